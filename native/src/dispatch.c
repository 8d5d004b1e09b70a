/*
 * CPU feature detection and kernel dispatch.  Features are read once (x86: cpuid, and xgetbv for
 * the register state the OS saves; aarch64: HWCAP_AES from the kernel's auxiliary vector on
 * Linux, hw.optional.arm.FEAT_AES on macOS); a context binds one kernel's entry points when it
 * is created, so every call costs one indirect call and nothing per block.
 */
#include <stdlib.h>

#include "implementations.h"

#if SEALSTORE_X86 && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define SEALSTORE_HAVE_CPUID 1
#elif SEALSTORE_X86 && defined(_MSC_VER)
#include <intrin.h> /* __cpuidex, _xgetbv */
#define SEALSTORE_HAVE_CPUID 1
#elif SEALSTORE_X86
#error "sealstore: no way to read CPUID with this compiler (every x86 kernel would be lost)"
#else
#define SEALSTORE_HAVE_CPUID 0
#endif

#if SEALSTORE_X86
#define X86_IMPL(flag, name) SEALSTORE_IMPL_OR_NULL(flag, name)
#else
#define X86_IMPL(flag, name) NULL
#endif

#if SEALSTORE_ARM64 && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_AES
#define HWCAP_AES (1UL << 3) /* <asm/hwcap.h> on aarch64 Linux */
#endif
#define SEALSTORE_HAVE_HWCAP 1
#else
#define SEALSTORE_HAVE_HWCAP 0
#endif
#if SEALSTORE_ARM64 && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#if SEALSTORE_ARM64
#define ARM_IMPL(flag, name) SEALSTORE_IMPL_OR_NULL(flag, name)
#else
#define ARM_IMPL(flag, name) NULL
#endif

/* The tables below come from the variant table (include/sealstore_variants.h), one row each. */
#define SEALSTORE_VARIANT(ID, dir, name, family, keybytes, npubbytes, lanes, aesni, avx2,      \
                          avx512, armcrypto, batch_avx512)                                     \
    [SEALSTORE_##ID] = {&sealstore_##dir##_portable, X86_IMPL(aesni, sealstore_##dir##_aesni), \
                        X86_IMPL(avx2, sealstore_##dir##_avx2),                                \
                        X86_IMPL(avx512, sealstore_##dir##_avx512),                            \
                        ARM_IMPL(armcrypto, sealstore_##dir##_armcrypto)},
static const sealstore_aead_impl *const impls[SEALSTORE_NVARIANTS][SEALSTORE_NKERNELS] = {
#include "../include/sealstore_variants.h"
};
#undef SEALSTORE_VARIANT

/* The suite-registry name of each variant (plugin/suites.py native_variant). */
#define SEALSTORE_VARIANT(ID, dir, name, ...) [SEALSTORE_##ID] = name,
static const char *const variant_names[SEALSTORE_NVARIANTS] = {
#include "../include/sealstore_variants.h"
};
#undef SEALSTORE_VARIANT

/* Key and nonce bytes of each variant (16 for the AEGIS-128 family, 32 for AEGIS-256). */
#define SEALSTORE_VARIANT(ID, dir, name, family, keybytes, npubbytes, ...)                     \
    [SEALSTORE_##ID] = {keybytes, npubbytes},
static const unsigned char variant_sizes[SEALSTORE_NVARIANTS][2] = {
#include "../include/sealstore_variants.h"
};
#undef SEALSTORE_VARIANT

/* Every size fits the context's key buffer and the segment nonce (C89-safe static check). */
#define SEALSTORE_VARIANT(ID, dir, name, family, keybytes, npubbytes, ...)                     \
    typedef char sealstore_##dir##_fits[(keybytes) <= SEALSTORE_MAX_KEYBYTES &&                \
                                                (npubbytes) <= SEALSTORE_MAX_NPUBBYTES &&      \
                                                (npubbytes) > 5                                \
                                            ? 1                                                \
                                            : -1];
#include "../include/sealstore_variants.h"
#undef SEALSTORE_VARIANT

#if SEALSTORE_X86
/* The four-message kernels (Keyring.seal_many) of the variants whose batch_avx512 is 1. */
#define SEALSTORE_VARIANT(ID, dir, name, family, keybytes, npubbytes, lanes, aesni, avx2,      \
                          avx512, armcrypto, batch_avx512)                                     \
    SEALSTORE_IF(batch_avx512,                                                                 \
                 static const sealstore_batch_impl batch_##dir##_avx512 = {                    \
                     sealstore_##dir##_encrypt4_avx512, sealstore_##dir##_decrypt4_avx512,     \
                     "avx512"};)
#include "../include/sealstore_variants.h"
#undef SEALSTORE_VARIANT
#define SEALSTORE_VARIANT(ID, dir, name, family, keybytes, npubbytes, lanes, aesni, avx2,      \
                          avx512, armcrypto, batch_avx512)                                     \
    [SEALSTORE_##ID] = SEALSTORE_IMPL_OR_NULL(batch_avx512, batch_##dir##_avx512),
static const sealstore_batch_impl *const batches_avx512[SEALSTORE_NVARIANTS] = {
#include "../include/sealstore_variants.h"
};
#undef SEALSTORE_VARIANT
#endif

/* What each kernel needs from the CPU and the OS. */
static const uint32_t kernel_needs[SEALSTORE_NKERNELS] = {
    [SEALSTORE_KERNEL_PORTABLE] = 0,
    [SEALSTORE_KERNEL_AESNI] = SEALSTORE_CPU_AESNI,
    [SEALSTORE_KERNEL_AVX2] = SEALSTORE_CPU_AESNI | SEALSTORE_CPU_AVX | SEALSTORE_CPU_AVX2 |
                              SEALSTORE_CPU_VAES | SEALSTORE_CPU_OS_YMM,
    [SEALSTORE_KERNEL_AVX512] = SEALSTORE_CPU_AESNI | SEALSTORE_CPU_AVX | SEALSTORE_CPU_AVX2 |
                                SEALSTORE_CPU_VAES | SEALSTORE_CPU_AVX512F |
                                SEALSTORE_CPU_OS_YMM | SEALSTORE_CPU_OS_ZMM,
    [SEALSTORE_KERNEL_ARMCRYPTO] = SEALSTORE_CPU_ARM_AES,
};

/* Whether this build compiled the kernel's code at all (x86 kernels on x86, ...). */
static int kernel_in_build(int kernel)
{
    if (kernel == SEALSTORE_KERNEL_PORTABLE) {
        return 1;
    }
    if (kernel == SEALSTORE_KERNEL_ARMCRYPTO) {
        return SEALSTORE_ARM64;
    }
    return SEALSTORE_X86;
}

static int detected;
static uint32_t features;
static uint32_t features_keep = ~0u;
static int forced = -1;

#if SEALSTORE_HAVE_CPUID && !defined(__GNUC__) && !defined(__clang__)
/* MSVC: <intrin.h> */
static uint64_t xgetbv0(void)
{
    return (uint64_t)_xgetbv(0);
}

static unsigned int cpuid_max(void)
{
    int r[4];
    __cpuid(r, 0);
    return (unsigned int)r[0];
}

#define CPUID_COUNT(leaf, sub, a, b, c, d)                                                     \
    do {                                                                                       \
        int r_[4];                                                                             \
        __cpuidex(r_, (leaf), (sub));                                                          \
        (a) = (unsigned int)r_[0];                                                             \
        (b) = (unsigned int)r_[1];                                                             \
        (c) = (unsigned int)r_[2];                                                             \
        (d) = (unsigned int)r_[3];                                                             \
    } while (0)
#elif SEALSTORE_HAVE_CPUID
static uint64_t xgetbv0(void)
{
    uint32_t eax, edx;
    __asm__ __volatile__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

#define cpuid_max() __get_cpuid_max(0, NULL)
#define CPUID_COUNT(leaf, sub, a, b, c, d) __cpuid_count(leaf, sub, a, b, c, d)
#endif

#if SEALSTORE_ARM64
static uint32_t detect_arm(void)
{
    uint32_t f = 0;
#if SEALSTORE_HAVE_HWCAP
    if (getauxval(AT_HWCAP) & HWCAP_AES) {
        f |= SEALSTORE_CPU_ARM_AES;
    }
#elif defined(__APPLE__)
    int aes = 0;
    size_t len = sizeof aes;
    if (sysctlbyname("hw.optional.arm.FEAT_AES", &aes, &len, NULL, 0) == 0 && aes != 0) {
        f |= SEALSTORE_CPU_ARM_AES;
    }
#endif
    return f;
}
#endif

static uint32_t detect(void)
{
    uint32_t f = 0;
#if SEALSTORE_ARM64
    f = detect_arm();
#endif
#if SEALSTORE_HAVE_CPUID
    unsigned int eax, ebx, ecx, edx;
    unsigned int max = cpuid_max();

    if (max < 1) {
        return 0;
    }
    CPUID_COUNT(1, 0, eax, ebx, ecx, edx);
    if (ecx & (1u << 25)) {
        f |= SEALSTORE_CPU_AESNI;
    }
    if (ecx & (1u << 1)) {
        f |= SEALSTORE_CPU_PCLMUL;
    }
    /* AVX registers are usable only if the OS saves them (OSXSAVE, then XCR0) */
    if ((ecx & (1u << 27)) && (ecx & (1u << 28))) {
        const uint64_t xcr0 = xgetbv0();
        if ((xcr0 & 0x6) == 0x6) {
            f |= SEALSTORE_CPU_OS_YMM | SEALSTORE_CPU_AVX;
            if ((xcr0 & 0xe0) == 0xe0) {
                f |= SEALSTORE_CPU_OS_ZMM;
            }
        }
    }
    if (max >= 7) {
        CPUID_COUNT(7, 0, eax, ebx, ecx, edx);
        if (ebx & (1u << 5)) {
            f |= SEALSTORE_CPU_AVX2;
        }
        if (ebx & (1u << 16)) {
            f |= SEALSTORE_CPU_AVX512F;
        }
        if (ecx & (1u << 9)) {
            f |= SEALSTORE_CPU_VAES;
        }
    }
#endif
    return f;
}

uint32_t sealstore_cpu_features(void)
{
    /* racing first calls compute the same value; plain stores of an int are enough */
    if (!detected) {
        features = detect();
        detected = 1;
    }
    return features & features_keep;
}

void sealstore_cpu_mask(uint32_t keep)
{
    features_keep = keep;
}

int sealstore_kernel_supported(int kernel)
{
    if (kernel < 0 || kernel >= SEALSTORE_NKERNELS) {
        return 0;
    }
    if (!kernel_in_build(kernel)) {
        return 0;
    }
    return (sealstore_cpu_features() & kernel_needs[kernel]) == kernel_needs[kernel];
}

int sealstore_variant_has_kernel(int variant, int kernel)
{
    if (variant < 0 || variant >= SEALSTORE_NVARIANTS || !sealstore_kernel_supported(kernel)) {
        return 0;
    }
    return impls[variant][kernel] != NULL;
}

int sealstore_force_kernel(int kernel)
{
    if (kernel == -1) {
        forced = -1;
        return 0;
    }
    if (!sealstore_kernel_supported(kernel)) {
        return -1;
    }
    forced = kernel;
    return 0;
}

int sealstore_selected_kernel(int variant)
{
    if (forced >= 0 && sealstore_variant_has_kernel(variant, forced)) {
        return forced;
    }
    for (int k = SEALSTORE_NKERNELS - 1; k > 0; k--) {
        if (sealstore_variant_has_kernel(variant, k)) {
            return k;
        }
    }
    return SEALSTORE_KERNEL_PORTABLE;
}

const char *sealstore_variant_name(int variant)
{
    if (variant < 0 || variant >= SEALSTORE_NVARIANTS) {
        return NULL;
    }
    return variant_names[variant];
}

size_t sealstore_key_size(int variant)
{
    if (variant < 0 || variant >= SEALSTORE_NVARIANTS) {
        return 0;
    }
    return variant_sizes[variant][0];
}

size_t sealstore_nonce_size(int variant)
{
    if (variant < 0 || variant >= SEALSTORE_NVARIANTS) {
        return 0;
    }
    return variant_sizes[variant][1];
}

const sealstore_aead_impl *sealstore_impl(int variant, int kernel)
{
    if (!sealstore_variant_has_kernel(variant, kernel)) {
        return NULL;
    }
    return impls[variant][kernel];
}

sealstore_ctx *sealstore_ctx_new(int variant, int kernel, const uint8_t *k, size_t maclen)
{
    sealstore_ctx *ctx;

    if (variant < 0 || variant >= SEALSTORE_NVARIANTS || (maclen != 16 && maclen != 32)) {
        return NULL;
    }
    if (kernel < 0) {
        kernel = sealstore_selected_kernel(variant);
    }
    if (!sealstore_variant_has_kernel(variant, kernel)) {
        return NULL;
    }
    ctx = (sealstore_ctx *)malloc(sizeof *ctx);
    if (ctx == NULL) {
        return NULL;
    }
    ctx->impl = impls[variant][kernel];
    ctx->batch = NULL;
#if SEALSTORE_X86
    /* four values at once in zmm lanes (AEGIS-128L), unless a lesser kernel is forced */
    if (batches_avx512[variant] != NULL && kernel != SEALSTORE_KERNEL_PORTABLE &&
        sealstore_kernel_supported(SEALSTORE_KERNEL_AVX512) &&
        (forced < 0 || forced == SEALSTORE_KERNEL_AVX512)) {
        ctx->batch = batches_avx512[variant];
    }
#endif
    ctx->maclen = maclen;
    ctx->keylen = sealstore_key_size(variant);
    ctx->npublen = sealstore_nonce_size(variant);
    ctx->variant = variant;
    ctx->kernel = kernel;
    memset(ctx->key, 0, sizeof ctx->key);
    memcpy(ctx->key, k, ctx->keylen);
    return ctx;
}

void sealstore_ctx_free(sealstore_ctx *ctx)
{
    if (ctx != NULL) {
        sealstore_memzero(ctx, sizeof *ctx);
        free(ctx);
    }
}
