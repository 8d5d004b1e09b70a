/*
 * sealstore native API: the AEGIS kernels behind a run-time dispatcher.  Everything exported carries the sealstore_ prefix; everything else is static.
 *
 * Functions return 0 on success and -1 on failure.  A failed decryption wipes the whole
 * output buffer, so no unauthenticated plaintext escapes.
 */
#ifndef SEALSTORE_H
#define SEALSTORE_H

#include <stddef.h>
#include <stdint.h>

/* Key and nonce sizes are per variant (sealstore_key_size, sealstore_nonce_size): 16 bytes for
   the AEGIS-128 family, 32 for AEGIS-256.  These bound them all. */
#define SEALSTORE_MAX_KEYBYTES 32
#define SEALSTORE_MAX_NPUBBYTES 32

/* variants: one id per line of sealstore_variants.h, in its order */
enum {
#define SEALSTORE_VARIANT(ID, ...) SEALSTORE_##ID,
#include "sealstore_variants.h"
#undef SEALSTORE_VARIANT
    SEALSTORE_NVARIANTS
};

/* kernels, in increasing order of preference */
#define SEALSTORE_KERNEL_PORTABLE 0
#define SEALSTORE_KERNEL_AESNI 1
#define SEALSTORE_KERNEL_AVX2 2
#define SEALSTORE_KERNEL_AVX512 3
#define SEALSTORE_KERNEL_ARMCRYPTO 4 /* aarch64: AESE/AESMC (x86 and arm kernels never meet) */
#define SEALSTORE_NKERNELS 5

/* CPU features seen (bits of sealstore_cpu_features()) */
#define SEALSTORE_CPU_AESNI (1u << 0)
#define SEALSTORE_CPU_PCLMUL (1u << 1)
#define SEALSTORE_CPU_AVX (1u << 2)
#define SEALSTORE_CPU_AVX2 (1u << 3)
#define SEALSTORE_CPU_VAES (1u << 4)
#define SEALSTORE_CPU_AVX512F (1u << 5)
#define SEALSTORE_CPU_OS_YMM (1u << 6)
#define SEALSTORE_CPU_OS_ZMM (1u << 7)
#define SEALSTORE_CPU_ARM_AES (1u << 8) /* aarch64 AESE/AESMC (HWCAP_AES, FEAT_AES) */

/* One kernel's entry points for one variant (detached tag; maclen is 16 or 32). */
typedef int (*sealstore_encrypt_fn)(uint8_t *c, uint8_t *mac, size_t maclen, const uint8_t *m,
                                    size_t mlen, const uint8_t *ad, size_t adlen,
                                    const uint8_t *npub, const uint8_t *k);
typedef int (*sealstore_decrypt_fn)(uint8_t *m, const uint8_t *c, size_t clen,
                                    const uint8_t *mac, size_t maclen, const uint8_t *ad,
                                    size_t adlen, const uint8_t *npub, const uint8_t *k);

typedef struct sealstore_aead_impl {
    sealstore_encrypt_fn encrypt;
    sealstore_decrypt_fn decrypt;
    const char *name;
} sealstore_aead_impl;

/* Four independent messages at once (same key and AD; own nonce, length, output, tag). */
typedef int (*sealstore_encrypt4_fn)(uint8_t *const c[4], uint8_t *const mac[4], size_t maclen,
                                     const uint8_t *const m[4], const size_t mlen[4],
                                     const uint8_t *ad, size_t adlen,
                                     const uint8_t *const npub[4], const uint8_t *k);
typedef int (*sealstore_decrypt4_fn)(uint8_t *const m[4], const uint8_t *const c[4],
                                     const size_t clen[4], const uint8_t *const mac[4],
                                     size_t maclen, const uint8_t *ad, size_t adlen,
                                     const uint8_t *const npub[4], const uint8_t *k, int ok[4]);

typedef struct sealstore_batch_impl {
    sealstore_encrypt4_fn encrypt4;
    sealstore_decrypt4_fn decrypt4;
    const char *name;
} sealstore_batch_impl;

/* A keyed cipher: the kernel picked once, the key in memory this struct owns (wiped on free).
   batch, when not NULL, runs four values of a list at once (Keyring.seal_many). */
typedef struct sealstore_ctx {
    const sealstore_aead_impl *impl;
    const sealstore_batch_impl *batch;
    size_t maclen;
    size_t keylen;  /* sealstore_key_size(variant) */
    size_t npublen; /* sealstore_nonce_size(variant) */
    int variant;
    int kernel;
    uint8_t key[SEALSTORE_MAX_KEYBYTES];
} sealstore_ctx;

/* ---- CPU features and dispatch (dispatch.c) ---- */

/* Features seen by cpuid/xgetbv (aarch64: the HWCAP auxv or sysctl), read once, as
   SEALSTORE_CPU_* bits. */
uint32_t sealstore_cpu_features(void);
/* Tests only: pretend the CPU lacks every feature not in keep (~0u restores). */
void sealstore_cpu_mask(uint32_t keep);
/* 1 if this build and CPU can run the kernel (for any variant). */
int sealstore_kernel_supported(int kernel);
/* 1 if the variant has that kernel in this build and the CPU can run it. */
int sealstore_variant_has_kernel(int variant, int kernel);
/* Force a kernel for every variant that has it (-1: none); -1 if the CPU cannot run it. */
int sealstore_force_kernel(int kernel);
/* The kernel new contexts of a variant get: the forced one if it has it, else its best. */
int sealstore_selected_kernel(int variant);
/* The variant's name ("AEGIS-128X4"), or NULL for an unknown variant. */
const char *sealstore_variant_name(int variant);
/* The variant's key and nonce sizes in bytes, or 0 for an unknown variant. */
size_t sealstore_key_size(int variant);
size_t sealstore_nonce_size(int variant);
/* The entry points of (variant, kernel), or NULL when unavailable. */
const sealstore_aead_impl *sealstore_impl(int variant, int kernel);

/* A keyed context on (variant, kernel), reading sealstore_key_size(variant) bytes of k;
   kernel -1 picks sealstore_selected_kernel().
   NULL if the kernel is unavailable, the variant unknown or maclen not 16/32. */
sealstore_ctx *sealstore_ctx_new(int variant, int kernel, const uint8_t *k, size_t maclen);
/* Wipe the key and free. */
void sealstore_ctx_free(sealstore_ctx *ctx);

/* Attached tag: c receives mlen + maclen bytes; decrypt reads clen (>= maclen) bytes. */
int sealstore_encrypt(const sealstore_ctx *ctx, uint8_t *c, const uint8_t *m, size_t mlen,
                      const uint8_t *ad, size_t adlen, const uint8_t *npub);
int sealstore_decrypt(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *c, size_t clen,
                      const uint8_t *ad, size_t adlen, const uint8_t *npub);
/* Detached tag of ctx->maclen bytes. */
int sealstore_encrypt_detached(const sealstore_ctx *ctx, uint8_t *c, uint8_t *mac,
                               const uint8_t *m, size_t mlen, const uint8_t *ad, size_t adlen,
                               const uint8_t *npub);
int sealstore_decrypt_detached(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *c,
                               size_t clen, const uint8_t *mac, const uint8_t *ad, size_t adlen,
                               const uint8_t *npub);

/* ---- prefixed values (calls.c) ----
   A prefixed value is prefix || npub || ciphertext || tag, authenticated with
   AD = prefix || ad.  The sealed-value format of sealstore is built on it. */
int sealstore_seal_prefixed(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *prefix,
                            size_t prefixlen, const uint8_t *npub, const uint8_t *m, size_t mlen,
                            const uint8_t *ad, size_t adlen);
/* m receives inlen - prefixlen - ctx->npublen - maclen bytes; -1 (m wiped) if too short or forged. */
int sealstore_open_prefixed(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *in,
                            size_t inlen, size_t prefixlen, const uint8_t *ad, size_t adlen);

/* ---- segmented streams (calls.c) ----
   Segment i: nonce = nonce_prefix[npublen - 5] || BE32(i) || final flag; output ct || tag per segment.
   A non-final buffer is whole segments; a final one ends with the last segment (the remainder,
   0 .. seglen-1 bytes).  Return 0, -1 (a tag failed: out wiped, *bad_index set), -2 (the
   lengths cannot be a segment sequence), or -3 (the last index would pass 2^32 - 1). */
int sealstore_seal_segments(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *in,
                            size_t inlen, size_t seglen, const uint8_t *nonce_prefix,
                            uint32_t first_index, int final, const uint8_t *ad, size_t adlen);
int sealstore_open_segments(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *in,
                            size_t inlen, size_t seglen, const uint8_t *nonce_prefix,
                            uint32_t first_index, int final, const uint8_t *ad, size_t adlen,
                            size_t *bad_index);

void sealstore_memzero(void *p, size_t n);

#endif
