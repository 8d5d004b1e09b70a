/* AEGIS-128X2 portable kernel: plain C, constant time (bitsliced AES, bitsliced state). */
#define LANES 2
#define AEGIS_IMPL sealstore_aegis128x2_portable
#define AEGIS_KERNEL_NAME "portable"
#include "../portable_core.h"
