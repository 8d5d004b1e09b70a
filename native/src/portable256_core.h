/*
 * AEGIS-256 / AEGIS-256X{2,4} for the portable kernels: plain C, constant time, on the
 * bitsliced state of portable256_blk.h (no table, no secret-dependent branch or address).  The
 * same steps as aegis256_core.h, with the state kept in planes.  A kernel file defines LANES,
 * AEGIS_IMPL and AEGIS_KERNEL_NAME, then includes this header.
 */
#include "portable256_blk.h"

#define BLKBYTES (16 * LANES)
#define RATE BLKBYTES

/* Called rather than inlined outside the message loops (as pgroup_update_call). */
static void p6_update_call(p6group *g, const aesp_w m)
{
    p6_update(g, m);
}

#if AESP_VECTOR
#define p6_update_loop p6_update
#else
#define p6_update_loop p6_update_call
#endif

SEALSTORE_INLINE void aegis256_init(p6state *st, const uint8_t *k, const uint8_t *npub)
{
    const aesp_w c0 = aesp_load(sealstore_aegis_c0), c1 = aesp_load(sealstore_aegis_c1);
    const aesp_w k0 = aesp_load(k), k1 = aesp_load(k + 16);
    const aesp_w k0n0 = aesp_xor(k0, aesp_load(npub)), k1n1 = aesp_xor(k1, aesp_load(npub + 16));
    const aesp_w words[6] = {k0n0, k1n1, c1, c0, aesp_xor(k0, c0), aesp_xor(k1, c1)};
    const aesp_w msgs[4] = {k0, k1, k0n0, k1n1};

    for (int l = 0; l < LANES; l++) {
#if LANES > 1
        /* ctx[l] = Byte(l) || Byte(D - 1) || zeros, folded into S3 and S5 before every Update */
        const uint8_t ctxb[16] = {(uint8_t)l, (uint8_t)(LANES - 1)};
        const aesp_w zero = aesp_splat(0), cw = aesp_load(ctxb);
        const aesp_w ctxw[6] = {zero, zero, zero, cw, zero, cw};
        p6group ctx;
        p6_pack(&ctx, ctxw);
#endif
        p6_pack(&st->g[l], words);
        for (int i = 0; i < 16; i++) {
#if LANES > 1
            for (int b = 0; b < 8; b++) {
                st->g[l].p[b] = aesp_xor(st->g[l].p[b], ctx.p[b]);
            }
#endif
            p6_update_call(&st->g[l], msgs[i % 4]);
        }
    }
}

/* Update of every lane with RATE bytes of AD (or a padded block). */
SEALSTORE_INLINE void p6_absorb(p6state *st, const uint8_t *src)
{
    for (int l = 0; l < LANES; l++) {
        p6_update_call(&st->g[l], aesp_load(src + 16 * l));
    }
}

SEALSTORE_INLINE void aegis256_absorb_ad(p6state *st, const uint8_t *ad, size_t adlen)
{
    size_t i;
    for (i = 0; i + RATE <= adlen; i += RATE) {
        p6_absorb(st, ad + i);
    }
    if (adlen % RATE) {
        uint8_t pad[RATE];
        memset(pad, 0, sizeof pad);
        memcpy(pad, ad + i, adlen % RATE);
        p6_absorb(st, pad);
    }
}

/* Enc of RATE bytes; dst may be src (each lane loads its input before storing). */
SEALSTORE_INLINE void p6_enc(p6state *st, uint8_t *dst, const uint8_t *src)
{
    for (int l = 0; l < LANES; l++) {
        const aesp_w m = aesp_load(src + 16 * l);
        aesp_store(dst + 16 * l, aesp_xor(m, p6_keystream(&st->g[l])));
        p6_update_loop(&st->g[l], m);
    }
}

/* Dec of RATE bytes; dst may be src. */
SEALSTORE_INLINE void p6_dec(p6state *st, uint8_t *dst, const uint8_t *src)
{
    for (int l = 0; l < LANES; l++) {
        const aesp_w m = aesp_xor(aesp_load(src + 16 * l), p6_keystream(&st->g[l]));
        aesp_store(dst + 16 * l, m);
        p6_update_loop(&st->g[l], m);
    }
}

/* Enc of the zero-padded last len (< RATE) bytes. */
SEALSTORE_INLINE void aegis256_enc_partial(p6state *st, uint8_t *dst, const uint8_t *src,
                                           size_t len)
{
    uint8_t pad[RATE];
    memset(pad, 0, sizeof pad);
    memcpy(pad, src, len);
    p6_enc(st, pad, pad);
    memcpy(dst, pad, len);
    sealstore_memzero(pad, sizeof pad);
}

/* DecPartial: decrypt the zero-padded last block, then absorb the zero-padded plaintext. */
SEALSTORE_INLINE void aegis256_dec_partial(p6state *st, uint8_t *dst, const uint8_t *src,
                                           size_t len)
{
    uint8_t pad[RATE];
    memset(pad, 0, sizeof pad);
    memcpy(pad, src, len);
    for (int l = 0; l < LANES; l++) {
        aesp_store(pad + 16 * l, aesp_xor(aesp_load(pad + 16 * l), p6_keystream(&st->g[l])));
    }
    memcpy(dst, pad, len);
    memset(pad + len, 0, RATE - len);
    p6_absorb(st, pad);
    sealstore_memzero(pad, sizeof pad);
}

/* Finalize: seven Updates with S3 ^ (LE64(ad bits) || LE64(msg bits)), then the tag, XORed
   over the lanes: S0 ^ .. ^ S5, or (S0 ^ S1 ^ S2) || (S3 ^ S4 ^ S5). */
SEALSTORE_INLINE void aegis256_mac(p6state *st, uint8_t *mac, size_t maclen, uint64_t adlen,
                                   uint64_t mlen)
{
    uint8_t u[16], word[16];
    aesp_w lo = aesp_splat(0), hi = aesp_splat(0);

    sealstore_store64_le(u, adlen << 3);
    sealstore_store64_le(u + 8, mlen << 3);
    for (int l = 0; l < LANES; l++) {
        p6group *g = &st->g[l];
        const aesp_w t = aesp_xor(p6_slot(g, 3), aesp_load(u));
        for (int i = 0; i < 7; i++) {
            p6_update_call(g, t);
        }
        for (int j = 0; j < 3; j++) {
            lo = aesp_xor(lo, p6_slot(g, j));
            hi = aesp_xor(hi, p6_slot(g, j + 3));
        }
    }
    if (maclen == 16) {
        aesp_store(mac, aesp_xor(lo, hi));
    } else {
        aesp_store(mac, lo);
        aesp_store(word, hi);
        memcpy(mac + 16, word, 16);
    }
}

/* the shared driver: encrypt/decrypt_detached and AEGIS_IMPL */
#define DRIVER_STATE p6state
#define DRIVER_INIT aegis256_init
#define DRIVER_ABSORB_AD aegis256_absorb_ad
#define DRIVER_ENC p6_enc
#define DRIVER_DEC p6_dec
#define DRIVER_ENC_PARTIAL aegis256_enc_partial
#define DRIVER_DEC_PARTIAL aegis256_dec_partial
#define DRIVER_MAC aegis256_mac
#include "portable_driver.h"
