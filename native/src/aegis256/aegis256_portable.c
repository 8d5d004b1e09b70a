/* AEGIS-256 portable kernel: plain C, constant time (bitsliced AES, bitsliced state). */
#define LANES 1
#define AEGIS_IMPL sealstore_aegis256_portable
#define AEGIS_KERNEL_NAME "portable"
#include "../portable256_core.h"
