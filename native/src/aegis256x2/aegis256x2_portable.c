/* AEGIS-256X2 portable kernel: plain C, constant time (bitsliced AES, bitsliced state). */
#define LANES 2
#define AEGIS_IMPL sealstore_aegis256x2_portable
#define AEGIS_KERNEL_NAME "portable"
#include "../portable256_core.h"
