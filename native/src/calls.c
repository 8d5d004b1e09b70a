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
    uint8_t *c = out + prefixlen + SEALSTORE_NPUBBYTES;
    int ret;

    if (fullad == NULL) {
        return -1;
    }
    if (prefixlen) {
        memmove(out, prefix, prefixlen);
    }
    memmove(out + prefixlen, npub, SEALSTORE_NPUBBYTES);
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

    if (inlen < prefixlen + SEALSTORE_NPUBBYTES + ctx->maclen) {
        return -1;
    }
    clen = inlen - prefixlen - SEALSTORE_NPUBBYTES - ctx->maclen;
    fullad = join_ad(buf, sizeof buf, &heap, in, prefixlen, ad, adlen);
    if (fullad == NULL) {
        return -1;
    }
    ret = ctx->impl->decrypt(m, in + prefixlen + SEALSTORE_NPUBBYTES, clen, in + inlen - ctx->maclen,
                             ctx->maclen, fullad, prefixlen + adlen, in + prefixlen, ctx->key);
    free(heap);
    return ret;
}
