/*
 * AEGIS-128X4 with the ARMv8 Crypto Extension (AESE/AESMC): each lane of a state word is one
 * 128-bit NEON register.  The 32 registers of the state fill the register file, so the message
 * loop runs two lanes at a time (aegis128x4_armcrypto_halves.h); see docs/BENCH.md for its
 * instruction mix.
 */
#include "../common.h"
#if SEALSTORE_ARM64
#include "../armcrypto_isa.h"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns") /* as in aegis128x2_armcrypto.c: no spill per block */
#endif
#include "../target_begin.h"

#define LANES 4
#include "../armcrypto_blk.h"
#include "aegis128x4_armcrypto_halves.h"

#define AEGIS_IMPL sealstore_aegis128x4_armcrypto
#define AEGIS_KERNEL_NAME "armcrypto"
#include "../aegis_core.h"

#include "../target_end.h"
#endif
