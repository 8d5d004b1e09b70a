/* MSVC-mode compile shim (tools/msvc_shim/README.md) */
#pragma once
#include <stddef.h>
void *__cdecl malloc(size_t n);
void __cdecl free(void *p);
void *__cdecl realloc(void *p, size_t n);
__declspec(noreturn) void __cdecl exit(int status);
char *__cdecl getenv(const char *name);
unsigned long __cdecl strtoul(const char *s, char **end, int base);
