"""No secret in any ``repr``/``str`` (issue 27): a database URL's password (in the user-info
part or in the query string), a KMS endpoint's credentials, key material, wrapped keys and
object keys stay out of the reprs of the config, its models, the key sources, the wrappers,
the keys and keyrings, the S3 sealing state and the object ciphers, and out of the messages of
configuration errors."""

from __future__ import annotations

import base64
import json

import pytest

from sealstore.config import DatabaseKeySourceConfig, SealstoreConfig, load_config
from sealstore.errors import ConfigError
from sealstore.keyring import Key, Keyring, KeyState
from sealstore.keysources.file import KeyFile
from sealstore.redact import MASK, mask_url
from sealstore.stream import ObjectCipher
from sealstore.wrapping import MasterKeyWrapper
from sealstore.wrapping.kms import KmsWrapper

PASSWORD = "hunter2-Pa55w0rd"
MATERIAL = bytes.fromhex("a11ce5" * 10 + "b0b5")
MASTER = bytes.fromhex("c0ffee" * 10 + "5ec2")


def secret_forms() -> list[str]:
    out = [PASSWORD]
    for raw in (MATERIAL, MASTER):
        out += [raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode(), repr(raw)[2:-1]]
    return out


def assert_clean(*objects: object) -> None:
    for obj in objects:
        for text in (repr(obj), str(obj)):
            for form in secret_forms():
                assert form not in text, f"{type(obj).__name__}: {text[:200]}"


URLS = [
    f"postgresql+psycopg://app:{PASSWORD}@db.example:5432/app",
    f"postgresql+psycopg://app@db.example/app?password={PASSWORD}&sslmode=require",
    f"postgresql+psycopg://app@db.example/app?sslpassword={PASSWORD}",
    f"mysql+pymysql://app:{PASSWORD}@db.example/app?charset=utf8mb4",
    f"postgresql+psycopg://app:{PASSWORD.replace('-', '/')}@db.example/app",  # unescaped /
    f"postgresql+psycopg://app:{PASSWORD}@x@db.example/app",  # unescaped @
]


@pytest.mark.parametrize("url", URLS)
def test_mask_url(url):
    masked = mask_url(url)
    assert PASSWORD not in masked and PASSWORD.replace("-", "/") not in masked
    assert MASK in masked
    assert masked.startswith(url.split("://")[0] + "://app")
    assert "db.example" in masked


@pytest.mark.parametrize(
    "url",
    ["sqlite:///relative.db", "sqlite:////abs/path.db?mode=ro", "sqlite://",
     "postgresql+psycopg://app@db.example:5432/app?sslmode=require", "http://localhost:4566"],
)  # fmt: skip
def test_mask_url_leaves_urls_without_secrets_as_they_are(url):
    assert mask_url(url) == url


def database_config(url: str, endpoint: str | None = None) -> SealstoreConfig:
    wrapping = {"type": "aws-kms", "kms_key_id": "alias/k"}
    if endpoint:
        wrapping["endpoint_url"] = endpoint
    return SealstoreConfig.model_validate(
        {"key_source": {"type": "database", "url": url, "wrapping": wrapping}}
    )


@pytest.mark.parametrize("url", URLS)
def test_config_repr_and_str_mask_the_password(url):
    cfg = database_config(url, endpoint=f"http://AKIAEXAMPLE:{PASSWORD}@localhost:4566")
    assert_clean(cfg, cfg.key_source, cfg.key_source.wrapping)
    assert "db.example" in repr(cfg) and MASK in str(cfg.key_source)
    # the value itself is intact: the key source connects with it
    assert cfg.key_source.url == url
    assert json.loads(cfg.model_dump_json())["key_source"]["url"] == url


def test_config_from_a_file_and_the_environment(tmp_path):
    path = tmp_path / "sealstore.toml"
    path.write_text(
        f'[key_source]\ntype = "database"\nurl = "{URLS[0]}"\n'
        '[key_source.wrapping]\ntype = "aws-kms"\nkms_key_id = "alias/k"\n'
    )
    path.chmod(0o600)
    cfg = load_config(path, env={})
    assert_clean(cfg, cfg.key_source)
    cfg = load_config(
        env={
            "SEALSTORE_KEY_SOURCE__TYPE": "database",
            "SEALSTORE_KEY_SOURCE__URL": URLS[1],
            "SEALSTORE_KEY_SOURCE__WRAPPING__TYPE": "master-key",
            "SEALSTORE_KEY_SOURCE__WRAPPING__PATH": str(tmp_path / "m.key"),
        }
    )
    assert_clean(cfg, cfg.key_source)


def test_config_errors_show_no_input_value():
    bad = [
        {"key_source": {"type": "database", "url": URLS[0], "wrapping": {"type": "none"}}},
        {"key_source": {"type": "database", "url": URLS[0]}, "extra": URLS[0]},
        {"key_source": {"type": "database", "url": URLS[0], "wrapping": {"type": "aws-kms"}},
         "tag_size": PASSWORD},
    ]  # fmt: skip
    for data in bad:
        with pytest.raises(Exception) as err:
            SealstoreConfig.model_validate(data)
        assert PASSWORD not in str(err.value) and PASSWORD not in repr(err.value)
    env = {"SEALSTORE_KEY_SOURCE__TYPE": "database", "SEALSTORE_KEY_SOURCE__URL": URLS[0]}
    with pytest.raises(ConfigError) as err:
        load_config(env={**env, "SEALSTORE_TAG_SIZE": PASSWORD})
    assert PASSWORD not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


@pytest.mark.filterwarnings("ignore:Query string argument:Warning")  # pysqlite ignores it
def test_database_key_source_repr_str_and_messages(tmp_path):
    from sealstore.errors import KeySourceError
    from sealstore.keysources.database import DatabaseKeySource

    wrapper = MasterKeyWrapper(MASTER)
    for url in URLS[:4]:
        src = DatabaseKeySource(url, wrapper)
        assert_clean(src, wrapper, src.engine, src.engine.url)  # the Engine's own repr too
        assert "db.example" in repr(src)
    # a missing table: the message names the source (masked)
    src = DatabaseKeySource(f"sqlite:///{tmp_path / 'k.db'}?password={PASSWORD}", wrapper)
    with pytest.raises(KeySourceError) as err:
        src.load()
    assert PASSWORD not in str(err.value) and "k.db" in str(err.value)
    src = DatabaseKeySourceConfig(type="database", url=URLS[0], wrapping={"type": "aws-kms",
                                  "kms_key_id": "alias/k"})  # fmt: skip
    assert_clean(src)


def test_keys_keyrings_wrappers_and_sources(tmp_path):
    key = Key(7, "AEGIS-256X4", MATERIAL, state=KeyState.PRIMARY)
    ring = Keyring([key])
    master_path = tmp_path / "master.key"
    master_path.write_text(base64.b64encode(MASTER).decode())
    master_path.chmod(0o600)
    master = MasterKeyWrapper.from_file(master_path)
    kms = KmsWrapper("alias/k", client=object())
    source = KeyFile(tmp_path / "keys.json", master)
    stored = source.init()
    objects = [key, ring, master, MasterKeyWrapper(MASTER), kms, source, stored, *stored.keys]
    assert_clean(*objects)
    cipher = ObjectCipher.create(ring)
    assert_clean(cipher, cipher.header)
    stored.close()


def test_s3_sealing_and_encrypted_client(tmp_path):
    boto3 = pytest.importorskip("boto3")
    from sealstore.adapters.s3 import encrypt_client

    ring = Keyring([Key(7, "AEGIS-128X4", MATERIAL, state=KeyState.PRIMARY)])
    client = boto3.client(
        "s3",
        region_name="us-east-1",
        endpoint_url="http://localhost:9",
        aws_access_key_id="AKIAEXAMPLE",
        aws_secret_access_key=PASSWORD,
    )
    client = encrypt_client(client, ring, passthrough=True)
    assert_clean(client, client.sealstore, client.meta.events)


def test_database_key_source_passes_a_query_password_to_the_driver():
    """The ``?password=`` leaves ``engine.url`` (whose repr SQLAlchemy masks only in the
    user-info part) and reaches the driver as the same keyword argument."""
    from sqlalchemy import event

    from sealstore.keysources.database import DatabaseKeySource

    src = DatabaseKeySource(URLS[1], MasterKeyWrapper(MASTER))
    seen: dict = {}

    @event.listens_for(src.engine, "do_connect")
    def capture(dialect, conn_rec, cargs, cparams):
        seen.update(cparams)
        raise ConnectionAbortedError  # nothing is sent anywhere

    with pytest.raises(Exception):
        src.engine.connect()
    assert seen["password"] == PASSWORD and seen["sslmode"] == "require"
    assert "password" not in src.engine.url.query


def test_object_engine_gcs_and_tenant_classes(tmp_path):
    """The classes added since: the object engine's (sealing, opened objects, the in-memory
    store, tenancy and bindings), the GCS sealing and store (a client with a secret-bearing
    credential), the tenants' store, live keys and KMS wrapping.  An object's context and a
    resumable session's URL are secrets too."""
    pytest.importorskip("google.cloud.storage")
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from sealstore.adapters.gcs import encrypt_client
    from sealstore.adapters.gcs.store import GCSStore, _Session
    from sealstore.adapters.objects import MemoryStore, ObjectSealing
    from sealstore.adapters.objects.tenancy import ObjectBinding, ObjectTenancy
    from sealstore.tenants import KmsTenantWrapping, TenantKeys, TenantStore

    context = b"CONTEXT-" + PASSWORD.encode()
    ring = Keyring([Key(7, "AEGIS-128X4", MATERIAL, state=KeyState.PRIMARY)])
    store = MemoryStore()
    store.create_bucket("b")
    sealing = ObjectSealing(ring, context=context, segment_size=1024)
    sealing.seal(store, "b", "k", b"PLAINTEXT-" + PASSWORD.encode())
    opened = sealing.open(store, "b", "k")
    tenancy = ObjectTenancy(tenant="acme", prefix="t/{tenant}/")
    binding = ObjectBinding(ring, context, "acme")
    client = storage.Client(project="p", credentials=AnonymousCredentials())
    gcs = encrypt_client(client, ring, context=context)
    session = _Session(f"https://storage.example/upload?upload_id={PASSWORD}")
    tenants = TenantStore(tmp_path / "tenants")
    live = TenantKeys(tenants)
    live.register("acme", ring, Keyring([Key(8, "AEGIS-128X4", MASTER, state=KeyState.PRIMARY)]))
    kms = KmsTenantWrapping(object())
    objects = [sealing, opened, store, tenancy, binding, gcs, gcs.sealstore, GCSStore(client)]
    objects += [session, tenants, live, kms, store.head("b", "k")]
    for obj in objects:
        for text in (repr(obj), str(obj)):
            assert "CONTEXT-" not in text and "PLAINTEXT-" not in text, text[:200]
    assert_clean(*objects)
    assert opened.read() == b"PLAINTEXT-" + PASSWORD.encode()
    live.close()
