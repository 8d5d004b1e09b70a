/* Every kernel this build has, one sealstore_aead_impl per (variant, instruction set). */
#ifndef SEALSTORE_IMPLEMENTATIONS_H
#define SEALSTORE_IMPLEMENTATIONS_H

#include "common.h"

extern const sealstore_aead_impl sealstore_aegis128l_portable;
extern const sealstore_aead_impl sealstore_aegis128x2_portable;
extern const sealstore_aead_impl sealstore_aegis128x4_portable;

#if SEALSTORE_X86
extern const sealstore_aead_impl sealstore_aegis128l_aesni;
extern const sealstore_aead_impl sealstore_aegis128l_avx2;
extern const sealstore_aead_impl sealstore_aegis128x2_aesni;
extern const sealstore_aead_impl sealstore_aegis128x4_aesni;
extern const sealstore_aead_impl sealstore_aegis128x2_avx2;
extern const sealstore_aead_impl sealstore_aegis128x4_avx2;
extern const sealstore_aead_impl sealstore_aegis128x4_avx512;
#endif

#if SEALSTORE_ARM64
extern const sealstore_aead_impl sealstore_aegis128l_armcrypto;
extern const sealstore_aead_impl sealstore_aegis128x2_armcrypto;
extern const sealstore_aead_impl sealstore_aegis128x4_armcrypto;
#endif

#endif
