/* MSVC-mode compile shim (tools/msvc_shim/README.md) */
#pragma once
#include <stddef.h>
void *__cdecl malloc(size_t n);
void __cdecl free(void *p);
