/*
 * The portable kernel as it was before the bitsliced state (one AES round on four blocks at a
 * time, the S-box by an addition chain, bytes transposed in and out of planes on every round),
 * kept only for the C harness so the speed-up of the current portable kernel is measured in
 * the same run.  Built three times, with -DLANES=1, 2 and 4; exports
 * sealstore_bench_baseline_{128l,128x2,128x4}.  Never part of the package's native module.
 */
#ifndef LANES
#error "build with -DLANES=1, 2 or 4"
#endif
#include "common.h"

/* Transpose the 8x8 bit matrix held in x (row = byte, column = bit). */
SEALSTORE_INLINE uint64_t aesp_transpose8(uint64_t x)
{
    uint64_t t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAULL;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCULL;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ULL;
    x ^= t ^ (t << 28);
    return x;
}

SEALSTORE_INLINE void aesp_swap(uint64_t *a, uint64_t *b, int shift, uint64_t mask)
{
    const uint64_t t = ((*a >> shift) ^ *b) & mask;
    *a ^= t << shift;
    *b ^= t;
}

/* Transpose the 8x8 byte matrix held in w[0..7] (row = word, column = byte). */
SEALSTORE_INLINE void aesp_transpose_bytes(uint64_t w[8])
{
    for (int j = 0; j < 4; j++) {
        aesp_swap(&w[j], &w[j + 4], 32, 0x00000000FFFFFFFFULL);
    }
    for (int j = 0; j < 8; j += 4) {
        aesp_swap(&w[j], &w[j + 2], 16, 0x0000FFFF0000FFFFULL);
        aesp_swap(&w[j + 1], &w[j + 3], 16, 0x0000FFFF0000FFFFULL);
    }
    for (int j = 0; j < 8; j += 2) {
        aesp_swap(&w[j], &w[j + 1], 8, 0x00FF00FF00FF00FFULL);
    }
}

/* Reduce a 15-term product modulo x^8 + x^4 + x^3 + x + 1. */
SEALSTORE_INLINE void aesp_reduce(uint64_t r[8], uint64_t p[15])
{
    for (int k = 14; k >= 8; k--) {
        p[k - 4] ^= p[k];
        p[k - 5] ^= p[k];
        p[k - 7] ^= p[k];
        p[k - 8] ^= p[k];
    }
    for (int i = 0; i < 8; i++) {
        r[i] = p[i];
    }
}

SEALSTORE_INLINE void aesp_mul(uint64_t r[8], const uint64_t a[8], const uint64_t b[8])
{
    uint64_t p[15] = {0};
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 8; j++) {
            p[i + j] ^= a[i] & b[j];
        }
    }
    aesp_reduce(r, p);
}

SEALSTORE_INLINE void aesp_sq(uint64_t r[8], const uint64_t a[8])
{
    uint64_t p[15] = {0};
    for (int i = 0; i < 8; i++) {
        p[2 * i] = a[i];
    }
    aesp_reduce(r, p);
}

/* The AES S-box on 64 bytes at once; x[i] is bit plane i (bit i of every byte). */
SEALSTORE_INLINE void aesp_sbox(uint64_t x[8])
{
    uint64_t x2[8], x3[8], x12[8], t[8];

    aesp_sq(x2, x);       /* x^2 */
    aesp_mul(x3, x2, x);  /* x^3 */
    aesp_sq(t, x3);       /* x^6 */
    aesp_sq(x12, t);      /* x^12 */
    aesp_mul(t, x12, x3); /* x^15 */
    aesp_sq(t, t);        /* x^30 */
    aesp_sq(t, t);        /* x^60 */
    aesp_sq(t, t);        /* x^120 */
    aesp_sq(t, t);        /* x^240 */
    aesp_mul(t, t, x12);  /* x^252 */
    aesp_mul(t, t, x2);   /* x^254 = x^-1 (0 stays 0) */
    for (int i = 0; i < 8; i++) {
        x[i] = t[i] ^ t[(i + 4) & 7] ^ t[(i + 5) & 7] ^ t[(i + 6) & 7] ^ t[(i + 7) & 7];
    }
    /* + 0x63 */
    x[0] = ~x[0];
    x[1] = ~x[1];
    x[5] = ~x[5];
    x[6] = ~x[6];
}

SEALSTORE_INLINE uint8_t aesp_xtime(uint8_t b)
{
    return (uint8_t)((b << 1) ^ (0x1b & (0u - (unsigned)(b >> 7))));
}

/* out[i] = MixColumns(ShiftRows(SubBytes(in[i]))) ^ rk[i] for four 16-byte blocks. */
SEALSTORE_INLINE void aesp_round4(uint8_t *out, const uint8_t *in, const uint8_t *rk)
{
    uint64_t w[8];
    uint8_t sb[64];

    memcpy(w, in, 64);
    for (int j = 0; j < 8; j++) {
        w[j] = aesp_transpose8(w[j]);
    }
    aesp_transpose_bytes(w);
    aesp_sbox(w);
    aesp_transpose_bytes(w);
    for (int j = 0; j < 8; j++) {
        w[j] = aesp_transpose8(w[j]);
    }
    memcpy(sb, w, 64);

    for (int b = 0; b < 4; b++) {
        const uint8_t *a = sb + 16 * b;
        const uint8_t *k = rk + 16 * b;
        uint8_t *o = out + 16 * b;
        for (int c = 0; c < 4; c++) {
            /* ShiftRows: row r of column c comes from column c + r */
            const uint8_t a0 = a[4 * c];
            const uint8_t a1 = a[4 * ((c + 1) & 3) + 1];
            const uint8_t a2 = a[4 * ((c + 2) & 3) + 2];
            const uint8_t a3 = a[4 * ((c + 3) & 3) + 3];
            const uint8_t t = (uint8_t)(a0 ^ a1 ^ a2 ^ a3);
            o[4 * c] = (uint8_t)(a0 ^ t ^ aesp_xtime((uint8_t)(a0 ^ a1)) ^ k[4 * c]);
            o[4 * c + 1] = (uint8_t)(a1 ^ t ^ aesp_xtime((uint8_t)(a1 ^ a2)) ^ k[4 * c + 1]);
            o[4 * c + 2] = (uint8_t)(a2 ^ t ^ aesp_xtime((uint8_t)(a2 ^ a3)) ^ k[4 * c + 2]);
            o[4 * c + 3] = (uint8_t)(a3 ^ t ^ aesp_xtime((uint8_t)(a3 ^ a0)) ^ k[4 * c + 3]);
        }
    }
}

#define PW (2 * LANES)

typedef struct {
    uint64_t w[PW];
} blk;

SEALSTORE_INLINE blk blk_xor(const blk a, const blk b)
{
    blk r;
    for (int i = 0; i < PW; i++) {
        r.w[i] = a.w[i] ^ b.w[i];
    }
    return r;
}

SEALSTORE_INLINE blk blk_and(const blk a, const blk b)
{
    blk r;
    for (int i = 0; i < PW; i++) {
        r.w[i] = a.w[i] & b.w[i];
    }
    return r;
}

SEALSTORE_INLINE blk blk_load(const uint8_t *p)
{
    blk r;
    memcpy(r.w, p, sizeof r.w);
    return r;
}

SEALSTORE_INLINE void blk_store(uint8_t *p, const blk x)
{
    memcpy(p, x.w, sizeof x.w);
}

SEALSTORE_INLINE blk blk_dup(const uint8_t *p)
{
    blk r;
    for (int i = 0; i < LANES; i++) {
        memcpy(&r.w[2 * i], p, 16);
    }
    return r;
}

#define AEGIS_CUSTOM_UPDATE 1
SEALSTORE_INLINE void aegis_update(blk s[8], const blk m0, const blk m1)
{
    /* inputs [S7, S0, ..., S6], round keys [S0 ^ M0, S1, S2, S3, S4 ^ M1, S5, S6, S7] */
    blk in[8], rk[8];
    in[0] = s[7];
    for (int i = 1; i < 8; i++) {
        in[i] = s[i - 1];
    }
    for (int i = 0; i < 8; i++) {
        rk[i] = s[i];
    }
    rk[0] = blk_xor(rk[0], m0);
    rk[4] = blk_xor(rk[4], m1);
    /* 8 * LANES blocks, always a multiple of four */
    for (size_t off = 0; off < sizeof in; off += 64) {
        aesp_round4((uint8_t *)s + off, (const uint8_t *)in + off, (const uint8_t *)rk + off);
    }
}

#if LANES == 1
#define AEGIS_IMPL sealstore_bench_baseline_128l
#elif LANES == 2
#define AEGIS_IMPL sealstore_bench_baseline_128x2
#else
#define AEGIS_IMPL sealstore_bench_baseline_128x4
#endif
#define AEGIS_KERNEL_NAME "portable-baseline"
#include "aegis_core.h"
