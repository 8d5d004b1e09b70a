/* AEGIS-256X2 with the ARMv8 Crypto Extension (AESE/AESMC): each lane of a state word is one
   128-bit NEON register (the state is 12 of the 32). */
#include "../common.h"
#if SEALSTORE_ARM64
#include "../armcrypto_isa.h"
#include "../target_begin.h"

#define LANES 2
#include "../armcrypto_blk.h"

#define AEGIS_IMPL sealstore_aegis256x2_armcrypto
#define AEGIS_KERNEL_NAME "armcrypto"
#define AEGIS_UNROLL 1 /* clang spills state words in the two-block loop */
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
