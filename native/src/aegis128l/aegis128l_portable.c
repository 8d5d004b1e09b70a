/* AEGIS-128L portable kernel: plain C, constant time (bitsliced AES, bitsliced state). */
#define LANES 1
#define AEGIS_IMPL sealstore_aegis128l_portable
#define AEGIS_KERNEL_NAME "portable"
#include "../portable_core.h"
