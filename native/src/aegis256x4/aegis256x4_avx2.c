/* AEGIS-256X4 with AVX2 and VAES: each state word (four lanes) is two 256-bit registers. */
#include "../common.h"
#if SEALSTORE_X86
#define SEALSTORE_TARGET "aes,avx,avx2,vaes"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 4
#define VEC_PER_BLK 2
#include "../avx2_blk.h"

#define AEGIS_SPLIT 1 /* the state is 12 registers of 16: one register at a time */
#define AEGIS_IMPL sealstore_aegis256x4_avx2
#define AEGIS_KERNEL_NAME "avx2"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
