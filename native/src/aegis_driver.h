/*
 * The AEAD driver of the vector kernels, shared by the AEGIS-128 family (aegis_core.h) and the
 * AEGIS-256 family (aegis256_core.h): init, AD, the whole blocks, the partial block, the tag
 * and its constant-time check, and the kernel's sealstore_aead_impl.  The family's core
 * defines, before including this file, RATE and
 *   DRIVER_WORDS                            state words (8 or 6 blk)
 *   DRIVER_INIT(s, k, npub)                 DRIVER_ABSORB_AD(s, ad, adlen)
 *   DRIVER_WHOLE_ENC(i, s, dst, src, len)   the whole blocks, as statements setting i to the
 *   DRIVER_WHOLE_DEC(i, s, dst, src, len)   bytes done (encrypting, decrypting)
 *   DRIVER_ENC(s, dst, src)                 one RATE-byte block (the padded last one)
 *   DRIVER_DEC_PARTIAL(s, dst, src, len)    DRIVER_MAC(s, mac, maclen, adlen, mlen)
 * (its force-inlined functions' names, or macros; the preprocessed kernels are token for token
 * what each core held before, so the object code is the same).
 */

static int aegis_encrypt_detached(uint8_t *c, uint8_t *mac, size_t maclen, const uint8_t *m,
                                  size_t mlen, const uint8_t *ad, size_t adlen,
                                  const uint8_t *npub, const uint8_t *k)
{
    blk s[DRIVER_WORDS];
    size_t i;

    if (maclen != 16 && maclen != 32) {
        return -1;
    }
    DRIVER_INIT(s, k, npub);
    DRIVER_ABSORB_AD(s, ad, adlen);
    DRIVER_WHOLE_ENC(i, s, c, m, mlen);
    if (mlen % RATE) {
        SEALSTORE_ALIGN(64) uint8_t pad[RATE];
        memset(pad, 0, sizeof pad);
        memcpy(pad, m + i, mlen % RATE);
        DRIVER_ENC(s, pad, pad);
        memcpy(c + i, pad, mlen % RATE);
        sealstore_memzero(pad, sizeof pad);
    }
    DRIVER_MAC(s, mac, maclen, adlen, mlen);
    return 0;
}

static int aegis_decrypt_detached(uint8_t *m, const uint8_t *c, size_t clen, const uint8_t *mac,
                                  size_t maclen, const uint8_t *ad, size_t adlen,
                                  const uint8_t *npub, const uint8_t *k)
{
    blk s[DRIVER_WORDS];
    size_t i;
    uint8_t computed[32];

    if (maclen != 16 && maclen != 32) {
        return -1;
    }
    DRIVER_INIT(s, k, npub);
    DRIVER_ABSORB_AD(s, ad, adlen);
    DRIVER_WHOLE_DEC(i, s, m, c, clen);
    if (clen % RATE) {
        DRIVER_DEC_PARTIAL(s, m + i, c + i, clen % RATE);
    }
    DRIVER_MAC(s, computed, maclen, adlen, clen);
    if (sealstore_verify(computed, mac, maclen) != 0) {
        sealstore_memzero(m, clen);
        return -1;
    }
    return 0;
}

const sealstore_aead_impl AEGIS_IMPL = {aegis_encrypt_detached, aegis_decrypt_detached,
                                        AEGIS_KERNEL_NAME};
