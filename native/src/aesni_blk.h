/* The block abstraction on 128-bit AES-NI registers: LANES (1, 2 or 4) registers per word. */
#ifndef SEALSTORE_AESNI_BLK_H
#define SEALSTORE_AESNI_BLK_H

typedef struct {
    __m128i v[LANES];
} blk;

SEALSTORE_INLINE blk blk_xor(const blk a, const blk b)
{
    blk r;
    for (int i = 0; i < LANES; i++) {
        r.v[i] = _mm_xor_si128(a.v[i], b.v[i]);
    }
    return r;
}

SEALSTORE_INLINE blk blk_and(const blk a, const blk b)
{
    blk r;
    for (int i = 0; i < LANES; i++) {
        r.v[i] = _mm_and_si128(a.v[i], b.v[i]);
    }
    return r;
}

SEALSTORE_INLINE blk blk_load(const uint8_t *p)
{
    blk r;
    for (int i = 0; i < LANES; i++) {
        r.v[i] = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i));
    }
    return r;
}

SEALSTORE_INLINE void blk_store(uint8_t *p, const blk x)
{
    for (int i = 0; i < LANES; i++) {
        _mm_storeu_si128((__m128i *)(void *)(p + 16 * i), x.v[i]);
    }
}

SEALSTORE_INLINE blk blk_dup(const uint8_t *p)
{
    blk r;
    const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    for (int i = 0; i < LANES; i++) {
        r.v[i] = x;
    }
    return r;
}

SEALSTORE_INLINE blk blk_aesround(const blk in, const blk rk)
{
    blk r;
    for (int i = 0; i < LANES; i++) {
        r.v[i] = _mm_aesenc_si128(in.v[i], rk.v[i]);
    }
    return r;
}

/* The LANES registers XORed together, stored as 16 bytes (aegis_fold). */
#define BLK_HAVE_FOLD16 1
SEALSTORE_INLINE void blk_fold16(uint8_t *out, const blk x)
{
    __m128i acc = x.v[0];
    for (int i = 1; i < LANES; i++) {
        acc = _mm_xor_si128(acc, x.v[i]);
    }
    _mm_storeu_si128((__m128i *)(void *)out, acc);
}


/* One register of a word, for kernels that split the state (AEGIS_SPLIT in aegis_core.h). */
typedef __m128i reg;
#define BLK_REGS LANES
#define REG_BYTES 16
#define reg_xor _mm_xor_si128
#define reg_and _mm_and_si128
#define reg_aesround _mm_aesenc_si128
#define reg_load(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define reg_store(p, x) _mm_storeu_si128((__m128i *)(void *)(p), (x))

#endif
