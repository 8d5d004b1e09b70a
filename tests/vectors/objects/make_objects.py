"""Generate the frozen sealed-object vectors (run once; never regenerate: they pin format v1).

python tests/vectors/objects/make_objects.py > tests/vectors/objects/objects-v1.json
"""

import json
import os

from sealstore import stream as S
from sealstore.keyring import Key, Keyring

CASES = [
    ("AEGIS-128X4", 32, 1024, 2500),
    ("AEGIS-128L", 16, 1024, 2048),
    ("AES-256-GCM", 16, 1024, 700),
]

out = []
for suite, tag, seg, n in CASES:
    material = os.urandom(32)
    key_id = int.from_bytes(os.urandom(4), "big")
    keyring = Keyring([Key(key_id, suite, material, state="primary")], tag_size=tag)
    plaintext = bytes(i * 7 % 251 for i in range(n))
    context = b"sealstore/vectors" if suite == "AEGIS-128L" else b""
    sealed = b"".join(S.seal_stream(plaintext, keyring, segment_size=seg, context=context))
    out.append(
        {
            "suite": suite,
            "tag_size": tag,
            "segment_size": seg,
            "key_id": f"{key_id:08x}",
            "material": material.hex(),
            "context": context.hex(),
            "plaintext": plaintext.hex(),
            "sealed": sealed.hex(),
        }
    )
print(json.dumps(out, indent=1))
