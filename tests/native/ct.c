/*
 * Constant-time check of the kernels (the ctgrind technique): the key and the plaintext are
 * marked undefined ("secret"), then every kernel encrypts and decrypts.  The checker reports
 * any conditional jump, conditional move or memory address that depends on a secret:
 *
 *   - valgrind memcheck (default build): VALGRIND_MAKE_MEM_UNDEFINED marks the secrets; run
 *     under valgrind, which executes the portable and AES-NI kernels (it has no VAES/AVX-512);
 *   - MemorySanitizer (build with clang -fsanitize=memory -DCT_MSAN): __msan_poison marks the
 *     secrets; runs natively, so it also covers the AVX2 and AVX-512 kernels.
 *
 * Only secrets are marked.  Ciphertext, tag, nonce, AD and lengths are public; so is the
 * accept/reject outcome of decryption, which the caller learns anyway.  The driver is linked
 * with -Wl,--wrap=sealstore_verify: the wrapper calls the real constant-time comparison and
 * declassifies only its one-bit result, so the comparison itself runs on secret data and is
 * checked, while the branch on "tag valid?" that follows it is not reported.
 *
 *   ct run [KERNEL...]     every variant, both tag sizes, many lengths; must be silent
 *   ct taint KERNEL        control: as run on one kernel, without declassifying the tag check;
 *                          the branch on it must be reported (the secrets reached the tag)
 *   ct leak-branch         control: an early-exit tag comparison (a secret-dependent branch)
 *   ct leak-index          control: a table lookup indexed by a key byte (a secret address)
 *   ct kernels             the kernels this process can run
 *
 * The controls prove the method sees what it is meant to see: each must be reported.
 * (Under MemorySanitizer the first report ends the process, hence one control per run.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sealstore.h"

#if defined(CT_MSAN)
#include <sanitizer/msan_interface.h>
#define SECRET(p, n) __msan_poison((p), (n))
#define PUBLIC(p, n) __msan_unpoison((p), (n))
#else
#include <valgrind/memcheck.h>
#define SECRET(p, n) VALGRIND_MAKE_MEM_UNDEFINED((p), (n))
#define PUBLIC(p, n) VALGRIND_MAKE_MEM_DEFINED((p), (n))
#endif

#if defined(_MSC_VER) && !defined(__GNUC__) && !defined(__clang__)
#define NOINLINE __declspec(noinline)
#else
#define NOINLINE __attribute__((noinline))
#endif

/* 1 when every byte of p[0..n) is secret-tainted: the checker tracked the secrets through the
   kernel to its outputs (otherwise a silent run would prove nothing). */
static int all_secret(const void *p, size_t n)
{
    const uint8_t *b = (const uint8_t *)p;
#if defined(CT_MSAN)
    for (size_t i = 0; i < n; i++) {
        if (__msan_test_shadow(b + i, 1) != 0) {
            return 0;
        }
    }
    return 1;
#else
    uint8_t vbits[64];
    if (!RUNNING_ON_VALGRIND) {
        return 1;
    }
    for (size_t off = 0; off < n; off += sizeof vbits) {
        const size_t len = n - off < sizeof vbits ? n - off : sizeof vbits;
        if (VALGRIND_GET_VBITS(b + off, vbits, len) != 1) {
            return 0;
        }
        for (size_t i = 0; i < len; i++) {
            if (vbits[i] == 0) {
                return 0;
            }
        }
    }
    return 1;
#endif
}

/* the C library's names: no second list of variants here */
#define variant_names(v) sealstore_variant_name(v)
static const char *const kernel_names[SEALSTORE_NKERNELS] = {"portable", "aesni", "avx2",
                                                             "avx512", "armcrypto"};

/* The tag comparison's result is public: declassify it, and nothing else. */
int __real_sealstore_verify(const uint8_t *a, const uint8_t *b, size_t n);
int __wrap_sealstore_verify(const uint8_t *a, const uint8_t *b, size_t n);
static int declassify = 1;

int __wrap_sealstore_verify(const uint8_t *a, const uint8_t *b, size_t n)
{
    int r = __real_sealstore_verify(a, b, n);
    if (declassify) {
        PUBLIC(&r, sizeof r);
    }
    return r;
}

static int failures;

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

/* Checks of results, after declassifying copies (the driver's own logic is not under test). */
static int same(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint8_t *x = malloc(n + 1), *y = malloc(n + 1);
    int r;
    memcpy(x, a, n);
    memcpy(y, b, n);
    PUBLIC(x, n);
    PUBLIC(y, n);
    r = memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return r;
}

static void check(int ok, const char *what, int v, int k, size_t mlen)
{
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL %s %s mlen %zu: %s\n", variant_names(v), kernel_names[k], mlen,
                what);
    }
}

static void one_case(int v, int k, size_t maclen, size_t mlen, size_t adlen)
{
    const sealstore_aead_impl *impl = sealstore_impl(v, k);
    /* the variant's key and nonce sizes: every key byte is marked secret */
    const size_t klen = sealstore_key_size(v), nlen = sealstore_nonce_size(v);
    uint8_t key[SEALSTORE_MAX_KEYBYTES], npub[SEALSTORE_MAX_NPUBBYTES], mac[32];
    uint8_t *m = malloc(mlen + 1), *c = malloc(mlen + 1), *p = malloc(mlen + 1);
    uint8_t *ad = malloc(adlen + 1), *sealed = malloc(7 + nlen + mlen + 32);
    const uint8_t prefix[7] = {1, 3, 0, 0, 0, 1, 0};
    sealstore_ctx *ctx;
    int rc;

    fill(key, klen, (uint32_t)(mlen * 131 + adlen));
    fill(npub, nlen, 7);
    fill(m, mlen, 11);
    fill(ad, adlen, 13);

    /* detached encrypt: secrets are the key and the plaintext */
    SECRET(key, klen);
    SECRET(m, mlen);
    rc = impl->encrypt(c, mac, maclen, m, mlen, ad, adlen, npub, key);
    check(rc == 0, "encrypt failed", v, k, mlen);
    check(all_secret(c, mlen) && all_secret(mac, maclen),
          "ciphertext or tag not tainted by the secrets (the checker lost track)", v, k, mlen);

    /* ciphertext and tag are published */
    PUBLIC(c, mlen);
    PUBLIC(mac, maclen);

    /* decrypt, valid: the plaintext it writes is secret (derived from the key) */
    rc = impl->decrypt(p, c, mlen, mac, maclen, ad, adlen, npub, key);
    check(rc == 0, "decrypt rejected a valid message", v, k, mlen);
    check(same(p, m, mlen), "decrypt returned a different plaintext", v, k, mlen);

    /* decrypt, forged tag: the failure path (wipe) */
    mac[0] ^= 1;
    rc = impl->decrypt(p, c, mlen, mac, maclen, ad, adlen, npub, key);
    check(rc != 0, "decrypt accepted a forged tag", v, k, mlen);
    mac[0] ^= 1;

    /* the context calls: the key is copied into the context, the prefixed value is public */
    ctx = sealstore_ctx_new(v, k, key, maclen);
    check(ctx != NULL, "no context", v, k, mlen);
    if (ctx != NULL) {
        rc = sealstore_seal_prefixed(ctx, sealed, prefix, sizeof prefix, npub, m, mlen, ad, adlen);
        check(rc == 0, "seal_prefixed failed", v, k, mlen);
        PUBLIC(sealed, 7 + nlen + mlen + maclen);
        rc = sealstore_open_prefixed(ctx, p, sealed, 7 + nlen + mlen + maclen, sizeof prefix, ad,
                                     adlen);
        check(rc == 0, "open_prefixed rejected its own value", v, k, mlen);
        sealed[7 + nlen + mlen] ^= 0x80;
        rc = sealstore_open_prefixed(ctx, p, sealed, 7 + nlen + mlen + maclen, sizeof prefix, ad,
                                     adlen);
        check(rc != 0, "open_prefixed accepted a forged tag", v, k, mlen);
        sealstore_ctx_free(ctx);
    }
    free(m);
    free(c);
    free(p);
    free(ad);
    free(sealed);
}

/* The four-value batch kernel a context may carry (AEGIS-128L on AVX-512): lanes of
   different (public) lengths, secret key and plaintexts. */
static int batch_case(int v, int k, size_t maclen, const size_t len[4])
{
    uint8_t key[16], npub[4][16], mac[4][32], ad[45];
    uint8_t *m[4], *c[4], *p[4];
    const uint8_t *mc[4], *cc[4], *nc[4], *macc[4];
    int ok[4], rc, ran = 0;
    sealstore_ctx *ctx;

    fill(key, sizeof key, 99);
    fill(ad, sizeof ad, 98);
    ctx = sealstore_ctx_new(v, k, key, maclen);
    if (ctx == NULL || ctx->batch == NULL) {
        sealstore_ctx_free(ctx);
        return 0;
    }
    for (int l = 0; l < 4; l++) {
        m[l] = malloc(len[l] + 1);
        c[l] = malloc(len[l] + 1);
        p[l] = malloc(len[l] + 1);
        fill(m[l], len[l], 50u + (uint32_t)l);
        fill(npub[l], 16, 60u + (uint32_t)l);
        SECRET(m[l], len[l]);
        mc[l] = m[l];
        cc[l] = c[l];
        nc[l] = npub[l];
        macc[l] = mac[l];
    }
    SECRET(ctx->key, sizeof ctx->key);
    {
        uint8_t *macp[4] = {mac[0], mac[1], mac[2], mac[3]};
        rc = ctx->batch->encrypt4(c, macp, maclen, mc, len, ad, sizeof ad, nc, ctx->key);
    }
    check(rc == 0, "batch encrypt4 failed", v, k, len[0]);
    for (int l = 0; l < 4; l++) {
        check(all_secret(c[l], len[l]) && all_secret(mac[l], maclen),
              "batch outputs not tainted by the secrets", v, k, len[l]);
        PUBLIC(c[l], len[l]);
        PUBLIC(mac[l], maclen);
    }
    mac[2][0] ^= 1; /* lane 2 forged, the others valid */
    rc = ctx->batch->decrypt4(p, cc, len, macc, maclen, ad, sizeof ad, nc, ctx->key, ok);
    PUBLIC(ok, sizeof ok);
    check(ok[0] && ok[1] && !ok[2] && ok[3], "batch decrypt4 verdicts wrong", v, k, len[0]);
    for (int l = 0; l < 4; l++) {
        if (ok[l]) {
            check(same(p[l], m[l], len[l]), "batch decrypt4 plaintext differs", v, k, len[l]);
        }
        free(m[l]);
        free(c[l]);
        free(p[l]);
    }
    (void)rc;
    sealstore_ctx_free(ctx);
    ran = 1;
    return ran;
}

static int run(int argc, char **argv)
{
    static const size_t lens[] = {0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300};
    const size_t nlens = sizeof lens / sizeof lens[0];
    int ran = 0;

    for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
        int wanted = argc == 0;
        for (int i = 0; i < argc; i++) {
            wanted |= strcmp(argv[i], kernel_names[k]) == 0;
        }
        if (!wanted) {
            continue;
        }
        for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
            if (sealstore_impl(v, k) == NULL) {
                continue;
            }
            for (size_t i = 0; i < nlens; i++) {
                one_case(v, k, (i & 1) ? 32 : 16, lens[i], lens[nlens - 1 - i]);
            }
            printf("checked %s %s\n", variant_names(v), kernel_names[k]);
            ran++;
            for (size_t maclen = 16; maclen <= 32; maclen += 16) {
                static const size_t batch_lens[][4] = {
                    {0, 1, 31, 32}, {33, 100, 7, 64}, {300, 300, 300, 300}, {5, 250, 0, 129}};
                int did = 0;
                for (size_t i = 0; i < sizeof batch_lens / sizeof batch_lens[0]; i++) {
                    did |= batch_case(v, k, maclen, batch_lens[i]);
                }
                if (did) {
                    printf("checked %s %s batch of four, tag %zu\n", variant_names(v),
                           kernel_names[k], maclen);
                }
            }
        }
    }
    if (ran == 0) {
        fprintf(stderr, "no kernel ran\n");
        return 2;
    }
    return failures ? 1 : 0;
}

/* ---- deliberately leaky controls ---- */

static volatile int sink;

/* The classic mistake: a tag comparison that stops at the first differing byte. */
static NOINLINE int leaky_compare(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            return -1;
        }
    }
    return 0;
}

/* A table lookup indexed by secret bytes (a table-driven S-box). */
static NOINLINE uint8_t leaky_lookup(const uint8_t *k, size_t n)
{
    static uint8_t table[256];
    uint8_t acc = 0;
    for (int i = 0; i < 256; i++) {
        table[i] = (uint8_t)(i * 7 + 1);
    }
    for (size_t i = 0; i < n; i++) {
        acc ^= table[k[i]];
    }
    return acc;
}

static int control(const char *which)
{
    uint8_t key[16], tag[16];
    fill(key, sizeof key, 1);
    fill(tag, sizeof tag, 2);
    SECRET(key, sizeof key);
    if (strcmp(which, "leak-branch") == 0) {
        sink = leaky_compare(key, tag, sizeof key);
    } else {
        sink = leaky_lookup(key, sizeof key);
    }
    printf("control %s ran\n", which);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "run") == 0) {
        return run(argc - 2, argv + 2);
    }
    if (argc == 3 && strcmp(argv[1], "taint") == 0) {
        declassify = 0;
        return run(1, argv + 2);
    }
    if (argc == 2 && (strcmp(argv[1], "leak-branch") == 0 || strcmp(argv[1], "leak-index") == 0)) {
        return control(argv[1]);
    }
    if (argc == 2 && strcmp(argv[1], "kernels") == 0) {
        for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
            if (sealstore_kernel_supported(k)) {
                printf("%s\n", kernel_names[k]);
            }
        }
        return 0;
    }
    fprintf(stderr, "usage: ct run [KERNEL...] | ct taint KERNEL | ct leak-branch | ct leak-index"
                    " | ct kernels\n");
    return 2;
}
