/* MSVC-mode compile shim (tools/msvc_shim/README.md) */
#pragma once
typedef struct {
    unsigned long long part[2];
} _JBTYPE;
typedef _JBTYPE jmp_buf[16];
