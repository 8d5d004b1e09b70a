/*
 * AEGIS-256 on CPUs with AVX2: the AES-NI kernel compiled to VEX encoding, as for AEGIS-128L
 * (one lane, so 256-bit registers don't help; three-operand forms drop the register copies).
 */
#include "../common.h"
#if SEALSTORE_X86
#include <immintrin.h>
#define SEALSTORE_TARGET "aes,avx,avx2"
#include "../target_begin.h"

#define LANES 1
#include "../aesni_blk.h"

#define AEGIS_IMPL sealstore_aegis256_avx2
#define AEGIS_KERNEL_NAME "avx2"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
