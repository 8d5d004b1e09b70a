/* AEGIS-256X2 with AVX2 and VAES: each state word (two lanes) is one 256-bit register. */
#include "../common.h"
#if SEALSTORE_X86
#define SEALSTORE_TARGET "aes,avx,avx2,vaes"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 2
#define VEC_PER_BLK 1
#include "../avx2_blk.h"

#define AEGIS_IMPL sealstore_aegis256x2_avx2
#define AEGIS_KERNEL_NAME "avx2"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
