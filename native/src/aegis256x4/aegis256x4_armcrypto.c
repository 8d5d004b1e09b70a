/*
 * AEGIS-256X4 with the ARMv8 Crypto Extension (AESE/AESMC): each lane of a state word is one
 * 128-bit NEON register.  The whole state (24 registers, plus AESE's copies, the message and
 * the keystream) does not stay in the 32 registers, so the message loop runs two lanes at a
 * time (AEGIS_SPLIT of aegis256_core.h with a register pair as its reg: 12 state registers
 * per pass, as AEGIS-256X2).
 */
#include "../common.h"
#if SEALSTORE_ARM64
#include "../armcrypto_isa.h"
#include "../target_begin.h"

#define LANES 4
#include "../armcrypto_blk.h"

/* lanes 2r and 2r + 1 of a word */
typedef struct {
    uint8x16_t a, b;
} reg;
#define BLK_REGS 2
#define REG_BYTES 32
#define BLK_REG_GET(x, r) ((reg){(x).v[2 * (r)], (x).v[2 * (r) + 1]})
#define BLK_REG_SET(x, r, y) ((x).v[2 * (r)] = (y).a, (x).v[2 * (r) + 1] = (y).b)

SEALSTORE_INLINE reg reg_xor(const reg x, const reg y)
{
    return (reg){veorq_u8(x.a, y.a), veorq_u8(x.b, y.b)};
}

SEALSTORE_INLINE reg reg_and(const reg x, const reg y)
{
    return (reg){vandq_u8(x.a, y.a), vandq_u8(x.b, y.b)};
}

SEALSTORE_INLINE reg reg_aesround(const reg in, const reg rk)
{
    const uint8x16_t zero = vdupq_n_u8(0);
    return (reg){veorq_u8(vaesmcq_u8(vaeseq_u8(in.a, zero)), rk.a),
                 veorq_u8(vaesmcq_u8(vaeseq_u8(in.b, zero)), rk.b)};
}

SEALSTORE_INLINE reg reg_load(const uint8_t *p)
{
    return (reg){vld1q_u8(p), vld1q_u8(p + 16)};
}

SEALSTORE_INLINE void reg_store(uint8_t *p, const reg x)
{
    vst1q_u8(p, x.a);
    vst1q_u8(p + 16, x.b);
}

#define AEGIS_SPLIT 1
#define AEGIS_IMPL sealstore_aegis256x4_armcrypto
#define AEGIS_KERNEL_NAME "armcrypto"
#include "../aegis256_core.h"

#include "../target_end.h"
#endif
