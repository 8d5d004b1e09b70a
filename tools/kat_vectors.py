"""Print the AEGIS-128L/128X2/128X4 AEAD vectors of a draft-18 JSON file as plain text lines
for the C drivers in ``tests/native/`` (which have no JSON parser).

One line per (vector, tag size)::

    ALG TAGBYTES VALID KEY NONCE AD MSG CT TAG

hex fields, ``-`` for an empty or absent field, VALID 1 or 0.  Usage::

    python tools/kat_vectors.py [tests/vectors/aegis-draft.json] > vectors.txt
"""

from __future__ import annotations

import json
import os
import sys

from sealstore.suites import native_variants

ALGS = native_variants()  # the suites the C library runs (the vector file has more)
DEFAULT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "tests",
    "vectors",
    "aegis-draft.json",
)


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


if __name__ == "__main__":
    print("\n".join(lines(*sys.argv[1:2])))
