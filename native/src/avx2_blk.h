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

/* The lanes of every register XORed together, stored as 16 bytes (aegis_fold). */
#define BLK_HAVE_FOLD16 1
SEALSTORE_INLINE void blk_fold16(uint8_t *out, const blk x)
{
    __m256i acc = x.v[0];
    for (int i = 1; i < VEC_PER_BLK; i++) {
        acc = _mm256_xor_si256(acc, x.v[i]);
    }
    const __m128i r =
        _mm_xor_si128(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    _mm_storeu_si128((__m128i *)(void *)out, r);
}


/* One register of a word, for kernels that split the state (AEGIS_SPLIT in aegis_core.h). */
typedef __m256i reg;
#define BLK_REGS VEC_PER_BLK
#define REG_BYTES 32
#define reg_xor _mm256_xor_si256
#define reg_and _mm256_and_si256
#define reg_aesround _mm256_aesenc_epi128
#define reg_load(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define reg_store(p, x) _mm256_storeu_si256((__m256i *)(void *)(p), (x))

#endif
