/*
 * Key hygiene in C: every keyed context is wiped before its memory goes back to the allocator.
 * Linked with -Wl,--wrap=free: the wrapper inspects the block being freed when it is the
 * context under watch.  Prints one line per (variant, kernel, tag size) and exits 1 if a freed
 * context still held a byte of its key (or any nonzero byte) or was never freed.
 * "wipe control" frees the contexts with plain free() instead: every line must say NOT WIPED.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sealstore.h"

void __real_free(void *p);
void __wrap_free(void *p);

/* volatile: the compiler knows free() and would assume a call to it leaves these alone */
static const void *volatile watch;
static volatile size_t watch_len;
static volatile int seen, dirty;

void __wrap_free(void *p)
{
    if (p != NULL && p == watch) {
        const volatile uint8_t *b = (const volatile uint8_t *)p;
        seen = 1;
        for (size_t i = 0; i < watch_len; i++) {
            dirty |= b[i] != 0;
        }
    }
    __real_free(p);
}

int main(int argc, char **argv)
{
    const int control = argc == 2 && strcmp(argv[1], "control") == 0;
    static const char *const kernels[SEALSTORE_NKERNELS] = {"portable", "aesni", "avx2",
                                                            "avx512", "armcrypto"};
    uint8_t key[SEALSTORE_MAX_KEYBYTES]; /* sealstore_key_size(v) bytes are read: 16 or 32 */
    int failures = 0, ran = 0;

    memset(key, 0xab, sizeof key);
    for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
        for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
            for (size_t maclen = 16; maclen <= 32; maclen += 16) {
                sealstore_ctx *ctx = sealstore_ctx_new(v, k, key, maclen);
                if (ctx == NULL) {
                    continue;
                }
                if (ctx->keylen != sealstore_key_size(v) ||
                    memcmp(ctx->key, key, ctx->keylen) != 0) {
                    printf("variant %d %s: the context does not hold the key\n", v, kernels[k]);
                    failures++;
                }
                watch = ctx;
                watch_len = sizeof *ctx;
                seen = dirty = 0;
                if (control) {
                    free(ctx); /* what sealstore_ctx_free must not be */
                } else {
                    sealstore_ctx_free(ctx);
                }
                watch = NULL;
                printf("variant %d %s tag %zu: %s\n", v, kernels[k], maclen,
                       !seen ? "NOT FREED" : dirty ? "NOT WIPED" : "wiped");
                failures += !seen || dirty;
                ran++;
            }
        }
    }
    return failures || ran == 0 ? 1 : 0;
}
