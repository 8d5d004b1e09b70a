/* AEGIS-128X4 with AES-NI: each lane of a state word is one 128-bit register. */
#include "../common.h"
#if SEALSTORE_X86
#define SEALSTORE_TARGET "aes,sse4.1"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 4
#include "../aesni_blk.h"

#define AEGIS_IMPL sealstore_aegis128x4_aesni
#define AEGIS_KERNEL_NAME "aesni"
#define AEGIS_UNROLL 1 /* 32 state registers already spill on 16 xmm */
#include "../aegis_core.h"

#include "../target_end.h"
#endif
