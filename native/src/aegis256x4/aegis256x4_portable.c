/* AEGIS-256X4 portable kernel: plain C, constant time (bitsliced AES, bitsliced state). */
#define LANES 4
#define AEGIS_IMPL sealstore_aegis256x4_portable
#define AEGIS_KERNEL_NAME "portable"
#include "../portable256_core.h"
