"""Generate the frozen AEGIS-256 sealed-object vectors (run once; never regenerate: they pin
format v1 for the AEGIS-256 suites, added after objects-v1.json was frozen).

python tests/vectors/objects/make_objects_aegis256.py > tests/vectors/objects/objects-v1-aegis256.json
"""

import json
import os

from sealstore import stream as S
from sealstore.keyring import Key, Keyring

CASES = [
    ("AEGIS-256X4", 32, 1024, 2500),
    ("AEGIS-256X2", 16, 1024, 1024),
    ("AEGIS-256", 32, 1024, 700),
]

out = []
for suite, tag, seg, n in CASES:
    material = os.urandom(32)
    key_id = int.from_bytes(os.urandom(4), "big")
    keyring = Keyring([Key(key_id, suite, material, state="primary")], tag_size=tag)
    plaintext = bytes(i * 7 % 251 for i in range(n))
    context = b"sealstore/vectors" if suite == "AEGIS-256" else b""
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
