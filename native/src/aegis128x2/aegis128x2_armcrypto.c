/* AEGIS-128X2 with the ARMv8 Crypto Extension (AESE/AESMC): each lane of a state word is one
   128-bit NEON register. */
#include "../common.h"
#if SEALSTORE_ARM64
#include "../armcrypto_isa.h"
#if defined(__GNUC__) && !defined(__clang__)
/* gcc's pre-allocation scheduler hoists the 16 register copies AESE's destructive form needs
   ahead of the rounds and spills a word per block; without it the loop keeps everything in
   the 32 registers (tools/inline_guard.py) */
#pragma GCC optimize("no-schedule-insns")
#endif
#include "../target_begin.h"

#define LANES 2
#include "../armcrypto_blk.h"

#define AEGIS_IMPL sealstore_aegis128x2_armcrypto
#define AEGIS_KERNEL_NAME "armcrypto"
#define AEGIS_UNROLL 1 /* two blocks per iteration spill the 16 state registers */
#include "../aegis_core.h"

#include "../target_end.h"
#endif
