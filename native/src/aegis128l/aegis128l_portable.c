/* AEGIS-128L portable kernel: plain C, constant time (bitsliced AES round). */
#define LANES 1
#include "../portable_blk.h"

#define AEGIS_IMPL sealstore_aegis128l_portable
#define AEGIS_KERNEL_NAME "portable"
#include "../aegis_core.h"
