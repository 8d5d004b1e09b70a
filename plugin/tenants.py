"""Tenants: a name, the active tenant, a key per tenant, and crypto-shredding (docs/TENANTS.md).

A tenant is a short name (``[A-Za-z0-9_][A-Za-z0-9_-]{0,62}``: no dot, colon, slash or space,
so it never breaks a file name, a keyring name or an encoding).  Each tenant owns two keyrings
of its own, kept in a :class:`TenantStore` (a private directory of key files, one pair per
tenant, each wrapped by the tenant's own wrapper when one is given):

* ``<tenant>.keys.json``, the tenant's **data keyring**: every value bound to the tenant is
  sealed under one of its keys, with a context naming the tenant (and the schema);
* ``<tenant>.index.json``, the tenant's **index keyring**: the blind indexes of the tenant's
  rows are keyed by it, so equal values in two tenants give unrelated index values.

The live process finds a tenant's keyrings through :class:`TenantKeys` (one per process,
installed with :func:`use_tenant_keys`): it loads a tenant's pair once, registers it as the
named keyrings ``tenant:<name>`` and ``tenant-index:<name>`` (the dictionary the column path
already looks names up in), and never touches the store on the per-value path.
:meth:`TenantKeys.refresh` (every ``refresh_interval`` seconds in a background thread) brings
loaded tenants up to date and drops a shredded tenant's keyrings (material wiped).

Crypto-shredding (:meth:`TenantStore.shred`) records who, when and which key ids in
``shredded.json`` (never key material), overwrites both key files with every key destroyed (no
material, no wrapped blob), and, for a KMS-wrapped tenant, disables and schedules the deletion
of the tenant's KMS key: the one step a backup of the key files cannot undo.

The object adapter's seam is :func:`object_binding`: the tenant's data keyring and the context
prefix an object of the tenant binds to.
"""

from __future__ import annotations

import contextlib
import contextvars
import getpass
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .blind_index import check_separate
from .errors import (
    ConfigError,
    KeySourceError,
    TenantError,
    TenantMismatch,
    TenantRequired,
    TenantShredded,
    UnknownTenant,
)
from .keyring import DEFAULT_SUITE, Keyring, KeyState
from .keyring.named import _NAMED, forget_keyring, use_keyring
from .keysources.file import KeyFile
from .securefile import exclusive_lock, private_directory, read_secret_file, write_secret_file
from .wrapping import Wrapper

__all__ = [
    "KmsTenantWrapping",
    "ShredRecord",
    "TenantKeys",
    "TenantStore",
    "check_name",
    "current_tenant",
    "get_tenant_keys",
    "index_keyring_name",
    "keyring_name",
    "object_binding",
    "pick_tenant",
    "resolve_tenant",
    "tenant",
    "tenant_index_keyring",
    "tenant_keyring",
    "use_tenant_keys",
]

log: logging.Logger = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,62}\Z")
_KEYRING_PREFIX = "tenant:"
_INDEX_PREFIX = "tenant-index:"
_OBJECT_DOMAIN = b"sealstore/v1/tenant-object"
SHRED_LOG = "shredded.json"


def check_name(name: object) -> str:
    """``name`` if it is a valid tenant name, else TenantError (the name is shown only when it
    is a short str, never bytes of unknown content)."""
    if not isinstance(name, str):
        raise TenantError(f"a tenant name must be a str, not {type(name).__name__}")
    if not _NAME.match(name):
        shown = repr(name) if len(name) <= 64 and name.isprintable() else "(not shown)"
        raise TenantError(
            f"invalid tenant name {shown}: 1 to 63 characters among letters, digits, '_' and "
            "'-', not starting with '-'"
        )
    return name


def keyring_name(tenant: str) -> str:
    """The registered keyring name of ``tenant``'s data keyring."""
    return _KEYRING_PREFIX + tenant


def index_keyring_name(tenant: str) -> str:
    """The registered keyring name of ``tenant``'s blind-index keyring."""
    return _INDEX_PREFIX + tenant


# ---- the active tenant ---------------------------------------------------------------------

_SCOPED: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "sealstore_tenant", default=None
)


@contextlib.contextmanager
def tenant(name: str) -> Iterator[str]:
    """``with sealstore.tenant("acme"):`` every tenant-aware value written or read inside the
    block (this thread or task) is bound to ``acme``.  Blocks nest; the inner one wins."""
    token = _SCOPED.set(check_name(name))
    try:
        yield name
    finally:
        _SCOPED.reset(token)


def current_tenant() -> str | None:
    """The tenant of the innermost ``sealstore.tenant()`` block, or None."""
    return _SCOPED.get()


def resolve_tenant(option: str | None) -> str:
    """The tenant a context-tenanted value binds to: the execution option ``option`` or the
    active block's tenant (TenantMismatch when both are given and differ, TenantRequired when
    neither is)."""
    return pick_tenant(option, _SCOPED.get())


def pick_tenant(option: str | None, scoped: str | None) -> str:
    """:func:`resolve_tenant` with the block's tenant ``scoped`` given."""
    if option is not None:
        if scoped is not None and scoped != option:
            raise TenantMismatch(
                f"the execution option sealstore_tenant={option!r} contradicts the active "
                f"sealstore.tenant({scoped!r}) block; nothing was written"
            )
        return option
    if scoped is None:
        raise TenantRequired(
            "this column binds its values to a tenant and none is set: use "
            "`with sealstore.tenant(name):` or the execution option sealstore_tenant=name"
        )
    return scoped


# ---- the store -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ShredRecord:
    """One crypto-shredding: who, when, which key ids (never key material)."""

    tenant: str
    by: str
    at: str
    key_ids: tuple[str, ...]
    index_key_ids: tuple[str, ...]
    kms_key: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant, "by": self.by, "at": self.at, "key_ids": list(self.key_ids),
            "index_key_ids": list(self.index_key_ids), "kms_key": self.kms_key,
        }  # fmt: skip


class KmsTenantWrapping:
    """One AWS KMS key per tenant (alias ``<prefix><tenant>``), wrapping both of its keyrings.

    Shredding disables the KMS key and schedules its deletion: every copy of the tenant's
    wrapped keys, backups included, stops unwrapping at once (a disabled key refuses Decrypt)
    and for good once AWS deletes it (after ``pending_days``, 7 to 30).
    """

    def __init__(
        self, client: Any, *, alias_prefix: str = "alias/sealstore-tenant-", pending_days: int = 7
    ) -> None:
        if not 7 <= pending_days <= 30:
            raise ValueError("pending_days must be 7..30 (what KMS allows)")
        self.client: Any = client
        self.alias_prefix: str = alias_prefix
        self.pending_days: int = pending_days

    def alias(self, tenant: str) -> str:
        return self.alias_prefix + tenant

    def create(self, tenant: str) -> str:
        """Create the tenant's KMS key and its alias; returns the key id."""
        key_id: str = self.client.create_key(
            Description=f"sealstore tenant {tenant}", KeyUsage="ENCRYPT_DECRYPT"
        )["KeyMetadata"]["KeyId"]
        self.client.create_alias(AliasName=self.alias(tenant), TargetKeyId=key_id)
        return key_id

    def wrapper(self, tenant: str) -> Wrapper:
        from .wrapping.kms import KmsWrapper

        return KmsWrapper(self.alias(tenant), client=self.client, cache_max_age=0)

    def key_id(self, tenant: str) -> str:
        meta = self.client.describe_key(KeyId=self.alias(tenant))["KeyMetadata"]
        return str(meta["KeyId"])

    def shred(self, tenant: str) -> str:
        """Disable the tenant's KMS key and schedule its deletion; returns its key id."""
        key_id = self.key_id(tenant)
        state = self.client.describe_key(KeyId=key_id)["KeyMetadata"]["KeyState"]
        if state == "Enabled":
            self.client.disable_key(KeyId=key_id)
        if state != "PendingDeletion":
            self.client.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=self.pending_days)
        return key_id


class TenantStore:
    """The tenants' keyrings: a private directory holding a key file pair per tenant and the
    shredding log.  ``wrapper`` (a function of the tenant name) or ``kms`` (one KMS key per
    tenant) wraps each tenant's keys; without either the key files hold plain material
    (development)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        wrapper: Callable[[str], Wrapper | None] | None = None,
        kms: KmsTenantWrapping | None = None,
    ) -> None:
        if wrapper is not None and kms is not None:
            raise ValueError("give wrapper= or kms=, not both")
        self.directory: Path = Path(directory)
        self.kms: KmsTenantWrapping | None = kms
        self._wrapper = kms.wrapper if kms is not None else wrapper

    def __repr__(self) -> str:
        return f"TenantStore({str(self.directory)!r})"

    def _files(self, name: str) -> tuple[KeyFile, KeyFile]:
        check_name(name)
        wrapper = self._wrapper(name) if self._wrapper is not None else None
        index_wrapper = self._wrapper(name) if self._wrapper is not None else None
        return (
            KeyFile(self.directory / f"{name}.keys.json", wrapper),
            KeyFile(self.directory / f"{name}.index.json", index_wrapper),
        )

    # -- the shredding log --

    def _log_path(self) -> Path:
        return self.directory / SHRED_LOG

    def shred_log(self) -> list[ShredRecord]:
        """Every shredding recorded in the store, oldest first."""
        path = self._log_path()
        if not path.exists():
            return []
        try:
            data = json.loads(read_secret_file(path, what="tenant shredding log"))
            return [
                ShredRecord(
                    r["tenant"],
                    r["by"],
                    r["at"],
                    tuple(r["key_ids"]),
                    tuple(r["index_key_ids"]),
                    r.get("kms_key"),
                )  # fmt: skip
                for r in data["shredded"]
            ]
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"{path}: not a sealstore tenant shredding log") from None

    def shredded(self, name: str) -> ShredRecord | None:
        """The shredding record of ``name``, or None if it was never shredded."""
        check_name(name)
        return next((r for r in self.shred_log() if r.tenant == name), None)

    # -- tenants --

    def names(self) -> list[str]:
        """The tenants holding keys (shredded ones excluded), sorted."""
        if not self.directory.is_dir():
            return []
        gone = {r.tenant for r in self.shred_log()}
        found = [
            p.name[: -len(".keys.json")]
            for p in self.directory.iterdir()
            if p.name.endswith(".keys.json")
        ]
        return sorted(n for n in found if _NAME.match(n) and n not in gone)

    def create(self, name: str, *, suite: str | None = None) -> tuple[Keyring, Keyring]:
        """Create tenant ``name``: its KMS key (``kms=``), its data and its index keyrings."""
        check_name(name)
        private_directory(self.directory, what="tenant key directory")
        if self.shredded(name) is not None:
            raise TenantShredded(f"tenant {name!r} was shredded; its name cannot be reused")
        data_file, index_file = self._files(name)
        if data_file.exists() or index_file.exists():
            raise TenantError(f"tenant {name!r} already exists in {self}")
        if self.kms is not None:
            self.kms.create(name)
        data = data_file.init(suite=suite or DEFAULT_SUITE)
        index = index_file.init(suite=suite or DEFAULT_SUITE)
        check_separate(index, data, index_name=index_keyring_name(name),
                       other_name=keyring_name(name), what=f"tenant {name!r}")  # fmt: skip
        log.info("created tenant %s (data key %s, index key %s)", name,
                 data.primary.id_hex, index.primary.id_hex)  # fmt: skip
        return data, index

    def load(self, name: str) -> tuple[Keyring, Keyring]:
        """The tenant's (data, index) keyrings; UnknownTenant, TenantShredded."""
        check_name(name)
        if self.shredded(name) is not None:
            raise TenantShredded(f"tenant {name!r} was shredded: its values no longer open")
        data_file, index_file = self._files(name)
        if not data_file.exists() or not index_file.exists():
            raise UnknownTenant(
                f"tenant {name!r} has no keys in {self} (sealstore tenants create {name})"
            )
        return data_file.load(), index_file.load()

    def rotate(self, name: str) -> tuple[str, str]:
        """A new primary key in the tenant's data and index keyrings; their hex ids."""
        data, index = self.load(name)
        try:
            data_file, index_file = self._files(name)
            return data_file.rotate(data).id_hex, index_file.rotate(index).id_hex
        finally:
            data.close()
            index.close()

    def shred(self, name: str, *, by: str | None = None) -> ShredRecord:
        """Destroy every key of tenant ``name`` (see the module doc); returns the record.

        The record is written first: from then on the tenant is refused everywhere (loads, and
        live processes at their next refresh), even if the shredding stops half-way (a crash,
        SIGKILL, a KMS outage).  Running it again finishes the work and returns the same record.
        """
        check_name(name)
        data_file, index_file = self._files(name)
        record = self.shredded(name)
        if record is None:
            if not data_file.exists() or not index_file.exists():
                raise UnknownTenant(f"tenant {name!r} has no keys in {self}")
            ids = [
                tuple(f"{r.key_id:08x}" for r in f._read_checked()) for f in (data_file, index_file)
            ]
            kms_key = self.kms.key_id(name) if self.kms is not None else None
            at = datetime.now(timezone.utc).isoformat()
            record = ShredRecord(name, by or _who(), at, ids[0], ids[1], kms_key)
            self._append(record)
        else:
            log.info("tenant %s: finishing the shredding recorded at %s", name, record.at)
        for source in (data_file, index_file):
            if source.exists():
                self._destroy_all(source)
        if self.kms is not None:
            self.kms.shred(name)
        log.warning("tenant %s shredded by %s: keys %s, index keys %s", name, record.by,
                    ", ".join(record.key_ids), ", ".join(record.index_key_ids))  # fmt: skip
        return record

    def _append(self, record: ShredRecord) -> None:
        with exclusive_lock(self._log_path()):
            entries = [r.as_json() for r in self.shred_log()]
            if any(e["tenant"] == record.tenant for e in entries):
                raise TenantShredded(f"tenant {record.tenant!r} was already shredded")
            doc = {"sealstore_tenant_shredding": 1, "shredded": [*entries, record.as_json()]}
            write_secret_file(self._log_path(), (json.dumps(doc, indent=2) + "\n").encode(),
                              what="tenant shredding log")  # fmt: skip

    @staticmethod
    def _destroy_all(source: KeyFile) -> None:
        """Every key of ``source`` destroyed: no material, no wrapped blob left in the file."""
        with source._mutex, source._exclusive():
            records = source._read_checked()
            if all(r.state is KeyState.DESTROYED for r in records):
                return
            for r in records:
                r.state, r.material, r.wrapped = KeyState.DESTROYED, None, None
            source._store(records, create=False)
        source.forget()


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


# ---- the live cache ------------------------------------------------------------------------


class TenantKeys:
    """The tenants' keyrings of this process: loaded once per tenant from ``store``, registered
    as named keyrings, refreshed by :meth:`refresh` (and every ``refresh_interval`` seconds by
    :meth:`start`)."""

    def __init__(self, store: TenantStore | None = None) -> None:
        self.store: TenantStore | None = store
        self._lock = threading.Lock()
        self._loaded: dict[str, tuple[Keyring, Keyring]] = {}
        self._shredded: set[str] = set()
        self._stop: threading.Event | None = None

    def register(self, name: str, data: Keyring, index: Keyring) -> None:
        """Serve ``name`` from these keyrings (tests, the bench, or a store of your own)."""
        check_name(name)
        check_separate(index, data, index_name=index_keyring_name(name),
                       other_name=keyring_name(name), what=f"tenant {name!r}")  # fmt: skip
        with self._lock:
            self._shredded.discard(name)
            self._loaded[name] = (data, index)
            use_keyring(data, keyring_name(name))
            use_keyring(index, index_keyring_name(name))

    def keyrings(self, name: str) -> tuple[Keyring, Keyring]:
        """The (data, index) keyrings of ``name``, loaded on first use."""
        pair = self._loaded.get(name)
        if pair is not None:
            return pair
        if name in self._shredded:
            raise TenantShredded(f"tenant {name!r} was shredded: its values no longer open")
        with self._lock:
            pair = self._loaded.get(name)
            if pair is not None:
                return pair
            if name in self._shredded:
                raise TenantShredded(f"tenant {name!r} was shredded: its values no longer open")
            if self.store is None:
                raise UnknownTenant(f"tenant {name!r} is not registered and no store is set")
            check_name(name)
            try:
                pair = self.store.load(name)
            except TenantShredded:
                self._shredded.add(name)
                raise
            self._loaded[name] = pair
            use_keyring(pair[0], keyring_name(name))
            use_keyring(pair[1], index_keyring_name(name))
        log.info("tenant %s loaded (%d data keys, %d index keys)", name, len(pair[0]), len(pair[1]))
        return pair

    def drop(self, name: str, *, shredded: bool = False) -> None:
        """Forget ``name``'s keyrings here (closed: material wiped); ``shredded`` refuses it from
        now on."""
        with self._lock:
            pair = self._loaded.pop(name, None)
            if shredded:
                self._shredded.add(name)
            if _NAMED.get(keyring_name(name)) is (pair[0] if pair else None):
                forget_keyring(keyring_name(name))
            if _NAMED.get(index_keyring_name(name)) is (pair[1] if pair else None):
                forget_keyring(index_keyring_name(name))
        if pair is not None:
            pair[0].close()
            pair[1].close()

    def refresh(self) -> None:
        """Apply the store's changes to the loaded tenants: a shredded tenant is dropped (its
        keyrings closed, its name refused), the others refreshed (new primaries, states)."""
        if self.store is None:
            return
        gone = {r.tenant for r in self.store.shred_log()}
        for name in list(self._loaded):
            if name in gone:
                self.drop(name, shredded=True)
                log.warning("tenant %s was shredded: its keyrings are closed here", name)
                continue
            data, index = self._loaded[name]
            data_file, index_file = self.store._files(name)
            try:
                data_file.refresh(data)
                index_file.refresh(index)
            except (KeySourceError, ConfigError, TenantError):  # shredded between two reads
                if self.store.shredded(name) is not None:
                    self.drop(name, shredded=True)
                else:
                    raise
        with self._lock:
            self._shredded |= gone

    def start(self, refresh_interval: float) -> None:
        """Refresh every ``refresh_interval`` seconds in a daemon thread (until :meth:`stop`)."""
        if not refresh_interval > 0:
            raise ValueError("refresh_interval must be > 0 seconds")
        self.stop()
        stop = self._stop = threading.Event()

        def run() -> None:
            while not stop.wait(refresh_interval):
                try:
                    self.refresh()
                except Exception:  # keep refreshing; the failure is logged, not swallowed
                    log.exception("tenant key refresh failed")

        threading.Thread(target=run, name="sealstore-tenant-refresh", daemon=True).start()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None

    def close(self) -> None:
        """Stop refreshing and close every loaded tenant's keyrings."""
        self.stop()
        for name in list(self._loaded):
            self.drop(name)


_ACTIVE: list[TenantKeys] = [TenantKeys()]


def use_tenant_keys(keys: TenantKeys) -> TenantKeys:
    """Install ``keys`` as this process's tenant keyrings; the previous ones are closed (their
    refresh stopped, their keyrings unregistered and wiped)."""
    if not isinstance(keys, TenantKeys):
        raise TypeError(f"keys must be a TenantKeys, not {type(keys).__name__}")
    previous, _ACTIVE[0] = _ACTIVE[0], keys
    if previous is not keys:
        previous.close()
    return keys


def get_tenant_keys() -> TenantKeys:
    return _ACTIVE[0]


def tenant_keyring(name: str) -> Keyring:
    """The data keyring of tenant ``name`` (UnknownTenant, TenantShredded)."""
    return _ACTIVE[0].keyrings(name)[0]


def tenant_index_keyring(name: str) -> Keyring:
    """The blind-index keyring of tenant ``name`` (UnknownTenant, TenantShredded)."""
    return _ACTIVE[0].keyrings(name)[1]


def object_binding(name: str | None = None) -> tuple[Keyring, bytes]:
    """The seam for object stores: the data keyring of tenant ``name`` (the active tenant when
    None) and the context prefix ``len || "sealstore/v1/tenant-object" || len || tenant`` an
    object of that tenant appends its own location context to."""
    name = check_name(name) if name is not None else resolve_tenant(None)
    ring = tenant_keyring(name)
    enc = name.encode()
    prefix = len(_OBJECT_DOMAIN).to_bytes(4, "big") + _OBJECT_DOMAIN
    return ring, prefix + len(enc).to_bytes(4, "big") + enc
