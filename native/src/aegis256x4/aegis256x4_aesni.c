/* AEGIS-256X4 with AES-NI: each lane of a state word is one 128-bit register. */
#include "../common.h"
#if SEALSTORE_X86
#define SEALSTORE_TARGET "aes,sse4.1"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 4
#include "../aesni_blk.h"

#define AEGIS_SPLIT 1 /* the state is 24 registers of 16: one register at a time */
#define AEGIS_IMPL sealstore_aegis256x4_aesni
#define AEGIS_KERNEL_NAME "aesni"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
