/*
 * AEGIS-128L / AEGIS-128X{2,4}, written once against a block abstraction
 * (draft-irtf-cfrg-aegis-aead-18, sections on AEGIS-128L and AEGIS-128X).
 *
 * A kernel file defines, before including this header:
 *   LANES                  the degree D (1 for AEGIS-128L)
 *   blk                    one state word for all D lanes (16*D bytes)
 *   blk_xor, blk_and, blk_load, blk_store, blk_dup (broadcast 16 bytes to every lane)
 *   blk_aesround(in, rk)   AESRound on every lane, unless AEGIS_CUSTOM_UPDATE is defined and
 *                          the kernel provides aegis_update() itself
 *   AEGIS_IMPL             the name of the sealstore_aead_impl this file exports
 *   AEGIS_KERNEL_NAME      its kernel name ("aesni", ...)
 *   AEGIS_UNROLL           optional: 1 to keep one block per loop iteration (default 2; two
 *                          blocks per iteration measured 25% faster for the 512-bit kernel,
 *                          slower where the state already fills the register file)
 *   AEGIS_BULK(s, dst, src, len, decrypt)  optional: encrypt (decrypt 0) or decrypt every whole
 *                          block of the message its own way, in place of the loops below, and
 *                          return the bytes done (len rounded down to a multiple of RATE)
 *   AEGIS_SPLIT            optional, for words of several registers (reg, BLK_REGS,
 *                          REG_BYTES and the reg_* operations, as in aesni_blk.h): run the
 *                          message's whole blocks one register of the state at a time (below)
 * Everything here is static and force-inlined into the two exported functions, so each
 * kernel's loop keeps the state in registers.
 */
#include "common.h"

#define BLKBYTES (16 * LANES)
#define RATE (2 * BLKBYTES)
#ifndef AEGIS_UNROLL
#define AEGIS_UNROLL 2
#endif

#ifndef AEGIS_CUSTOM_UPDATE
/*
 * Update(M0, M1): S'i = AESRound(S(i-1), Si), with M0 into S0 and M1 into S4.
 * AESRound(x, k) = MixColumns(ShiftRows(SubBytes(x))) ^ k, so AESRound(S7, S0 ^ M0) is
 * AESRound(S7, M0) ^ S0: the message goes in as the round key and S0 is folded in after, which
 * keeps the XOR off the S0 -> S0' dependency chain (one AES latency per update, not one plus
 * an XOR).
 */
SEALSTORE_INLINE void aegis_update(blk s[8], const blk m0, const blk m1)
{
    const blk t = s[7];
    s[7] = blk_aesround(s[6], s[7]);
    s[6] = blk_aesround(s[5], s[6]);
    s[5] = blk_aesround(s[4], s[5]);
    s[4] = blk_xor(blk_aesround(s[3], m1), s[4]);
    s[3] = blk_aesround(s[2], s[3]);
    s[2] = blk_aesround(s[1], s[2]);
    s[1] = blk_aesround(s[0], s[1]);
    s[0] = blk_xor(blk_aesround(t, m0), s[0]);
}

/*
 * The same Update for messages computed from the state (decryption: M = C ^ keystream, and
 * the keystream is S1, S2, S3, S5, S6 and S7 of this very state).  Fed in as the round key,
 * such an M would put its three XORs in front of the AES round on the S0 and S4 chains; here
 * the rounds take the state alone and M joins after them, AESRound(S7, S0 ^ M0) =
 * AESRound(S7, S0) ^ M0, so the keystream is computed while the rounds run.
 */
SEALSTORE_INLINE void aegis_update_late(blk s[8], const blk m0, const blk m1)
{
    const blk t = s[7];
    s[7] = blk_aesround(s[6], s[7]);
    s[6] = blk_aesround(s[5], s[6]);
    s[5] = blk_aesround(s[4], s[5]);
    s[4] = blk_xor(blk_aesround(s[3], s[4]), m1);
    s[3] = blk_aesround(s[2], s[3]);
    s[2] = blk_aesround(s[1], s[2]);
    s[1] = blk_aesround(s[0], s[1]);
    s[0] = blk_xor(blk_aesround(t, s[0]), m0);
}
#else
/* a kernel with its own Update has one form of it */
#define aegis_update_late aegis_update
#endif

#ifdef AEGIS_SPLIT
/*
 * The lanes of AEGIS-128X never mix between initialization and finalization, so when a word
 * is BLK_REGS registers, register r of the eight words is an independent 8-register state
 * (its lanes' share of every block: bytes [r * REG_BYTES, +REG_BYTES) of each word).  Updating
 * all of them at once needs 8 * BLK_REGS registers for the state alone, which spills on 16
 * registers (AEGIS-128X4 on ymm, X2 and X4 on xmm) at every block; here the blocks of a chunk
 * run over one register's state, then over the next (the chunk stays in L1 between passes),
 * and each pass keeps its state in registers.  Update and keystream as above, on one
 * register: the message as round key when encrypting, folded in late when decrypting.
 * In-place calls stay correct: each pass reads and writes only its own bytes of each word.
 */
#define AEGIS_SPLIT_CHUNK 4096

SEALSTORE_INLINE void reg_update(reg h[8], const reg m0, const reg m1, const int late)
{
    const reg t = h[7];
    h[7] = reg_aesround(h[6], h[7]);
    h[6] = reg_aesround(h[5], h[6]);
    h[5] = reg_aesround(h[4], h[5]);
    h[4] = late ? reg_xor(reg_aesround(h[3], h[4]), m1) : reg_xor(reg_aesround(h[3], m1), h[4]);
    h[3] = reg_aesround(h[2], h[3]);
    h[2] = reg_aesround(h[1], h[2]);
    h[1] = reg_aesround(h[0], h[1]);
    h[0] = late ? reg_xor(reg_aesround(t, h[0]), m0) : reg_xor(reg_aesround(t, m0), h[0]);
}

/* One pass: the blocks in [at, end) over register r of the state. */
SEALSTORE_INLINE void split_pass(blk s[8], const int r, uint8_t *dst, const uint8_t *src,
                                 size_t at, const size_t end, const int decrypt)
{
    reg h[8];
    for (int j = 0; j < 8; j++) {
        h[j] = s[j].v[r];
    }
    for (; at < end; at += RATE) {
        const uint8_t *p = src + at + REG_BYTES * r;
        uint8_t *q = dst + at + REG_BYTES * r;
        const reg z0 = reg_xor(reg_xor(h[6], h[1]), reg_and(h[2], h[3]));
        const reg z1 = reg_xor(reg_xor(h[2], h[5]), reg_and(h[6], h[7]));
        const reg a = reg_load(p);
        const reg b = reg_load(p + BLKBYTES);
        const reg x0 = reg_xor(a, z0);
        const reg x1 = reg_xor(b, z1);
        reg_store(q, x0);
        reg_store(q + BLKBYTES, x1);
        if (decrypt) {
            reg_update(h, x0, x1, 1);
        } else {
            reg_update(h, a, b, 0);
        }
    }
    for (int j = 0; j < 8; j++) {
        s[j].v[r] = h[j];
    }
}

/* Encrypt (decrypt: 1) the whole blocks of len bytes; returns the bytes done. */
SEALSTORE_INLINE size_t aegis_bulk(blk s[8], uint8_t *dst, const uint8_t *src, size_t len,
                                   const int decrypt)
{
    const size_t n = len - len % RATE;
    for (size_t at = 0; at < n; at += AEGIS_SPLIT_CHUNK) {
        const size_t end = n - at > AEGIS_SPLIT_CHUNK ? at + AEGIS_SPLIT_CHUNK : n;
        for (int r = 0; r < BLK_REGS; r++) {
            split_pass(s, r, dst, src, at, end, decrypt);
        }
    }
    return n;
}
#endif

SEALSTORE_INLINE void aegis_init(blk s[8], const uint8_t *k, const uint8_t *npub)
{
    const blk c0 = blk_dup(sealstore_aegis_c0);
    const blk c1 = blk_dup(sealstore_aegis_c1);
    const blk kb = blk_dup(k);
    const blk nb = blk_dup(npub);
    const blk kn = blk_xor(kb, nb);

    s[0] = kn;
    s[1] = c1;
    s[2] = c0;
    s[3] = c1;
    s[4] = kn;
    s[5] = blk_xor(kb, c0);
    s[6] = blk_xor(kb, c1);
    s[7] = blk_xor(kb, c0);
#if LANES > 1
    /* ctx[i] = Byte(i) || Byte(D - 1) || zeros, folded into S3 and S7 before every round */
    SEALSTORE_ALIGN(64) uint8_t ctxb[BLKBYTES];
    memset(ctxb, 0, sizeof ctxb);
    for (int i = 0; i < LANES; i++) {
        ctxb[16 * i] = (uint8_t)i;
        ctxb[16 * i + 1] = (uint8_t)(LANES - 1);
    }
    const blk ctx = blk_load(ctxb);
#endif
    for (int i = 0; i < 10; i++) {
#if LANES > 1
        s[3] = blk_xor(s[3], ctx);
        s[7] = blk_xor(s[7], ctx);
#endif
        aegis_update(s, nb, kb);
    }
}

SEALSTORE_INLINE void aegis_absorb(blk s[8], const uint8_t *src)
{
    aegis_update(s, blk_load(src), blk_load(src + BLKBYTES));
}

SEALSTORE_INLINE void aegis_enc(blk s[8], uint8_t *dst, const uint8_t *src)
{
    const blk z0 = blk_xor(blk_xor(s[6], s[1]), blk_and(s[2], s[3]));
    const blk z1 = blk_xor(blk_xor(s[2], s[5]), blk_and(s[6], s[7]));
    const blk t0 = blk_load(src);
    const blk t1 = blk_load(src + BLKBYTES);
    blk_store(dst, blk_xor(t0, z0));
    blk_store(dst + BLKBYTES, blk_xor(t1, z1));
    aegis_update(s, t0, t1);
}

SEALSTORE_INLINE void aegis_dec(blk s[8], uint8_t *dst, const uint8_t *src)
{
    const blk z0 = blk_xor(blk_xor(s[6], s[1]), blk_and(s[2], s[3]));
    const blk z1 = blk_xor(blk_xor(s[2], s[5]), blk_and(s[6], s[7]));
    const blk x0 = blk_xor(blk_load(src), z0);
    const blk x1 = blk_xor(blk_load(src + BLKBYTES), z1);
    blk_store(dst, x0);
    blk_store(dst + BLKBYTES, x1);
    aegis_update_late(s, x0, x1);
}

/* Two blocks, both ciphertexts loaded before either plaintext is stored (measured: AEGIS-128X2
   1 MiB decryption 0.97-0.98x -> 1.00-1.04x libaegis, same run). */
SEALSTORE_INLINE void aegis_dec2(blk s[8], uint8_t *dst, const uint8_t *src)
{
    const blk a0 = blk_load(src), a1 = blk_load(src + BLKBYTES);
    const blk b0 = blk_load(src + RATE), b1 = blk_load(src + RATE + BLKBYTES);
    blk x0 = blk_xor(a0, blk_xor(blk_xor(s[6], s[1]), blk_and(s[2], s[3])));
    blk x1 = blk_xor(a1, blk_xor(blk_xor(s[2], s[5]), blk_and(s[6], s[7])));
    blk_store(dst, x0);
    blk_store(dst + BLKBYTES, x1);
    aegis_update_late(s, x0, x1);
    x0 = blk_xor(b0, blk_xor(blk_xor(s[6], s[1]), blk_and(s[2], s[3])));
    x1 = blk_xor(b1, blk_xor(blk_xor(s[2], s[5]), blk_and(s[6], s[7])));
    blk_store(dst + RATE, x0);
    blk_store(dst + RATE + BLKBYTES, x1);
    aegis_update_late(s, x0, x1);
}

/* DecPartial: decrypt the zero-padded last block, then absorb the zero-padded plaintext. */
SEALSTORE_INLINE void aegis_dec_partial(blk s[8], uint8_t *dst, const uint8_t *src, size_t len)
{
    SEALSTORE_ALIGN(64) uint8_t pad[RATE];
    const blk z0 = blk_xor(blk_xor(s[6], s[1]), blk_and(s[2], s[3]));
    const blk z1 = blk_xor(blk_xor(s[2], s[5]), blk_and(s[6], s[7]));

    memset(pad, 0, sizeof pad);
    memcpy(pad, src, len);
    blk_store(pad, blk_xor(blk_load(pad), z0));
    blk_store(pad + BLKBYTES, blk_xor(blk_load(pad + BLKBYTES), z1));
    memcpy(dst, pad, len);
    memset(pad + len, 0, RATE - len);
    aegis_absorb(s, pad);
    sealstore_memzero(pad, sizeof pad);
}

/* XOR the D lanes of a stored word into 16 bytes: the kernel's blk_fold16 when it has one,
   else through memory, 8 bytes at a time (bytes one by one cost a hundred instructions). */
SEALSTORE_INLINE void aegis_fold(uint8_t out[16], const blk x)
{
#ifdef BLK_HAVE_FOLD16
    blk_fold16(out, x);
#else
    SEALSTORE_ALIGN(64) uint8_t buf[BLKBYTES];
    uint64_t acc[2] = {0, 0};
    blk_store(buf, x);
    for (int i = 0; i < 2 * LANES; i++) {
        uint64_t w;
        memcpy(&w, buf + 8 * i, 8);
        acc[i & 1] ^= w;
    }
    memcpy(out, acc, 16);
#endif
}

SEALSTORE_INLINE void aegis_mac(blk s[8], uint8_t *mac, size_t maclen, uint64_t adlen,
                                uint64_t mlen)
{
    uint8_t u[16];
    sealstore_store64_le(u, adlen << 3);
    sealstore_store64_le(u + 8, mlen << 3);
    const blk t = blk_xor(s[2], blk_dup(u));
    for (int i = 0; i < 7; i++) {
        aegis_update(s, t, t);
    }
    if (maclen == 16) {
        blk x = blk_xor(blk_xor(s[0], s[1]), blk_xor(s[2], s[3]));
        x = blk_xor(x, blk_xor(blk_xor(s[4], s[5]), s[6]));
        aegis_fold(mac, x);
    } else {
        aegis_fold(mac, blk_xor(blk_xor(s[0], s[1]), blk_xor(s[2], s[3])));
        aegis_fold(mac + 16, blk_xor(blk_xor(s[4], s[5]), blk_xor(s[6], s[7])));
    }
}

SEALSTORE_INLINE void aegis_absorb_ad(blk s[8], const uint8_t *ad, size_t adlen)
{
    size_t i;
    for (i = 0; i + RATE <= adlen; i += RATE) {
        aegis_absorb(s, ad + i);
    }
    if (adlen % RATE) {
        SEALSTORE_ALIGN(64) uint8_t pad[RATE];
        memset(pad, 0, sizeof pad);
        memcpy(pad, ad + i, adlen % RATE);
        aegis_absorb(s, pad);
    }
}

/* The whole blocks of the message (the driver's DRIVER_WHOLE_ENC/_DEC: statements setting i to
   the bytes done).  Macros, not a function: the loops stay in the exported functions as they
   were written there (an inline function in their place changed the AEGIS-128 kernels' code). */
#ifdef AEGIS_BULK
#define AEGIS_WHOLE_ENC(i, s, dst, src, len) i = AEGIS_BULK(s, dst, src, len, 0)
#define AEGIS_WHOLE_DEC(i, s, dst, src, len) i = AEGIS_BULK(s, dst, src, len, 1)
#else
#ifdef AEGIS_SPLIT
#define AEGIS_WHOLE_FIRST(s, dst, src, len, decrypt) aegis_bulk(s, dst, src, len, decrypt)
#else
#define AEGIS_WHOLE_FIRST(s, dst, src, len, decrypt) 0
#endif
#define AEGIS_WHOLE_ENC(i, s, dst, src, len)                                                   \
    i = AEGIS_WHOLE_FIRST(s, dst, src, len, 0);                                                \
    for (; AEGIS_UNROLL == 2 && i + 2 * RATE <= len; i += 2 * RATE) {                          \
        aegis_enc(s, dst + i, src + i);                                                        \
        aegis_enc(s, dst + i + RATE, src + i + RATE);                                          \
    }                                                                                          \
    for (; i + RATE <= len; i += RATE) {                                                       \
        aegis_enc(s, dst + i, src + i);                                                        \
    }
#define AEGIS_WHOLE_DEC(i, s, dst, src, len)                                                   \
    i = AEGIS_WHOLE_FIRST(s, dst, src, len, 1);                                                \
    for (; AEGIS_UNROLL == 2 && i + 2 * RATE <= len; i += 2 * RATE) {                          \
        aegis_dec2(s, dst + i, src + i);                                                       \
    }                                                                                          \
    for (; i + RATE <= len; i += RATE) {                                                       \
        aegis_dec(s, dst + i, src + i);                                                        \
    }
#endif

/* the shared driver: encrypt/decrypt_detached and AEGIS_IMPL */
#define DRIVER_WORDS 8
#define DRIVER_INIT aegis_init
#define DRIVER_ABSORB_AD aegis_absorb_ad
#define DRIVER_WHOLE_ENC AEGIS_WHOLE_ENC
#define DRIVER_WHOLE_DEC AEGIS_WHOLE_DEC
#define DRIVER_ENC aegis_enc
#define DRIVER_DEC_PARTIAL aegis_dec_partial
#define DRIVER_MAC aegis_mac
#include "aegis_driver.h"
