/*
 * AEGIS-128X4 with the ARMv8 Crypto Extension (AESE/AESMC): each lane of a state word is one
 * 128-bit NEON register, so the 32 registers of the state fill the register file (the loop keeps
 * one block per iteration; see docs/BENCH.md for its instruction mix).
 */
#include "../common.h"
#if SEALSTORE_ARM64
#include "../armcrypto_isa.h"
#include "../target_begin.h"

#define LANES 4
#include "../armcrypto_blk.h"

#define AEGIS_IMPL sealstore_aegis128x4_armcrypto
#define AEGIS_KERNEL_NAME "armcrypto"
#define AEGIS_UNROLL 1 /* the 32 state registers spill already */
#include "../aegis_core.h"

#include "../target_end.h"
#endif
