/*
 * Known-answer and cross-kernel agreement driver for the native kernels, in plain C, linked
 * straight against native/src (no Python).  Used by tests/toolchain/test_build.py (natively, and
 * cross-compiled for aarch64 under qemu), by tools/sanitize.sh (ASan/UBSan) and under
 * valgrind memcheck.
 *
 *   kat kernels                  print "VARIANT: kernel ..." for what this build and CPU run
 *   kat selected                 print "VARIANT: kernel" for the kernel a context gets by default
 *   kat overflow                 control for the sanitizer runs: encrypts one byte more than
 *                                its buffer holds (a heap over-read AddressSanitizer must report)
 *   kat [-k KERNEL] [-q] FILE    run the draft vectors in FILE (tools/kat_vectors.py output,
 *                                "-" for stdin) on every runnable kernel, or only KERNEL, then
 *                                check every kernel against the portable one on pseudo-random
 *                                inputs whose lengths straddle every block and lane boundary,
 *                                round trips, tamper rejection (output wiped), the attached,
 *                                prefixed and segment calls.  -q: fewer lengths (valgrind).
 *                                -L: every message length 0..4096 and large odd ones instead
 *                                (tools/cross_aarch64.sh runs it under qemu).
 *
 * Prints one summary line and exits 0 when everything passed, 1 otherwise.
 *
 * Built with -DKAT_WRAP_GETAUXVAL and -Wl,--wrap=getauxval (aarch64 Linux), the driver clears
 * the HWCAP bits in the environment variable KAT_HWCAP_CLEAR (hex) from what the kernel
 * reports, so a CPU without the Crypto Extension can be played through the real detection path.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sealstore.h"

#ifdef KAT_WRAP_GETAUXVAL
#include <sys/auxv.h>

unsigned long __real_getauxval(unsigned long type);
unsigned long __wrap_getauxval(unsigned long type);

unsigned long __wrap_getauxval(unsigned long type)
{
    const char *clear = getenv("KAT_HWCAP_CLEAR");
    unsigned long v = __real_getauxval(type);
    if (type == AT_HWCAP && clear != NULL) {
        v &= ~strtoul(clear, NULL, 16);
    }
    return v;
}
#endif

/* the C library's names (the suite registry's native variants): no second list here */
#define variant_names(v) sealstore_variant_name(v)
static const char *const kernel_names[SEALSTORE_NKERNELS] = {"portable", "aesni", "avx2",
                                                             "avx512", "armcrypto"};
static int failures;
static long checks;
static int only_kernel = -1;

#define FAIL(...)                                                                               \
    do {                                                                                        \
        failures++;                                                                             \
        if (failures <= 20) {                                                                   \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                                \
        }                                                                                       \
    } while (0)

static void *xmalloc(size_t n)
{
    /* +1 so a zero-length buffer is still a distinct, valid pointer */
    void *p = malloc(n + 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* splitmix64: deterministic inputs, the same on every platform */
static uint64_t rng_state = 0x5ea15708e5eedULL;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void rng_fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)rng_next();
    }
}

static int all_zero(const uint8_t *p, size_t n)
{
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= p[i];
    }
    return d == 0;
}

static int kernel_wanted(int variant, int kernel)
{
    if (only_kernel >= 0 && kernel != only_kernel) {
        return 0;
    }
    return sealstore_impl(variant, kernel) != NULL;
}

/* ---- vectors ---- */

static int unhex(const char *s, uint8_t **out, size_t *len)
{
    size_t n;
    if (strcmp(s, "-") == 0) {
        *out = xmalloc(0);
        *len = 0;
        return 0;
    }
    n = strlen(s);
    if (n % 2) {
        return -1;
    }
    *out = xmalloc(n / 2);
    *len = n / 2;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            return -1;
        }
        (*out)[i] = (uint8_t)v;
    }
    return 0;
}

static int variant_id(const char *name)
{
    for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
        if (strcmp(name, variant_names(v)) == 0) {
            return v;
        }
    }
    return -1;
}

static void run_vector(int lineno, const char *alg, size_t maclen, int valid, char **hex)
{
    uint8_t *f[6];
    size_t n[6];
    const int v = variant_id(alg);

    if (v < 0 || (maclen != 16 && maclen != 32)) {
        FAIL("line %d: bad variant or tag size", lineno);
        return;
    }
    for (int i = 0; i < 6; i++) {
        if (unhex(hex[i], &f[i], &n[i]) != 0) {
            FAIL("line %d: bad hex in field %d", lineno, i);
            for (int j = 0; j < i; j++) {
                free(f[j]);
            }
            return;
        }
    }
    /* f: key nonce ad msg ct tag */
    for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
        const sealstore_aead_impl *impl;
        uint8_t *m, *c, mac[32];
        if (!kernel_wanted(v, k)) {
            continue;
        }
        impl = sealstore_impl(v, k);
        m = xmalloc(n[4]);
        c = xmalloc(n[4]);
        if (valid) {
            if (impl->encrypt(c, mac, maclen, f[3], n[3], f[2], n[2], f[1], f[0]) != 0 ||
                n[3] != n[4] || memcmp(c, f[4], n[4]) != 0 || memcmp(mac, f[5], maclen) != 0) {
                FAIL("line %d %s tag%zu %s: encrypt differs from the vector", lineno, alg,
                     maclen * 8, kernel_names[k]);
            }
            if (impl->decrypt(m, f[4], n[4], f[5], maclen, f[2], n[2], f[1], f[0]) != 0 ||
                memcmp(m, f[3], n[3]) != 0) {
                FAIL("line %d %s tag%zu %s: decrypt differs from the vector", lineno, alg,
                     maclen * 8, kernel_names[k]);
            }
        } else {
            memset(m, 0xa5, n[4]);
            if (impl->decrypt(m, f[4], n[4], f[5], maclen, f[2], n[2], f[1], f[0]) == 0) {
                FAIL("line %d %s tag%zu %s: must-fail vector accepted", lineno, alg, maclen * 8,
                     kernel_names[k]);
            } else if (!all_zero(m, n[4])) {
                FAIL("line %d %s tag%zu %s: output not wiped on failure", lineno, alg, maclen * 8,
                     kernel_names[k]);
            }
        }
        checks++;
        free(m);
        free(c);
    }
    for (int i = 0; i < 6; i++) {
        free(f[i]);
    }
}

/* One line of fp into *line (grown as needed, NUL-terminated, newline kept); its length, or
   -1 at end of file with nothing read.  Standard C only (POSIX getline is absent on Windows). */
static long read_line(char **line, size_t *cap, FILE *fp)
{
    size_t len = 0;
    int ch;

    while ((ch = fgetc(fp)) != EOF) {
        if (len + 2 > *cap) {
            size_t ncap = *cap ? 2 * *cap : 256;
            char *grown = realloc(*line, ncap);
            if (grown == NULL) {
                fprintf(stderr, "out of memory\n");
                exit(2);
            }
            *line = grown;
            *cap = ncap;
        }
        (*line)[len++] = (char)ch;
        if (ch == '\n') {
            break;
        }
    }
    if (len == 0) {
        return -1;
    }
    (*line)[len] = '\0';
    return (long)len;
}

static int run_vectors(const char *path)
{
    FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, count = 0;

    if (fp == NULL) {
        perror(path);
        return -1;
    }
    while (read_line(&line, &cap, fp) > 0) {
        char alg[32], hex[6][4096];
        unsigned maclen;
        int valid;
        char *hp[6];
        lineno++;
        if (line[0] == '\n' || line[0] == '#') {
            continue;
        }
        if (strlen(line) > 6 * 4000 ||
            sscanf(line, "%31s %u %d %4095s %4095s %4095s %4095s %4095s %4095s", alg, &maclen,
                   &valid, hex[0], hex[1], hex[2], hex[3], hex[4], hex[5]) != 9) {
            FAIL("line %d: cannot parse", lineno);
            continue;
        }
        for (int i = 0; i < 6; i++) {
            hp[i] = hex[i];
        }
        run_vector(lineno, alg, maclen, valid, hp);
        count++;
    }
    free(line);
    if (fp != stdin) {
        fclose(fp);
    }
    if (count == 0) {
        FAIL("no vectors in %s", path);
    }
    return count;
}

/* ---- cross-kernel agreement ---- */

/* One (variant, mlen, adlen, maclen) case, buffers at the given misalignment. */
static void cross_case(int v, size_t mlen, size_t adlen, size_t maclen, size_t off)
{
    uint8_t key[SEALSTORE_MAX_KEYBYTES], npub[SEALSTORE_MAX_NPUBBYTES], ref_mac[32], mac[32];
    uint8_t *mbuf = xmalloc(mlen + off), *adbuf = xmalloc(adlen + off);
    uint8_t *ref = xmalloc(mlen), *cbuf = xmalloc(mlen + off), *pbuf = xmalloc(mlen + off);
    uint8_t *m = mbuf + off, *ad = adbuf + off, *c = cbuf + off, *p = pbuf + off;
    const sealstore_aead_impl *portable = sealstore_impl(v, SEALSTORE_KERNEL_PORTABLE);

    rng_fill(key, sizeof key);
    rng_fill(npub, sizeof npub);
    rng_fill(m, mlen);
    rng_fill(ad, adlen);
    portable->encrypt(ref, ref_mac, maclen, m, mlen, ad, adlen, npub, key);

    for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
        const sealstore_aead_impl *impl;
        if (!kernel_wanted(v, k)) {
            continue;
        }
        impl = sealstore_impl(v, k);
        memset(mac, 0, sizeof mac);
        if (impl->encrypt(c, mac, maclen, m, mlen, ad, adlen, npub, key) != 0 ||
            memcmp(c, ref, mlen) != 0 || memcmp(mac, ref_mac, maclen) != 0) {
            FAIL("%s %s: mlen %zu adlen %zu tag %zu off %zu differs from portable",
                 variant_names(v), kernel_names[k], mlen, adlen, maclen, off);
        }
        if (impl->decrypt(p, c, mlen, mac, maclen, ad, adlen, npub, key) != 0 ||
            memcmp(p, m, mlen) != 0) {
            FAIL("%s %s: mlen %zu adlen %zu tag %zu: round trip failed", variant_names(v),
                 kernel_names[k], mlen, adlen, maclen);
        }
        /* in place (output exactly over the input, which the API allows), both ways */
        if (impl->encrypt(p, mac, maclen, p, mlen, ad, adlen, npub, key) != 0 ||
            memcmp(p, ref, mlen) != 0 ||
            impl->decrypt(p, p, mlen, mac, maclen, ad, adlen, npub, key) != 0 ||
            memcmp(p, m, mlen) != 0) {
            FAIL("%s %s: mlen %zu: in-place encrypt or decrypt differs", variant_names(v),
                 kernel_names[k], mlen);
        }
        /* flip one bit of the ciphertext (or the tag when empty), then of the AD */
        if (mlen) {
            c[mlen / 2] ^= 0x10;
        } else {
            mac[maclen - 1] ^= 0x10;
        }
        memset(p, 0xa5, mlen);
        if (impl->decrypt(p, c, mlen, mac, maclen, ad, adlen, npub, key) == 0 ||
            !all_zero(p, mlen)) {
            FAIL("%s %s: mlen %zu: tampered ciphertext accepted or output not wiped",
                 variant_names(v), kernel_names[k], mlen);
        }
        if (mlen) {
            c[mlen / 2] ^= 0x10;
        } else {
            mac[maclen - 1] ^= 0x10;
        }
        if (adlen) {
            ad[adlen - 1] ^= 0x01;
            if (impl->decrypt(p, c, mlen, mac, maclen, ad, adlen, npub, key) == 0) {
                FAIL("%s %s: adlen %zu: tampered AD accepted", variant_names(v),
                     kernel_names[k], adlen);
            }
            ad[adlen - 1] ^= 0x01;
        }
        checks++;
    }
    free(mbuf);
    free(adbuf);
    free(ref);
    free(cbuf);
    free(pbuf);
}

/* every length 0..4096 (AD lengths cycling), then large odd ones: the bulk loops and tails */
static void run_cross_long(void)
{
    /* across the 4 KiB turns of the two-lane X4 loop (aegis128x4_armcrypto_halves.h) too */
    static const size_t big[] = {4096 + 128 + 5,  8192 - 1,       (1u << 20) - 1,
                                 1u << 20,        (1u << 20) + 77, 3u << 19 | 13};
    for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
        for (size_t mlen = 0; mlen <= 4096; mlen++) {
            cross_case(v, mlen, (mlen * 7) % 300, (mlen & 1) ? 32 : 16, mlen % 4);
        }
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
            cross_case(v, big[i], 1000 + i, (i & 1) ? 16 : 32, i % 4);
        }
    }
}

/* In place (c == m, then m == c): every kernel against the portable one, the split kernels
   included (each pass of theirs must read its bytes of a block before writing them). */
static void in_place_case(int v, size_t mlen)
{
    uint8_t key[SEALSTORE_MAX_KEYBYTES], npub[SEALSTORE_MAX_NPUBBYTES], ad[20], ref_mac[32];
    uint8_t mac[32];
    uint8_t *m = xmalloc(mlen), *ref = xmalloc(mlen), *buf = xmalloc(mlen);
    const sealstore_aead_impl *portable = sealstore_impl(v, SEALSTORE_KERNEL_PORTABLE);

    rng_fill(key, sizeof key);
    rng_fill(npub, sizeof npub);
    rng_fill(ad, sizeof ad);
    rng_fill(m, mlen);
    portable->encrypt(ref, ref_mac, 32, m, mlen, ad, sizeof ad, npub, key);
    for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
        const sealstore_aead_impl *impl;
        if (!kernel_wanted(v, k)) {
            continue;
        }
        impl = sealstore_impl(v, k);
        memcpy(buf, m, mlen);
        if (impl->encrypt(buf, mac, 32, buf, mlen, ad, sizeof ad, npub, key) != 0 ||
            memcmp(buf, ref, mlen) != 0 || memcmp(mac, ref_mac, 32) != 0) {
            FAIL("%s %s: mlen %zu: in-place encryption differs from portable", variant_names(v),
                 kernel_names[k], mlen);
        }
        if (impl->decrypt(buf, buf, mlen, mac, 32, ad, sizeof ad, npub, key) != 0 ||
            memcmp(buf, m, mlen) != 0) {
            FAIL("%s %s: mlen %zu: in-place decryption failed", variant_names(v),
                 kernel_names[k], mlen);
        }
        checks++;
    }
    free(m);
    free(ref);
    free(buf);
}

static void run_cross(int quick)
{
    /* around the 4096-byte chunks of the kernels that split their state (aegis_core.h) */
    static const size_t chunk_lens[] = {1000, 4095, 4096, 4097, 4096 + 256, 8192 - 64, 8192 + 300};
    /* lengths around every block (16), rate (32 * D) and lane boundary of the three variants */
    static const size_t ad_lens[] = {0,  1,  15, 16, 17,  31,  32,  33,  63,
                                     64, 65, 95, 127, 128, 129, 255, 256, 257};
    const size_t max_m = quick ? 140 : 520;
    for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
        for (size_t mlen = 0; mlen <= max_m; mlen += (quick ? 3 : 1)) {
            const size_t adlen = ad_lens[mlen % (sizeof ad_lens / sizeof ad_lens[0])];
            cross_case(v, mlen, adlen, (mlen & 1) ? 32 : 16, mlen % 4);
        }
        for (size_t i = 0; i < sizeof ad_lens / sizeof ad_lens[0]; i++) {
            cross_case(v, 64 * (i + 1) + 1, ad_lens[i], 16, 0);
        }
        for (size_t i = 0; i < sizeof chunk_lens / sizeof chunk_lens[0]; i++) {
            cross_case(v, chunk_lens[i], i * 7, 16, i % 4);
            in_place_case(v, chunk_lens[i]);
        }
        /* a large message at an odd offset: the bulk loops and the tail together */
        cross_case(v, quick ? 4099 : (1u << 20) + 77, 300, 32, 3);
    }
}

/* ---- the context calls: attached tag, prefixed values, segments ---- */

static void run_ctx_calls(void)
{
    uint8_t key[SEALSTORE_MAX_KEYBYTES], npub[SEALSTORE_MAX_NPUBBYTES];
    uint8_t prefix[7] = {1, 3, 0, 0, 0, 9, 1}, nprefix[SEALSTORE_MAX_NPUBBYTES - 5];
    uint8_t m[300], ad[40], c[300 + 32], p[300], sealed[7 + SEALSTORE_MAX_NPUBBYTES + 300 + 32];
    uint8_t segout[300 + 8 * 32], segback[300];
    size_t bad = 0;

    rng_fill(key, sizeof key);
    rng_fill(npub, sizeof npub);
    rng_fill(m, sizeof m);
    rng_fill(ad, sizeof ad);
    rng_fill(nprefix, sizeof nprefix);
    for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
        const size_t npublen = sealstore_nonce_size(v);
        for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
            for (size_t maclen = 16; maclen <= 32; maclen += 16) {
                sealstore_ctx *ctx;
                if (!kernel_wanted(v, k)) {
                    continue;
                }
                ctx = sealstore_ctx_new(v, k, key, maclen);
                if (ctx == NULL || ctx->kernel != k) {
                    FAIL("%s %s: no context", variant_names(v), kernel_names[k]);
                    continue;
                }
                /* attached tag */
                if (sealstore_encrypt(ctx, c, m, sizeof m, ad, sizeof ad, npub) != 0 ||
                    sealstore_decrypt(ctx, p, c, sizeof m + maclen, ad, sizeof ad, npub) != 0 ||
                    memcmp(p, m, sizeof m) != 0) {
                    FAIL("%s %s: attached round trip", variant_names(v), kernel_names[k]);
                }
                if (sealstore_decrypt(ctx, p, c, maclen - 1, ad, sizeof ad, npub) == 0) {
                    FAIL("%s %s: input shorter than the tag accepted", variant_names(v),
                         kernel_names[k]);
                }
                /* prefixed */
                if (sealstore_seal_prefixed(ctx, sealed, prefix, sizeof prefix, npub, m, sizeof m,
                                            ad, sizeof ad) != 0 ||
                    sealstore_open_prefixed(ctx, p, sealed, 7 + npublen + sizeof m + maclen, 7, ad,
                                            sizeof ad) != 0 ||
                    memcmp(p, m, sizeof m) != 0) {
                    FAIL("%s %s: prefixed round trip", variant_names(v), kernel_names[k]);
                }
                sealed[0] ^= 1; /* the prefix is authenticated */
                if (sealstore_open_prefixed(ctx, p, sealed, 7 + npublen + sizeof m + maclen, 7, ad,
                                            sizeof ad) == 0) {
                    FAIL("%s %s: edited prefix accepted", variant_names(v), kernel_names[k]);
                }
                if (sealstore_open_prefixed(ctx, p, sealed, 7 + npublen + maclen - 1, 7, ad, 0) ==
                    0) {
                    FAIL("%s %s: short prefixed value accepted", variant_names(v),
                         kernel_names[k]);
                }
                /* segments of 64 bytes: 300 = 4 whole + a final 44 */
                if (sealstore_seal_segments(ctx, segout, m, sizeof m, 64, nprefix, 7, 1, ad,
                                            sizeof ad) != 0 ||
                    sealstore_open_segments(ctx, segback, segout, sizeof m + 5 * maclen, 64,
                                            nprefix, 7, 1, ad, sizeof ad, &bad) != 0 ||
                    memcmp(segback, m, sizeof m) != 0) {
                    FAIL("%s %s: segment round trip", variant_names(v), kernel_names[k]);
                }
                /* cut at a segment boundary: not a segment sequence (framing, -2) */
                if (sealstore_open_segments(ctx, segback, segout, 4 * (64 + maclen), 64, nprefix,
                                            7, 1, ad, sizeof ad, &bad) != -2) {
                    FAIL("%s %s: stream cut at a boundary not refused", variant_names(v),
                         kernel_names[k]);
                }
                /* cut inside segment 10: its stub opens as a final segment and fails there */
                if (sealstore_open_segments(ctx, segback, segout, 3 * (64 + maclen) + maclen + 10,
                                            64, nprefix, 7, 1, ad, sizeof ad, &bad) != -1 ||
                    bad != 10) {
                    FAIL("%s %s: truncated stream not detected at segment 10 (bad %zu)",
                         variant_names(v), kernel_names[k], bad);
                }
                segout[2 * (64 + maclen)] ^= 4;
                if (sealstore_open_segments(ctx, segback, segout, sizeof m + 5 * maclen, 64,
                                            nprefix, 7, 1, ad, sizeof ad, &bad) != -1 ||
                    bad != 9 || !all_zero(segback, sizeof m)) {
                    FAIL("%s %s: edited segment 9 not detected or output not wiped",
                         variant_names(v), kernel_names[k]);
                }
                sealstore_ctx_free(ctx);
                checks++;
            }
        }
    }
}

/* Every byte of the variant's key and nonce counts, and nothing past them: a kernel reading
   16 bytes of a 32-byte key (or 32 of a 16-byte one) fails here. */
static void run_sizes(void)
{
    uint8_t key[SEALSTORE_MAX_KEYBYTES + 1], npub[SEALSTORE_MAX_NPUBBYTES + 1], m[40];
    uint8_t ref[40], ref_mac[16], c[40], mac[16];

    for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
        const size_t klen = sealstore_key_size(v), nlen = sealstore_nonce_size(v);
        if (klen == 0 || nlen == 0 || klen > SEALSTORE_MAX_KEYBYTES ||
            nlen > SEALSTORE_MAX_NPUBBYTES || nlen < 5) {
            FAIL("%s: key/nonce sizes %zu/%zu out of range", variant_names(v), klen, nlen);
            continue;
        }
        for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
            const sealstore_aead_impl *impl;
            if (!kernel_wanted(v, k)) {
                continue;
            }
            impl = sealstore_impl(v, k);
            rng_fill(key, sizeof key);
            rng_fill(npub, sizeof npub);
            rng_fill(m, sizeof m);
            impl->encrypt(ref, ref_mac, 16, m, sizeof m, NULL, 0, npub, key);
            for (size_t i = 0; i < klen + nlen + 2; i++) {
                /* flip key byte i (i < klen + 1), then nonce byte i - klen - 1 */
                uint8_t *b = i <= klen ? key + i : npub + (i - klen - 1);
                const int inside = i <= klen ? i < klen : i - klen - 1 < nlen;
                *b ^= 0x80;
                impl->encrypt(c, mac, 16, m, sizeof m, NULL, 0, npub, key);
                *b ^= 0x80;
                if ((memcmp(mac, ref_mac, 16) != 0) != inside) {
                    FAIL("%s %s: %s byte %zu %s the output", variant_names(v), kernel_names[k],
                         i <= klen ? "key" : "nonce", i <= klen ? i : i - klen - 1,
                         inside ? "does not change" : "past the end changes");
                }
            }
            checks++;
        }
    }
}

/* The four-message kernels (ctx->batch: AEGIS-128L on AVX-512) against the portable kernel,
   one message at a time: lengths around the block and lane boundaries, each lane's own nonce,
   length and tag; then decrypt4 back, and one lane's tag flipped: that lane refused with its
   output wiped, the others opened. */
static void run_batch(void)
{
    static const size_t lens[] = {0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1029};
    enum { NL = sizeof lens / sizeof lens[0], MAXLEN = 1029 };
    uint8_t key[SEALSTORE_MAX_KEYBYTES], ad[40];
    uint8_t *m[4], *c[4], *p[4], *cref, npub[4][SEALSTORE_MAX_NPUBBYTES];
    uint8_t mac[4][32], macref[32];

    if (only_kernel >= 0 && only_kernel != SEALSTORE_KERNEL_AVX512) {
        return;
    }
    rng_fill(key, sizeof key);
    rng_fill(ad, sizeof ad);
    for (int l = 0; l < 4; l++) {
        m[l] = xmalloc(MAXLEN);
        c[l] = xmalloc(MAXLEN);
        p[l] = xmalloc(MAXLEN);
        rng_fill(m[l], MAXLEN);
        rng_fill(npub[l], sizeof npub[l]);
    }
    cref = xmalloc(MAXLEN);
    for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
        const sealstore_aead_impl *ref = sealstore_impl(v, SEALSTORE_KERNEL_PORTABLE);
        for (size_t maclen = 16; maclen <= 32; maclen += 16) {
            sealstore_ctx *ctx = sealstore_ctx_new(v, -1, key, maclen);
            if (ctx == NULL) {
                FAIL("%s: no context", variant_names(v));
                continue;
            }
            if (ctx->batch == NULL) {
                sealstore_ctx_free(ctx);
                continue;
            }
            for (size_t r = 0; r < NL; r++) {
                const uint8_t *const mc[4] = {m[0], m[1], m[2], m[3]};
                const uint8_t *const cc[4] = {c[0], c[1], c[2], c[3]};
                const uint8_t *const nc[4] = {npub[0], npub[1], npub[2], npub[3]};
                uint8_t *const mp[4] = {mac[0], mac[1], mac[2], mac[3]};
                const uint8_t *const mcp[4] = {mac[0], mac[1], mac[2], mac[3]};
                size_t len[4];
                int ok[4], rc;
                for (int l = 0; l < 4; l++) {
                    len[l] = lens[(r + 4 * (size_t)l) % NL]; /* four different lengths */
                }
                if (ctx->batch->encrypt4(c, mp, maclen, mc, len, ad, sizeof ad, nc, key) != 0) {
                    FAIL("%s %s: encrypt4 failed", variant_names(v), ctx->batch->name);
                }
                for (int l = 0; l < 4; l++) {
                    ref->encrypt(cref, macref, maclen, m[l], len[l], ad, sizeof ad, npub[l], key);
                    if (memcmp(cref, c[l], len[l]) != 0 || memcmp(macref, mac[l], maclen) != 0) {
                        FAIL("%s %s: lane %d (%zu bytes) differs from portable", variant_names(v),
                             ctx->batch->name, l, len[l]);
                    }
                    checks++;
                }
                rc = ctx->batch->decrypt4(p, cc, len, mcp, maclen, ad, sizeof ad, nc, key, ok);
                for (int l = 0; l < 4; l++) {
                    if (rc != 0 || !ok[l] || memcmp(p[l], m[l], len[l]) != 0) {
                        FAIL("%s %s: decrypt4 lane %d (%zu bytes)", variant_names(v),
                             ctx->batch->name, l, len[l]);
                    }
                }
                mac[r % 4][0] ^= 1;
                rc = ctx->batch->decrypt4(p, cc, len, mcp, maclen, ad, sizeof ad, nc, key, ok);
                mac[r % 4][0] ^= 1;
                for (int l = 0; l < 4; l++) {
                    const int bad = l == (int)(r % 4);
                    if (ok[l] == bad || (bad && !all_zero(p[l], len[l])) ||
                        (!bad && memcmp(p[l], m[l], len[l]) != 0)) {
                        FAIL("%s %s: decrypt4 with lane %d's tag flipped, lane %d",
                             variant_names(v), ctx->batch->name, (int)(r % 4), l);
                    }
                }
                if (rc == 0) {
                    FAIL("%s %s: decrypt4 returned 0 with a lane refused", variant_names(v),
                         ctx->batch->name);
                }
                checks++;
            }
            sealstore_ctx_free(ctx);
        }
    }
    for (int l = 0; l < 4; l++) {
        free(m[l]);
        free(c[l]);
        free(p[l]);
    }
    free(cref);
}

static int kernel_id(const char *name)
{
    for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
        if (strcmp(name, kernel_names[k]) == 0) {
            return k;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    int quick = 0, longrun = 0, nvec;
    const char *path = NULL;

    if (argc == 2 && strcmp(argv[1], "kernels") == 0) {
        for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
            printf("%s:", variant_names(v));
            for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
                if (sealstore_variant_has_kernel(v, k)) {
                    printf(" %s", kernel_names[k]);
                }
            }
            printf("\n");
        }
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "selected") == 0) {
        static const uint8_t key[SEALSTORE_MAX_KEYBYTES];
        for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
            sealstore_ctx *ctx = sealstore_ctx_new(v, -1, key, 16);
            if (ctx == NULL || ctx->kernel != sealstore_selected_kernel(v)) {
                fprintf(stderr, "%s: the default context has another kernel\n", variant_names(v));
                return 1;
            }
            printf("%s: %s\n", variant_names(v), kernel_names[ctx->kernel]);
            sealstore_ctx_free(ctx);
        }
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "overflow") == 0) {
        static uint8_t key[16], npub[16], mac[16], c[65];
        uint8_t *m = xmalloc(63); /* 64 usable bytes; 65 are read */
        memset(m, 0, 64);
        sealstore_impl(SEALSTORE_AEGIS128L, SEALSTORE_KERNEL_PORTABLE)
            ->encrypt(c, mac, 16, m, 65, NULL, 0, npub, key);
        printf("overflow control: not detected\n");
        free(m);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-q") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "-L") == 0) {
            longrun = 1;
        } else if (strcmp(argv[i], "-k") == 0 && i + 1 < argc) {
            only_kernel = kernel_id(argv[++i]);
            if (only_kernel < 0 || !sealstore_kernel_supported(only_kernel)) {
                fprintf(stderr, "kernel %s cannot run here\n", argv[i]);
                return 2;
            }
        } else {
            path = argv[i];
        }
    }
    if (path == NULL) {
        fprintf(stderr, "usage: kat kernels|selected | kat [-k KERNEL] [-q|-L] VECTORS|-\n");
        return 2;
    }
    nvec = run_vectors(path);
    if (nvec < 0) {
        return 2;
    }
    if (longrun) {
        run_cross_long();
    } else {
        run_cross(quick);
    }
    run_sizes();
    run_ctx_calls();
    run_batch();
    printf("kat: %d vector lines, %ld kernel checks, %d failures; kernels:", nvec, checks,
           failures);
    for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
        if ((only_kernel < 0 || k == only_kernel) && sealstore_kernel_supported(k)) {
            printf(" %s", kernel_names[k]);
        }
    }
    printf("\n");
    return failures ? 1 : 0;
}
