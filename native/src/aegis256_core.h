/*
 * AEGIS-256 / AEGIS-256X{2,4}, written once against the block abstraction of aegis_core.h
 * (draft-irtf-cfrg-aegis-aead-18, sections on AEGIS-256 and AEGIS-256X).
 *
 * The state is six words S0..S5 (each 16 * D bytes, D = LANES), the key and the nonce 32 bytes,
 * and one Update absorbs one message block of 16 * D bytes:
 *   S'0 = AESRound(S5, S0 ^ M), S'i = AESRound(S(i-1), Si) for i = 1..5.
 *
 * A kernel file defines, before including this header, what aegis_core.h takes: LANES, blk and
 * the blk_* operations, AEGIS_IMPL, AEGIS_KERNEL_NAME, and optionally AEGIS256_DEC_ZERO_KEY
 * (decryption's Update in the form of aegis256_update_late's comment), AEGIS_UNROLL (1 or 2,
 * default 2), AEGIS_SPLIT (reg, BLK_REGS, REG_BYTES and the reg_* operations, and
 * BLK_REG_GET/BLK_REG_SET when a reg is not one element of blk.v: run the whole blocks one
 * register of the state at a time) or AEGIS_BULK(s, dst, src, len, decrypt).
 * Everything here is static and force-inlined into the two exported functions, so each
 * kernel's loop keeps the state in registers.
 */
#include "common.h"

#define BLKBYTES (16 * LANES)
#define RATE BLKBYTES
#ifndef AEGIS_UNROLL
#define AEGIS_UNROLL 2
#endif

/*
 * Update(M).  AESRound(x, k) = MixColumns(ShiftRows(SubBytes(x))) ^ k, so AESRound(S5, S0 ^ M)
 * is AESRound(S5, M) ^ S0: the message goes in as the round key and S0 is folded in after,
 * which keeps the XOR off the S0 -> S0' chain when M is known ahead (encryption, AD, init).
 */
SEALSTORE_INLINE void aegis256_update(blk s[6], const blk m)
{
    const blk t = s[5];
    s[5] = blk_aesround(s[4], s[5]);
    s[4] = blk_aesround(s[3], s[4]);
    s[3] = blk_aesround(s[2], s[3]);
    s[2] = blk_aesround(s[1], s[2]);
    s[1] = blk_aesround(s[0], s[1]);
    s[0] = blk_xor(blk_aesround(t, m), s[0]);
}

/*
 * The same Update for a message computed from the state (decryption: M = C ^ keystream, the
 * keystream being S1, S2, S3, S4 and S5 of this very state): the round takes S0 as its key and
 * M joins after it, AESRound(S5, S0 ^ M) = AESRound(S5, S0) ^ M, so the keystream is computed
 * while the rounds run.
 */
SEALSTORE_INLINE void aegis256_update_late(blk s[6], const blk m)
{
    const blk t = s[5];
#ifdef AEGIS256_DEC_ZERO_KEY
    /* the round with a zero key and S0 ^ M after it: S0 reaches S0' through two XORs, not
       through the AES round that takes it as round key (measured on AVX2 with gcc: decryption
       2-3% faster for AEGIS-256, more for AEGIS-256X2) */
    const blk w = blk_xor(s[0], m), zero = blk_xor(t, t);
#endif
    s[5] = blk_aesround(s[4], s[5]);
    s[4] = blk_aesround(s[3], s[4]);
    s[3] = blk_aesround(s[2], s[3]);
    s[2] = blk_aesround(s[1], s[2]);
    s[1] = blk_aesround(s[0], s[1]);
#ifdef AEGIS256_DEC_ZERO_KEY
    s[0] = blk_xor(blk_aesround(t, zero), w);
#else
    s[0] = blk_xor(blk_aesround(t, s[0]), m);
#endif
}

/* The keystream Z = S1 ^ S4 ^ S5 ^ (S2 & S3). */
SEALSTORE_INLINE blk aegis256_z(const blk s[6])
{
    return blk_xor(blk_xor(s[1], s[4]), blk_xor(s[5], blk_and(s[2], s[3])));
}

#ifdef AEGIS_SPLIT
/*
 * As in aegis_core.h: the lanes never mix between initialization and finalization, so when a
 * word is BLK_REGS registers, register r of the six words is an independent 6-register state
 * (bytes [r * REG_BYTES, +REG_BYTES) of every block).  The blocks of a chunk run over one
 * register's state, then over the next (the chunk stays in L1 between passes), and each pass
 * keeps its state in registers.  In-place calls stay correct: each pass reads and writes only
 * its own bytes of each block.
 */
#define AEGIS_SPLIT_CHUNK 4096

SEALSTORE_INLINE void reg256_update(reg h[6], const reg m, const int late)
{
    const reg t = h[5];
    h[5] = reg_aesround(h[4], h[5]);
    h[4] = reg_aesround(h[3], h[4]);
    h[3] = reg_aesround(h[2], h[3]);
    h[2] = reg_aesround(h[1], h[2]);
    h[1] = reg_aesround(h[0], h[1]);
    h[0] = late ? reg_xor(reg_aesround(t, h[0]), m) : reg_xor(reg_aesround(t, m), h[0]);
}

#ifndef BLK_REG_GET
/* register r of a word (a kernel whose reg is not one element of blk.v defines its own) */
#define BLK_REG_GET(x, r) ((x).v[r])
#define BLK_REG_SET(x, r, y) ((x).v[r] = (y))
#endif

/* One pass: the blocks in [at, end) over register r of the state. */
SEALSTORE_INLINE void split256_pass(blk s[6], const int r, uint8_t *dst, const uint8_t *src,
                                    size_t at, const size_t end, const int decrypt)
{
    reg h[6];
    for (int j = 0; j < 6; j++) {
        h[j] = BLK_REG_GET(s[j], r);
    }
    for (; at < end; at += RATE) {
        const reg z = reg_xor(reg_xor(h[1], h[4]), reg_xor(h[5], reg_and(h[2], h[3])));
        const reg a = reg_load(src + at + REG_BYTES * r);
        const reg x = reg_xor(a, z);
        reg_store(dst + at + REG_BYTES * r, x);
        if (decrypt) {
            reg256_update(h, x, 1);
        } else {
            reg256_update(h, a, 0);
        }
    }
    for (int j = 0; j < 6; j++) {
        BLK_REG_SET(s[j], r, h[j]);
    }
}

/* Encrypt (decrypt: 1) the whole blocks of len bytes; returns the bytes done. */
SEALSTORE_INLINE size_t aegis256_bulk(blk s[6], uint8_t *dst, const uint8_t *src, size_t len,
                                      const int decrypt)
{
    const size_t n = len - len % RATE;
    for (size_t at = 0; at < n; at += AEGIS_SPLIT_CHUNK) {
        const size_t end = n - at > AEGIS_SPLIT_CHUNK ? at + AEGIS_SPLIT_CHUNK : n;
        for (int r = 0; r < BLK_REGS; r++) {
            split256_pass(s, r, dst, src, at, end, decrypt);
        }
    }
    return n;
}
#endif

SEALSTORE_INLINE void aegis256_init(blk s[6], const uint8_t *k, const uint8_t *npub)
{
    const blk k0 = blk_dup(k), k1 = blk_dup(k + 16);
    const blk k0n0 = blk_xor(k0, blk_dup(npub)), k1n1 = blk_xor(k1, blk_dup(npub + 16));
    const blk c0 = blk_dup(sealstore_aegis_c0), c1 = blk_dup(sealstore_aegis_c1);

    s[0] = k0n0;
    s[1] = k1n1;
    s[2] = c1;
    s[3] = c0;
    s[4] = blk_xor(k0, c0);
    s[5] = blk_xor(k1, c1);
#if LANES > 1
    /* ctx[i] = Byte(i) || Byte(D - 1) || zeros, folded into S3 and S5 before every Update */
    SEALSTORE_ALIGN(64) uint8_t ctxb[BLKBYTES];
    memset(ctxb, 0, sizeof ctxb);
    for (int i = 0; i < LANES; i++) {
        ctxb[16 * i] = (uint8_t)i;
        ctxb[16 * i + 1] = (uint8_t)(LANES - 1);
    }
    const blk ctx = blk_load(ctxb);
#define AEGIS256_CTX()                                                                          \
    do {                                                                                        \
        s[3] = blk_xor(s[3], ctx);                                                              \
        s[5] = blk_xor(s[5], ctx);                                                              \
    } while (0)
#else
#define AEGIS256_CTX() ((void)0)
#endif
    for (int i = 0; i < 4; i++) {
        AEGIS256_CTX();
        aegis256_update(s, k0);
        AEGIS256_CTX();
        aegis256_update(s, k1);
        AEGIS256_CTX();
        aegis256_update(s, k0n0);
        AEGIS256_CTX();
        aegis256_update(s, k1n1);
    }
#undef AEGIS256_CTX
}

SEALSTORE_INLINE void aegis256_enc(blk s[6], uint8_t *dst, const uint8_t *src)
{
    const blk z = aegis256_z(s);
    const blk t = blk_load(src);
    blk_store(dst, blk_xor(t, z));
    aegis256_update(s, t);
}

SEALSTORE_INLINE void aegis256_dec(blk s[6], uint8_t *dst, const uint8_t *src)
{
    const blk x = blk_xor(blk_load(src), aegis256_z(s));
    blk_store(dst, x);
    aegis256_update_late(s, x);
}

/* Two blocks, both ciphertexts loaded before either plaintext is stored (so in-place calls
   stay correct and the second load does not wait for the first store). */
SEALSTORE_INLINE void aegis256_dec2(blk s[6], uint8_t *dst, const uint8_t *src)
{
    const blk a = blk_load(src), b = blk_load(src + RATE);
    blk x = blk_xor(a, aegis256_z(s));
    blk_store(dst, x);
    aegis256_update_late(s, x);
    x = blk_xor(b, aegis256_z(s));
    blk_store(dst + RATE, x);
    aegis256_update_late(s, x);
}

/* DecPartial: decrypt the zero-padded last block, then absorb the zero-padded plaintext. */
SEALSTORE_INLINE void aegis256_dec_partial(blk s[6], uint8_t *dst, const uint8_t *src, size_t len)
{
    SEALSTORE_ALIGN(64) uint8_t pad[RATE];
    memset(pad, 0, sizeof pad);
    memcpy(pad, src, len);
    blk_store(pad, blk_xor(blk_load(pad), aegis256_z(s)));
    memcpy(dst, pad, len);
    memset(pad + len, 0, RATE - len);
    aegis256_update(s, blk_load(pad));
    sealstore_memzero(pad, sizeof pad);
}

/* XOR the D lanes of a word into 16 bytes: the kernel's blk_fold16 when it has one, else
   through memory, 8 bytes at a time. */
SEALSTORE_INLINE void aegis256_fold(uint8_t out[16], const blk x)
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

/* Finalize: seven Updates with S3 ^ (LE64(ad bits) || LE64(msg bits)) in every lane, then
   the tag: fold(S0 ^ .. ^ S5), or fold(S0 ^ S1 ^ S2) || fold(S3 ^ S4 ^ S5). */
SEALSTORE_INLINE void aegis256_mac(blk s[6], uint8_t *mac, size_t maclen, uint64_t adlen,
                                   uint64_t mlen)
{
    uint8_t u[16];
    sealstore_store64_le(u, adlen << 3);
    sealstore_store64_le(u + 8, mlen << 3);
    const blk t = blk_xor(s[3], blk_dup(u));
    for (int i = 0; i < 7; i++) {
        aegis256_update(s, t);
    }
    const blk lo = blk_xor(blk_xor(s[0], s[1]), s[2]);
    const blk hi = blk_xor(blk_xor(s[3], s[4]), s[5]);
    if (maclen == 16) {
        aegis256_fold(mac, blk_xor(lo, hi));
    } else {
        aegis256_fold(mac, lo);
        aegis256_fold(mac + 16, hi);
    }
}

SEALSTORE_INLINE void aegis256_absorb_ad(blk s[6], const uint8_t *ad, size_t adlen)
{
    size_t i;
    for (i = 0; i + RATE <= adlen; i += RATE) {
        aegis256_update(s, blk_load(ad + i));
    }
    if (adlen % RATE) {
        SEALSTORE_ALIGN(64) uint8_t pad[RATE];
        memset(pad, 0, sizeof pad);
        memcpy(pad, ad + i, adlen % RATE);
        aegis256_update(s, blk_load(pad));
    }
}

/* The whole blocks of the message, encrypted (decrypt 0) or decrypted; the bytes done. */
SEALSTORE_INLINE size_t aegis256_whole(blk s[6], uint8_t *dst, const uint8_t *src, size_t len,
                                       const int decrypt)
{
    size_t i;
#if defined(AEGIS_BULK)
    i = AEGIS_BULK(s, dst, src, len, decrypt);
#elif defined(AEGIS_SPLIT)
    /* every whole block: no loop over the whole state is compiled (it would spill) */
    i = aegis256_bulk(s, dst, src, len, decrypt);
#else
    i = 0;
    if (decrypt) {
        for (; AEGIS_UNROLL == 2 && i + 2 * RATE <= len; i += 2 * RATE) {
            aegis256_dec2(s, dst + i, src + i);
        }
        for (; i + RATE <= len; i += RATE) {
            aegis256_dec(s, dst + i, src + i);
        }
    } else {
        for (; AEGIS_UNROLL == 2 && i + 2 * RATE <= len; i += 2 * RATE) {
            aegis256_enc(s, dst + i, src + i);
            aegis256_enc(s, dst + i + RATE, src + i + RATE);
        }
        for (; i + RATE <= len; i += RATE) {
            aegis256_enc(s, dst + i, src + i);
        }
    }
#endif
    return i;
}

/* the shared driver: encrypt/decrypt_detached and AEGIS_IMPL */
#define DRIVER_WORDS 6
#define DRIVER_INIT aegis256_init
#define DRIVER_ABSORB_AD aegis256_absorb_ad
#define DRIVER_WHOLE_ENC(i, s, dst, src, len) i = aegis256_whole(s, dst, src, len, 0)
#define DRIVER_WHOLE_DEC(i, s, dst, src, len) i = aegis256_whole(s, dst, src, len, 1)
#define DRIVER_ENC aegis256_enc
#define DRIVER_DEC_PARTIAL aegis256_dec_partial
#define DRIVER_MAC aegis256_mac
#include "aegis_driver.h"
