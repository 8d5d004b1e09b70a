/* MSVC-mode compile shim (tools/msvc_shim/README.md) */
#pragma once
#include <stddef.h>
void *__cdecl memcpy(void *dst, const void *src, size_t n);
void *__cdecl memset(void *dst, int c, size_t n);
void *__cdecl memmove(void *dst, const void *src, size_t n);
int __cdecl memcmp(const void *a, const void *b, size_t n);
int __cdecl strcmp(const char *a, const char *b);
size_t __cdecl strlen(const char *s);
