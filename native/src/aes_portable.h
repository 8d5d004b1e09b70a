/*
 * A constant-time, table-free AES round for the portable kernels, bitsliced on eight blocks.
 *
 * Representation (one "group" of eight 16-byte blocks B0..B7): eight plane words p[0..7],
 * p[b] holding bit b of every byte of the eight blocks.  A plane word has four 32-bit lanes,
 * lane c for AES column c; inside a lane, bit 8*r + j is bit b of row r (byte 4*c + r) of
 * block Bj.  With that layout:
 *   SubBytes    is the Boyar-Peralta depth-16 circuit (34 AND, 94 XOR/XNOR), implemented from
 *               the equations of "A depth-16 circuit for the AES S-box" (Boyar, Peralta,
 *               IACR ePrint 2011/332)
 *               and checked against the S-box computed from its definition (tests);
 *   ShiftRows   moves row r from lane c + r to lane c: three lane rotations and masks;
 *   MixColumns  mixes the bytes of one lane: byte rotations of every lane and XORs;
 * and every block of a group goes through the same instructions.  Only bitwise operations,
 * shifts by constants and lane permutations by constants: no table, no data-dependent branch
 * or address.
 *
 * The plane word is a GNU C vector of four uint32_t where the compiler has vector extensions
 * (SSE2 on x86-64, NEON on aarch64, scalar code elsewhere: the compiler lowers it), and a
 * struct of four lanes otherwise (SEALSTORE_PORTABLE_SCALAR forces that form, for tests).
 * Lanes are loaded and stored little-endian on every host (byte r of a column is bits 8r..8r+7
 * of its lane); the whole-vector memcpy is used only where the host is known little-endian.
 */
#ifndef SEALSTORE_AES_PORTABLE_H
#define SEALSTORE_AES_PORTABLE_H

#include "common.h"

#if (defined(__GNUC__) || defined(__clang__)) && !defined(SEALSTORE_PORTABLE_SCALAR)
#define AESP_VECTOR 1
typedef uint32_t aesp_w __attribute__((vector_size(16)));
#else
#define AESP_VECTOR 0
typedef struct {
    uint32_t l[4];
} aesp_w;
#endif

#if AESP_VECTOR && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && \
    !defined(SEALSTORE_PORTABLE_BYTEWISE)
#define AESP_LE_MEMCPY 1
#else
#define AESP_LE_MEMCPY 0
#endif

#if AESP_VECTOR
#define AESP_OP2(name, expr)                                                                   \
    SEALSTORE_INLINE aesp_w name(const aesp_w a, const aesp_w b)                               \
    {                                                                                          \
        return expr;                                                                           \
    }
AESP_OP2(aesp_xor, a ^ b)
AESP_OP2(aesp_and, a & b)
AESP_OP2(aesp_or, a | b)
AESP_OP2(aesp_xnor, ~(a ^ b))

SEALSTORE_INLINE aesp_w aesp_shl(const aesp_w a, const int n)
{
    return a << n;
}

SEALSTORE_INLINE aesp_w aesp_shr(const aesp_w a, const int n)
{
    return a >> n;
}

SEALSTORE_INLINE aesp_w aesp_splat(const uint32_t v)
{
    const aesp_w r = {v, v, v, v};
    return r;
}

/* lane c of the result is lane c + K (mod 4) of a */
#if defined(__clang__)
#define AESP_LANES(a, K)                                                                       \
    __builtin_shufflevector((a), (a), (K) & 3, ((K) + 1) & 3, ((K) + 2) & 3, ((K) + 3) & 3)
#else
#define AESP_LANES(a, K)                                                                       \
    __builtin_shuffle((a), (aesp_w){(K) & 3, ((K) + 1) & 3, ((K) + 2) & 3, ((K) + 3) & 3})
#endif

#else /* four scalar lanes */
#define AESP_OP2(name, op)                                                                     \
    SEALSTORE_INLINE aesp_w name(const aesp_w a, const aesp_w b)                               \
    {                                                                                          \
        aesp_w r;                                                                              \
        for (int i = 0; i < 4; i++) {                                                          \
            r.l[i] = op;                                                                       \
        }                                                                                      \
        return r;                                                                              \
    }
AESP_OP2(aesp_xor, a.l[i] ^ b.l[i])
AESP_OP2(aesp_and, a.l[i] & b.l[i])
AESP_OP2(aesp_or, a.l[i] | b.l[i])
AESP_OP2(aesp_xnor, ~(a.l[i] ^ b.l[i]))

SEALSTORE_INLINE aesp_w aesp_shl(const aesp_w a, const int n)
{
    aesp_w r;
    for (int i = 0; i < 4; i++) {
        r.l[i] = a.l[i] << n;
    }
    return r;
}

SEALSTORE_INLINE aesp_w aesp_shr(const aesp_w a, const int n)
{
    aesp_w r;
    for (int i = 0; i < 4; i++) {
        r.l[i] = a.l[i] >> n;
    }
    return r;
}

SEALSTORE_INLINE aesp_w aesp_splat(const uint32_t v)
{
    aesp_w r;
    for (int i = 0; i < 4; i++) {
        r.l[i] = v;
    }
    return r;
}

SEALSTORE_INLINE aesp_w aesp_lanes(const aesp_w a, const int k)
{
    aesp_w r;
    for (int i = 0; i < 4; i++) {
        r.l[i] = a.l[(i + k) & 3];
    }
    return r;
}
#define AESP_LANES(a, K) aesp_lanes((a), (K))
#endif

/* a & mask, the mask being the same 32 bits in every lane */
SEALSTORE_INLINE aesp_w aesp_mask(const aesp_w a, const uint32_t mask)
{
    return aesp_and(a, aesp_splat(mask));
}

/* every lane rotated right by n bits (0 < n < 32) */
SEALSTORE_INLINE aesp_w aesp_rotr(const aesp_w a, const int n)
{
    return aesp_or(aesp_shr(a, n), aesp_shl(a, 32 - n));
}

/* A 16-byte block, lane c = bytes 4c..4c+3 little-endian. */
SEALSTORE_INLINE aesp_w aesp_load(const uint8_t *p)
{
    aesp_w r;
#if AESP_LE_MEMCPY
    memcpy(&r, p, 16);
#else
    uint32_t l[4];
    for (int c = 0; c < 4; c++) {
        l[c] = (uint32_t)p[4 * c] | (uint32_t)p[4 * c + 1] << 8 |
               (uint32_t)p[4 * c + 2] << 16 | (uint32_t)p[4 * c + 3] << 24;
    }
#if AESP_VECTOR
    r = (aesp_w){l[0], l[1], l[2], l[3]};
#else
    memcpy(r.l, l, sizeof l);
#endif
#endif
    return r;
}

SEALSTORE_INLINE void aesp_store(uint8_t *p, const aesp_w a)
{
#if AESP_LE_MEMCPY
    memcpy(p, &a, 16);
#else
    for (int c = 0; c < 4; c++) {
#if AESP_VECTOR
        const uint32_t v = a[c];
#else
        const uint32_t v = a.l[c];
#endif
        p[4 * c] = (uint8_t)v;
        p[4 * c + 1] = (uint8_t)(v >> 8);
        p[4 * c + 2] = (uint8_t)(v >> 16);
        p[4 * c + 3] = (uint8_t)(v >> 24);
    }
#endif
}

/*
 * SubBytes on planes x[0..7] (x[b] = bit b; the circuit's input U0 and output S0 are the most
 * significant bit, x[7]).  Top linear layer: t[1..27].
 */
SEALSTORE_INLINE void aesp_sbox_top(aesp_w t[28], const aesp_w x[8])
{
    t[1] = aesp_xor(x[7], x[4]);
    t[2] = aesp_xor(x[7], x[2]);
    t[3] = aesp_xor(x[7], x[1]);
    t[4] = aesp_xor(x[4], x[2]);
    t[5] = aesp_xor(x[3], x[1]);
    t[6] = aesp_xor(t[1], t[5]);
    t[7] = aesp_xor(x[6], x[5]);
    t[8] = aesp_xor(x[0], t[6]);
    t[9] = aesp_xor(x[0], t[7]);
    t[10] = aesp_xor(t[6], t[7]);
    t[11] = aesp_xor(x[6], x[2]);
    t[12] = aesp_xor(x[5], x[2]);
    t[13] = aesp_xor(t[3], t[4]);
    t[14] = aesp_xor(t[6], t[11]);
    t[15] = aesp_xor(t[5], t[11]);
    t[16] = aesp_xor(t[5], t[12]);
    t[17] = aesp_xor(t[9], t[16]);
    t[18] = aesp_xor(x[4], x[0]);
    t[19] = aesp_xor(t[7], t[18]);
    t[20] = aesp_xor(t[1], t[19]);
    t[21] = aesp_xor(x[1], x[0]);
    t[22] = aesp_xor(t[7], t[21]);
    t[23] = aesp_xor(t[2], t[22]);
    t[24] = aesp_xor(t[2], t[10]);
    t[25] = aesp_xor(t[20], t[17]);
    t[26] = aesp_xor(t[3], t[16]);
    t[27] = aesp_xor(t[1], t[12]);
}

/* The shared non-linear middle (inversion in the tower field): q[0..8] = M37..M45. */
SEALSTORE_INLINE void aesp_sbox_inv(aesp_w q[9], const aesp_w t[28], const aesp_w x[8])
{
    const aesp_w M1 = aesp_and(t[13], t[6]);
    const aesp_w M2 = aesp_and(t[23], t[8]);
    const aesp_w M3 = aesp_xor(t[14], M1);
    const aesp_w M4 = aesp_and(t[19], x[0]);
    const aesp_w M5 = aesp_xor(M4, M1);
    const aesp_w M6 = aesp_and(t[3], t[16]);
    const aesp_w M7 = aesp_and(t[22], t[9]);
    const aesp_w M8 = aesp_xor(t[26], M6);
    const aesp_w M9 = aesp_and(t[20], t[17]);
    const aesp_w M10 = aesp_xor(M9, M6);
    const aesp_w M11 = aesp_and(t[1], t[15]);
    const aesp_w M12 = aesp_and(t[4], t[27]);
    const aesp_w M13 = aesp_xor(M12, M11);
    const aesp_w M14 = aesp_and(t[2], t[10]);
    const aesp_w M15 = aesp_xor(M14, M11);
    const aesp_w M16 = aesp_xor(M3, M2);
    const aesp_w M17 = aesp_xor(M5, t[24]);
    const aesp_w M18 = aesp_xor(M8, M7);
    const aesp_w M19 = aesp_xor(M10, M15);
    const aesp_w M20 = aesp_xor(M16, M13);
    const aesp_w M21 = aesp_xor(M17, M15);
    const aesp_w M22 = aesp_xor(M18, M13);
    const aesp_w M23 = aesp_xor(M19, t[25]);
    const aesp_w M24 = aesp_xor(M22, M23);
    const aesp_w M25 = aesp_and(M22, M20);
    const aesp_w M26 = aesp_xor(M21, M25);
    const aesp_w M27 = aesp_xor(M20, M21);
    const aesp_w M28 = aesp_xor(M23, M25);
    const aesp_w M29 = aesp_and(M28, M27);
    const aesp_w M30 = aesp_and(M26, M24);
    const aesp_w M31 = aesp_and(M20, M23);
    const aesp_w M32 = aesp_and(M27, M31);
    const aesp_w M33 = aesp_xor(M27, M25);
    const aesp_w M34 = aesp_and(M21, M22);
    const aesp_w M35 = aesp_and(M24, M34);
    const aesp_w M36 = aesp_xor(M24, M25);
    q[0] = aesp_xor(M21, M29);
    q[1] = aesp_xor(M32, M33);
    q[2] = aesp_xor(M23, M30);
    q[3] = aesp_xor(M35, M36);
    q[4] = aesp_xor(q[1], q[3]);
    q[5] = aesp_xor(q[0], q[2]);
    q[6] = aesp_xor(q[0], q[1]);
    q[7] = aesp_xor(q[2], q[3]);
    q[8] = aesp_xor(q[5], q[4]);
}

/* The eighteen output products m[0..17] = M46..M63. */
SEALSTORE_INLINE void aesp_sbox_products(aesp_w m[18], const aesp_w q[9], const aesp_w t[28],
                                         const aesp_w x[8])
{
    m[0] = aesp_and(q[7], t[6]);
    m[1] = aesp_and(q[3], t[8]);
    m[2] = aesp_and(q[2], x[0]);
    m[3] = aesp_and(q[6], t[16]);
    m[4] = aesp_and(q[1], t[9]);
    m[5] = aesp_and(q[0], t[17]);
    m[6] = aesp_and(q[5], t[15]);
    m[7] = aesp_and(q[8], t[27]);
    m[8] = aesp_and(q[4], t[10]);
    m[9] = aesp_and(q[7], t[13]);
    m[10] = aesp_and(q[3], t[23]);
    m[11] = aesp_and(q[2], t[19]);
    m[12] = aesp_and(q[6], t[3]);
    m[13] = aesp_and(q[1], t[22]);
    m[14] = aesp_and(q[0], t[20]);
    m[15] = aesp_and(q[5], t[1]);
    m[16] = aesp_and(q[8], t[4]);
    m[17] = aesp_and(q[4], t[2]);
}

/* Bottom linear layer, with the affine constant folded into its XNORs. */
SEALSTORE_INLINE void aesp_sbox_bottom(aesp_w x[8], const aesp_w m[18])
{
    const aesp_w L0 = aesp_xor(m[15], m[16]);
    const aesp_w L1 = aesp_xor(m[4], m[10]);
    const aesp_w L2 = aesp_xor(m[0], m[2]);
    const aesp_w L3 = aesp_xor(m[1], m[9]);
    const aesp_w L4 = aesp_xor(m[8], m[12]);
    const aesp_w L5 = aesp_xor(m[3], m[15]);
    const aesp_w L6 = aesp_xor(m[16], L5);
    const aesp_w L7 = aesp_xor(m[0], L3);
    const aesp_w L8 = aesp_xor(m[5], m[13]);
    const aesp_w L9 = aesp_xor(m[6], m[7]);
    const aesp_w L10 = aesp_xor(m[7], L4);
    const aesp_w L11 = aesp_xor(m[14], L2);
    const aesp_w L12 = aesp_xor(m[2], m[5]);
    const aesp_w L13 = aesp_xor(m[4], L0);
    const aesp_w L14 = aesp_xor(m[6], m[15]);
    const aesp_w L15 = aesp_xor(m[9], L1);
    const aesp_w L16 = aesp_xor(m[10], L0);
    const aesp_w L17 = aesp_xor(m[11], L1);
    const aesp_w L18 = aesp_xor(m[12], L8);
    const aesp_w L19 = aesp_xor(m[17], L4);
    const aesp_w L20 = aesp_xor(L0, L1);
    const aesp_w L21 = aesp_xor(L1, L7);
    const aesp_w L22 = aesp_xor(L3, L12);
    const aesp_w L23 = aesp_xor(L18, L2);
    const aesp_w L24 = aesp_xor(L15, L9);
    const aesp_w L25 = aesp_xor(L6, L10);
    const aesp_w L26 = aesp_xor(L7, L9);
    const aesp_w L27 = aesp_xor(L8, L10);
    const aesp_w L28 = aesp_xor(L11, L14);
    const aesp_w L29 = aesp_xor(L11, L17);
    x[7] = aesp_xor(L6, L24);
    x[6] = aesp_xnor(L16, L26);
    x[5] = aesp_xnor(L19, L28);
    x[4] = aesp_xor(L6, L21);
    x[3] = aesp_xor(L20, L22);
    x[2] = aesp_xor(L25, L29);
    x[1] = aesp_xnor(L13, L27);
    x[0] = aesp_xnor(L6, L23);
}

SEALSTORE_INLINE void aesp_sbox(aesp_w x[8])
{
    aesp_w t[28], q[9], m[18];
    t[0] = x[0]; /* unused slot: T1..T27 keep the paper's numbering */
    aesp_sbox_top(t, x);
    aesp_sbox_inv(q, t, x);
    aesp_sbox_products(m, q, t, x);
    aesp_sbox_bottom(x, m);
}

/* ShiftRows: row r of lane c comes from lane c + r (row r = bits 8r..8r+7 of a lane). */
SEALSTORE_INLINE aesp_w aesp_shiftrows(const aesp_w a)
{
    aesp_w r = aesp_mask(a, 0x000000FFu);
    r = aesp_or(r, aesp_mask(AESP_LANES(a, 1), 0x0000FF00u));
    r = aesp_or(r, aesp_mask(AESP_LANES(a, 2), 0x00FF0000u));
    return aesp_or(r, aesp_mask(AESP_LANES(a, 3), 0xFF000000u));
}

/*
 * MixColumns on the planes: row r of a column becomes 2*a[r] ^ 3*a[r+1] ^ a[r+2] ^ a[r+3]
 * = xtime(a[r] ^ a[r+1]) ^ a[r+1] ^ (a[r+2] ^ a[r+3]).  Rotating a lane right by 8 bits
 * brings row r+1 to row r; xtime on planes moves bit b to b+1 and folds bit 7 into 0, 1, 3, 4.
 */
SEALSTORE_INLINE void aesp_mixcolumns(aesp_w x[8])
{
    aesp_w t[8], a1[8];
    for (int b = 0; b < 8; b++) {
        a1[b] = aesp_rotr(x[b], 8);
        t[b] = aesp_xor(x[b], a1[b]);
    }
    for (int b = 0; b < 8; b++) {
        /* xtime(t), plane b */
        aesp_w xt = b == 0 ? t[7] : t[b - 1];
        if (b == 1 || b == 3 || b == 4) {
            xt = aesp_xor(xt, t[7]);
        }
        x[b] = aesp_xor(aesp_xor(xt, a1[b]), aesp_rotr(t[b], 16));
    }
}

/* MixColumns(ShiftRows(SubBytes(.))) of the eight blocks of a group: AESRound without its key. */
SEALSTORE_INLINE void aesp_round_nokey(aesp_w x[8])
{
    aesp_sbox(x);
    for (int b = 0; b < 8; b++) {
        x[b] = aesp_shiftrows(x[b]);
    }
    aesp_mixcolumns(x);
}

#endif
