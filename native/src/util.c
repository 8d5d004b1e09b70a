/* Constant-time comparison and wiping, shared by every kernel. */
#include "common.h"

void sealstore_memzero(void *p, size_t n)
{
    if (n == 0) {
        return;
    }
    memset(p, 0, n);
#if defined(__GNUC__) || defined(__clang__)
    /* Tell the compiler the zeroed memory is read, so the memset cannot be elided. */
    __asm__ __volatile__("" : : "r"(p) : "memory");
#else
    volatile uint8_t *v = (volatile uint8_t *)p;
    for (size_t i = 0; i < n; i++) {
        v[i] = 0;
    }
#endif
}

int sealstore_verify(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint64_t d = 0, x, y;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { /* no early exit: every byte is read */
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        d |= x ^ y;
    }
    for (; i < n; i++) {
        d |= (uint64_t)(a[i] ^ b[i]);
    }
    {
        /* a volatile store of the whole OR: the compiler must compute every bit of it, so it
           cannot stop early once d is known to be non-zero */
        volatile uint64_t exact = d;
        d = exact;
    }
    d = (d >> 32) | (d & 0xffffffffu);
    /* d < 2^32, so (d - 1) >> 63 is 1 exactly when d == 0 */
    return (int)((1u & (unsigned)((d - 1u) >> 63)) - 1u);
}
