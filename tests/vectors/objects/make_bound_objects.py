"""Generate the frozen vectors of objects bound to a location (header flag bit 1).

Run once; never regenerate (they pin the bound-object encoding of format v1):

python tests/vectors/objects/make_bound_objects.py > tests/vectors/objects/objects-v1-bound.json

``location`` is the S3 encoding of ("vectors-bucket", "alice/report.bin")
(``sealstore.adapters.s3.location.object_location``), written out here so the vectors do not
depend on the adapter.
"""

import json
import os

from sealstore import stream as S
from sealstore.keyring import Key, Keyring


def _lp(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


LOCATION = _lp(b"sealstore/v1/s3-object") + _lp(b"vectors-bucket") + _lp(b"alice/report.bin")
CASES = [
    ("AEGIS-128X4", 32, 1024, 2500, b""),
    ("AEGIS-128L", 16, 1024, 2048, b"sealstore/vectors"),
    ("AES-256-GCM", 16, 1024, 700, b""),
]

out = []
for suite, tag, seg, n, context in CASES:
    material = os.urandom(32)
    key_id = int.from_bytes(os.urandom(4), "big")
    keyring = Keyring([Key(key_id, suite, material, state="primary")], tag_size=tag)
    plaintext = bytes(i * 7 % 251 for i in range(n))
    sealed = b"".join(
        S.seal_stream(plaintext, keyring, segment_size=seg, context=context, location=LOCATION)
    )
    out.append(
        {
            "suite": suite,
            "tag_size": tag,
            "segment_size": seg,
            "key_id": f"{key_id:08x}",
            "material": material.hex(),
            "context": context.hex(),
            "location": LOCATION.hex(),
            "plaintext": plaintext.hex(),
            "sealed": sealed.hex(),
        }
    )
print(json.dumps(out, indent=1))
