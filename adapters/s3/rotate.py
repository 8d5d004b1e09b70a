"""Re-seal the objects under a prefix with the keyring's primary key (``sealstore s3 rotate``).

For each object, in listing order:

* already under the primary key (read from the metadata, or from the 76-byte header when the
  metadata was lost): nothing is downloaded; lost metadata is put back with a server-side
  ``CopyObject`` (conditional on the ETag).  This is also the whole cost of a rotation of the
  key-encryption key that wraps the keyring (``sealstore keys``): objects name keyring keys,
  which such a rotation does not change, so every object takes this path;
* under another key: opened and re-sealed as a stream and written back with ``IfMatch`` on the
  ETag that was read, so a concurrent writer is never overwritten (that object is reported as a
  conflict and left for the next run);
* not sealed: skipped, or sealed in place with ``seal_plaintext`` (buckets being migrated).

Objects above 5 GiB, which one PutObject or CopyObject cannot write, take multipart uploads
with the same conditions (``large.py``).  Every write repeats what the object had: content
headers, user metadata, tags, storage class, server-side encryption, object lock, legal hold
and a readable ACL (``settings.py``).

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
from typing import Any

from botocore.exceptions import ClientError
from sealstore.errors import ConfigError, NotSealedObject, SealstoreError
from sealstore.securefile import (
    check_directory,
    private_directory,
    read_secret_file,
    state_directory,
    write_secret_file,
)
from sealstore.stream import HEADER_SIZE, ObjectCipher, parse_object_header

from ..objects import metadata as M
from .large import MAX_SINGLE_REQUEST, copy_multipart, needs_multipart, put_multipart
from .location import object_location
from .settings import for_copy, object_settings

__all__ = [
    "CHECKPOINT_LIMIT",
    "RotationReport",
    "default_checkpoint",
    "parse_s3_url",
    "pending_objects",
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


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> ``(bucket, prefix)``."""
    if not url.startswith("s3://") or len(url) <= 5:
        raise ValueError(f"expected s3://BUCKET[/PREFIX], got {url!r}")
    bucket, _, prefix = url[5:].partition("/")
    if not bucket:
        raise ValueError(f"expected s3://BUCKET[/PREFIX], got {url!r}")
    return bucket, prefix


CHECKPOINT_LIMIT = 64 * 1024 * 1024  # bytes a checkpoint may hold (its lists of failures)


def default_checkpoint(url: str) -> str:
    """Where ``sealstore s3 rotate`` keeps the position of a run on ``url`` by default:
    ``rotate-<12 hex digits of the URL's SHA-256>.json`` in sealstore's state directory
    (``$XDG_STATE_HOME/sealstore``, else ``~/.local/state/sealstore``), created with mode
    0700 if missing; refused (InsecureKeyFile) when others could write into it."""
    directory = private_directory(state_directory(), what="rotation checkpoint")
    return str(directory / f"rotate-{hashlib.sha256(url.encode()).hexdigest()[:12]}.json")


def _load_checkpoint(path, bucket, prefix, primary) -> str | None:
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


def _save_checkpoint(path, report: RotationReport) -> None:
    """The report, written as key files are (sealstore.securefile: a new temp file with a
    random name, mode 0600, fsync, rename over ``path``; a link there is replaced, not
    followed; a crash leaves the previous checkpoint whole)."""
    if not path or report.dry_run:
        return
    data = json.dumps(asdict(report)).encode()
    write_secret_file(path, data, what="rotation checkpoint")


def pending_objects(
    client: Any, bucket: str, prefix: str = "", *, checkpoint: str | None = None
) -> int:
    """How many objects :func:`rotate_objects` with the same arguments would visit now: one
    listing pass (one request per 1000 objects), after the checkpoint's position when the run
    would resume from it.  Objects written meanwhile may make the run visit more."""
    sealing = client.sealstore
    after = _load_checkpoint(checkpoint, bucket, prefix, sealing.keyring.primary.id_hex)
    args = {"Bucket": bucket, "Prefix": prefix, **({"StartAfter": after} if after else {})}
    return sum(len(page.get("Contents", [])) for page in _pages(sealing, args))


def rotate_objects(
    client: Any,
    bucket: str,
    prefix: str = "",
    *,
    checkpoint: str | None = None,
    dry_run: bool = False,
    seal_plaintext: bool = False,
    pause: float = 0.0,
    progress: Callable[[RotationReport, str, str], None] | None = None,
) -> RotationReport:
    """Re-seal every object under ``bucket/prefix`` with the primary key of ``client``'s
    keyring (``client`` comes from :func:`sealstore.adapters.s3.encrypt_client`).

    ``checkpoint``: a file recording the position, to resume after a stop; ``dry_run``: only
    count; ``seal_plaintext``: also seal objects that are not sealed; ``pause``: seconds to
    wait between objects (throttle); ``progress(report, key, outcome)`` is called per object.
    """
    sealing = client.sealstore
    primary = sealing.keyring.primary
    report = RotationReport(bucket, prefix, primary.id_hex, dry_run=dry_run)
    report.after = _load_checkpoint(checkpoint, bucket, prefix, primary.id_hex)
    if checkpoint and not dry_run:  # a checkpoint that cannot be written: refused before any object
        check_directory(os.path.dirname(os.path.abspath(checkpoint)), what="rotation checkpoint")
    report.last_key = report.after
    args = {"Bucket": bucket, "Prefix": prefix}
    if report.after:
        args["StartAfter"] = report.after
    log.info(
        "s3 rotate s3://%s/%s to key %s%s%s", bucket, prefix, primary.id_hex,
        f", resuming after {report.after!r}" if report.after else "",
        " (dry run)" if dry_run else "",
    )  # fmt: skip
    for page in _pages(sealing, args):
        for item in page.get("Contents", []):
            key = item["Key"]
            outcome = _outcome(
                report, key, lambda: _rotate_one(
                    client, sealing, bucket, key, primary, dry_run, seal_plaintext
                ),
            )  # fmt: skip
            report.scanned += 1
            report.last_key = key
            log.debug("s3 rotate %s/%s: %s", bucket, key, outcome)
            _save_checkpoint(checkpoint, report)
            if progress is not None:
                progress(report, key, outcome)
            if pause:
                time.sleep(pause)
    report.complete = True
    _save_checkpoint(checkpoint, report)
    log.info(
        "s3 rotate s3://%s/%s done: %d objects, %d re-sealed, %d conflicts, %d failed",
        bucket, prefix, report.scanned, report.resealed, len(report.conflicts),
        len(report.failures),
    )  # fmt: skip
    return report


#: outcomes counted in the report's fields of the same name
_COUNTED = ("current", "repaired", "resealed", "sealed_plaintext", "not_sealed")


def _outcome(report: RotationReport, key: str, rotate) -> str:
    """Run ``rotate()`` for ``key`` and record its outcome in ``report``: a changed or deleted
    object is a conflict (left as it is), any other S3 or sealstore error a failure (its
    class and message only; the run goes on)."""
    try:
        outcome = rotate()
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code in ("PreconditionFailed", "412", "NoSuchKey"):
            report.conflicts.append(key)
            return "conflict"
        report.failures.append({"key": key, "error": f"{code}: {exc}"})
        return "failed"
    except SealstoreError as exc:
        report.failures.append({"key": key, "error": f"{type(exc).__name__}: {exc}"})
        return "failed"
    if outcome in _COUNTED:
        setattr(report, outcome, getattr(report, outcome) + 1)
    return outcome


def _pages(sealing, args):
    """Listing pages, each fetched raw (the objects are then handled outside the raw block)."""
    token = None
    while True:
        with sealing.raw() as raw:
            page = raw.list_objects_v2(**args, **({"ContinuationToken": token} if token else {}))
        yield page
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return


def _header_of(sealing, bucket, key, head):
    """(header, from_metadata) of an object, or (None, False) when it is not sealed."""
    found = M.header_from_metadata(head.get("Metadata"))
    if found is not None:
        return found[0], True
    if head.get("ContentLength", 0) < HEADER_SIZE:
        return None, False
    with sealing.raw() as raw:
        body = raw.get_object(
            Bucket=bucket,
            Key=key,
            Range=f"bytes=0-{HEADER_SIZE - 1}",
            IfMatch=head["ETag"],
        )["Body"]
        try:
            data = body.read()
        finally:
            body.close()
    try:
        return parse_object_header(data), False
    except NotSealedObject:
        return None, False


def _rotate_one(client, sealing, bucket, key, primary, dry_run, seal_plaintext) -> str:
    with sealing.raw() as raw:
        head = raw.head_object(Bucket=bucket, Key=key)
    etag = head["ETag"]
    header, in_meta = _header_of(sealing, bucket, key, head)
    user_meta = M.split_user_metadata(head.get("Metadata"))
    if header is None:
        if not seal_plaintext:
            return "not_sealed"
        if not dry_run:
            with sealing.raw() as raw:
                keep = object_settings(raw, bucket, key, head)
                body = raw.get_object(Bucket=bucket, Key=key, IfMatch=etag)["Body"]
            _write(client, sealing, bucket, key, body, head["ContentLength"], etag, user_meta, keep)
        return "sealed_plaintext"
    return _rotate_sealed(client, sealing, bucket, key, primary, dry_run, head, header, in_meta)


def _rotate_sealed(client, sealing, bucket, key, primary, dry_run, head, header, in_meta) -> str:
    """A sealed object: current (nothing to do), repaired (under the primary, its metadata put
    back server-side) or resealed (opened and sealed again under the primary)."""
    etag = head["ETag"]
    user_meta = M.split_user_metadata(head.get("Metadata"))
    cipher = ObjectCipher.from_header(
        sealing.keyring,
        header,
        context=sealing.context,
        allow_retired=True,
        location=object_location(bucket, key),
    )  # the commitment (and a bound object's location) is checked before anything is decided
    tag = primary.suite.spec.tag_size_for(sealing.keyring.tag_size)
    if (header.key_id, header.suite, header.tag_size) == (
        primary.key_id,
        primary.suite,
        tag,
    ):
        meta = head.get("Metadata") or {}
        if in_meta and M.stored_length(meta) is not None:
            return "current"
        if not dry_run:  # put the lost metadata back, server-side
            _repair_metadata(sealing, bucket, key, head, header, cipher, user_meta)
        return "repaired"
    if not dry_run:
        with sealing.raw() as raw:
            keep = object_settings(raw, bucket, key, head)
        with sealing.opening_retired():  # rotating away from a retired key is what this is for
            resp = client.get_object(Bucket=bucket, Key=key, IfMatch=etag)
        _write(
            client,
            sealing,
            bucket,
            key,
            resp["Body"],
            resp["ContentLength"],
            etag,
            user_meta,
            keep,
        )
    return "resealed"


def _repair_metadata(sealing, bucket, key, head, header, cipher, user_meta) -> None:
    """Copy an object sealed under the primary onto itself with its sealstore metadata put
    back (If-Match on its ETag: a changed object is a conflict)."""
    etag = head["ETag"]
    n = cipher.plaintext_size(head["ContentLength"])
    meta = {**user_meta, **M.object_metadata(header, n)}
    with sealing.raw() as raw:
        keep = object_settings(raw, bucket, key, head)
        if head["ContentLength"] > MAX_SINGLE_REQUEST:
            copy_multipart(
                raw, {"Bucket": bucket, "Key": key}, bucket, key, head["ContentLength"],
                metadata=meta, extra=keep, source_if_match=etag, if_match=etag,
            )  # fmt: skip
            return
        raw.copy_object(
            Bucket=bucket,
            Key=key,
            CopySource={"Bucket": bucket, "Key": key},
            CopySourceIfMatch=etag,
            MetadataDirective="REPLACE",
            Metadata=meta,
            **for_copy(keep),
        )


def _write(client, sealing, bucket, key, body, length, etag, user_meta, keep) -> None:
    """Seal ``body`` (a plaintext stream of ``length`` bytes) over ``key`` if it is unchanged."""
    try:
        if needs_multipart(length):
            put_multipart(
                client, sealing, bucket, key, body, length,
                metadata=user_meta, extra=keep, if_match=etag,
            )  # fmt: skip
            return
        client.put_object(
            Bucket=bucket,
            Key=key,
            Body=body,
            ContentLength=length,
            IfMatch=etag,
            Metadata=user_meta,
            **keep,
        )
    finally:
        body.close()
