/*
 * libFuzzer target for the C open/decrypt entry points (sealstore.h), built with
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Inative/include \
 *       tests/native/fuzz_open.c <kernel sources> -o fuzz_open
 * (tools/fuzz_c.sh does it).  Input: 8 control bytes, then the data.
 *   c[0] variant, c[1] kernel (skipped if not runnable), c[2] tag size, c[3] call,
 *   c[4..7] a length parameter (prefix length, segment size) and the first segment index.
 * Calls, on every input: sealstore_decrypt, sealstore_decrypt_detached, sealstore_open_prefixed
 * (any prefix length, as the header allows: too long is a failure, not a crash),
 * sealstore_open_segments (any segment size, index, final flag), and the round trip of the
 * column fast path (sealstore.keyring.named_sealer/named_opener, native/python/bound.c): the data as a
 * value sealed behind a 7-byte header, opened back, then opened with one bit flipped.
 * Properties: no sanitizer report; no forged input opens; a failed call leaves no plaintext
 * in the output (wiped, or never written); a sealed value opens to what was sealed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sealstore.h"

/* room for every variant's key (sealstore_key_size: 16 or 32 bytes are read) */
static const uint8_t KEY[SEALSTORE_MAX_KEYBYTES] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                                    12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                                    23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static int clean(const uint8_t *p, size_t n)
{
    /* zeros where the output was wiped, then the 0xa5 fill nobody wrote */
    size_t i = 0;
    while (i < n && p[i] == 0) {
        i++;
    }
    for (; i < n; i++) {
        if (p[i] != 0xa5) {
            return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER 7 /* the sealed-value header the named sealer/opener put before the nonce */

/* named_sealer then named_opener on ``m`` (the C calls bound.c makes), then a one-bit change */
static void column_round_trip(const sealstore_ctx *ctx, const uint8_t *m, size_t n, size_t flip)
{
    const size_t over = HEADER + ctx->npublen + ctx->maclen;
    uint8_t header[HEADER] = {0}, npub[SEALSTORE_MAX_NPUBBYTES] = {0};
    uint8_t *sealed = malloc(n + over), *back = malloc(n + 1);

    memcpy(header, m, n < HEADER ? n : HEADER);
    memcpy(npub, m + n / 2, n - n / 2 < ctx->npublen ? n - n / 2 : ctx->npublen);
    if (sealstore_seal_prefixed(ctx, sealed, header, HEADER, npub, m, n, m, n % 9) != 0 ||
        memcmp(sealed, header, HEADER) != 0) {
        abort(); /* sealing a valid value failed, or lost the header */
    }
    if (sealstore_open_prefixed(ctx, back, sealed, n + over, HEADER, m, n % 9) != 0 ||
        (n && memcmp(back, m, n) != 0)) {
        abort(); /* the value does not open to what was sealed */
    }
    sealed[flip % (n + over)] ^= (uint8_t)(1u << (flip % 8));
    memset(back, 0xa5, n + 1);
    if (sealstore_open_prefixed(ctx, back, sealed, n + over, HEADER, m, n % 9) == 0) {
        abort(); /* a modified value opened */
    }
    if (!clean(back, n + 1)) {
        abort();
    }
    free(sealed);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sealstore_ctx *ctx;
    const uint8_t *body;
    uint8_t *out, npub[SEALSTORE_MAX_NPUBBYTES] = {0};
    uint8_t nprefix[SEALSTORE_MAX_NPUBBYTES - 5] = {0};
    size_t n, param, bad = 0, outlen;
    int rc = 0;

    if (size < 8) {
        return 0;
    }
    ctx = sealstore_ctx_new(data[0] % SEALSTORE_NVARIANTS, data[1] % SEALSTORE_NKERNELS, KEY,
                            (data[2] & 1) ? 32 : 16);
    if (ctx == NULL) {
        return 0; /* kernel not runnable here */
    }
    param = (size_t)data[4] | (size_t)data[5] << 8 | (size_t)data[6] << 16;
    if (data[7] & 0x80) {
        param = SIZE_MAX - param; /* huge values too */
    }
    body = data + 8;
    n = size - 8;
    outlen = n + 64;
    out = malloc(outlen);
    memset(out, 0xa5, outlen);
    memcpy(npub, body, n < ctx->npublen ? n : ctx->npublen);
    memcpy(nprefix, body, n < ctx->npublen - 5 ? n : ctx->npublen - 5);

    if (data[3] % 5 == 4) {
        column_round_trip(ctx, body, n, param);
        free(out);
        sealstore_ctx_free(ctx);
        return 0;
    }
    switch (data[3] % 5) {
    case 0:
        rc = sealstore_decrypt(ctx, out, body, n, body, n / 2, npub);
        break;
    case 1:
        rc = n >= ctx->maclen ? sealstore_decrypt_detached(ctx, out, body, n - ctx->maclen,
                                                           body + n - ctx->maclen, NULL, 0, npub)
                              : -1;
        break;
    case 2:
        rc = sealstore_open_prefixed(ctx, out, body, n, param, body, n % 7);
        break;
    default:
        rc = sealstore_open_segments(ctx, out, body, n, param ? param : 1, nprefix,
                                     (uint32_t)data[7] << 24, data[2] & 2, body, n % 5, &bad);
        break;
    }
    if (rc == 0) {
        abort(); /* a forgery opened */
    }
    if (!clean(out, outlen)) {
        abort(); /* plaintext left behind after a failure */
    }
    free(out);
    sealstore_ctx_free(ctx);
    return 0;
}
