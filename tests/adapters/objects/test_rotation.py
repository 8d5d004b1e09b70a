"""The engine's rotation on the in-memory store (no S3 anywhere): each decision (current,
metadata repaired by a copy onto itself, re-sealed, not sealed, sealed from plaintext), a
concurrent writer never overwritten (a conflict), a failing object recorded while the run goes
on, the checkpoint resumed after a stop, dry runs that write nothing."""

from __future__ import annotations

import os

import pytest
from sealstore.adapters.objects import MemoryStore, ObjectSealing
from sealstore.adapters.objects import metadata as M
from sealstore.adapters.objects.rotation import pending_objects, rotate_object, rotate_objects
from sealstore.keyring import Keyring

SEG = 1024


@pytest.fixture
def world():
    kr = Keyring.generate("AEGIS-128L", 16)
    store = MemoryStore()
    store.create_bucket("b")
    sealing = ObjectSealing(kr, segment_size=SEG, part_size=store.limits.min_part)
    old = {f"d/old-{i}": os.urandom(700 * i + 3) for i in range(4)}
    for key, value in old.items():
        sealing.seal(store, "b", key, value, metadata={"n": key})
    kr.rotate()
    sealing.seal(store, "b", "d/new", b"under the new key")
    sealing.seal(store, "b", "d/bare", b"new key, metadata lost")
    bare = store.get("b", "d/bare").read()
    store.put("b", "d/bare", bare, length=len(bare), metadata={"keep": "me"})
    store.put("b", "d/plain", b"never sealed", length=12)
    return kr, store, sealing, old


def key_of(sealing, store, key) -> int:
    return sealing.header(store, store.head("b", key))[0].key_id


def test_every_decision(world):
    kr, store, sealing, old = world
    outcomes = {}
    report = rotate_objects(sealing, store, "b", "d/",
                            progress=lambda r, key, outcome: outcomes.__setitem__(key, outcome))  # fmt: skip
    assert outcomes == {**{k: "resealed" for k in old}, "d/new": "current",
                        "d/bare": "repaired", "d/plain": "not_sealed"}  # fmt: skip
    assert report.complete and report.ok and report.scanned == 7
    for key, value in old.items():
        assert sealing.open(store, "b", key).read() == value
        assert key_of(sealing, store, key) == kr.primary.key_id
        assert store.head("b", key).metadata["n"] == key  # user metadata kept
    bare = store.head("b", "d/bare").metadata
    assert bare["keep"] == "me" and M.stored_length(bare) == len(b"new key, metadata lost")
    assert store.get("b", "d/plain").read() == b"never sealed"
    again = rotate_objects(sealing, store, "b", "d/")
    assert (again.current, again.resealed, again.repaired) == (6, 0, 0)


def test_seal_plaintext_and_dry_run(world):
    kr, store, sealing, old = world
    before = {o.key: o.etag for o in store.list("b", "d/")}
    dry = rotate_objects(sealing, store, "b", "d/", dry_run=True, seal_plaintext=True)
    assert (dry.resealed, dry.repaired, dry.sealed_plaintext) == (4, 1, 1)
    assert {o.key: o.etag for o in store.list("b", "d/")} == before  # nothing written
    rotate_objects(sealing, store, "b", "d/", seal_plaintext=True)
    opened = sealing.open(store, "b", "d/plain")
    assert opened.read() == b"never sealed" and opened.header.key_id == kr.primary.key_id


class _RacingStore(MemoryStore):
    """A writer replaces ``victim`` between the rotation's read and its write."""

    victim = "d/old-2"

    def get(self, bucket, key, *args, **kw):
        body = super().get(bucket, key, *args, **kw)
        if key == self.victim and kw.get("first", args[0] if args else 0) == 0:
            MemoryStore.put(self, bucket, key, b"a concurrent write", length=18)
            self.victim = ""
        return body


def test_a_concurrent_writer_is_never_overwritten():
    kr = Keyring.generate("AEGIS-128L", 16)
    store = _RacingStore()
    store.create_bucket("b")
    sealing = ObjectSealing(kr, segment_size=SEG)
    for i in range(4):
        sealing.seal(store, "b", f"d/old-{i}", b"value %d" % i)
    kr.rotate()
    report = rotate_objects(sealing, store, "b", "d/")
    assert report.conflicts == ["d/old-2"] and report.resealed == 3
    assert store.get("b", "d/old-2").read() == b"a concurrent write"


def test_a_failing_object_is_recorded_and_the_run_goes_on(world):
    kr, store, sealing, old = world
    store.tamper("b", "d/old-1", 76 + 5)  # a flipped stored byte in its first segment
    report = rotate_objects(sealing, store, "b", "d/")
    assert [f["key"] for f in report.failures] == ["d/old-1"]
    assert report.failures[0]["error"].startswith("InvalidTag")
    assert report.resealed == 3 and key_of(sealing, store, "d/old-1") != kr.primary.key_id


def test_the_checkpoint_resumes_after_a_stop(world, tmp_path):
    kr, store, sealing, old = world
    checkpoint = str(tmp_path / "cp.json")
    os.chmod(tmp_path, 0o700)

    class Stop(Exception):
        pass

    def stop_after_two(report, key, outcome):
        if report.scanned == 2:
            raise Stop

    with pytest.raises(Stop):
        rotate_objects(sealing, store, "b", "d/", checkpoint=checkpoint, progress=stop_after_two)
    assert pending_objects(sealing, store, "b", "d/", checkpoint=checkpoint) == 5
    resumed = rotate_objects(sealing, store, "b", "d/", checkpoint=checkpoint)
    assert resumed.after is not None and resumed.scanned == 5 and resumed.complete


def test_one_object(world):
    kr, store, sealing, old = world
    assert rotate_object(sealing, store, "b", "d/old-0") == "resealed"
    assert rotate_object(sealing, store, "b", "d/old-0") == "current"


def test_if_none_match_is_refused_for_a_multipart_upload_not_ignored():
    from sealstore.errors import UnsupportedOperation

    store = MemoryStore()
    store.create_bucket("b")
    sealing = ObjectSealing(Keyring.generate("AEGIS-128L", 16), part_size=store.limits.min_part)
    big = os.urandom(store.limits.max_single + 1)
    with pytest.raises(UnsupportedOperation):
        sealing.seal(store, "b", "k", big, if_none_match=True)
    with pytest.raises(UnsupportedOperation):  # a stream of unknown length, longer than a part
        sealing.seal(store, "b", "k", iter([big]), if_none_match=True)
    assert list(store.list("b")) == []
    sealing.seal(store, "b", "k", iter([b"a short ", b"stream"]), if_none_match=True)
    assert sealing.open(store, "b", "k").read() == b"a short stream"
    sealing.seal(store, "b", "big", big)
    assert sealing.size(store, "b", "big") == len(big)


def test_a_binding_forwards_exactly_the_rotation_keywords():
    """``RotationOptions`` (what ``sealstore.adapters.s3.rotate.rotate_objects`` forwards) is the
    engine's keyword list: a keyword added to one and not the other fails here."""
    import inspect

    from sealstore.adapters.objects.rotation import RotationOptions

    keywords = {
        name
        for name, p in inspect.signature(rotate_objects).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert set(RotationOptions.__annotations__) == keywords


def test_object_settings_are_validated_once_and_make_the_engine():
    from sealstore.adapters.objects.engine import ObjectSettings
    from sealstore.adapters.objects.tenancy import ObjectTenancy

    with pytest.raises(ValueError, match="segment_size"):
        ObjectSettings(segment_size=1000)
    with pytest.raises(ValueError, match="segment_size"):
        ObjectSettings.of(segment_size=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tenant=False"):
        ObjectSettings.of(tenant=False)
    settings = ObjectSettings.of(segment_size=SEG, context=b"c", tenant_prefix="t/{tenant}/")
    assert isinstance(settings.tenancy, ObjectTenancy)
    assert ObjectSettings.of().tenancy is None
    with pytest.raises(ValueError, match="segment_size"):
        settings.replace(segment_size=3)
    kr = Keyring.generate("AEGIS-128L", 16)
    engine = ObjectSealing.from_settings(kr, settings.replace(passthrough=1), part_size=5 << 20)
    assert engine.settings.passthrough is True
    assert (engine.segment_size, engine.context, engine.part_size) == (SEG, b"c", 5 << 20)
    assert engine.tenancy is settings.tenancy
    assert ObjectSealing(kr, segment_size=SEG).settings == ObjectSettings(segment_size=SEG)
