/* The block abstraction on 512-bit VAES registers: each state word (four lanes) is one zmm
   register (AEGIS-128X4 and AEGIS-256X4). */
#ifndef SEALSTORE_AVX512_BLK_H
#define SEALSTORE_AVX512_BLK_H

typedef __m512i blk;

SEALSTORE_INLINE blk blk_xor(const blk a, const blk b)
{
    return _mm512_xor_si512(a, b);
}

SEALSTORE_INLINE blk blk_and(const blk a, const blk b)
{
    return _mm512_and_si512(a, b);
}

SEALSTORE_INLINE blk blk_load(const uint8_t *p)
{
    return _mm512_loadu_si512((const void *)p);
}

SEALSTORE_INLINE void blk_store(uint8_t *p, const blk x)
{
    _mm512_storeu_si512((void *)p, x);
}

SEALSTORE_INLINE blk blk_dup(const uint8_t *p)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)p));
}

SEALSTORE_INLINE blk blk_aesround(const blk in, const blk rk)
{
    return _mm512_aesenc_epi128(in, rk);
}

#endif
