/*
 * The ARMv8 Crypto Extension for one translation unit: sets SEALSTORE_TARGET (include
 * target_begin.h next) and brings in the NEON and AES intrinsics.  Only for aarch64 files.
 *
 * gcc names the extension "+crypto" (its arm_neon.h declares the AES intrinsics under that
 * target); clang names it "aes", and clang before 16 declares them only when __ARM_FEATURE_AES
 * is defined, which a build without -march=...+aes does not do: it is defined here, for this
 * file alone, whose functions all carry the target attribute.
 */
#ifndef SEALSTORE_ARMCRYPTO_ISA_H
#define SEALSTORE_ARMCRYPTO_ISA_H

#if defined(__clang__)
#define SEALSTORE_TARGET "aes"
#ifndef __ARM_FEATURE_AES
#define __ARM_FEATURE_AES 1
#endif
#else
#define SEALSTORE_TARGET "+crypto"
#endif
#include <arm_neon.h>

#endif
