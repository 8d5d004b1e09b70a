/* Helpers shared by every kernel: inlining, loads/stores, constant-time compare, wiping. */
#ifndef SEALSTORE_COMMON_H
#define SEALSTORE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../include/sealstore.h"

#if defined(_MSC_VER)
#define SEALSTORE_INLINE static __forceinline
#define SEALSTORE_ALIGN(n) __declspec(align(n))
#else
#define SEALSTORE_INLINE static inline __attribute__((always_inline))
#define SEALSTORE_ALIGN(n) __attribute__((aligned(n)))
#endif

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#define SEALSTORE_X86 1
#else
#define SEALSTORE_X86 0
#endif

#if defined(__aarch64__) || defined(_M_ARM64)
#define SEALSTORE_ARM64 1
#else
#define SEALSTORE_ARM64 0
#endif

/* The AEGIS constants C0 and C1 (Fibonacci sequence mod 256), as in the draft. */
static const uint8_t sealstore_aegis_c0[16] = {0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                                               0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62};
static const uint8_t sealstore_aegis_c1[16] = {0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                                               0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd};

SEALSTORE_INLINE void sealstore_store64_le(uint8_t *p, uint64_t v)
{
#if (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) ||                  \
    (defined(_MSC_VER) && !defined(__BYTE_ORDER__)) /* every MSVC target is little-endian */
    /* one 8-byte store (the byte loop compiles to eight shifts and byte inserts) */
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
#endif
}

/* Overwrite n bytes in a way the compiler may not drop. */
void sealstore_memzero(void *p, size_t n);

/* 0 when the n bytes of a and b are equal, -1 otherwise; time depends on n only. */
int sealstore_verify(const uint8_t *a, const uint8_t *b, size_t n);

#endif
