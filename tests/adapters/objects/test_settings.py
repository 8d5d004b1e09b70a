"""``ObjectSettings.of`` takes exactly the settings keywords of every store's ``encrypt_client``
(the one list an adapter forwards; a keyword added to one and not the others fails here), and
each encrypted client's sealing holds the record it was built from."""

from __future__ import annotations

import importlib
import inspect

import pytest
from sealstore.adapters.objects.engine import ObjectSettings


def _keywords(fn) -> dict[str, object]:
    return {
        name: p.default
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


@pytest.mark.parametrize("adapter", ["s3", "gcs"])
def test_encrypt_client_keywords_are_the_settings(adapter):
    module = importlib.import_module(f"sealstore.adapters.{adapter}")
    assert _keywords(module.encrypt_client) == _keywords(ObjectSettings.of)


def test_an_encrypted_s3_client_holds_its_settings():
    import boto3
    from sealstore.adapters.s3 import encrypt_client
    from sealstore.keyring import Keyring

    client = boto3.client(
        "s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    encrypt_client(client, Keyring.generate("AEGIS-128L", 16), segment_size=4096, context=b"c")
    sealing = client.sealstore
    assert sealing.settings == ObjectSettings(segment_size=4096, context=b"c")
    assert sealing.engine.settings is sealing.settings
    assert (sealing.segment_size, sealing.context, sealing.bind_location) == (4096, b"c", True)
    with pytest.raises(ValueError, match="segment_size"):
        encrypt_client(boto3.client("s3", region_name="us-east-1"), sealing.keyring,
                       segment_size=1000)  # fmt: skip
