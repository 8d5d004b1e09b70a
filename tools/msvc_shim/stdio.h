/* MSVC-mode compile shim (tools/msvc_shim/README.md) */
#pragma once
#include <stddef.h>
typedef struct _iobuf FILE;
FILE *__cdecl __acrt_iob_func(unsigned index);
#define stdin (__acrt_iob_func(0))
#define stdout (__acrt_iob_func(1))
#define stderr (__acrt_iob_func(2))
#define EOF (-1)
FILE *__cdecl fopen(const char *path, const char *mode);
int __cdecl fclose(FILE *fp);
int __cdecl fgetc(FILE *fp);
int __cdecl fputc(int c, FILE *fp);
int __cdecl fprintf(FILE *fp, const char *fmt, ...);
int __cdecl printf(const char *fmt, ...);
int __cdecl sscanf(const char *s, const char *fmt, ...);
void __cdecl perror(const char *s);
