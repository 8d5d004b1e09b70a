/*
 * The AEGIS-256 state of the portable kernels, kept bitsliced from initialization to
 * finalization (portable256_core.h runs the algorithm on it; tests/native/portable_check.c
 * checks these blocks against the definitions).
 *
 * Lane l of the D = LANES lanes is one group of eight bitsliced blocks of aes_portable.h (as
 * in portable_blk.h for AEGIS-128L): its six state words S0..S5 ride in slots 0..5 (slot j =
 * bit j of every byte of a plane lane) and slots 6 and 7 stay zero, unused: the bitsliced AES
 * round costs the same for six blocks as for eight, and one round per Update is all the state
 * needs.  One Update is then one bitsliced round of the group, a rotation of slots 0..5 by one
 * (AESRound(S5) lands in slot 0, AESRound(S(i-1)) in slot i) and an XOR with the old planes and
 * with the message in slot 0.  Only the message block goes in per Update and only the
 * keystream block Z = S1 ^ S4 ^ S5 ^ (S2 & S3) comes out (computed on the planes into slot 0).
 */
#ifndef SEALSTORE_PORTABLE256_BLK_H
#define SEALSTORE_PORTABLE256_BLK_H

#include "aes_portable.h"

typedef struct {
    aesp_w p[8];
} p6group;

typedef struct {
    p6group g[LANES];
} p6state;

/* The planes of six blocks (block j into slot j; slots 6 and 7 zero). */
SEALSTORE_INLINE void p6_pack(p6group *g, const aesp_w w[6])
{
    for (int b = 0; b < 8; b++) {
        aesp_w p = aesp_mask(aesp_shr(w[0], b), 0x01010101u);
        for (int j = 1; j < 6; j++) {
            p = aesp_or(p, aesp_shl(aesp_mask(aesp_shr(w[j], b), 0x01010101u), j));
        }
        g->p[b] = p;
    }
}

/* Bit 0 of every byte of the eight planes, gathered into one block (plane b -> bit b). */
SEALSTORE_INLINE aesp_w p6_gather(const aesp_w x[8])
{
    aesp_w r = aesp_mask(x[0], 0x01010101u);
    for (int b = 1; b < 8; b++) {
        r = aesp_or(r, aesp_shl(aesp_mask(x[b], 0x01010101u), b));
    }
    return r;
}

/* State word j of a group, as a block. */
SEALSTORE_INLINE aesp_w p6_slot(const p6group *g, const int j)
{
    aesp_w x[8];
    for (int b = 0; b < 8; b++) {
        x[b] = aesp_shr(g->p[b], j);
    }
    return p6_gather(x);
}

/* Update(M) of one lane. */
SEALSTORE_INLINE void p6_update(p6group *g, const aesp_w m)
{
    aesp_w x[8];
    for (int b = 0; b < 8; b++) {
        x[b] = g->p[b];
    }
    aesp_round_nokey(x);
    for (int b = 0; b < 8; b++) {
        /* slot j -> j + 1 for j < 5, slot 5 -> 0; slots 6 and 7 (rounds of zero) dropped */
        const aesp_w moved = aesp_or(aesp_mask(aesp_shl(x[b], 1), 0x3E3E3E3Eu),
                                     aesp_mask(aesp_shr(x[b], 5), 0x01010101u));
        const aesp_w mp = aesp_mask(aesp_shr(m, b), 0x01010101u);
        g->p[b] = aesp_xor(aesp_xor(moved, g->p[b]), mp);
    }
}

/* The keystream of one lane: Z = S1 ^ S4 ^ S5 ^ (S2 & S3), from slots 1..5 into slot 0. */
SEALSTORE_INLINE aesp_w p6_keystream(const p6group *g)
{
    aesp_w z[8];
    for (int b = 0; b < 8; b++) {
        const aesp_w x = g->p[b];
        z[b] = aesp_xor(aesp_xor(aesp_shr(x, 1), aesp_shr(x, 4)),
                        aesp_xor(aesp_shr(x, 5), aesp_and(aesp_shr(x, 2), aesp_shr(x, 3))));
    }
    return p6_gather(z);
}

#endif
