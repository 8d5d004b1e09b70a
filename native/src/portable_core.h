/*
 * AEGIS-128L / AEGIS-128X{2,4} for the portable kernels, on the bitsliced state of
 * portable_blk.h (draft-irtf-cfrg-aegis-aead-18; the same steps as aegis_core.h, which the
 * other kernels share, with the state kept in planes).  A kernel file defines LANES,
 * AEGIS_IMPL and AEGIS_KERNEL_NAME, then includes this header.
 */
#include "portable_blk.h"

SEALSTORE_INLINE void aegis_init(pstate *st, const uint8_t *k, const uint8_t *npub)
{
    const aesp_w c0 = aesp_load(sealstore_aegis_c0);
    const aesp_w c1 = aesp_load(sealstore_aegis_c1);
    const aesp_w kb = aesp_load(k);
    const aesp_w nb = aesp_load(npub);
    const aesp_w kn = aesp_xor(kb, nb);
    const aesp_w words[8] = {kn, c1, c0, c1, kn, aesp_xor(kb, c0), aesp_xor(kb, c1),
                             aesp_xor(kb, c0)};

    for (int l = 0; l < LANES; l++) {
#if LANES > 1
        /* ctx[l] = Byte(l) || Byte(D - 1) || zeros, folded into S3 and S7 before every round */
        uint8_t ctxb[16] = {(uint8_t)l, (uint8_t)(LANES - 1)};
        const aesp_w zero = aesp_splat(0), cw = aesp_load(ctxb);
        const aesp_w ctxw[8] = {zero, zero, zero, cw, zero, zero, zero, cw};
        pgroup ctx;
        pgroup_pack(&ctx, ctxw);
#endif
        pgroup_pack(&st->g[l], words);
        for (int i = 0; i < 10; i++) {
#if LANES > 1
            for (int b = 0; b < 8; b++) {
                st->g[l].p[b] = aesp_xor(st->g[l].p[b], ctx.p[b]);
            }
#endif
            pgroup_update_call(&st->g[l], nb, kb);
        }
    }
}

SEALSTORE_INLINE void aegis_absorb_ad(pstate *st, const uint8_t *ad, size_t adlen)
{
    size_t i;
    for (i = 0; i + RATE <= adlen; i += RATE) {
        pstate_absorb(st, ad + i);
    }
    if (adlen % RATE) {
        uint8_t pad[RATE];
        memset(pad, 0, sizeof pad);
        memcpy(pad, ad + i, adlen % RATE);
        pstate_absorb(st, pad);
    }
}

/* Enc of the zero-padded last len (< RATE) bytes. */
SEALSTORE_INLINE void aegis_enc_partial(pstate *st, uint8_t *dst, const uint8_t *src, size_t len)
{
    uint8_t pad[RATE];
    memset(pad, 0, sizeof pad);
    memcpy(pad, src, len);
    pstate_enc(st, pad, pad);
    memcpy(dst, pad, len);
    sealstore_memzero(pad, sizeof pad);
}

/* DecPartial: decrypt the zero-padded last block, then absorb the zero-padded plaintext. */
SEALSTORE_INLINE void aegis_dec_partial(pstate *st, uint8_t *dst, const uint8_t *src, size_t len)
{
    uint8_t pad[RATE];
    memset(pad, 0, sizeof pad);
    memcpy(pad, src, len);
    for (int l = 0; l < LANES; l++) {
        aesp_w z0, z1;
        pgroup_keystream(&st->g[l], &z0, &z1);
        aesp_store(pad + 16 * l, aesp_xor(aesp_load(pad + 16 * l), z0));
        aesp_store(pad + BLKBYTES + 16 * l, aesp_xor(aesp_load(pad + BLKBYTES + 16 * l), z1));
    }
    memcpy(dst, pad, len);
    memset(pad + len, 0, RATE - len);
    pstate_absorb(st, pad);
    sealstore_memzero(pad, sizeof pad);
}

/* Finalize: seven Updates with S2 ^ (adlen || mlen in bits), then the tag, XORed over lanes. */
SEALSTORE_INLINE void aegis_mac(pstate *st, uint8_t *mac, size_t maclen, uint64_t adlen,
                                uint64_t mlen)
{
    uint8_t u[16], word[16];
    aesp_w t0 = aesp_splat(0), t1 = aesp_splat(0);

    sealstore_store64_le(u, adlen << 3);
    sealstore_store64_le(u + 8, mlen << 3);
    for (int l = 0; l < LANES; l++) {
        pgroup *g = &st->g[l];
        const aesp_w t = aesp_xor(pgroup_slot(g, 2), aesp_load(u));
        for (int i = 0; i < 7; i++) {
            pgroup_update_call(g, t, t);
        }
        for (int j = 0; j < 4; j++) {
            t0 = aesp_xor(t0, pgroup_slot(g, j));
        }
        for (int j = 4; j < (maclen == 16 ? 7 : 8); j++) {
            t1 = aesp_xor(t1, pgroup_slot(g, j));
        }
    }
    if (maclen == 16) {
        aesp_store(mac, aesp_xor(t0, t1));
    } else {
        aesp_store(mac, t0);
        aesp_store(word, t1);
        memcpy(mac + 16, word, 16);
    }
}

/* the shared driver: encrypt/decrypt_detached and AEGIS_IMPL */
#define DRIVER_STATE pstate
#define DRIVER_INIT aegis_init
#define DRIVER_ABSORB_AD aegis_absorb_ad
#define DRIVER_ENC pstate_enc
#define DRIVER_DEC pstate_dec
#define DRIVER_ENC_PARTIAL aegis_enc_partial
#define DRIVER_DEC_PARTIAL aegis_dec_partial
#define DRIVER_MAC aegis_mac
#include "portable_driver.h"
