"""Print the AEAD vectors of a draft-18 JSON file, for the suite registry's native variants,
as plain text lines for the C drivers in ``tests/native/`` (which have no JSON parser).

One line per (vector, tag size)::

    ALG TAGBYTES VALID KEY NONCE AD MSG CT TAG

hex fields, ``-`` for an empty or absent field, VALID 1 or 0.  ``--wycheproof`` appends
Project Wycheproof's cases for the variants it has a file for (AEGIS-128L: 479 cases,
AEGIS-256: 472; the "invalid" ones checked as must-fail decryptions).  Usage::

    python tools/kat_vectors.py [--wycheproof] [tests/vectors/aegis-draft.json] > vectors.txt
"""

from __future__ import annotations

import json
import os
import sys

from sealstore.suites import by_native_variant, native_variants

ALGS = native_variants()  # the suites the C library runs (the vector file has more)
VECTORS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "vectors"
)
DEFAULT = os.path.join(VECTORS, "aegis-draft.json")
#: Wycheproof file -> the variant it tests
WYCHEPROOF = {"aegis128L_test.json": "AEGIS-128L", "aegis256_test.json": "AEGIS-256"}


def lines(path: str = DEFAULT) -> list[str]:
    with open(path) as f:
        doc = json.load(f)
    out = []
    for v in doc["vectors"]:
        if v.get("kind") != "aead" or v["alg"] not in ALGS:
            continue
        for size, field in ((16, "tag128"), (32, "tag256")):
            if not v.get(field):
                continue
            cols = [v["alg"], str(size), "1" if v["valid"] else "0"]
            cols += [v.get(name) or "-" for name in ("key", "nonce", "ad", "msg", "ct")]
            cols.append(v[field])
            out.append(" ".join(cols))
    return out


def wycheproof_lines(directory: str = os.path.join(VECTORS, "wycheproof")) -> list[str]:
    """The Wycheproof cases of every file in WYCHEPROOF whose variant the C library runs.

    Every group must use the sizes the C drivers take (the variant's key and nonce sizes, a
    16- or 32-byte tag) and every result be "valid" or "invalid": anything else is an error,
    not a skip."""
    out = []
    for name, alg in WYCHEPROOF.items():
        if alg not in ALGS:
            continue
        spec = by_native_variant(alg)
        sizes = (8 * spec.key_size, 8 * spec.nonce_size)
        with open(os.path.join(directory, name)) as f:
            doc = json.load(f)
        for group in doc["testGroups"]:
            if (group["keySize"], group["ivSize"]) != sizes or group["tagSize"] not in (128, 256):
                raise ValueError(f"{name}: a test group the C drivers cannot take")
            for t in group["tests"]:
                if t["result"] not in ("valid", "invalid"):
                    raise ValueError(f"{name} tc{t['tcId']}: result {t['result']!r}")
                cols = [alg, str(group["tagSize"] // 8), "1" if t["result"] == "valid" else "0"]
                cols += [t[k] or "-" for k in ("key", "iv", "aad", "msg", "ct", "tag")]
                out.append(" ".join(cols))
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    wp = "--wycheproof" in args
    args = [a for a in args if a != "--wycheproof"]
    print("\n".join(lines(*args[:1]) + (wycheproof_lines() if wp else [])))
