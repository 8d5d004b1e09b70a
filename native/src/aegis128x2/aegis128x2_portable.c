/* AEGIS-128X2 portable kernel: plain C, constant time (bitsliced AES round). */
#define LANES 2
#include "../portable_blk.h"

#define AEGIS_IMPL sealstore_aegis128x2_portable
#define AEGIS_KERNEL_NAME "portable"
#include "../aegis_core.h"
