/*
 * The block abstraction for the portable kernels: a state word of LANES 16-byte lanes held in
 * 64-bit words, and an Update that runs the eight AES rounds of all lanes through the
 * bitsliced round four blocks at a time.
 */
#ifndef SEALSTORE_PORTABLE_BLK_H
#define SEALSTORE_PORTABLE_BLK_H

#include "aes_portable.h"

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

#endif
