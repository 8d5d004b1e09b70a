/* What cffi sees of include/sealstore.h (cffi's parser takes no expressions in #define;
   "..." takes the value from the compiled header: SEALSTORE_NVARIANTS counts the rows of
   include/sealstore_variants.h). */
#define SEALSTORE_MAX_KEYBYTES 32
#define SEALSTORE_MAX_NPUBBYTES 32
#define SEALSTORE_NVARIANTS ...
#define SEALSTORE_NKERNELS 5

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
typedef struct sealstore_batch_impl {
    const char *name;
    ...;
} sealstore_batch_impl;
typedef struct sealstore_ctx {
    const sealstore_aead_impl *impl;
    const sealstore_batch_impl *batch;
    size_t maclen;
    size_t keylen;
    size_t npublen;
    int variant;
    int kernel;
    ...;
} sealstore_ctx;

uint32_t sealstore_cpu_features(void);
void sealstore_cpu_mask(uint32_t keep);
int sealstore_kernel_supported(int kernel);
int sealstore_variant_has_kernel(int variant, int kernel);
int sealstore_force_kernel(int kernel);
int sealstore_selected_kernel(int variant);
const char *sealstore_variant_name(int variant);
size_t sealstore_key_size(int variant);
size_t sealstore_nonce_size(int variant);
const sealstore_aead_impl *sealstore_impl(int variant, int kernel);

sealstore_ctx *sealstore_ctx_new(int variant, int kernel, const uint8_t *k, size_t maclen);
void sealstore_ctx_free(sealstore_ctx *ctx);

int sealstore_encrypt(const sealstore_ctx *ctx, uint8_t *c, const uint8_t *m, size_t mlen,
                      const uint8_t *ad, size_t adlen, const uint8_t *npub);
int sealstore_decrypt(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *c, size_t clen,
                      const uint8_t *ad, size_t adlen, const uint8_t *npub);
int sealstore_encrypt_detached(const sealstore_ctx *ctx, uint8_t *c, uint8_t *mac,
                               const uint8_t *m, size_t mlen, const uint8_t *ad, size_t adlen,
                               const uint8_t *npub);
int sealstore_decrypt_detached(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *c,
                               size_t clen, const uint8_t *mac, const uint8_t *ad, size_t adlen,
                               const uint8_t *npub);
int sealstore_seal_prefixed(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *prefix,
                            size_t prefixlen, const uint8_t *npub, const uint8_t *m, size_t mlen,
                            const uint8_t *ad, size_t adlen);
int sealstore_open_prefixed(const sealstore_ctx *ctx, uint8_t *m, const uint8_t *in,
                            size_t inlen, size_t prefixlen, const uint8_t *ad, size_t adlen);
int sealstore_seal_segments(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *in,
                            size_t inlen, size_t seglen, const uint8_t *nonce_prefix,
                            uint32_t first_index, int final, const uint8_t *ad, size_t adlen);
int sealstore_open_segments(const sealstore_ctx *ctx, uint8_t *out, const uint8_t *in,
                            size_t inlen, size_t seglen, const uint8_t *nonce_prefix,
                            uint32_t first_index, int final, const uint8_t *ad, size_t adlen,
                            size_t *bad_index);
void sealstore_memzero(void *p, size_t n);
