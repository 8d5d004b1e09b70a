/* AEGIS-256 with AES-NI: each state word is one 128-bit register. */
#include "../common.h"
#if SEALSTORE_X86
#define SEALSTORE_TARGET "aes,sse4.1"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 1
#include "../aesni_blk.h"

#define AEGIS_IMPL sealstore_aegis256_aesni
#define AEGIS_KERNEL_NAME "aesni"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
