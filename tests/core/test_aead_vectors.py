"""Known-answer tests of the native ciphers on every kernel this machine can run.

- every AEGIS-128L/128X2/128X4 vector of draft-irtf-cfrg-aegis-aead-18, both tag sizes, the
  must-fail ones rejected with InvalidTag;
- Project Wycheproof's AEGIS-128L file through AEGIS128L;
- Project Wycheproof's AES-GCM file through sealstore.AESGCM.

Kernels the CPU cannot run are listed as skipped parameters with the reason.
"""

from __future__ import annotations

import pytest

from aead_cases import (
    cipher_class,
    draft_aead_cases,
    kernel_matrix,
    load_wycheproof,
)
from sealstore import AESGCM
from sealstore.errors import InvalidTag

# run on the built wheel too (.ci/run, the 3.13 step); vectors: no dependency's version changes
# them (.ci/run's lowest-versions step leaves them out)
pytestmark = [pytest.mark.wheel, pytest.mark.vectors]


def h(s: str) -> bytes:
    return bytes.fromhex(s)


def _with_kernels(cases: list, variant_of) -> list:
    """Cross every case with its variant's kernel matrix (unrunnable kernels skipped)."""
    out = []
    for case in cases:
        variant = variant_of(case)
        for k, reason in kernel_matrix(variant):
            marks = list(case.marks) + ([pytest.mark.skip(reason=reason)] if reason else [])
            out.append(pytest.param(*case.values, k, id=f"{case.id}-{k}", marks=marks))
    return out


DRAFT_CASES = _with_kernels(draft_aead_cases(), lambda c: c.values[0]["alg"])


@pytest.mark.parametrize("vec,tag_size,kernel", DRAFT_CASES)
def test_draft18_vector(vec, tag_size, kernel):
    cipher = cipher_class(vec["alg"])(h(vec["key"]), tag_size=tag_size, kernel=kernel)
    assert cipher.kernel == kernel
    nonce, ad, ct = h(vec["nonce"]), h(vec["ad"]), h(vec["ct"])
    tag = h(vec["tag128" if tag_size == 16 else "tag256"])
    if vec["valid"]:
        msg = h(vec["msg"])
        assert cipher.encrypt(nonce, msg, ad) == ct + tag
        assert cipher.decrypt(nonce, ct + tag, ad) == msg
        out = bytearray(len(msg) + tag_size)
        assert cipher.encrypt_into(nonce, msg, ad, out) == len(out)
        assert bytes(out) == ct + tag
        back = bytearray(len(msg))
        assert cipher.decrypt_into(nonce, ct + tag, ad, back) == len(msg)
        assert bytes(back) == msg
    else:
        with pytest.raises(InvalidTag):
            cipher.decrypt(nonce, ct + tag, ad)
        back = bytearray(b"\xa5" * len(ct))
        with pytest.raises(InvalidTag):
            cipher.decrypt_into(nonce, ct + tag, ad, back)
        assert back == bytes(len(ct))


def _wycheproof_cases(name: str, label: str) -> list:
    data = load_wycheproof(name)
    out = []
    for group in data["testGroups"]:
        for t in group["tests"]:
            out.append(pytest.param(t, id=f"wycheproof-{label}-tc{t['tcId']}"))
    return out


#: (Wycheproof file, variant, algorithm field, key/iv/tag bits, number of tests)
WYCHEPROOF_AEGIS = [
    ("aegis128L_test.json", "AEGIS-128L", "AEGIS128L", (128, 128, 128), 479),
    ("aegis256_test.json", "AEGIS-256", "AEGIS256", (256, 256, 128), 472),
]
AEGIS_WP = [
    pytest.param(variant, *p.values, id=p.id, marks=p.marks)
    for name, variant, _, _, _ in WYCHEPROOF_AEGIS
    for p in _with_kernels(_wycheproof_cases(name, variant), lambda c, v=variant: v)
]


@pytest.mark.parametrize("name, variant, alg, sizes, count", WYCHEPROOF_AEGIS)
def test_wycheproof_aegis_files_are_what_we_expect(name, variant, alg, sizes, count):
    data = load_wycheproof(name)
    assert data["algorithm"] == alg
    groups = data["testGroups"]
    assert {(g["keySize"], g["ivSize"], g["tagSize"]) for g in groups} == {sizes}
    assert sum(len(g["tests"]) for g in groups) == data["numberOfTests"] == count


@pytest.mark.parametrize("variant,t,kernel", AEGIS_WP)
def test_wycheproof_aegis(variant, t, kernel):
    cipher = cipher_class(variant)(h(t["key"]), kernel=kernel)
    nonce, ad, msg, ct, tag = (h(t[k]) for k in ("iv", "aad", "msg", "ct", "tag"))
    assert t["result"] in ("valid", "invalid")  # the files have no "acceptable" AEGIS tests
    if t["result"] == "valid":
        assert cipher.encrypt(nonce, msg, ad) == ct + tag
        assert cipher.decrypt(nonce, ct + tag, ad) == msg
    else:
        with pytest.raises(InvalidTag):
            cipher.decrypt(nonce, ct + tag, ad)


def _gcm_iv_ok(iv_len: int) -> bool:
    """Whether cryptography's AESGCM takes a nonce of this length (it takes 8..128 bytes)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM as Ref

    try:
        Ref(bytes(16)).encrypt(bytes(iv_len), b"", None)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("t", _wycheproof_cases("aes_gcm_test.json", "AES-GCM"))
def test_wycheproof_aesgcm(t):
    key, nonce, ad, msg, ct, tag = (h(t[k]) for k in ("key", "iv", "aad", "msg", "ct", "tag"))
    cipher = AESGCM(key)
    if not _gcm_iv_ok(len(nonce)):
        with pytest.raises(ValueError):
            cipher.encrypt(nonce, msg, ad)
        with pytest.raises(ValueError):
            cipher.decrypt(nonce, ct + tag, ad)
    elif t["result"] == "valid":
        assert cipher.encrypt(nonce, msg, ad) == ct + tag
        assert cipher.decrypt(nonce, ct + tag, ad) == msg
    else:
        assert t["result"] == "invalid"
        with pytest.raises(InvalidTag):
            cipher.decrypt(nonce, ct + tag, ad)
