/*
 * The calls on a keyed context: attached and detached tags, and prefixed values
 * (prefix || npub || ciphertext || tag, with AD = prefix || ad), so the format layer above
 * never copies a payload.  Nothing here knows which kernel runs: ctx->impl does.
 */
#include <stdlib.h>

#include "common.h"

int sealstore_encrypt(const sealstore_ctx *ctx, uint8_t *c, const uint8_t *m, size_t mlen,
                      const uint8_t *ad, size_t adlen, const uint8_t *npub)
{
    return ctx->impl->encrypt(c, c + mlen, ctx->maclen, m, mlen, ad, adlen, npub, ctx->key);
}

int sealstore_decrypt(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *c, size_t clen,
                      const uint8_t *ad, size_t adlen, const uint8_t *npub)
{
    if (clen < ctx->maclen) {
        return -1;
    }
    clen -= ctx->maclen;
    return ctx->impl->decrypt(m, c, clen, c + clen, ctx->maclen, ad, adlen, npub, ctx->key);
}

int sealstore_encrypt_detached(const sealstore_ctx *ctx, uint8_t *c, uint8_t *mac,
                               const uint8_t *m, size_t mlen, const uint8_t *ad, size_t adlen,
                               const uint8_t *npub)
{
    return ctx->impl->encrypt(c, mac, ctx->maclen, m, mlen, ad, adlen, npub, ctx->key);
}

int sealstore_decrypt_detached(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *c,
                               size_t clen, const uint8_t *mac, const uint8_t *ad, size_t adlen,
                               const uint8_t *npub)
{
    return ctx->impl->decrypt(m, c, clen, mac, ctx->maclen, ad, adlen, npub, ctx->key);
}

/* Join prefix and ad; small ADs (the usual case: a header and a context digest) stay on the
   stack.  Returns the AD pointer (buf, or a heap block the caller frees) or NULL. */
static const uint8_t *join_ad(uint8_t *buf, size_t bufsize, uint8_t **heap, const uint8_t *prefix,
                              size_t prefixlen, const uint8_t *ad, size_t adlen)
{
    uint8_t *dst = buf;

    *heap = NULL;
    if (adlen > SIZE_MAX - prefixlen) {
        return NULL;
    }
    if (prefixlen + adlen > bufsize) {
        dst = *heap = (uint8_t *)malloc(prefixlen + adlen);
        if (dst == NULL) {
            return NULL;
        }
    }
    if (prefixlen) {
        memcpy(dst, prefix, prefixlen);
    }
    if (adlen) {
        memcpy(dst + prefixlen, ad, adlen);
    }
    return dst;
}

int sealstore_seal_prefixed(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *prefix,
                            size_t prefixlen, const uint8_t *npub, const uint8_t *m, size_t mlen,
                            const uint8_t *ad, size_t adlen)
{
    uint8_t buf[256];
    uint8_t *heap;
    const uint8_t *fullad = join_ad(buf, sizeof buf, &heap, prefix, prefixlen, ad, adlen);
    uint8_t *c = out + prefixlen + ctx->npublen;
    int ret;

    if (fullad == NULL) {
        return -1;
    }
    if (prefixlen) {
        memmove(out, prefix, prefixlen);
    }
    memmove(out + prefixlen, npub, ctx->npublen);
    ret = ctx->impl->encrypt(c, c + mlen, ctx->maclen, m, mlen, fullad, prefixlen + adlen,
                             out + prefixlen, ctx->key);
    free(heap);
    return ret;
}

int sealstore_open_prefixed(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *in,
                            size_t inlen, size_t prefixlen, const uint8_t *ad, size_t adlen)
{
    uint8_t buf[256];
    uint8_t *heap;
    const uint8_t *fullad;
    size_t clen;
    int ret;

    if (prefixlen > inlen || inlen - prefixlen < ctx->npublen + ctx->maclen) {
        return -1;
    }
    clen = inlen - prefixlen - ctx->npublen - ctx->maclen;
    fullad = join_ad(buf, sizeof buf, &heap, in, prefixlen, ad, adlen);
    if (fullad == NULL) {
        return -1;
    }
    ret = ctx->impl->decrypt(m, in + prefixlen + ctx->npublen, clen, in + inlen - ctx->maclen,
                             ctx->maclen, fullad, prefixlen + adlen, in + prefixlen, ctx->key);
    free(heap);
    return ret;
}

/* ---- segmented streams ----
   Segment i is sealed with nonce = nonce_prefix (npublen - 5 bytes) || BE32(i) || final flag, where the
   flag is 1 on the stream's last segment only, and with the same AD for every segment.  A
   buffer holds whole segments (segment_len plaintext bytes each); a final buffer ends with the
   last segment, which holds the remainder (0 to segment_len - 1 bytes), so truncation,
   reordering, duplication and extension all fail to open. */

static void seg_nonce(uint8_t npub[SEALSTORE_MAX_NPUBBYTES], size_t npublen,
                      const uint8_t *prefix, uint32_t index, int final)
{
    const size_t at = npublen - 5;
    memcpy(npub, prefix, at);
    npub[at] = (uint8_t)(index >> 24);
    npub[at + 1] = (uint8_t)(index >> 16);
    npub[at + 2] = (uint8_t)(index >> 8);
    npub[at + 3] = (uint8_t)index;
    npub[at + 4] = (uint8_t)(final ? 1 : 0);
}

/* Number of segments in a plaintext buffer; 0 when the framing is impossible (-2), or
   SIZE_MAX when the last index would pass 2^32 - 1 (-3). */
static size_t seg_count(size_t inlen, size_t seglen, size_t maclen, uint32_t first_index,
                        int final)
{
    size_t n;
    if (seglen == 0 || seglen > SIZE_MAX - maclen || (!final && inlen % seglen != 0)) {
        return 0;
    }
    n = inlen / seglen + (final ? 1 : 0);
    if (n == 0) {
        return 0;
    }
    if (n - 1 > (size_t)(UINT32_MAX - first_index)) {
        return SIZE_MAX;
    }
    return n;
}

int sealstore_seal_segments(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *in,
                            size_t inlen, size_t seglen, const uint8_t *nonce_prefix,
                            uint32_t first_index, int final, const uint8_t *ad, size_t adlen)
{
    const size_t n = seg_count(inlen, seglen, ctx->maclen, first_index, final);
    uint8_t npub[SEALSTORE_MAX_NPUBBYTES];

    if (n == 0) {
        return -2;
    }
    if (n == SIZE_MAX) {
        return -3;
    }
    for (size_t i = 0; i < n; i++) {
        const size_t mlen = (i + 1 < n || !final) ? seglen : inlen - i * seglen;
        uint8_t *c = out + i * (seglen + ctx->maclen);
        seg_nonce(npub, ctx->npublen, nonce_prefix, first_index + (uint32_t)i, final && i + 1 == n);
        if (ctx->impl->encrypt(c, c + mlen, ctx->maclen, in + i * seglen, mlen, ad, adlen, npub,
                               ctx->key) != 0) {
            return -1;
        }
    }
    return 0;
}

int sealstore_open_segments(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *in,
                            size_t inlen, size_t seglen, const uint8_t *nonce_prefix,
                            uint32_t first_index, int final, const uint8_t *ad, size_t adlen,
                            size_t *bad_index)
{
    size_t sealed, n, outlen;
    uint8_t npub[SEALSTORE_MAX_NPUBBYTES];

    if (seglen == 0 || seglen > SIZE_MAX - ctx->maclen) {
        return -2;
    }
    sealed = seglen + ctx->maclen;
    n = inlen / sealed;
    if (final) {
        if (inlen - n * sealed < ctx->maclen) {
            return -2; /* no room for the last segment's tag: truncated */
        }
        n += 1;
    } else if (inlen % sealed != 0 || n == 0) {
        return -2;
    }
    if (n - 1 > (size_t)(UINT32_MAX - first_index)) {
        return -3;
    }
    outlen = inlen - n * ctx->maclen;
    for (size_t i = 0; i < n; i++) {
        const size_t clen = (i + 1 < n || !final) ? seglen : inlen - i * sealed - ctx->maclen;
        const uint8_t *c = in + i * sealed;
        seg_nonce(npub, ctx->npublen, nonce_prefix, first_index + (uint32_t)i, final && i + 1 == n);
        if (ctx->impl->decrypt(out + i * seglen, c, clen, c + clen, ctx->maclen, ad, adlen, npub,
                               ctx->key) != 0) {
            sealstore_memzero(out, outlen);
            *bad_index = first_index + i;
            return -1;
        }
    }
    return 0;
}
