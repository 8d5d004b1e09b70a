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
    volatile uint8_t d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= (uint8_t)(a[i] ^ b[i]);
    }
    /* (d - 1) >> 8 is 1 exactly when d == 0 */
    return (int)((1u & (((unsigned)d - 1u) >> 8)) - 1u);
}
