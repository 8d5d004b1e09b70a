"""Generate the frozen sealed-value vectors (format v1).  Run ONCE; never regenerate.

    python tests/vectors/golden/make_golden.py

Writes one ``<suite>.json`` per suite beside this script and refuses to overwrite an existing
file: the point of these vectors is that values sealed by an old release keep opening, so a
format change must add files (e.g. for a new version byte), never rewrite these.
Each vector records the key material, key id, context, plaintext, the derived subkey and the
sealed value; ``tests/core/test_format.py`` opens them through the Keyring and through the recipe
documented in ``docs/FORMAT.md``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sealstore.format import Suite, column_context, tag_sizes
from sealstore.keyring import Key, Keyring, KeyState

HERE = Path(__file__).parent
CONTEXTS = [b"", column_context("users", "email"), column_context("users", "ssn", row=42)]
PLAINTEXTS = [b"", b"hello, sealstore", bytes(range(100)), bytes(i * 7 % 256 for i in range(300))]


def main() -> int:
    for suite in Suite:
        out = HERE / f"{str(suite).lower()}.json"
        if out.exists():
            print(f"{out} exists: golden vectors are frozen, not regenerated", file=sys.stderr)
            continue
        material = hashlib.sha256(b"sealstore golden material " + str(suite).encode()).digest()
        key_id = 0x5EA10000 | int(suite)
        vectors = []
        for tag in tag_sizes(suite):
            ring = Keyring(
                [Key(key_id, suite, material, state=KeyState.PRIMARY)],
                tag_size=tag,
                adaptive_threshold=0,  # freeze each suite as itself, small values included
            )
            header = ring.seal(b"")[:7]
            length = suite.spec.key_size
            subkey = HKDF(hashes.SHA256(), length, None, b"sealstore/v1/subkey" + header).derive(
                material
            )
            for i, plaintext in enumerate(PLAINTEXTS):
                context = CONTEXTS[i % len(CONTEXTS)]
                vectors.append(
                    {
                        "suite": str(suite),
                        "tag_size": tag,
                        "key_id": f"{key_id:08x}",
                        "material": material.hex(),
                        "subkey": subkey.hex(),
                        "context": context.hex(),
                        "plaintext": plaintext.hex(),
                        "sealed": ring.seal(plaintext, context).hex(),
                    }
                )
        doc = {"format_version": 1, "suite": str(suite), "vectors": vectors}
        out.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {out} ({len(vectors)} vectors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
