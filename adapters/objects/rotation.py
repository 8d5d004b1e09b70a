"""Re-seal the objects under a prefix of any store with the keyring's primary key: the
decisions per object, the loop, its checkpoint and report (``sealstore s3 rotate`` runs it on
S3; any :class:`~sealstore.adapters.objects.store.ObjectStore` can be rotated the same way).

For each object, in listing order:

* already under the primary key (read from the metadata, or from the 76-byte header when the
  metadata was lost): nothing is downloaded; lost metadata is put back with a server-side
  ``copy`` onto itself (conditional on the version read).  This is also the whole cost of a
  rotation of the key-encryption key that wraps the keyring (``sealstore keys``): objects name
  keyring keys, which such a rotation does not change, so every object takes this path;
* under another key: opened and re-sealed as a stream and written back conditional on the
  version that was read, so a concurrent writer is never overwritten (that object is reported
  as a conflict and left for the next run);
* not sealed: skipped, or sealed in place with ``seal_plaintext`` (buckets being migrated).

Objects above the store's single-request limit take multipart uploads (the engine's ``seal``)
or a multipart copy (the store's ``copy``) with the same conditions.  Every write repeats what
the object had when the store keeps settings a rewrite must carry over (an optional
``settings(obj)`` method of the store, passed back as ``settings=``: for S3 content headers,
tags, storage class, server-side encryption, object lock, legal hold and a readable ACL).

After every object the position (the last key done) goes to a checkpoint file, written
atomically and privately (``sealstore.securefile``: random temp name, mode 0600, no link
followed, fsync, rename) and read back with the key files' checks; a run that was stopped or
killed resumes after it.  A finished run marks the checkpoint complete, and the next run starts
over.  The command's default place is :func:`default_checkpoint` (sealstore's state directory).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from sealstore.errors import (
    ConfigError,
    ObjectChanged,
    ObjectNotFound,
    SealstoreError,
    TenantRequired,
)
from sealstore.securefile import (
    check_directory,
    private_directory,
    read_secret_file,
    state_directory,
    write_secret_file,
)

from . import metadata as M
from .engine import ObjectSealing
from .store import ObjectStore, StoredObject

__all__ = [
    "CHECKPOINT_LIMIT",
    "RotationOptions",
    "RotationReport",
    "default_checkpoint",
    "pending_objects",
    "record_outcome",
    "rotate_object",
    "rotate_objects",
]

log: logging.Logger = logging.getLogger(__name__)


@dataclass
class RotationReport:
    """What a run did; ``after`` is the listing position it resumed from."""

    bucket: str
    prefix: str
    primary: str
    after: str | None = None
    scanned: int = 0
    current: int = 0
    repaired: int = 0
    resealed: int = 0
    sealed_plaintext: int = 0
    not_sealed: int = 0
    conflicts: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    last_key: str | None = None
    complete: bool = False
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures


CHECKPOINT_LIMIT = 64 * 1024 * 1024  # bytes a checkpoint may hold (its lists of failures)


def default_checkpoint(url: str) -> str:
    """Where a rotation of ``url`` keeps its position by default: ``rotate-<12 hex digits of the
    URL's SHA-256>.json`` in sealstore's state directory (``$XDG_STATE_HOME/sealstore``, else
    ``~/.local/state/sealstore``), created with mode 0700 if missing; refused
    (InsecureKeyFile) when others could write into it."""
    directory = private_directory(state_directory(), what="rotation checkpoint")
    return str(directory / f"rotate-{hashlib.sha256(url.encode()).hexdigest()[:12]}.json")


def _load_checkpoint(path: str | None, bucket: str, prefix: str, primary: str) -> str | None:
    """The position a checkpoint file holds for this run (None: no file, another rotation,
    or a finished one).  Read as key files are (no link followed, a regular file of the
    current user or root, mode 0600, in a directory only they can write, at most
    CHECKPOINT_LIMIT bytes): a planted checkpoint could make a run skip objects.  A file that
    is not a checkpoint raises ConfigError (delete it to start over)."""
    if not path or not os.path.lexists(path):
        return None
    raw = read_secret_file(path, limit=CHECKPOINT_LIMIT, what="rotation checkpoint")
    try:
        state = json.loads(raw)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deeply
        state = None
    last = state.get("last_key") if isinstance(state, dict) else None
    if not isinstance(state, dict) or not isinstance(last, (str, type(None))):
        raise ConfigError(
            f"rotation checkpoint {path} is not a checkpoint sealstore wrote; delete it to "
            "start the rotation from the beginning"
        )
    if (state.get("bucket"), state.get("prefix"), state.get("primary")) != (
        bucket,
        prefix,
        primary,
    ):
        return None  # another rotation
    if state.get("complete"):
        return None
    return last


def _save_checkpoint(path: str | None, report: RotationReport) -> None:
    """The report, written as key files are (sealstore.securefile: a new temp file with a
    random name, mode 0600, fsync, rename over ``path``; a link there is replaced, not
    followed; a crash leaves the previous checkpoint whole)."""
    if not path or report.dry_run:
        return
    data = json.dumps(asdict(report)).encode()
    write_secret_file(path, data, what="rotation checkpoint")


def pending_objects(
    sealing: ObjectSealing,
    store: ObjectStore,
    bucket: str,
    prefix: str = "",
    *,
    checkpoint: str | None = None,
) -> int:
    """How many objects :func:`rotate_objects` with the same arguments would visit now: one
    listing pass, after the checkpoint's position when the run would resume from it.  Objects
    written meanwhile may make the run visit more."""
    after = _load_checkpoint(checkpoint, bucket, prefix, _primary(sealing, bucket, prefix).id_hex)
    return sum(1 for _ in store.list(bucket, prefix, start_after=after))


def _primary(sealing: ObjectSealing, bucket: str, prefix: str) -> Any:
    """The key a run under ``prefix`` re-seals to (a tenant's, when the prefix or the tenancy
    names one; each object is still re-sealed under its own tenant's primary)."""
    try:
        return sealing.keyring_for(bucket, prefix).primary
    except TenantRequired:  # a key rule that names no tenant for the prefix itself
        return sealing.keyring.primary


class RotationOptions(TypedDict, total=False):
    """The keywords of :func:`rotate_objects` after its prefix, as a store binding's wrapper
    forwards them (``**options: Unpack[RotationOptions]``); a test keeps the two the same."""

    checkpoint: str | None
    dry_run: bool
    seal_plaintext: bool
    pause: float
    progress: Callable[[RotationReport, str, str], None] | None
    errors: tuple[type[BaseException], ...] | None


def rotate_objects(
    sealing: ObjectSealing,
    store: ObjectStore,
    bucket: str,
    prefix: str = "",
    *,
    checkpoint: str | None = None,
    dry_run: bool = False,
    seal_plaintext: bool = False,
    pause: float = 0.0,
    progress: Callable[[RotationReport, str, str], None] | None = None,
    errors: tuple[type[BaseException], ...] | None = None,
) -> RotationReport:
    """Re-seal every object under ``bucket/prefix`` of ``store`` with the primary key of
    ``sealing``'s keyring.

    ``checkpoint``: a file recording the position, to resume after a stop; ``dry_run``: only
    count; ``seal_plaintext``: also seal objects that are not sealed; ``pause``: seconds to
    wait between objects (throttle); ``progress(report, key, outcome)`` is called per object;
    ``errors``: the store client's error classes to record as one object's failure (the run
    goes on) rather than stop the run (default: the store's ``client_errors``).
    """
    if errors is None:
        errors = tuple(getattr(store, "client_errors", ()))
    primary = _primary(sealing, bucket, prefix)
    report = RotationReport(bucket, prefix, primary.id_hex, dry_run=dry_run)
    report.after = _load_checkpoint(checkpoint, bucket, prefix, primary.id_hex)
    if checkpoint and not dry_run:  # a checkpoint that cannot be written: refused before any object
        check_directory(os.path.dirname(os.path.abspath(checkpoint)), what="rotation checkpoint")
    report.last_key = report.after
    log.info(
        "rotate %s://%s/%s to key %s%s%s", store.scheme, bucket, prefix, primary.id_hex,
        f", resuming after {report.after!r}" if report.after else "",
        " (dry run)" if dry_run else "",
    )  # fmt: skip
    for item in store.list(bucket, prefix, start_after=report.after):
        key = item.key
        outcome = record_outcome(
            report, key, errors,
            lambda: rotate_object(sealing, store, bucket, key, dry_run=dry_run,
                                  seal_plaintext=seal_plaintext),
        )  # fmt: skip
        report.scanned += 1
        report.last_key = key
        log.debug("rotate %s/%s: %s", bucket, key, outcome)
        _save_checkpoint(checkpoint, report)
        if progress is not None:
            progress(report, key, outcome)
        if pause:
            time.sleep(pause)
    report.complete = True
    _save_checkpoint(checkpoint, report)
    log.info(
        "rotate %s://%s/%s done: %d objects, %d re-sealed, %d conflicts, %d failed",
        store.scheme, bucket, prefix, report.scanned, report.resealed, len(report.conflicts),
        len(report.failures),
    )  # fmt: skip
    return report


#: outcomes counted in the report's fields of the same name
_COUNTED = ("current", "repaired", "resealed", "sealed_plaintext", "not_sealed")


def record_outcome(
    report: RotationReport,
    key: str,
    errors: tuple[type[BaseException], ...],
    rotate: Callable[[], str],
) -> str:
    """Run ``rotate()`` for ``key`` and record its outcome in ``report``: a changed or deleted
    object is a conflict (left as it is), a sealstore error or one of the store's ``errors`` a
    failure (its class and message only; the run goes on)."""
    try:
        outcome: str = rotate()
    except (ObjectChanged, ObjectNotFound):
        report.conflicts.append(key)
        return "conflict"
    except SealstoreError as exc:
        report.failures.append({"key": key, "error": f"{type(exc).__name__}: {exc}"})
        return "failed"
    except errors as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        what = code or type(exc).__name__
        report.failures.append({"key": key, "error": f"{what}: {exc}"})
        return "failed"
    if outcome in _COUNTED:
        setattr(report, outcome, getattr(report, outcome) + 1)
    return outcome


def _settings(store: ObjectStore, obj: StoredObject) -> dict[str, Any]:
    """What a rewrite of ``obj`` must carry over, for stores that keep such settings."""
    get = getattr(store, "settings", None)
    return dict(get(obj)) if get is not None else {}


def _with_settings(settings: dict[str, Any]) -> dict[str, Any]:
    return {"settings": settings} if settings else {}


def rotate_object(
    sealing: ObjectSealing,
    store: ObjectStore,
    bucket: str,
    key: str,
    *,
    dry_run: bool = False,
    seal_plaintext: bool = False,
) -> str:
    """Rotate one object; returns its outcome: ``current``, ``repaired``, ``resealed``,
    ``sealed_plaintext`` or ``not_sealed``.  ObjectChanged/ObjectNotFound when it changed or
    went away meanwhile (nothing written over it)."""
    head = store.head(bucket, key)
    found = sealing.header(store, head)
    user_meta = M.split_user_metadata(head.metadata)
    if found is None:
        if not seal_plaintext:
            return "not_sealed"
        if not dry_run:
            keep = _settings(store, head)
            body = store.get(bucket, key, if_match=head.etag)
            try:
                sealing.seal(
                    store, bucket, key, body, length=head.size, metadata=user_meta,
                    if_match=head.etag, **_with_settings(keep),
                )  # fmt: skip
            finally:
                body.close()
        return "sealed_plaintext"
    header, _, in_meta = found
    # the commitment (and a bound object's location) is checked before anything is decided
    sealing.opener(store, bucket, key, header, allow_retired=True)
    keyring = sealing.keyring_for(bucket, key)  # a tenant's own, with a tenancy
    primary = keyring.primary
    tag = primary.suite.spec.tag_size_for(keyring.tag_size)
    if (header.key_id, header.suite, header.tag_size) == (primary.key_id, primary.suite, tag):
        if in_meta and M.stored_length(head.metadata) is not None:
            return "current"
        if not dry_run:  # put the lost metadata back, server-side
            n = sealing.plaintext_size(head, header)
            meta = {**user_meta, **M.object_metadata(header, n)}
            store.copy(
                bucket, key, bucket, key, metadata=meta, if_match=head.etag,
                **_with_settings(_settings(store, head)),
            )  # fmt: skip
        return "repaired"
    if not dry_run:
        keep = _settings(store, head)
        opened = sealing.open(store, bucket, key, head=head, allow_retired=True)
        try:
            sealing.seal(
                store, bucket, key, opened, length=opened.length, metadata=user_meta,
                if_match=head.etag, **_with_settings(keep),
            )  # fmt: skip
        finally:
            opened.close()
    return "resealed"
