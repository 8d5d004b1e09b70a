/* AEGIS-128X4 with AVX-512 and VAES: each state word (four lanes) is one 512-bit register. */
#include "../common.h"
#if SEALSTORE_X86
#define SEALSTORE_TARGET "aes,avx,avx2,avx512f,vaes"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 4
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

#define AEGIS_IMPL sealstore_aegis128x4_avx512
#define AEGIS_KERNEL_NAME "avx512"
#include "../aegis_core.h"

#include "../target_end.h"
#endif
