/* AEGIS-128X2 with AVX2 and VAES: each state word (two lanes) is one 256-bit register. */
#include "../common.h"
#if SEALSTORE_X86
#define SEALSTORE_TARGET "aes,avx,avx2,vaes"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 2
#define VEC_PER_BLK 1
#include "../avx2_blk.h"

/* one block per iteration: gcc keeps the state in registers (two blocks spilled one vector
   per block, tools/inline_guard.py); measured round robin against the two-block loop, gcc and
   clang, 1 KiB-1 MiB: encryption and decryption within 1% or faster */
#define AEGIS_UNROLL 1
#define AEGIS_IMPL sealstore_aegis128x2_avx2
#define AEGIS_KERNEL_NAME "avx2"
#include "../aegis_core.h"

#include "../target_end.h"
#endif
