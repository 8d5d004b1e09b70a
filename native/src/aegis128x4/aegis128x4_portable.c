/* AEGIS-128X4 portable kernel: plain C, constant time (bitsliced AES round). */
#define LANES 4
#include "../portable_blk.h"

#define AEGIS_IMPL sealstore_aegis128x4_portable
#define AEGIS_KERNEL_NAME "portable"
#include "../aegis_core.h"
