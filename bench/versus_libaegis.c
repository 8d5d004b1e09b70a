/*
 * Two AEAD implementations with the same detached-tag signature (sealstore's kernel table and
 * libaegis both use it) timed on the same buffers in one C loop, with no Python in between:
 * round-robin batches, the order of the two swapped every round.  bench/libaegis_versus.py
 * builds this file as a shared library and passes both function pointers as integers.
 */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int (*encrypt_fn)(uint8_t *c, uint8_t *mac, size_t maclen, const uint8_t *m,
                          size_t mlen, const uint8_t *ad, size_t adlen, const uint8_t *npub,
                          const uint8_t *k);
typedef int (*decrypt_fn)(uint8_t *m, const uint8_t *c, size_t clen, const uint8_t *mac,
                          size_t maclen, const uint8_t *ad, size_t adlen, const uint8_t *npub,
                          const uint8_t *k);

/* The buffers of one case: out receives n bytes; src holds the n input bytes (the ciphertext
   when decrypting, whose tag is mac); tag_out receives the tag when encrypting. */
typedef struct versus_case {
    int decrypt;
    size_t n;
    uint8_t *out;
    const uint8_t *src;
    uint8_t *tag_out;
    const uint8_t *mac;
    size_t maclen;
    const uint8_t *ad;
    size_t adlen;
    const uint8_t *npub;
    const uint8_t *key;
} versus_case;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds for iters calls of fn; -1 when a call fails (a decrypt that does not verify). */
static double batch(const versus_case *vc, uintptr_t fn, size_t iters)
{
    int bad = 0;
    const double t0 = now();
    if (vc->decrypt) {
        const decrypt_fn f = (decrypt_fn)fn;
        for (size_t i = 0; i < iters; i++) {
            bad |= f(vc->out, vc->src, vc->n, vc->mac, vc->maclen, vc->ad, vc->adlen, vc->npub,
                     vc->key);
        }
    } else {
        const encrypt_fn f = (encrypt_fn)fn;
        for (size_t i = 0; i < iters; i++) {
            bad |= f(vc->out, vc->tag_out, vc->maclen, vc->src, vc->n, vc->ad, vc->adlen,
                     vc->npub, vc->key);
        }
    }
    const double t = now() - t0;
    return bad ? -1.0 : t;
}

/* rounds rounds of one batch of a and one of b (b first on odd rounds): the seconds of each
   batch in ta[r] and tb[r].  0, or -1 as soon as a call fails. */
int versus_time(const versus_case *vc, uintptr_t a, uintptr_t b, size_t iters, int rounds,
                double *ta, double *tb)
{
    for (int r = 0; r < rounds; r++) {
        const int swap = r & 1;
        const double first = batch(vc, swap ? b : a, iters);
        const double second = batch(vc, swap ? a : b, iters);
        if (first < 0 || second < 0) {
            return -1;
        }
        ta[r] = swap ? second : first;
        tb[r] = swap ? first : second;
    }
    return 0;
}
