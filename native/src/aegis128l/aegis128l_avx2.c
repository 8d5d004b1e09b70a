/*
 * AEGIS-128L on CPUs with AVX2: the AES-NI kernel compiled to VEX encoding.  AEGIS-128L has one
 * lane, so 256-bit registers don't help, but three-operand VEX instructions drop the register
 * copies of the SSE form (measured about 11% faster here, 17.8 against 16.0 GB/s at 16 KiB).
 */
#include "../common.h"
#if SEALSTORE_X86
#include <immintrin.h>
#define SEALSTORE_TARGET "aes,avx,avx2"
#include "../target_begin.h"

#define LANES 1
#include "../aesni_blk.h"

#define AEGIS_IMPL sealstore_aegis128l_avx2
#define AEGIS_KERNEL_NAME "avx2"
#include "../aegis_core.h"

#include "../target_end.h"
#endif
