"""Every log record of every logger -- sealstore's, botocore's, urllib3's, moto's -- with DEBUG
on everywhere, over a KMS-wrapped keyring's whole life, carries no key material (raw, hex,
base64), no plaintext and no password: in its formatted message, its arguments, its exception
text or its stack (issue 27).  botocore logs KMS request parameters and response bodies at
DEBUG; sealstore.logguard withholds the records libraries make during a sealstore KMS call."""

from __future__ import annotations

import base64
import logging
import threading

import boto3
import pytest
import sqlalchemy  # noqa: F401 - its loggers exist before the fixture turns every logger on
from moto import mock_aws

from sealstore import logguard
from sealstore.errors import KeySourceError
from sealstore.keysources.file import KeyFile
from sealstore.wrapping import MasterKeyWrapper
from sealstore.wrapping.kms import KmsWrapper

PLAINTEXTS = [b"plaintext-of-the-log-test-%03d" % i for i in range(5)]


def forms(secret: bytes) -> list[str]:
    """The ways ``secret`` (or a 16-byte run of it) could show up in text."""
    raw = bytes(secret)
    out = [raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode(), repr(raw)[2:-1]]
    if len(raw) >= 16:
        out += [raw[:16].hex(), base64.b64encode(raw[:15]).decode(), repr(raw[:16])[2:-1]]
        out += [base64.b64encode(raw[i : i + 15]).decode() for i in (1, 2)]  # other alignments
    return [f for f in out if len(f) >= 16]


class Everything(logging.Handler):
    """Formats each record as a handler would (message with its arguments, exception text,
    stack) and keeps the record's arguments and extra attributes too."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.records: list[logging.LogRecord] = []
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.texts.append(self.format(record))
        args = record.args if isinstance(record.args, tuple) else (record.args,)
        for a in args:
            self.texts += [repr(a), str(a)]
            if isinstance(a, (bytes, bytearray, memoryview)):
                self.texts.append(bytes(a).hex())
        self.texts += [repr(v) for v in vars(record).values()]


@pytest.fixture
def everything():
    """Root at DEBUG, every logger on, one handler that keeps everything; logging restored."""
    root = logging.getLogger()
    level, factory = root.level, logging.getLogRecordFactory()
    disabled = {
        n: lg.disabled
        for n, lg in logging.Logger.manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    levels = {n: logging.getLogger(n).level for n in disabled}
    for n in disabled:
        logging.getLogger(n).disabled = False
        logging.getLogger(n).setLevel(logging.NOTSET)
    handler = Everything()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        logging.setLogRecordFactory(factory)
        for n, d in disabled.items():
            logging.getLogger(n).disabled = d
            logging.getLogger(n).setLevel(levels[n])


def spy(client) -> list[bytes]:
    """Every plaintext key that passes through ``client``: GenerateDataKey's and Decrypt's
    ``Plaintext`` and Encrypt's request ``Plaintext``."""
    seen: list[bytes] = []

    def request(params, **kw):
        if "Plaintext" in params:
            seen.append(bytes(params["Plaintext"]))

    def response(parsed, **kw):
        if isinstance(parsed, dict) and "Plaintext" in parsed:
            seen.append(bytes(parsed["Plaintext"]))

    client.meta.events.register("before-parameter-build.kms.*", request)
    client.meta.events.register("after-call.kms.*", response)
    return seen


def assert_clean(texts: list[str], secrets: list[bytes]) -> None:
    assert secrets
    for secret in secrets:
        for form in forms(secret):
            hits = [t for t in texts if form in t]
            assert not hits, f"a secret ({len(secret)} bytes) is in a log record: {hits[0][:200]}"


def kms_client():
    return boto3.client("kms", region_name="us-east-1")


def test_the_capture_sees_botocore_logging_key_material(everything):
    """The control: a KMS call made outside sealstore logs its data key, and the handler
    above finds it (so the clean results below are not a blind capture)."""
    with mock_aws():
        client = kms_client()
        kek = client.create_key()["KeyMetadata"]["KeyId"]
        material = client.generate_data_key(KeyId=kek, KeySpec="AES_256")["Plaintext"]
    with pytest.raises(AssertionError, match="is in a log record"):
        assert_clean(everything.texts, [material])
    assert any(r.name == "botocore.parsers" for r in everything.records)


@pytest.mark.parametrize("kind", ["file", "database"])
def test_kms_keyring_whole_life_logs_no_secret(everything, tmp_path, kind):
    """The key file, and the database registry on SQLite (SQLAlchemy's engine log on too:
    it shows statement parameters, which hold wrapped keys only)."""
    master_path = MasterKeyWrapper.create_file(tmp_path / "master.key")
    master = base64.b64decode(master_path.read_text())
    with mock_aws():
        client = kms_client()
        seen = spy(client)
        kek = client.create_key(Description="log test")["KeyMetadata"]["KeyId"]
        kek2 = client.create_key(Description="log test 2")["KeyMetadata"]["KeyId"]
        path = tmp_path / "keys.json"
        url = f"sqlite:///{tmp_path / 'registry.db'}"

        def store(_path, wrapper):
            if kind == "file":
                return KeyFile(_path, wrapper)
            from sealstore.keysources.database import DatabaseKeySource

            return DatabaseKeySource(url, wrapper)

        # create, seal, rotate, retire, destroy, save
        source = store(path, KmsWrapper(kek, client=client))
        kr = source.init()
        first = kr.primary.key_id
        materials = [k.reveal_material() for k in kr.keys]
        sealed = [kr.seal(p) for p in PLAINTEXTS]
        new = source.rotate(kr)
        materials.append(new.reveal_material())
        kr.retire(first)
        source.save(kr)
        sealed.append(kr.seal(PLAINTEXTS[0]))
        # load and open in a fresh process's way (Decrypt), with the cache off
        fresh = store(path, KmsWrapper(kek, client=client, cache_max_age=0)).load(
            allow_retired=True
        )
        assert [fresh.open(v) for v in sealed[:-1]] == PLAINTEXTS
        # rewrap: KMS -> KMS (ReEncrypt), KMS -> master key (Decrypt), master -> KMS (Encrypt)
        assert store(path, KmsWrapper(kek, client=client)).rewrap(KmsWrapper(kek2, client=client))
        assert store(path, KmsWrapper(kek2, client=client)).rewrap(
            MasterKeyWrapper.from_file(master_path)
        )
        assert store(path, MasterKeyWrapper.from_file(master_path)).rewrap(
            KmsWrapper(kek, client=client)
        )
        again = store(path, KmsWrapper(kek, client=client)).load(allow_retired=True)
        assert again.open(sealed[-1]) == PLAINTEXTS[0]
        # a failing Decrypt (the encryption context names another key id): error records
        blob = KmsWrapper(kek, client=client).generate(7)[1]
        with pytest.raises(KeySourceError):
            KmsWrapper(kek, client=client).unwrap(8, blob)
        # calls from other threads are withheld as well
        errors: list[BaseException] = []

        def load() -> None:
            try:
                store(path, KmsWrapper(kek, client=client)).load(allow_retired=True).close()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=load) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        destroyed = again.destroy(first)
        store(path, KmsWrapper(kek, client=client)).save(again)
        for k in (kr, fresh, again):
            k.close()
        del destroyed
    assert len(seen) >= 10  # every kind of KMS call above moved plaintext keys
    assert_clean(everything.texts, [*seen, *materials, master, *PLAINTEXTS])
    records = everything.records
    assert any(r.name.startswith("sealstore.wrapping.kms") for r in records)
    withheld = [r for r in records if getattr(r, "_sealstore_withheld", False)]
    assert {r.name for r in withheld} >= {"botocore.parsers", "botocore.endpoint"}
    if kind == "database":  # SQLAlchemy logged its statements and parameters, and was checked
        assert any(r.name.startswith("sqlalchemy.engine") and r.args for r in records)
    assert all(r.getMessage().startswith("record withheld by sealstore") for r in withheld)


def test_records_outside_kms_calls_and_of_other_threads_are_untouched(everything):
    log = logging.getLogger("botocore.endpoint")
    other: list[logging.LogRecord] = []
    inside = threading.Event()
    done = threading.Event()

    def elsewhere() -> None:
        inside.wait(120)  # hang guards, not bounds: a loaded machine may be slow to switch
        log.debug("other thread %s", "visible")
        other.append(everything.records[-1])
        done.set()

    t = threading.Thread(target=elsewhere)
    t.start()
    with logguard.withheld("a test"):
        log.debug("secret %s", "s3cr3t-value")
        inside.set()
        done.wait(120)
    t.join()
    log.debug("after %s", "visible")
    msgs = [r.getMessage() for r in everything.records]
    assert "record withheld by sealstore: botocore.endpoint logged it during a test" in msgs
    assert not any("s3cr3t-value" in m for m in msgs)
    assert other[0].getMessage() == "other thread visible"
    assert msgs[-1] == "after visible"


def test_a_replaced_record_factory_or_logger_class_does_not_leak(everything):
    """An application that installs its own record factory after sealstore (without chaining)
    or a logger whose makeRecord bypasses the factory: the handler layer still withholds."""
    logging.setLogRecordFactory(logging.LogRecord)  # drops sealstore's factory

    class Bypass(logging.Logger):
        def makeRecord(self, name, level, fn, lno, msg, args, exc_info, func=None, extra=None,
                       sinfo=None):  # fmt: skip
            return logging.LogRecord(name, level, fn, lno, msg, args, exc_info, func, sinfo)

    bypass = Bypass("thirdparty.custom")
    bypass.parent = logging.getLogger()
    try:
        with logguard.withheld("a test"):
            # the factory was put back on top when the block was entered
            assert isinstance(logging.getLogRecordFactory(), logguard._Factory)
            logging.setLogRecordFactory(logging.LogRecord)  # and replaced again inside it
            try:
                raise ValueError("s3cr3t-in-exception")
            except ValueError:
                bypass.debug("x %s", "s3cr3t-arg", exc_info=True, extra={"k": "s3cr3t-extra"})
                logging.getLogger("botocore.parsers").debug("y %s", "s3cr3t-arg2", stack_info=True)
    finally:
        logging.setLogRecordFactory(logging.LogRecord)
    assert_texts = "\n".join(everything.texts)
    assert "s3cr3t" not in assert_texts
    assert sum("record withheld by sealstore" in t for t in everything.texts) >= 2


def test_sealstore_records_inside_a_kms_call_are_kept(everything):
    with logguard.withheld("a test"):
        logging.getLogger("sealstore.wrapping.kms").debug("kept %s", "as is")
    assert everything.records[-1].getMessage() == "kept as is"


def test_s3_calls_log_no_plaintext_or_key(everything, tmp_path, s3_endpoint, raw_s3, bucket):
    """The S3 adapter hands botocore sealed bodies only (the handlers run at
    before-parameter-build, before botocore logs the request), so botocore's records of
    PutObject, multipart uploads (s3transfer's threads), CopyObject and GetObject carry neither
    the plaintext nor any key."""
    import io

    from boto3.s3.transfer import TransferConfig
    from fixtures_s3 import make_client

    from sealstore.adapters.s3 import encrypt_client

    kr = KeyFile(tmp_path / "keys.json").init()
    materials = [k.reveal_material() for k in kr.keys]
    s3 = encrypt_client(make_client(s3_endpoint), kr, segment_size=1024)
    bodies = {
        "small": b"S3-PLAINTEXT-small-object-" * 40,
        "random": bytes(range(256)) * 20,
        "big": b"S3-PLAINTEXT-multipart-body-" * (6 * 1024 * 1024 // 28 + 1),
    }
    s3.put_object(Bucket=bucket, Key="small", Body=bodies["small"], Metadata={"m": "visible"})
    s3.put_object(Bucket=bucket, Key="random", Body=io.BytesIO(bodies["random"]))
    config = TransferConfig(
        multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024
    )
    s3.upload_fileobj(io.BytesIO(bodies["big"]), bucket, "big", Config=config)
    s3.copy_object(Bucket=bucket, Key="copied", CopySource=f"{bucket}/small")
    assert s3.get_object(Bucket=bucket, Key="copied")["Body"].read() == bodies["small"]
    got = s3.get_object(Bucket=bucket, Key="random", Range="bytes=10-300")["Body"].read()
    assert got == bodies["random"][10:301]
    out = io.BytesIO()
    s3.download_fileobj(bucket, "big", out, Config=config)
    assert out.getvalue() == bodies["big"]
    kr.close()
    names = {r.name for r in everything.records}
    assert {"botocore.endpoint", "botocore.parsers"} <= names  # botocore logged the calls
    # the plaintexts are repetitive: look for a 24-byte run of each rather than the whole
    runs = [b[:24] for b in bodies.values()] + [bodies["random"][300:330]]
    assert_clean(everything.texts, [*materials, *runs])
    texts = "\n".join(everything.texts)
    assert "S3-PLAINTEXT" not in texts


SCRIPT = r"""
import base64, json, logging, sys, tempfile, pathlib
import boto3
boto3.set_stream_logger("", logging.DEBUG)  # every logger to stderr, before sealstore is imported
from moto import mock_aws
with mock_aws():
    client = boto3.client("kms", region_name="us-east-1")
    seen = []
    client.meta.events.register(
        "after-call.kms.*",
        lambda parsed, **kw: seen.append(parsed["Plaintext"]) if "Plaintext" in parsed else None,
    )
    kek = client.create_key()["KeyMetadata"]["KeyId"]
    from sealstore.keysources.file import KeyFile
    from sealstore.wrapping.kms import KmsWrapper
    path = pathlib.Path(tempfile.mkdtemp()) / "keys.json"
    kr = KeyFile(path, KmsWrapper(kek, client=client)).init()
    KeyFile(path, KmsWrapper(kek, client=client)).rotate(kr)
    again = KeyFile(path, KmsWrapper(kek, client=client, cache_max_age=0)).load()
    assert again.open(kr.seal(b"x")) == b"x"
    keys = [k.reveal_material() for k in kr.keys] + seen
print(json.dumps([base64.b64encode(bytes(k)).decode() for k in keys]))
"""


def test_boto3_stream_logger_set_before_import_logs_no_key():
    """``boto3.set_stream_logger("")`` (a DEBUG handler on the root logger, set up before
    sealstore is imported, in a fresh interpreter): stderr holds no key material."""
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    keys = [base64.b64decode(k) for k in json.loads(r.stdout)]
    assert len(keys) >= 5
    assert "botocore.parsers" in r.stderr and "record withheld by sealstore" in r.stderr
    assert_clean([r.stderr], keys)


def test_gcs_calls_log_no_plaintext_or_key(everything, tmp_path, gcs_emulator, raw_gcs, gcs_bucket):
    """The GCS adapter with DEBUG on everywhere (google-cloud-storage, google-auth,
    google-resumable-media, urllib3, requests): simple and resumable uploads, ``blob.open``,
    whole and ranged downloads, ``copy_blob`` and ``rewrite`` log neither a plaintext nor any
    key, nor a resumable session's URL (a capability: urllib3 logs request paths, and a
    session's holds its ``upload_id``)."""
    import io

    from fixtures_gcs import make_gcs_client

    from sealstore.adapters.gcs import encrypt_client

    kr = KeyFile(tmp_path / "keys.json").init()
    materials = [k.reveal_material() for k in kr.keys]
    gcs = encrypt_client(make_gcs_client(gcs_emulator), kr, segment_size=1024)
    bucket = gcs.bucket(gcs_bucket)
    bodies = {
        "small": b"GCS-PLAINTEXT-small-object-" * 40,
        "random": bytes(range(256)) * 20,
        "big": b"GCS-PLAINTEXT-resumable-body" * (9 * 1024 * 1024 // 28 + 1),
    }
    bucket.blob("small").upload_from_string(bodies["small"])
    bucket.blob("random").upload_from_file(io.BytesIO(bodies["random"]))
    bucket.blob("big").upload_from_file(io.BytesIO(bodies["big"]), size=len(bodies["big"]))
    with bucket.blob("opened").open("wb") as f:
        f.write(bodies["small"])
    bucket.copy_blob(bucket.blob("small"), bucket, "copied")
    bucket.blob("rewritten").rewrite(bucket.blob("random"))
    assert bucket.blob("copied").download_as_bytes() == bodies["small"]
    assert bucket.blob("rewritten").download_as_bytes(start=10, end=300) == bodies["random"][10:301]
    assert bucket.blob("big").download_as_bytes() == bodies["big"]
    with bucket.blob("opened").open("rb") as f:
        assert f.read() == bodies["small"]
    kr.close()
    names = {r.name for r in everything.records}
    assert any(n.startswith("urllib3") for n in names), names  # the HTTP layer logged the calls
    runs = [b[:24] for b in bodies.values()] + [bodies["random"][300:330]]
    assert_clean(everything.texts, [*materials, *runs])
    texts = "\n".join(everything.texts)
    assert "GCS-PLAINTEXT" not in texts
    assert "upload_id" not in texts  # urllib3's records of the session's requests were withheld
    withheld = [r for r in everything.records if getattr(r, "_sealstore_withheld", False)]
    assert any(r.name.startswith("urllib3") for r in withheld)
    assert any("uploadType=multipart" in t for t in everything.texts)  # the other calls logged


def test_tenants_with_kms_keys_log_no_secret(everything, tmp_path):
    """Tenants with one KMS key each (``KmsTenantWrapping``) on moto, DEBUG on everywhere:
    create (CreateKey, GenerateDataKey), rotate, load (Decrypt), seal and open, shred
    (DisableKey, ScheduleKeyDeletion): no data key, no plaintext in any record."""
    from sealstore.errors import SealstoreError
    from sealstore.tenants import KmsTenantWrapping, TenantStore

    with mock_aws():
        client = kms_client()
        seen = spy(client)
        store = TenantStore(tmp_path / "tenants", kms=KmsTenantWrapping(client))
        materials: list[bytes] = []
        sealed = {}
        for name in ("acme", "globex"):
            data, index = store.create(name)
            store.rotate(name)
            data, index = store.load(name)
            materials += [k.reveal_material() for kr in (data, index) for k in kr.keys]
            sealed[name] = data.seal(PLAINTEXTS[1])
            data.close()
            index.close()
        assert store.load("acme")[0].open(sealed["acme"]) == PLAINTEXTS[1]
        store.shred("acme", by="the log test")
        with pytest.raises(SealstoreError):
            store.load("acme")
        assert store.load("globex")[0].open(sealed["globex"]) == PLAINTEXTS[1]
    assert len(seen) >= 8
    assert_clean(everything.texts, [*seen, *materials, *PLAINTEXTS])
    withheld = {r.name for r in everything.records if getattr(r, "_sealstore_withheld", False)}
    assert {"botocore.parsers", "botocore.endpoint"} <= withheld
