/* Four-message AEGIS-128L kernels (same key and AD, own nonce and length per message). */
#ifndef SEALSTORE_AEGIS128L_BATCH_H
#define SEALSTORE_AEGIS128L_BATCH_H

#include "../common.h"

#if SEALSTORE_X86
/* Encrypt m[l] (mlen[l] bytes) into c[l], tag into mac[l], for l = 0..3. */
int sealstore_aegis128l_encrypt4_avx512(uint8_t *const c[4], uint8_t *const mac[4],
                                        size_t maclen, const uint8_t *const m[4],
                                        const size_t mlen[4], const uint8_t *ad, size_t adlen,
                                        const uint8_t *const npub[4], const uint8_t *k);
/* Decrypt and verify four messages; ok[l] says which verified (failed ones are wiped);
   returns 0 when all four verified, -1 otherwise. */
int sealstore_aegis128l_decrypt4_avx512(uint8_t *const m[4], const uint8_t *const c[4],
                                        const size_t clen[4], const uint8_t *const mac[4],
                                        size_t maclen, const uint8_t *ad, size_t adlen,
                                        const uint8_t *const npub[4], const uint8_t *k,
                                        int ok[4]);
#endif

#endif
