/*
 * Four independent AEGIS-128L messages at once, one per 128-bit lane of 512-bit registers.
 *
 * A single AEGIS-128L stream is bound by the latency of the AES round: each update waits for
 * the previous one.  Four unrelated messages (same key and AD, their own nonces and lengths,
 * as in Keyring.seal_many) have no dependency between them, so running them in the four lanes
 * of VAES zmm registers does four times the work in about the same time per update.  Lanes
 * that run out of message earlier are held with a masked blend until all reach finalization.
 * The output is byte for byte what four AEGIS-128L calls produce.
 */
#include "../common.h"
#if SEALSTORE_X86
#include <immintrin.h>
#define SEALSTORE_TARGET "aes,avx,avx2,avx512f,vaes"
#include "../target_begin.h"

#include "aegis128l_batch.h"

typedef __m512i v4;

SEALSTORE_INLINE v4 gather4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2,
                            const uint8_t *p3)
{
    v4 v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)p0));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p1), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p2), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p3), 3);
}

SEALSTORE_INLINE void scatter4(uint8_t *p0, uint8_t *p1, uint8_t *p2, uint8_t *p3, const v4 v)
{
    _mm_storeu_si128((__m128i *)(void *)p0, _mm512_castsi512_si128(v));
    _mm_storeu_si128((__m128i *)(void *)p1, _mm512_extracti32x4_epi32(v, 1));
    _mm_storeu_si128((__m128i *)(void *)p2, _mm512_extracti32x4_epi32(v, 2));
    _mm_storeu_si128((__m128i *)(void *)p3, _mm512_extracti32x4_epi32(v, 3));
}

SEALSTORE_INLINE v4 dup4(const uint8_t *p)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)p));
}

SEALSTORE_INLINE void update4(v4 s[8], const v4 m0, const v4 m1)
{
    const v4 t = s[7];
    s[7] = _mm512_aesenc_epi128(s[6], s[7]);
    s[6] = _mm512_aesenc_epi128(s[5], s[6]);
    s[5] = _mm512_aesenc_epi128(s[4], s[5]);
    s[4] = _mm512_aesenc_epi128(s[3], _mm512_xor_si512(s[4], m1));
    s[3] = _mm512_aesenc_epi128(s[2], s[3]);
    s[2] = _mm512_aesenc_epi128(s[1], s[2]);
    s[1] = _mm512_aesenc_epi128(s[0], s[1]);
    s[0] = _mm512_aesenc_epi128(t, _mm512_xor_si512(s[0], m0));
}

/* Update only the lanes in the 8-bit qword mask (two qwords per lane). */
SEALSTORE_INLINE void update4_masked(v4 s[8], const v4 m0, const v4 m1, __mmask8 keep_new)
{
    v4 n[8];
    for (int i = 0; i < 8; i++) {
        n[i] = s[i];
    }
    update4(n, m0, m1);
    for (int i = 0; i < 8; i++) {
        s[i] = _mm512_mask_blend_epi64(keep_new, s[i], n[i]);
    }
}

SEALSTORE_INLINE v4 z0_of(const v4 s[8])
{
    return _mm512_xor_si512(_mm512_xor_si512(s[6], s[1]), _mm512_and_si512(s[2], s[3]));
}

SEALSTORE_INLINE v4 z1_of(const v4 s[8])
{
    return _mm512_xor_si512(_mm512_xor_si512(s[2], s[5]), _mm512_and_si512(s[6], s[7]));
}

/* init4 and final4 are inlined too: called out of line, they keep clang from holding the state
   in registers in the message loop between them (tools/inline_guard.py) */
SEALSTORE_INLINE void init4(v4 s[8], const uint8_t *k, const uint8_t *const npub[4],
                            const uint8_t *ad, size_t adlen)
{
    const v4 c0 = dup4(sealstore_aegis_c0), c1 = dup4(sealstore_aegis_c1);
    const v4 kb = dup4(k);
    const v4 nb = gather4(npub[0], npub[1], npub[2], npub[3]);
    const v4 kn = _mm512_xor_si512(kb, nb);
    size_t i;

    s[0] = kn;
    s[1] = c1;
    s[2] = c0;
    s[3] = c1;
    s[4] = kn;
    s[5] = _mm512_xor_si512(kb, c0);
    s[6] = _mm512_xor_si512(kb, c1);
    s[7] = _mm512_xor_si512(kb, c0);
    for (int r = 0; r < 10; r++) {
        update4(s, nb, kb);
    }
    /* the AD is the same for every lane */
    for (i = 0; i + 32 <= adlen; i += 32) {
        update4(s, dup4(ad + i), dup4(ad + i + 16));
    }
    if (adlen % 32) {
        SEALSTORE_ALIGN(32) uint8_t pad[32] = {0};
        memcpy(pad, ad + i, adlen % 32);
        update4(s, dup4(pad), dup4(pad + 16));
    }
}

SEALSTORE_INLINE void final4(v4 s[8], uint8_t *const mac[4], size_t maclen, size_t adlen,
                             const size_t mlen[4])
{
    uint8_t u[4][16];
    uint8_t x[4][16];
    for (int l = 0; l < 4; l++) {
        sealstore_store64_le(u[l], (uint64_t)adlen << 3);
        sealstore_store64_le(u[l] + 8, (uint64_t)mlen[l] << 3);
    }
    const v4 t = _mm512_xor_si512(s[2], gather4(u[0], u[1], u[2], u[3]));
    for (int r = 0; r < 7; r++) {
        update4(s, t, t);
    }
    if (maclen == 16) {
        v4 a = _mm512_xor_si512(_mm512_xor_si512(s[0], s[1]), _mm512_xor_si512(s[2], s[3]));
        a = _mm512_xor_si512(a, _mm512_xor_si512(_mm512_xor_si512(s[4], s[5]), s[6]));
        scatter4(mac[0], mac[1], mac[2], mac[3], a);
    } else {
        const v4 a = _mm512_xor_si512(_mm512_xor_si512(s[0], s[1]), _mm512_xor_si512(s[2], s[3]));
        const v4 b = _mm512_xor_si512(_mm512_xor_si512(s[4], s[5]), _mm512_xor_si512(s[6], s[7]));
        scatter4(mac[0], mac[1], mac[2], mac[3], a);
        scatter4(x[0], x[1], x[2], x[3], b);
        for (int l = 0; l < 4; l++) {
            memcpy(mac[l] + 16, x[l], 16);
        }
    }
}

SEALSTORE_INLINE size_t min4(const size_t v[4])
{
    size_t m = v[0];
    for (int l = 1; l < 4; l++) {
        m = v[l] < m ? v[l] : m;
    }
    return m;
}

SEALSTORE_INLINE size_t max4(const size_t v[4])
{
    size_t m = v[0];
    for (int l = 1; l < 4; l++) {
        m = v[l] > m ? v[l] : m;
    }
    return m;
}

int sealstore_aegis128l_encrypt4_avx512(uint8_t *const c[4], uint8_t *const mac[4],
                                        size_t maclen, const uint8_t *const m[4],
                                        const size_t mlen[4], const uint8_t *ad, size_t adlen,
                                        const uint8_t *const npub[4], const uint8_t *k)
{
    v4 s[8];
    size_t nblocks[4];
    size_t i, common, last;

    if (maclen != 16 && maclen != 32) {
        return -1;
    }
    for (int l = 0; l < 4; l++) {
        nblocks[l] = (mlen[l] + 31) / 32;
    }
    init4(s, k, npub, ad, adlen);

    /* every lane has a full block: no masks, no copies */
    common = min4(mlen) / 32;
    for (i = 0; i < common; i++) {
        const size_t o = 32 * i;
        const v4 t0 = gather4(m[0] + o, m[1] + o, m[2] + o, m[3] + o);
        const v4 t1 = gather4(m[0] + o + 16, m[1] + o + 16, m[2] + o + 16, m[3] + o + 16);
        scatter4(c[0] + o, c[1] + o, c[2] + o, c[3] + o, _mm512_xor_si512(t0, z0_of(s)));
        scatter4(c[0] + o + 16, c[1] + o + 16, c[2] + o + 16, c[3] + o + 16,
                 _mm512_xor_si512(t1, z1_of(s)));
        update4(s, t0, t1);
    }
    /* the lanes' tails: partial blocks and lanes already done */
    last = max4(nblocks);
    for (; i < last; i++) {
        SEALSTORE_ALIGN(64) uint8_t in[4][32], out[4][32];
        size_t take[4];
        __mmask8 active = 0;
        for (int l = 0; l < 4; l++) {
            const size_t o = 32 * i;
            take[l] = o < mlen[l] ? (mlen[l] - o < 32 ? mlen[l] - o : 32) : 0;
            memset(in[l], 0, 32);
            if (take[l]) {
                memcpy(in[l], m[l] + o, take[l]);
                active |= (__mmask8)(3u << (2 * l));
            }
        }
        const v4 t0 = gather4(in[0], in[1], in[2], in[3]);
        const v4 t1 = gather4(in[0] + 16, in[1] + 16, in[2] + 16, in[3] + 16);
        scatter4(out[0], out[1], out[2], out[3], _mm512_xor_si512(t0, z0_of(s)));
        scatter4(out[0] + 16, out[1] + 16, out[2] + 16, out[3] + 16,
                 _mm512_xor_si512(t1, z1_of(s)));
        update4_masked(s, t0, t1, active);
        for (int l = 0; l < 4; l++) {
            if (take[l]) {
                memcpy(c[l] + 32 * i, out[l], take[l]);
            }
        }
        sealstore_memzero(in, sizeof in);
    }
    final4(s, mac, maclen, adlen, mlen);
    return 0;
}

int sealstore_aegis128l_decrypt4_avx512(uint8_t *const m[4], const uint8_t *const c[4],
                                        const size_t clen[4], const uint8_t *const mac[4],
                                        size_t maclen, const uint8_t *ad, size_t adlen,
                                        const uint8_t *const npub[4], const uint8_t *k,
                                        int ok[4])
{
    v4 s[8];
    size_t nblocks[4];
    size_t i, common, last;
    uint8_t computed[4][32];
    uint8_t *const cp[4] = {computed[0], computed[1], computed[2], computed[3]};
    int ret = 0;

    if (maclen != 16 && maclen != 32) {
        return -1;
    }
    for (int l = 0; l < 4; l++) {
        nblocks[l] = (clen[l] + 31) / 32;
    }
    init4(s, k, npub, ad, adlen);

    common = min4(clen) / 32;
    for (i = 0; i < common; i++) {
        const size_t o = 32 * i;
        const v4 x0 = _mm512_xor_si512(gather4(c[0] + o, c[1] + o, c[2] + o, c[3] + o), z0_of(s));
        const v4 x1 = _mm512_xor_si512(
            gather4(c[0] + o + 16, c[1] + o + 16, c[2] + o + 16, c[3] + o + 16), z1_of(s));
        scatter4(m[0] + o, m[1] + o, m[2] + o, m[3] + o, x0);
        scatter4(m[0] + o + 16, m[1] + o + 16, m[2] + o + 16, m[3] + o + 16, x1);
        update4(s, x0, x1);
    }
    last = max4(nblocks);
    for (; i < last; i++) {
        SEALSTORE_ALIGN(64) uint8_t buf[4][32];
        size_t take[4];
        __mmask8 active = 0;
        for (int l = 0; l < 4; l++) {
            const size_t o = 32 * i;
            take[l] = o < clen[l] ? (clen[l] - o < 32 ? clen[l] - o : 32) : 0;
            memset(buf[l], 0, 32);
            if (take[l]) {
                memcpy(buf[l], c[l] + o, take[l]);
                active |= (__mmask8)(3u << (2 * l));
            }
        }
        const v4 y0 = _mm512_xor_si512(gather4(buf[0], buf[1], buf[2], buf[3]), z0_of(s));
        const v4 y1 = _mm512_xor_si512(
            gather4(buf[0] + 16, buf[1] + 16, buf[2] + 16, buf[3] + 16), z1_of(s));
        scatter4(buf[0], buf[1], buf[2], buf[3], y0);
        scatter4(buf[0] + 16, buf[1] + 16, buf[2] + 16, buf[3] + 16, y1);
        /* DecPartial: keep the plaintext bytes, absorb them zero-padded */
        for (int l = 0; l < 4; l++) {
            memcpy(m[l] + 32 * i, buf[l], take[l]);
            memset(buf[l] + take[l], 0, 32 - take[l]);
        }
        update4_masked(s, gather4(buf[0], buf[1], buf[2], buf[3]),
                       gather4(buf[0] + 16, buf[1] + 16, buf[2] + 16, buf[3] + 16), active);
        sealstore_memzero(buf, sizeof buf);
    }
    final4(s, cp, maclen, adlen, clen);
    for (int l = 0; l < 4; l++) {
        ok[l] = sealstore_verify(computed[l], mac[l], maclen) == 0;
        if (!ok[l]) {
            sealstore_memzero(m[l], clen[l]);
            ret = -1;
        }
    }
    return ret;
}

#include "../target_end.h"
#endif
