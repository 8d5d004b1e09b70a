/*
 * The AEGIS state of the portable kernels, kept bitsliced from initialization to finalization.
 *
 * Lane l of the D = LANES lanes (D = 1 for AEGIS-128L) is one group of aes_portable.h: its
 * eight state words S0..S7 are the group's blocks B0..B7 (slot j = bit j of every byte of a
 * plane lane).  One Update of a lane is then one bitsliced AESRound of its group, a rotation of
 * the slots by one (AESRound(S(i-1)) lands in slot i, a shift inside every byte) and an XOR
 * with the old planes, plus the message planes: M0 in slot 0, M1 in slot 4.  Only the 2*D
 * message blocks are converted per Update (into slots 0 and 4), and only the 2*D keystream
 * blocks come out (computed on the planes: Z0 = S1 ^ S6 ^ (S2 & S3) lands in slot 0 and
 * Z1 = S2 ^ S5 ^ (S6 & S7) in slot 4 from the same shifts).  The full state is converted only
 * at initialization and for the tag.
 */
#ifndef SEALSTORE_PORTABLE_BLK_H
#define SEALSTORE_PORTABLE_BLK_H

#include "aes_portable.h"

#define BLKBYTES (16 * LANES)
#define RATE (2 * BLKBYTES)

/* the eight state words of one lane, bitsliced */
typedef struct {
    aesp_w p[8];
} pgroup;

typedef struct {
    pgroup g[LANES];
} pstate;

/* The planes of eight blocks (block j into slot j). */
SEALSTORE_INLINE void pgroup_pack(pgroup *g, const aesp_w blk[8])
{
    for (int b = 0; b < 8; b++) {
        aesp_w p = aesp_mask(aesp_shr(blk[0], b), 0x01010101u);
        for (int j = 1; j < 8; j++) {
            p = aesp_or(p, aesp_shl(aesp_mask(aesp_shr(blk[j], b), 0x01010101u), j));
        }
        g->p[b] = p;
    }
}

/* State word j of a group, as a block. */
SEALSTORE_INLINE aesp_w pgroup_slot(const pgroup *g, const int j)
{
    aesp_w r = aesp_mask(aesp_shr(g->p[0], j), 0x01010101u);
    for (int b = 1; b < 8; b++) {
        r = aesp_or(r, aesp_shl(aesp_mask(aesp_shr(g->p[b], j), 0x01010101u), b));
    }
    return r;
}

/* The planes of M0 in slot 0 and M1 in slot 4 (every other slot zero). */
SEALSTORE_INLINE void pgroup_msg_planes(aesp_w out[8], const aesp_w m0, const aesp_w m1)
{
    /* per byte: bits 0..3 of M0 then of M1 (lo), bits 4..7 of M0 then of M1 (hi) */
    const aesp_w lo = aesp_or(aesp_mask(m0, 0x0F0F0F0Fu), aesp_shl(aesp_mask(m1, 0x0F0F0F0Fu), 4));
    const aesp_w hi = aesp_or(aesp_mask(aesp_shr(m0, 4), 0x0F0F0F0Fu), aesp_mask(m1, 0xF0F0F0F0u));
    for (int b = 0; b < 4; b++) {
        out[b] = aesp_mask(aesp_shr(lo, b), 0x11111111u);
        out[b + 4] = aesp_mask(aesp_shr(hi, b), 0x11111111u);
    }
}

/* Update(M0, M1) of one lane. */
SEALSTORE_INLINE void pgroup_update(pgroup *g, const aesp_w m0, const aesp_w m1)
{
    aesp_w x[8], mp[8];
    for (int b = 0; b < 8; b++) {
        x[b] = g->p[b];
    }
    aesp_round_nokey(x);
    pgroup_msg_planes(mp, m0, m1);
    for (int b = 0; b < 8; b++) {
        /* slot j -> j + 1 (mod 8): rotate every byte left by one */
        const aesp_w moved = aesp_or(aesp_mask(aesp_shl(x[b], 1), 0xFEFEFEFEu),
                                     aesp_mask(aesp_shr(x[b], 7), 0x01010101u));
        g->p[b] = aesp_xor(aesp_xor(moved, g->p[b]), mp[b]);
    }
}

/*
 * The keystream of one lane: Z0 = S1 ^ S6 ^ (S2 & S3), Z1 = S2 ^ S5 ^ (S6 & S7).  For slot
 * j in {0, 4} both read slots j+1, j+2, j+3 and j-2 (mod 8): shifts by 1, 2, 3 inside the
 * nibble, and slot 6 (for 0) or 2 (for 4) from the other nibble.
 */
SEALSTORE_INLINE void pgroup_keystream(const pgroup *g, aesp_w *z0, aesp_w *z1)
{
    aesp_w lo = aesp_splat(0), hi = aesp_splat(0);
    for (int b = 0; b < 8; b++) {
        const aesp_w x = g->p[b];
        aesp_w z = aesp_xor(aesp_shr(x, 1), aesp_and(aesp_shr(x, 2), aesp_shr(x, 3)));
        z = aesp_mask(z, 0x11111111u);
        z = aesp_xor(z, aesp_mask(aesp_shr(x, 6), 0x01010101u));
        z = aesp_xor(z, aesp_mask(aesp_shl(x, 2), 0x10101010u));
        /* z has Z0 bit b in bit 0 and Z1 bit b in bit 4 of every byte */
        if (b < 4) {
            lo = aesp_or(lo, aesp_shl(z, b));
        } else {
            hi = aesp_or(hi, aesp_shl(z, b - 4));
        }
    }
    *z0 = aesp_or(aesp_mask(lo, 0x0F0F0F0Fu), aesp_shl(aesp_mask(hi, 0x0F0F0F0Fu), 4));
    *z1 = aesp_or(aesp_mask(aesp_shr(lo, 4), 0x0F0F0F0Fu), aesp_mask(hi, 0xF0F0F0F0u));
}

/*
 * The same, called rather than inlined: for initialization, associated data, the last partial
 * block and finalization, which would otherwise copy the whole round into each of their call
 * sites (code size, and compile times of minutes for the four-lane kernel).  The message loops
 * keep the inlined form.
 */
static void pgroup_update_call(pgroup *g, const aesp_w m0, const aesp_w m1)
{
    pgroup_update(g, m0, m1);
}

/* The message loops inline the round, except in the struct form of the plane word (compilers
   without vector extensions), where every copy takes the optimizer a minute or more. */
#if AESP_VECTOR
#define pgroup_update_loop pgroup_update
#else
#define pgroup_update_loop pgroup_update_call
#endif

/* Update(M0, M1) of every lane, the message being RATE bytes (M0 of all lanes, then M1). */
SEALSTORE_INLINE void pstate_absorb(pstate *st, const uint8_t *src)
{
    for (int l = 0; l < LANES; l++) {
        pgroup_update_call(&st->g[l], aesp_load(src + 16 * l),
                           aesp_load(src + BLKBYTES + 16 * l));
    }
}

/* Enc of RATE bytes; dst may be src (each lane loads its input before storing). */
SEALSTORE_INLINE void pstate_enc(pstate *st, uint8_t *dst, const uint8_t *src)
{
    for (int l = 0; l < LANES; l++) {
        aesp_w z0, z1;
        const aesp_w m0 = aesp_load(src + 16 * l);
        const aesp_w m1 = aesp_load(src + BLKBYTES + 16 * l);
        pgroup_keystream(&st->g[l], &z0, &z1);
        aesp_store(dst + 16 * l, aesp_xor(m0, z0));
        aesp_store(dst + BLKBYTES + 16 * l, aesp_xor(m1, z1));
        pgroup_update_loop(&st->g[l], m0, m1);
    }
}

/* Dec of RATE bytes; dst may be src. */
SEALSTORE_INLINE void pstate_dec(pstate *st, uint8_t *dst, const uint8_t *src)
{
    for (int l = 0; l < LANES; l++) {
        aesp_w z0, z1;
        pgroup_keystream(&st->g[l], &z0, &z1);
        const aesp_w m0 = aesp_xor(aesp_load(src + 16 * l), z0);
        const aesp_w m1 = aesp_xor(aesp_load(src + BLKBYTES + 16 * l), z1);
        aesp_store(dst + 16 * l, m0);
        aesp_store(dst + BLKBYTES + 16 * l, m1);
        pgroup_update_loop(&st->g[l], m0, m1);
    }
}

#endif
