/* The block abstraction on 256-bit VAES registers: VEC_PER_BLK registers of two lanes each. */
#ifndef SEALSTORE_AVX2_BLK_H
#define SEALSTORE_AVX2_BLK_H

typedef struct {
    __m256i v[VEC_PER_BLK];
} blk;

SEALSTORE_INLINE blk blk_xor(const blk a, const blk b)
{
    blk r;
    for (int i = 0; i < VEC_PER_BLK; i++) {
        r.v[i] = _mm256_xor_si256(a.v[i], b.v[i]);
    }
    return r;
}

SEALSTORE_INLINE blk blk_and(const blk a, const blk b)
{
    blk r;
    for (int i = 0; i < VEC_PER_BLK; i++) {
        r.v[i] = _mm256_and_si256(a.v[i], b.v[i]);
    }
    return r;
}

SEALSTORE_INLINE blk blk_load(const uint8_t *p)
{
    blk r;
    for (int i = 0; i < VEC_PER_BLK; i++) {
        r.v[i] = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * i));
    }
    return r;
}

SEALSTORE_INLINE void blk_store(uint8_t *p, const blk x)
{
    for (int i = 0; i < VEC_PER_BLK; i++) {
        _mm256_storeu_si256((__m256i *)(void *)(p + 32 * i), x.v[i]);
    }
}

SEALSTORE_INLINE blk blk_dup(const uint8_t *p)
{
    blk r;
    const __m256i x =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p));
    for (int i = 0; i < VEC_PER_BLK; i++) {
        r.v[i] = x;
    }
    return r;
}

SEALSTORE_INLINE blk blk_aesround(const blk in, const blk rk)
{
    blk r;
    for (int i = 0; i < VEC_PER_BLK; i++) {
        r.v[i] = _mm256_aesenc_epi128(in.v[i], rk.v[i]);
    }
    return r;
}

#endif
