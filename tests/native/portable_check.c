/*
 * The building blocks of the bitsliced portable kernel (native/src/aes_portable.h and
 * portable_blk.h) against the definitions, byte by byte:
 *   - the S-box circuit on all 256 inputs, in every slot and lane, against inversion in
 *     GF(2^8) followed by the affine map (computed here, not taken from a table);
 *   - the bitsliced AESRound (without key) against SubBytes, ShiftRows, MixColumns on bytes;
 *   - Update and the keystream of a bitsliced lane against the AEGIS-128L definitions on
 *     bytes, over a chain of updates (the state stays bitsliced between them);
 *   - the same for the six-word AEGIS-256 lane of portable256_blk.h, and its Update on the
 *     draft's AEGIS-256 Update test vector;
 *   - pack/unpack round trips.
 * Built by tests/toolchain/test_portable_kernel.py in each form of the plane word (vector, scalar struct,
 * bytewise loads as on a big-endian host) and for aarch64 under qemu.
 *
 *   portable_check          run; prints one summary line, exit 0 when nothing failed
 *   portable_check broken   control: flips one output bit of the S-box; must fail
 */
#include <stdio.h>
#include <string.h>

#define LANES 1
#include "portable_blk.h"
#include "portable256_blk.h"

static int failures;
static long checks;
static int broken;

static void check(int ok, const char *what, int i)
{
    checks++;
    if (!ok && ++failures <= 10) {
        fprintf(stderr, "FAIL: %s (case %d)\n", what, i);
    }
}

static uint8_t gmul(uint8_t a, uint8_t b)
{
    uint8_t r = 0;
    for (int i = 0; i < 8; i++) {
        if (b & 1) {
            r ^= a;
        }
        b >>= 1;
        a = (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1b : 0));
    }
    return r;
}

/* The S-box from its definition: x^-1 in GF(2^8) (0 -> 0), then the affine map. */
static uint8_t sbox_def(uint8_t x)
{
    uint8_t inv = 0, s = 0x63;
    for (int y = 1; y < 256 && x != 0; y++) {
        if (gmul(x, (uint8_t)y) == 1) {
            inv = (uint8_t)y;
        }
    }
    for (int i = 0; i < 8; i++) {
        int bit = 0;
        for (int k = 0; k < 8; k += (k == 0 ? 4 : 1)) {
            bit ^= (inv >> ((i + k) & 7)) & 1;
        }
        s ^= (uint8_t)(bit << i);
    }
    return s;
}

static uint8_t sbox_ref[256];

/* MixColumns(ShiftRows(SubBytes(in))) on bytes (byte 4c + r = row r of column c). */
static void round_ref(uint8_t out[16], const uint8_t in[16])
{
    uint8_t a[16];
    for (int c = 0; c < 4; c++) {
        for (int r = 0; r < 4; r++) {
            a[4 * c + r] = sbox_ref[in[4 * ((c + r) & 3) + r]];
        }
    }
    for (int c = 0; c < 4; c++) {
        const uint8_t *x = a + 4 * c;
        for (int r = 0; r < 4; r++) {
            out[4 * c + r] = (uint8_t)(gmul(2, x[r]) ^ gmul(3, x[(r + 1) & 3]) ^ x[(r + 2) & 3] ^
                                       x[(r + 3) & 3]);
        }
    }
}

static uint32_t rng = 0x9e3779b9u;
static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        p[i] = (uint8_t)(rng >> 24);
    }
}

static void pack_bytes(pgroup *g, const uint8_t blocks[8][16])
{
    aesp_w w[8];
    for (int j = 0; j < 8; j++) {
        w[j] = aesp_load(blocks[j]);
    }
    pgroup_pack(g, w);
}

static void check_sbox(void)
{
    for (int half = 0; half < 2; half++) {
        uint8_t in[8][16], out[16];
        pgroup g;
        for (int i = 0; i < 128; i++) {
            in[i / 16][i % 16] = (uint8_t)(128 * half + i);
        }
        pack_bytes(&g, in);
        aesp_sbox(g.p);
        if (broken) {
            g.p[5] = aesp_xor(g.p[5], aesp_load((const uint8_t *)"\x00\x00\x00\x00\x01"
                                                              "\x00\x00\x00\x00\x00\x00\x00"
                                                              "\x00\x00\x00\x00"));
        }
        for (int j = 0; j < 8; j++) {
            aesp_store(out, pgroup_slot(&g, j));
            for (int i = 0; i < 16; i++) {
                check(out[i] == sbox_ref[in[j][i]], "S-box circuit", in[j][i]);
            }
        }
    }
}

static void check_round(void)
{
    for (int t = 0; t < 64; t++) {
        uint8_t in[8][16], out[16], want[16];
        pgroup g, back;
        fill(&in[0][0], sizeof in);
        pack_bytes(&g, in);
        for (int j = 0; j < 8; j++) {
            aesp_w w[8];
            for (int k = 0; k < 8; k++) {
                w[k] = pgroup_slot(&g, k);
            }
            pgroup_pack(&back, w);
            check(memcmp(&back, &g, sizeof g) == 0, "pack/unpack round trip", t);
        }
        aesp_round_nokey(g.p);
        for (int j = 0; j < 8; j++) {
            round_ref(want, in[j]);
            aesp_store(out, pgroup_slot(&g, j));
            check(memcmp(out, want, 16) == 0, "bitsliced AESRound", 8 * t + j);
        }
    }
}

/* AEGIS-128L Update and keystream on bytes, from the draft. */
static void update_ref(uint8_t s[8][16], const uint8_t m0[16], const uint8_t m1[16])
{
    uint8_t n[8][16];
    for (int i = 0; i < 8; i++) {
        round_ref(n[i], s[(i + 7) & 7]);
        for (int k = 0; k < 16; k++) {
            n[i][k] ^= s[i][k] ^ (i == 0 ? m0[k] : 0) ^ (i == 4 ? m1[k] : 0);
        }
    }
    memcpy(s, n, sizeof n);
}

static void check_update_chain(void)
{
    uint8_t s[8][16], m[2][16], z[2][16], got[16];
    pgroup g;
    fill(&s[0][0], sizeof s);
    pack_bytes(&g, s);
    for (int t = 0; t < 200; t++) {
        aesp_w z0, z1;
        pgroup_keystream(&g, &z0, &z1);
        for (int k = 0; k < 16; k++) {
            z[0][k] = (uint8_t)(s[1][k] ^ s[6][k] ^ (s[2][k] & s[3][k]));
            z[1][k] = (uint8_t)(s[2][k] ^ s[5][k] ^ (s[6][k] & s[7][k]));
        }
        aesp_store(got, z0);
        check(memcmp(got, z[0], 16) == 0, "keystream Z0", t);
        aesp_store(got, z1);
        check(memcmp(got, z[1], 16) == 0, "keystream Z1", t);
        fill(&m[0][0], sizeof m);
        update_ref(s, m[0], m[1]);
        pgroup_update(&g, aesp_load(m[0]), aesp_load(m[1]));
        for (int j = 0; j < 8; j++) {
            aesp_store(got, pgroup_slot(&g, j));
            check(memcmp(got, s[j], 16) == 0, "Update", 8 * t + j);
        }
    }
}

/* AEGIS-256 Update on bytes, from the draft:
   S'0 = AESRound(S5, S0 ^ M), S'i = AESRound(S(i-1), Si). */
static void update256_ref(uint8_t s[6][16], const uint8_t m[16])
{
    uint8_t n[6][16];
    for (int i = 0; i < 6; i++) {
        round_ref(n[i], s[(i + 5) % 6]);
        for (int k = 0; k < 16; k++) {
            n[i][k] ^= s[i][k] ^ (i == 0 ? m[k] : 0);
        }
    }
    memcpy(s, n, sizeof n);
}

static void pack6_bytes(p6group *g, const uint8_t blocks[6][16])
{
    aesp_w w[6];
    for (int j = 0; j < 6; j++) {
        w[j] = aesp_load(blocks[j]);
    }
    p6_pack(g, w);
}

/* Every state word of g equals s, and the two unused slots are still zero. */
static void check_p6(const p6group *g, const uint8_t s[6][16], const char *what, int t)
{
    static const uint8_t zero[16];
    uint8_t got[16];
    for (int j = 0; j < 8; j++) {
        aesp_store(got, p6_slot(g, j));
        check(memcmp(got, j < 6 ? s[j] : zero, 16) == 0, what, 8 * t + j);
    }
}

static void check_update256_chain(void)
{
    uint8_t s[6][16], m[16], z[16], got[16];
    p6group g;
    fill(&s[0][0], sizeof s);
    pack6_bytes(&g, s);
    check_p6(&g, s, "AEGIS-256 pack/slot", 0);
    for (int t = 0; t < 200; t++) {
        for (int k = 0; k < 16; k++) {
            z[k] = (uint8_t)(s[1][k] ^ s[4][k] ^ s[5][k] ^ (s[2][k] & s[3][k]));
        }
        aesp_store(got, p6_keystream(&g));
        check(memcmp(got, z, 16) == 0, "AEGIS-256 keystream", t);
        fill(m, sizeof m);
        update256_ref(s, m);
        p6_update(&g, aesp_load(m));
        check_p6(&g, s, "AEGIS-256 Update", t);
    }
}

static void unhex16(uint8_t out[16], const char *h)
{
    for (int i = 0; i < 16; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

/* The draft's AEGIS-256 Update test vector (tests/vectors/aegis-draft.json, intermediate). */
static void check_update256_vector(void)
{
    static const char *const before[6] = {
        "1fa1207ed76c86f2c4bb40e8b395b43e", "b44c375e6c1e1978db64bcd12e9e332f",
        "0dab84bfa9f0226432ff630f233d4e5b", "d7ef65c9b93e8ee60c75161407b066e7",
        "a760bb3da073fbd92bdc24734b1f56fb", "a828a18d6a964497ac6e7e53c5f55c73"};
    static const char *const after[6] = {
        "e6bc643bae82dfa3d991b1b323839dcd", "648578232ba0f2f0a3677f617dc052c3",
        "ea788e0e572044a46059212dd007a789", "2f1498ae19b80da13fba698f088a8590",
        "a54c2ee95e8c2a2c3dae2ec743ae6b86", "a3240fceb68e32d5d114df1b5363ab67"};
    uint8_t s[6][16], want[6][16], m[16];
    p6group g;
    for (int j = 0; j < 6; j++) {
        unhex16(s[j], before[j]);
        unhex16(want[j], after[j]);
    }
    unhex16(m, "b165617ed04ab738afb2612c6d18a1ec");
    pack6_bytes(&g, s);
    p6_update(&g, aesp_load(m));
    check_p6(&g, want, "AEGIS-256 Update test vector", 0);
    update256_ref(s, m);
    check(memcmp(s, want, sizeof s) == 0, "AEGIS-256 Update test vector (byte reference)", 0);
}

int main(int argc, char **argv)
{
    broken = argc > 1 && strcmp(argv[1], "broken") == 0;
    for (int x = 0; x < 256; x++) {
        sbox_ref[x] = sbox_def((uint8_t)x);
    }
    if (sbox_ref[0] != 0x63 || sbox_ref[1] != 0x7c || sbox_ref[0x53] != 0xed) {
        fprintf(stderr, "FAIL: the reference S-box itself\n");
        return 1;
    }
    check_sbox();
    check_round();
    check_update_chain();
    check_update256_chain();
    check_update256_vector();
    printf("portable check (%s, %s loads): %ld checks, %d failures\n",
           AESP_VECTOR ? "vector" : "scalar", AESP_LE_MEMCPY ? "memcpy" : "bytewise", checks,
           failures);
    return failures != 0;
}
