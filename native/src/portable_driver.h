/*
 * The AEAD driver of the portable kernels, shared by the AEGIS-128 family (portable_core.h) and
 * the AEGIS-256 family (portable256_core.h): init, AD, the whole blocks, the partial block,
 * the tag and its constant-time check, and the kernel's sealstore_aead_impl.  The family's
 * core defines, before including this file, RATE and
 *   DRIVER_STATE                      its state type
 *   DRIVER_INIT(st, k, npub)          DRIVER_ABSORB_AD(st, ad, adlen)
 *   DRIVER_ENC(st, dst, src)          DRIVER_DEC(st, dst, src)           one RATE-byte block
 *   DRIVER_ENC_PARTIAL(st, dst, src, len)   DRIVER_DEC_PARTIAL(st, dst, src, len)
 *   DRIVER_MAC(st, mac, maclen, adlen, mlen)
 * (plain names of its force-inlined functions: the preprocessed kernel is token for token the
 * one each core held before, so the object code is the same).
 */

static int aegis_encrypt_detached(uint8_t *c, uint8_t *mac, size_t maclen, const uint8_t *m,
                                  size_t mlen, const uint8_t *ad, size_t adlen,
                                  const uint8_t *npub, const uint8_t *k)
{
    DRIVER_STATE st;
    size_t i;

    if (maclen != 16 && maclen != 32) {
        return -1;
    }
    DRIVER_INIT(&st, k, npub);
    DRIVER_ABSORB_AD(&st, ad, adlen);
    for (i = 0; i + RATE <= mlen; i += RATE) {
        DRIVER_ENC(&st, c + i, m + i);
    }
    if (mlen % RATE) {
        DRIVER_ENC_PARTIAL(&st, c + i, m + i, mlen % RATE);
    }
    DRIVER_MAC(&st, mac, maclen, adlen, mlen);
    sealstore_memzero(&st, sizeof st);
    return 0;
}

static int aegis_decrypt_detached(uint8_t *m, const uint8_t *c, size_t clen, const uint8_t *mac,
                                  size_t maclen, const uint8_t *ad, size_t adlen,
                                  const uint8_t *npub, const uint8_t *k)
{
    DRIVER_STATE st;
    size_t i;
    uint8_t computed[32];

    if (maclen != 16 && maclen != 32) {
        return -1;
    }
    DRIVER_INIT(&st, k, npub);
    DRIVER_ABSORB_AD(&st, ad, adlen);
    for (i = 0; i + RATE <= clen; i += RATE) {
        DRIVER_DEC(&st, m + i, c + i);
    }
    if (clen % RATE) {
        DRIVER_DEC_PARTIAL(&st, m + i, c + i, clen % RATE);
    }
    DRIVER_MAC(&st, computed, maclen, adlen, clen);
    sealstore_memzero(&st, sizeof st);
    if (sealstore_verify(computed, mac, maclen) != 0) {
        sealstore_memzero(m, clen);
        return -1;
    }
    return 0;
}

const sealstore_aead_impl AEGIS_IMPL = {aegis_encrypt_detached, aegis_decrypt_detached,
                                        AEGIS_KERNEL_NAME};
