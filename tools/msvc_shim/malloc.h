/* MSVC-mode compile shim (tools/msvc_shim/README.md) */
#pragma once
#include <stdlib.h>
void *__cdecl _aligned_malloc(size_t n, size_t align);
void __cdecl _aligned_free(void *p);
