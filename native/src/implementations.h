/* Every kernel this build has, one sealstore_aead_impl per (variant, instruction set): declared
   from the variant table (include/sealstore_variants.h), a kernel's column set to 1 there. */
#ifndef SEALSTORE_IMPLEMENTATIONS_H
#define SEALSTORE_IMPLEMENTATIONS_H

#include "common.h"

/* SEALSTORE_IF(flag, x): x when the table's flag is 1, nothing when 0 */
#define SEALSTORE_IF(flag, ...) SEALSTORE_IF_##flag(__VA_ARGS__)
#define SEALSTORE_IF_0(...)
#define SEALSTORE_IF_1(...) __VA_ARGS__
/* SEALSTORE_IMPL_OR_NULL(flag, sym): &sym when the table's flag is 1, NULL when 0 */
#define SEALSTORE_IMPL_OR_NULL(flag, sym) SEALSTORE_IMPL_OR_NULL_##flag(sym)
#define SEALSTORE_IMPL_OR_NULL_0(sym) NULL
#define SEALSTORE_IMPL_OR_NULL_1(sym) (&(sym))

#define SEALSTORE_VARIANT(ID, dir, name, family, keybytes, npubbytes, lanes, aesni, avx2,      \
                          avx512, armcrypto, batch_avx512)                                     \
    extern const sealstore_aead_impl sealstore_##dir##_portable;
#include "../include/sealstore_variants.h"
#undef SEALSTORE_VARIANT

#if SEALSTORE_X86
#define SEALSTORE_VARIANT(ID, dir, name, family, keybytes, npubbytes, lanes, aesni, avx2,      \
                          avx512, armcrypto, batch_avx512)                                     \
    SEALSTORE_IF(aesni, extern const sealstore_aead_impl sealstore_##dir##_aesni;)             \
    SEALSTORE_IF(avx2, extern const sealstore_aead_impl sealstore_##dir##_avx2;)               \
    SEALSTORE_IF(avx512, extern const sealstore_aead_impl sealstore_##dir##_avx512;)           \
    SEALSTORE_IF(batch_avx512, SEALSTORE_BATCH_DECLS(sealstore_##dir##_encrypt4_avx512,       \
                                                     sealstore_##dir##_decrypt4_avx512))
/* the four-message kernels of src/<dir>/<dir>_batch_avx512.c (sealstore_batch_impl's types) */
#define SEALSTORE_BATCH_DECLS(enc, dec)                                                        \
    int enc(uint8_t *const c[4], uint8_t *const mac[4], size_t maclen, const uint8_t *const m[4], \
            const size_t mlen[4], const uint8_t *ad, size_t adlen, const uint8_t *const npub[4], \
            const uint8_t *k);                                                                 \
    int dec(uint8_t *const m[4], const uint8_t *const c[4], const size_t clen[4],              \
            const uint8_t *const mac[4], size_t maclen, const uint8_t *ad, size_t adlen,       \
            const uint8_t *const npub[4], const uint8_t *k, int ok[4]);
#include "../include/sealstore_variants.h"
#undef SEALSTORE_VARIANT
#endif

#if SEALSTORE_ARM64
#define SEALSTORE_VARIANT(ID, dir, name, family, keybytes, npubbytes, lanes, aesni, avx2,      \
                          avx512, armcrypto, batch_avx512)                                     \
    SEALSTORE_IF(armcrypto, extern const sealstore_aead_impl sealstore_##dir##_armcrypto;)
#include "../include/sealstore_variants.h"
#undef SEALSTORE_VARIANT
#endif

#endif
