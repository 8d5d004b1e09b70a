/*
 * The C kernels alone, without Python: GB/s of every (variant, kernel) this CPU runs, for the
 * message sizes of the AEAD benchmark; medians of repeated timed batches.  Then
 * "portable_baseline": the portable kernel against its pre-bitsliced baseline
 * (kernel_baseline.c, linked in three times with -DLANES=1, 2, 4), timed round-robin in this run.
 *
 *   ./kernel_bench [seconds-per-case [largest-size]]
 * (bench/aead.py c_harness() builds and runs it for you.)
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

#define variant_names(v) sealstore_variant_name(v) /* the C library's variants */
static const char *kernel_names[] = {"portable", "aesni", "avx2", "avx512", "armcrypto"};

#define REPS 15

/* ---- the portable kernel against its baseline, round-robin -------------------------------- */

extern const sealstore_aead_impl sealstore_bench_baseline_128l;
extern const sealstore_aead_impl sealstore_bench_baseline_128x2;
extern const sealstore_aead_impl sealstore_bench_baseline_128x4;

#define RR_REPS 101

typedef struct {
    uint8_t *m, *c, mac[16];
    size_t n;
} rr_buf;

static const uint8_t rr_key[16] = {7}, rr_npub[16] = {8}, rr_ad[16] = {9};

/* Seconds per call of one batch of iters calls. */
static double rr_batch(const sealstore_aead_impl *impl, int dir, size_t iters, rr_buf *b)
{
    const double t0 = now();
    for (size_t i = 0; i < iters; i++) {
        if (dir == 0) {
            impl->encrypt(b->c, b->mac, 16, b->m, b->n, rr_ad, sizeof rr_ad, rr_npub, rr_key);
        } else if (impl->decrypt(b->m, b->c, b->n, b->mac, 16, rr_ad, sizeof rr_ad, rr_npub,
                                 rr_key) != 0) {
            fprintf(stderr, "%s: decrypt failed\n", impl->name);
            exit(1);
        }
    }
    return (now() - t0) / (double)iters;
}

/* The number of calls that take about seconds. */
static size_t rr_calibrate(const sealstore_aead_impl *impl, int dir, double seconds, rr_buf *b)
{
    size_t iters = 1;
    while (rr_batch(impl, dir, iters, b) * (double)iters < seconds && iters < (1u << 24)) {
        iters *= 2;
    }
    return iters;
}

/* Both kernels must give the same ciphertext and tag, or the comparison means nothing. */
static void rr_same_output(const sealstore_aead_impl *a, const sealstore_aead_impl *b, rr_buf *x)
{
    uint8_t *c2 = malloc(x->n + 1), mac2[16];
    if (c2 == NULL) {
        exit(1);
    }
    a->encrypt(x->c, x->mac, 16, x->m, x->n, rr_ad, sizeof rr_ad, rr_npub, rr_key);
    b->encrypt(c2, mac2, 16, x->m, x->n, rr_ad, sizeof rr_ad, rr_npub, rr_key);
    if (memcmp(c2, x->c, x->n) != 0 || memcmp(mac2, x->mac, 16) != 0) {
        fprintf(stderr, "portable and baseline kernels disagree\n");
        exit(1);
    }
    free(c2);
}

/* The baselines, for the AEGIS-128 family only (variants 0..2; AEGIS-256 came later). */
static const sealstore_aead_impl *const baselines[] = {&sealstore_bench_baseline_128l,
                                                       &sealstore_bench_baseline_128x2,
                                                       &sealstore_bench_baseline_128x4};
#define NBASELINES ((int)(sizeof baselines / sizeof baselines[0]))

static void rr_row(int first, int v, int dir, size_t n, double budget, rr_buf *b)
{
    const sealstore_aead_impl *const *base = baselines;
    const sealstore_aead_impl *cur = sealstore_impl(v, SEALSTORE_KERNEL_PORTABLE);
    double tb[RR_REPS], tc[RR_REPS], ratio[RR_REPS];

    b->n = n;
    rr_same_output(base[v], cur, b);
    /* short batches: most of them then run inside one scheduler time slice on a busy machine,
       and the medians (and minima) are times of undisturbed batches */
    const double slice = budget / (2.0 * RR_REPS) < 5e-4 ? budget / (2.0 * RR_REPS) : 5e-4;
    const size_t ib = rr_calibrate(base[v], dir, slice, b), ic = rr_calibrate(cur, dir, slice, b);
    for (int r = 0; r < RR_REPS; r++) {
        tb[r] = rr_batch(base[v], dir, ib, b);
        tc[r] = rr_batch(cur, dir, ic, b);
        ratio[r] = tb[r] / tc[r];
    }
    qsort(tb, RR_REPS, sizeof tb[0], cmp);
    qsort(tc, RR_REPS, sizeof tc[0], cmp);
    qsort(ratio, RR_REPS, sizeof ratio[0], cmp);
    printf("%s  {\"variant\": \"%s\", \"op\": \"%s\", \"size\": %zu, \"reps\": %d, "
           "\"baseline_gbps\": %.4f, \"portable_gbps\": %.4f, \"speedup_median\": %.2f, "
           "\"speedup_min\": %.2f, \"speedup_max\": %.2f, \"speedup_of_fastest\": %.2f}",
           first ? "" : ",\n", variant_names(v), dir ? "decrypt" : "encrypt", n, RR_REPS,
           (double)n / tb[RR_REPS / 2] / 1e9, (double)n / tc[RR_REPS / 2] / 1e9,
           ratio[RR_REPS / 2], ratio[0], ratio[RR_REPS - 1], tb[0] / tc[0]);
    fflush(stdout);
}

/* 1 KiB and 16 KiB, every variant, both directions, about budget seconds per row. */
static void portable_vs_baseline(double budget, uint8_t *m, uint8_t *c)
{
    const size_t sizes[] = {1024, 16384};
    rr_buf b = {m, c, {0}, 0};
    int first = 1;
    for (int v = 0; v < NBASELINES && v < SEALSTORE_NVARIANTS; v++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            for (int dir = 0; dir < 2; dir++) {
                rr_row(first, v, dir, sizes[si], budget, &b);
                first = 0;
            }
        }
    }
}

int main(int argc, char **argv)
{
    const size_t sizes[] = {64, 1024, 16384, 1 << 20, 16 << 20};
    const double budget = argc > 1 ? atof(argv[1]) : 0.2;
    /* optional: the largest message size to run (--quick stops at 1 MiB) */
    const size_t max_size = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : (size_t)-1;
    uint8_t key[SEALSTORE_MAX_KEYBYTES] = {1}, npub[SEALSTORE_MAX_NPUBBYTES] = {2}, ad[16] = {3};
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
                           first ? "" : ",\n", variant_names(v), kernel_names[k],
                           dir ? "decrypt" : "encrypt", n, rates[REPS / 2], rates[0],
                           rates[REPS - 1], (double)n / rates[REPS / 2], cpb_text);
                    first = 0;
                    fflush(stdout);
                }
            }
            sealstore_ctx_free(ctx);
        }
    }
    printf("\n], \"portable_baseline\": [\n");
    portable_vs_baseline(budget, m, c);
    printf("\n]}\n");
    free(m);
    free(c);
    return 0;
}
