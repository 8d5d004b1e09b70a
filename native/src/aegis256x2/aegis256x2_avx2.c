/* AEGIS-256X2 with AVX2 and VAES: each state word (two lanes) is one 256-bit register. */
#include "../common.h"
#if SEALSTORE_X86
#if defined(__GNUC__) && !defined(__clang__)
/* as in aegis256x4_avx2.c: gcc's partial redundancy elimination made the decryption loop
   rotate the state through register copies (5 vector moves per two blocks); without it,
   none, and decryption measured 2-4% faster (encryption unchanged) */
#pragma GCC optimize("no-tree-pre")
/* and the message loops at 64-byte boundaries, as in aegis256_avx2.c */
#pragma GCC optimize("align-loops=64")
#endif
#define SEALSTORE_TARGET "aes,avx,avx2,vaes"
#include <immintrin.h>
#include "../target_begin.h"

#define LANES 2
#define VEC_PER_BLK 1
#include "../avx2_blk.h"

#if defined(__GNUC__) && !defined(__clang__)
/* gcc's loops, measured round robin against libaegis and the former form (two blocks per
   iteration, the S0-keyed round): decryption's zero-key round and one block per iteration
   are faster with gcc (AEGIS-256X2 decryption x0.94 -> x1.00-1.03 of libaegis at 1 MiB,
   encryption as fast or faster); clang schedules the former form better, so it keeps it */
#define AEGIS256_DEC_ZERO_KEY 1
#define AEGIS_UNROLL 1
#endif
#define AEGIS_IMPL sealstore_aegis256x2_avx2
#define AEGIS_KERNEL_NAME "avx2"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
