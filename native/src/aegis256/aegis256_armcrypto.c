/* AEGIS-256 with the ARMv8 Crypto Extension (AESE/AESMC): each state word is one 128-bit
   NEON register. */
#include "../common.h"
#if SEALSTORE_ARM64
#include "../armcrypto_isa.h"
#include "../target_begin.h"

#define LANES 1
#include "../armcrypto_blk.h"

#define AEGIS_IMPL sealstore_aegis256_armcrypto
#define AEGIS_KERNEL_NAME "armcrypto"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
