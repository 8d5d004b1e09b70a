/*
 * AEGIS-256 on CPUs with AVX2: the AES-NI kernel compiled to VEX encoding, as for AEGIS-128L
 * (one lane, so 256-bit registers don't help; three-operand forms drop the register copies).
 */
#include "../common.h"
#if SEALSTORE_X86
#if defined(__GNUC__) && !defined(__clang__)
/* the message loops at 64-byte boundaries: measured, where they fell across one more cache
   line than needed, encryption ran 1.5-2% slower for the same instructions */
#pragma GCC optimize("align-loops=64")
#endif
#include <immintrin.h>
#define SEALSTORE_TARGET "aes,avx,avx2"
#include "../target_begin.h"

#define LANES 1
#include "../aesni_blk.h"

#if defined(__GNUC__) && !defined(__clang__)
/* gcc's loops, measured round robin against libaegis and the former form (two blocks per
   iteration, the S0-keyed round): decryption's zero-key round and one block per iteration
   are faster with gcc (AEGIS-256X2 decryption x0.94 -> x1.00-1.03 of libaegis at 1 MiB,
   encryption as fast or faster); clang schedules the former form better, so it keeps it */
#define AEGIS256_DEC_ZERO_KEY 1
#define AEGIS_UNROLL 1
#endif
#define AEGIS_IMPL sealstore_aegis256_avx2
#define AEGIS_KERNEL_NAME "avx2"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
