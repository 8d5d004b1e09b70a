/*
 * The C kernels alone, without Python: GB/s of every (variant, kernel) this CPU runs, for the
 * message sizes of the AEAD benchmark; medians of repeated timed batches.
 *
 *   make -C bench kernel_bench && ./bench/kernel_bench [seconds-per-case [largest-size]]
 * (bench/aead_bench.py builds and runs it for you.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sealstore.h"

/* The time-stamp counter, where one can be read: it ticks at a constant reference rate, so
   "cycles" here are reference cycles, not core clock cycles (perf counters are not readable
   on every machine; the TSC is on x86). */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
static uint64_t ticks(void)
{
    return __rdtsc();
}
#else
#define HAVE_TSC 0
static uint64_t ticks(void)
{
    return 0;
}
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *variant_names[] = {"AEGIS-128L", "AEGIS-128X2", "AEGIS-128X4"};
static const char *kernel_names[] = {"portable", "aesni", "avx2", "avx512", "armcrypto"};

#define REPS 15

int main(int argc, char **argv)
{
    const size_t sizes[] = {64, 1024, 16384, 1 << 20, 16 << 20};
    const double budget = argc > 1 ? atof(argv[1]) : 0.2;
    /* optional: the largest message size to run (--quick stops at 1 MiB) */
    const size_t max_size = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : (size_t)-1;
    uint8_t key[16] = {1}, npub[16] = {2}, ad[16] = {3};
    uint8_t *m = malloc((16 << 20) + 64), *c = malloc((16 << 20) + 64);

    if (m == NULL || c == NULL) {
        return 1;
    }
    memset(m, 0x5a, (16 << 20) + 64);
    printf("{\"results\": [\n");
    int first = 1;
    for (int v = 0; v < SEALSTORE_NVARIANTS; v++) {
        for (int k = 0; k < SEALSTORE_NKERNELS; k++) {
            sealstore_ctx *ctx = sealstore_ctx_new(v, k, key, 16);
            if (ctx == NULL) {
                continue;
            }
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                const size_t n = sizes[si];
                if (n > max_size) {
                    continue;
                }
                for (int dir = 0; dir < 2; dir++) {
                    double rates[REPS], cpb[REPS];
                    size_t iters = 1;
                    sealstore_encrypt(ctx, c, m, n, ad, sizeof ad, npub);
                    /* calibrate one batch to budget / REPS */
                    for (;;) {
                        double t0 = now();
                        for (size_t i = 0; i < iters; i++) {
                            if (dir == 0) {
                                sealstore_encrypt(ctx, c, m, n, ad, sizeof ad, npub);
                            } else if (sealstore_decrypt(ctx, m, c, n + 16, ad, sizeof ad,
                                                         npub) != 0) {
                                fprintf(stderr, "decrypt failed\n");
                                return 1;
                            }
                        }
                        if (now() - t0 > budget / REPS || iters > (1u << 30)) {
                            break;
                        }
                        iters *= 2;
                    }
                    for (int r = 0; r < REPS; r++) {
                        const uint64_t c0 = ticks();
                        double t0 = now();
                        for (size_t i = 0; i < iters; i++) {
                            if (dir == 0) {
                                sealstore_encrypt(ctx, c, m, n, ad, sizeof ad, npub);
                            } else {
                                (void)sealstore_decrypt(ctx, m, c, n + 16, ad, sizeof ad, npub);
                            }
                        }
                        rates[r] = (double)n * (double)iters / (now() - t0) / 1e9;
                        cpb[r] = (double)(ticks() - c0) / ((double)n * (double)iters);
                    }
                    qsort(rates, REPS, sizeof rates[0], cmp);
                    qsort(cpb, REPS, sizeof cpb[0], cmp);
                    char cpb_text[32];
                    if (HAVE_TSC) {
                        snprintf(cpb_text, sizeof cpb_text, "%.3f", cpb[REPS / 2]);
                    } else {
                        snprintf(cpb_text, sizeof cpb_text, "null");
                    }
                    printf("%s  {\"variant\": \"%s\", \"kernel\": \"%s\", \"op\": \"%s\", "
                           "\"size\": %zu, \"gbps_median\": %.3f, \"gbps_min\": %.3f, "
                           "\"gbps_max\": %.3f, \"ns_per_call\": %.1f, \"tsc_cycles_per_byte\": %s}",
                           first ? "" : ",\n", variant_names[v], kernel_names[k],
                           dir ? "decrypt" : "encrypt", n, rates[REPS / 2], rates[0],
                           rates[REPS - 1], (double)n / rates[REPS / 2], cpb_text);
                    first = 0;
                    fflush(stdout);
                }
            }
            sealstore_ctx_free(ctx);
        }
    }
    printf("\n]}\n");
    free(m);
    free(c);
    return 0;
}
