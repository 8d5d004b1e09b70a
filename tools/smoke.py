"""Smoke test of an installed sealstore on one Python: import, an AEGIS round trip on every
variant, a TOML config file, one encrypted column on SQLite, one S3 object over HTTP on moto.

    python tools/smoke.py        (needs sealstore[sqlalchemy,s3] and moto[server] installed;
                                  run outside the tree)

.ci/run installs the sdist on every Python the package claims (3.10, 3.12, 3.13 besides the
3.11 of the main run) and runs this there, and on the repaired manylinux wheel
(tools/wheel.sh); cibuildwheel runs it on every wheel it builds ([tool.cibuildwheel]).  Exit 0 and one line per check, or a traceback.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile


def check_import() -> str:
    import sealstore

    where = os.path.dirname(sealstore.__file__)
    if os.path.exists(os.path.join(os.getcwd(), "plugin", "__init__.py")):
        raise SystemExit(
            "run the smoke test outside the source tree (it must test the installed package)"
        )
    return f"sealstore {sealstore.__version__} from {where}, kernels {sealstore.native.info()['selected']}"


def check_aead() -> str:
    from sealstore.errors import InvalidTag
    from sealstore.suites import SUITES

    native = [s for s in SUITES if s.native_variant is not None]
    for s in native:
        c = s.cipher(s.cipher.generate_key(), tag_size=32)
        nonce, data = os.urandom(s.nonce_size), os.urandom(1000)
        ct = c.encrypt(nonce, data, b"ad")
        assert c.decrypt(nonce, ct, b"ad") == data
        try:
            c.decrypt(nonce, ct, b"other")
        except InvalidTag:
            pass
        else:
            raise AssertionError(f"{s.cipher.__name__} opened under the wrong associated data")
    return f"{'/'.join(s.label for s in native)} round trips, wrong AD refused"


def check_config() -> str:
    from sealstore.config import load_config

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sealstore.toml")
        with open(path, "w") as f:
            f.write(
                'suite = "aegis-128l"\ntag_size = 16\n[key_source]\ntype = "file"\npath = "keys.json"\n'
            )
        cfg = load_config(path, env={})
    assert cfg.suite == "AEGIS-128L" and cfg.tag_size == 16, cfg
    return "TOML config file loaded"


def check_column() -> str:
    from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, select

    from sealstore import Keyring
    from sealstore.adapters.sqlalchemy import EncryptedString
    from sealstore.keyring import forget_keyring, use_keyring

    use_keyring(Keyring.generate())
    try:
        with tempfile.TemporaryDirectory() as tmp:
            engine = create_engine(f"sqlite:///{tmp}/smoke.db")
            md = MetaData()
            t = Table(
                "people",
                md,
                Column("id", Integer, primary_key=True),
                Column("ssn", EncryptedString(32)),
            )
            md.create_all(engine)
            with engine.begin() as conn:
                conn.execute(insert(t), [{"id": 1, "ssn": "123-45-6789"}])
                raw = conn.exec_driver_sql("SELECT ssn FROM people").scalar_one()
                assert b"123-45-6789" not in bytes(raw), "plaintext stored"
                assert conn.execute(select(t.c.ssn)).scalar_one() == "123-45-6789"
            engine.dispose()
    finally:
        forget_keyring()
    return "encrypted column on SQLite: sealed at rest, opened on select"


def check_s3() -> str:
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    from sealstore import Keyring
    from sealstore.adapters.s3 import encrypt_client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:

        def client():
            return boto3.client(
                "s3",
                endpoint_url=f"http://127.0.0.1:{port}",
                region_name="us-east-1",
                aws_access_key_id="smoke",
                aws_secret_access_key="smoke",
            )

        plain = client()
        plain.create_bucket(Bucket="smoke")
        sealed = encrypt_client(client(), Keyring.generate())
        data = os.urandom(300_000) + b"secret marker"
        sealed.put_object(Bucket="smoke", Key="o", Body=data)
        stored = plain.get_object(Bucket="smoke", Key="o")["Body"].read()
        assert b"secret marker" not in stored, "plaintext stored"
        assert sealed.get_object(Bucket="smoke", Key="o")["Body"].read() == data
    finally:
        server.stop()
    return "S3 object over HTTP on moto: sealed at rest, opened on get"


def main() -> int:
    print(f"Python {sys.version.split()[0]} ({sys.executable})")
    for check in (check_import, check_aead, check_config, check_column, check_s3):
        print(f"ok  {check.__name__[6:]}: {check()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
