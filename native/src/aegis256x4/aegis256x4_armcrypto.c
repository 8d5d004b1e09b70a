/* AEGIS-256X4 with the ARMv8 Crypto Extension (AESE/AESMC): each lane of a state word is one
   128-bit NEON register (the state is 24 of the 32). */
#include "../common.h"
#if SEALSTORE_ARM64
#include "../armcrypto_isa.h"
#include "../target_begin.h"

#define LANES 4
#include "../armcrypto_blk.h"

#define AEGIS_IMPL sealstore_aegis256x4_armcrypto
#define AEGIS_KERNEL_NAME "armcrypto"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
