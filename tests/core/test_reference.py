"""The pure-Python AEGIS oracle (tests/reference/aegis_ref.py) against the draft's vectors.

Every other AEAD test trusts this oracle, so it is checked here on its own: the AESRound,
Update and Initial State intermediate values, then every AEGIS-128L/128X2/128X4 vector of
draft-irtf-cfrg-aegis-aead-18 with both tag sizes, including the must-fail ones.
"""

from __future__ import annotations

import pytest

from aead_cases import draft_aead_cases, load_draft
from reference import aegis_ref as ref

# run on the built wheel too (.ci/run, the 3.13 step); vectors: no dependency's version changes
# them (.ci/run's lowest-versions step leaves them out)
pytestmark = [pytest.mark.wheel, pytest.mark.vectors]

DRAFT = load_draft()
INTER = DRAFT["intermediate"]


def h(s: str) -> bytes:
    return bytes.fromhex(s)


def _blk(s: str) -> int:
    return int.from_bytes(h(s), "little")


@pytest.mark.parametrize("case", INTER["aesround"], ids=lambda c: "draft18-AESRound")
def test_aes_round(case):
    out = ref.aes_round(_blk(case["in"]), _blk(case["rk"]))
    assert out.to_bytes(16, "little").hex() == case["out"]


def test_aes_round_sbox_is_the_aes_sbox():
    # FIPS-197 figure 7 spot values, independent of the draft's single AESRound vector.
    spots = {0x00: 0x63, 0x01: 0x7C, 0x53: 0xED, 0xFF: 0x16}
    assert {x: ref.SBOX[x] for x in spots} == spots
    assert sorted(ref.SBOX) == list(range(256))


UPDATE_128L = [u for u in INTER["update"] if u["alg"] == "AEGIS-128L"]


@pytest.mark.parametrize("case", UPDATE_128L, ids=lambda c: "draft18-AEGIS-128L-Update")
def test_update(case):
    st = ref.State(1, [[_blk(case["state_before"][f"S{j}"])] for j in range(8)])
    st.update([_blk(case["msg_blocks"]["M0"])], [_blk(case["msg_blocks"]["M1"])])
    got = {f"S{j}": st.v[j][0].to_bytes(16, "little").hex() for j in range(8)}
    assert got == case["state_after"]


UPDATE_256 = [u for u in INTER["update"] if u["alg"] == "AEGIS-256"]


@pytest.mark.parametrize("case", UPDATE_256, ids=lambda c: "draft18-AEGIS-256-Update")
def test_update_256(case):
    st = ref.State256(1, [[_blk(case["state_before"][f"S{j}"])] for j in range(6)])
    st.update([_blk(case["msg_blocks"]["M"])])
    got = {f"S{j}": st.v[j][0].to_bytes(16, "little").hex() for j in range(6)}
    assert got == case["state_after"]


def test_every_intermediate_vector_is_checked():
    # a vector of a variant the oracle does not know would otherwise be skipped silently
    assert len(UPDATE_128L) + len(UPDATE_256) == len(INTER["update"]) == 2
    assert {c["alg"] for c in INTER["initial_state"]} <= set(ref.DEGREE)


@pytest.mark.parametrize(
    "case", INTER["initial_state"], ids=lambda c: f"draft18-{c['alg']}-InitialState"
)
def test_initial_state(case):
    d = ref.DEGREE[case["alg"]]
    for i in range(d):
        assert case["ctx"][f"ctx[{i}]"] == (bytes([i, d - 1]) + bytes(14)).hex()
    cls = ref.State256 if ref.KEY_SIZE[case["alg"]] == 32 else ref.State
    st = cls.init(d, h(case["key"]), h(case["nonce"]))
    words = len(st.v)
    got = {
        f"V[{j},{i}]": st.v[j][i].to_bytes(16, "little").hex()
        for j in range(words)
        for i in range(d)
    }
    assert got == case["state_after_init"]


@pytest.mark.parametrize("vec,tag_size", draft_aead_cases())
def test_draft_vector(vec, tag_size):
    key, nonce, ad, ct = h(vec["key"]), h(vec["nonce"]), h(vec["ad"]), h(vec["ct"])
    tag = h(vec["tag128" if tag_size == 16 else "tag256"])
    if vec["valid"]:
        msg = h(vec["msg"])
        assert ref.encrypt(vec["alg"], key, nonce, msg, ad, tag_size) == (ct, tag)
        assert ref.decrypt(vec["alg"], key, nonce, ct, tag, ad) == msg
    else:
        assert ref.decrypt(vec["alg"], key, nonce, ct, tag, ad) is None


@pytest.mark.parametrize("variant", sorted(ref.DEGREE))
@pytest.mark.parametrize("length", [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300])
def test_round_trip_and_forgery(variant, length):
    size = ref.KEY_SIZE[variant]
    key, nonce = bytes(range(size)), bytes(range(size, 2 * size))
    msg, ad = bytes((7 * i) & 0xFF for i in range(length)), b"ad" * (length % 5)
    for tag_size in (16, 32):
        ct, tag = ref.encrypt(variant, key, nonce, msg, ad, tag_size)
        assert len(ct) == length and len(tag) == tag_size
        assert ref.decrypt(variant, key, nonce, ct, tag, ad) == msg
        bad = bytes([tag[0] ^ 1]) + tag[1:]
        assert ref.decrypt(variant, key, nonce, ct, bad, ad) is None
        if length:
            bad_ct = ct[:-1] + bytes([ct[-1] ^ 0x80])
            assert ref.decrypt(variant, key, nonce, bad_ct, tag, ad) is None


def test_variants_differ():
    msg = bytes(64)
    outs = {
        ref.encrypt(v, bytes(ref.KEY_SIZE[v]), bytes(ref.KEY_SIZE[v]), msg, b"", 16)
        for v in ref.DEGREE
    }
    assert len(outs) == len(ref.DEGREE) == 6
