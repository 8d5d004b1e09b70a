/*
 * The block abstraction on 128-bit NEON registers with the ARMv8 Crypto Extension: LANES
 * (1, 2 or 4) registers per state word.
 *
 * AESE(x, k) is SubBytes(ShiftRows(x ^ k)) and AESMC is MixColumns, while AEGIS's
 * AESRound(x, rk) is MixColumns(ShiftRows(SubBytes(x))) ^ rk (SubBytes and ShiftRows commute):
 * so AESE with an all-zero key, AESMC, then EOR with rk.  AESE/AESMC on the same register back
 * to back is the pair cores fuse.
 */
#ifndef SEALSTORE_ARMCRYPTO_BLK_H
#define SEALSTORE_ARMCRYPTO_BLK_H

typedef struct {
    uint8x16_t v[LANES];
} blk;

/* Unroll every lane loop even at -O2, where gcc keeps a 4-trip loop (and so the state in
   memory, indexed by the loop counter): tools/inline_guard.py checks it. */
#define LANE_LOOP _Pragma("GCC unroll 4") for

SEALSTORE_INLINE blk blk_xor(const blk a, const blk b)
{
    blk r;
    LANE_LOOP (int i = 0; i < LANES; i++) {
        r.v[i] = veorq_u8(a.v[i], b.v[i]);
    }
    return r;
}

SEALSTORE_INLINE blk blk_and(const blk a, const blk b)
{
    blk r;
    LANE_LOOP (int i = 0; i < LANES; i++) {
        r.v[i] = vandq_u8(a.v[i], b.v[i]);
    }
    return r;
}

SEALSTORE_INLINE blk blk_load(const uint8_t *p)
{
    blk r;
    LANE_LOOP (int i = 0; i < LANES; i++) {
        r.v[i] = vld1q_u8(p + 16 * i);
    }
    return r;
}

SEALSTORE_INLINE void blk_store(uint8_t *p, const blk x)
{
    LANE_LOOP (int i = 0; i < LANES; i++) {
        vst1q_u8(p + 16 * i, x.v[i]);
    }
}

SEALSTORE_INLINE blk blk_dup(const uint8_t *p)
{
    blk r;
    const uint8x16_t x = vld1q_u8(p);
    LANE_LOOP (int i = 0; i < LANES; i++) {
        r.v[i] = x;
    }
    return r;
}

SEALSTORE_INLINE blk blk_aesround(const blk in, const blk rk)
{
    blk r;
    const uint8x16_t zero = vdupq_n_u8(0);
    LANE_LOOP (int i = 0; i < LANES; i++) {
        r.v[i] = veorq_u8(vaesmcq_u8(vaeseq_u8(in.v[i], zero)), rk.v[i]);
    }
    return r;
}

#endif
