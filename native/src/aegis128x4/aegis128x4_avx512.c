/* AEGIS-128X4 with AVX-512 and VAES: each state word (four lanes) is one 512-bit register. */
#include "../common.h"
#if SEALSTORE_X86
#define SEALSTORE_TARGET "aes,avx,avx2,avx512f,vaes"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 4
#include "../avx512_blk.h"

#define AEGIS_IMPL sealstore_aegis128x4_avx512
#define AEGIS_KERNEL_NAME "avx512"
#include "../aegis_core.h"

#include "../target_end.h"
#endif
