/*
 * The message loop of AEGIS-128X4 on 32 NEON registers, two lanes at a time.
 *
 * The four lanes of AEGIS-128X4 only meet in the initialisation constants and the final tag
 * fold: between them, lane l updates from bytes [16l, 16l + 16) and [64 + 16l, 80 + 16l) of
 * each 128-byte block and nothing else.  The whole state (32 registers) cannot stay in the
 * register file, but half of it (lanes 0-1, then lanes 2-3: 16 registers, as AEGIS-128X2)
 * can: each half runs over a chunk of blocks with its state in registers, and the state is
 * saved and reloaded once per chunk and half instead of spilling in every block.
 *
 * Included by aegis128x4_armcrypto.c after armcrypto_blk.h (LANES 4, blk) and before
 * aegis_core.h, which calls AEGIS_BULK for the whole blocks.
 */
#ifndef SEALSTORE_AEGIS128X4_ARMCRYPTO_HALVES_H
#define SEALSTORE_AEGIS128X4_ARMCRYPTO_HALVES_H

#define HALF_CHUNK 4096 /* bytes of message per half and turn: a save + reload per 4 KiB */

typedef struct {
    uint8x16_t a, b;
} half;

SEALSTORE_INLINE half h_xor(const half x, const half y)
{
    return (half){veorq_u8(x.a, y.a), veorq_u8(x.b, y.b)};
}

SEALSTORE_INLINE half h_and(const half x, const half y)
{
    return (half){vandq_u8(x.a, y.a), vandq_u8(x.b, y.b)};
}

SEALSTORE_INLINE half h_round(const half in, const half rk)
{
    const uint8x16_t zero = vdupq_n_u8(0);
    return (half){veorq_u8(vaesmcq_u8(vaeseq_u8(in.a, zero)), rk.a),
                  veorq_u8(vaesmcq_u8(vaeseq_u8(in.b, zero)), rk.b)};
}

/* the Update of aegis_core.h on two lanes */
SEALSTORE_INLINE void h_update(half s[8], const half m0, const half m1)
{
    const half t = s[7];
    s[7] = h_round(s[6], s[7]);
    s[6] = h_round(s[5], s[6]);
    s[5] = h_round(s[4], s[5]);
    s[4] = h_xor(h_round(s[3], m1), s[4]);
    s[3] = h_round(s[2], s[3]);
    s[2] = h_round(s[1], s[2]);
    s[1] = h_round(s[0], s[1]);
    s[0] = h_xor(h_round(t, m0), s[0]);
}

/* Encrypt (decrypt = 0) or decrypt the blocks [from, to) of src into dst on lanes 2h, 2h+1,
   whose state words are kept in st (word j, lane l at st + 64 j + 16 l) between turns. */
SEALSTORE_INLINE void h_run(uint8_t *st, int h, uint8_t *dst, const uint8_t *src, size_t from,
                            size_t to, int decrypt)
{
    half t[8];
    for (int j = 0; j < 8; j++) {
        t[j] = (half){vld1q_u8(st + 64 * j + 32 * h), vld1q_u8(st + 64 * j + 32 * h + 16)};
    }
    for (size_t i = from; i < to; i += 128) {
        const uint8_t *p = src + i + 32 * h;
        uint8_t *q = dst + i + 32 * h;
        const half z0 = h_xor(h_xor(t[6], t[1]), h_and(t[2], t[3]));
        const half z1 = h_xor(h_xor(t[2], t[5]), h_and(t[6], t[7]));
        const half in0 = {vld1q_u8(p), vld1q_u8(p + 16)};
        const half in1 = {vld1q_u8(p + 64), vld1q_u8(p + 80)};
        const half out0 = h_xor(in0, z0), out1 = h_xor(in1, z1);
        vst1q_u8(q, out0.a);
        vst1q_u8(q + 16, out0.b);
        vst1q_u8(q + 64, out1.a);
        vst1q_u8(q + 80, out1.b);
        h_update(t, decrypt ? out0 : in0, decrypt ? out1 : in1);
    }
    for (int j = 0; j < 8; j++) {
        vst1q_u8(st + 64 * j + 32 * h, t[j].a);
        vst1q_u8(st + 64 * j + 32 * h + 16, t[j].b);
    }
}

/* Every whole 128-byte block of src, both halves; returns the bytes done.  The state goes
   through memory between the halves (so the half not running leaves the registers). */
SEALSTORE_INLINE size_t x4_halves(blk s[8], uint8_t *dst, const uint8_t *src, size_t len,
                                  int decrypt)
{
    const size_t whole = len - len % 128;
    SEALSTORE_ALIGN(64) uint8_t st[8 * 64];

    if (whole == 0) {
        return 0;
    }
    for (int j = 0; j < 8; j++) {
        blk_store(st + 64 * j, s[j]);
    }
    for (size_t off = 0; off < whole; off += HALF_CHUNK) {
        const size_t end = whole - off < HALF_CHUNK ? whole : off + HALF_CHUNK;
        h_run(st, 0, dst, src, off, end, decrypt);
        h_run(st, 1, dst, src, off, end, decrypt);
    }
    for (int j = 0; j < 8; j++) {
        s[j] = blk_load(st + 64 * j);
    }
    sealstore_memzero(st, sizeof st);
    return whole;
}

#define AEGIS_BULK(s, dst, src, len, decrypt) x4_halves(s, dst, src, len, decrypt)

#endif
