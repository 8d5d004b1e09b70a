"""Every door of google-cloud-storage that moves an object's body, and where an encrypted client
sends it: one table, ``DOORS``, of ``(class, method, what it becomes)``.

The library routes every upload through ``Blob._prep_and_do_upload`` (``upload_from_string``,
``upload_from_file``, ``upload_from_filename``, ``transfer_manager.upload_many``) and every
download through ``Blob._prep_and_do_download`` (``download_as_bytes/text/string``,
``download_to_file/filename``, ``Client.download_blob_to_file``,
``transfer_manager.download_many`` and ``download_chunks_concurrently``); ``blob.open()``,
``copy_blob`` (so ``rename_blob``), ``rewrite`` (so ``update_storage_class``) and ``compose`` are
methods of their own.  The table replaces those methods on the library's classes once; each
replacement looks at the client the call uses and, for an encrypted client outside its
``raw()`` block, seals, opens, re-seals or refuses with ``UnsealedPath``; any other client gets
the library's method untouched.

Behind the table, :func:`guard_transport` wraps the encrypted client's HTTP session: a request
that would send or return a body (a media upload or download, the XML API, ``copyTo``,
``rewriteTo``, ``compose``) and does not come from the sealed paths raises ``UnsealedPath``
before it is sent, so a door the table does not know (``transfer_manager``'s XML multipart
upload, a media link fetched with the client's session) is refused, not a leak.  An encrypted
client cannot be pickled either: a process pool would rebuild a plain client from its settings.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from google.cloud.storage import Blob, Bucket, Client, transfer_manager
from sealstore.errors import SealstoreError, UnsealedPath, UnsupportedOperation

from .files import open_blob

__all__ = ["DOORS", "encrypted_class", "guard_transport", "install"]

#: arguments of the library's methods that do not apply to sealed transfers
_TRANSPORT = ("client", "timeout", "retry", "checksum", "command", "crc32c_checksum_value",
              "single_shot_download", "raw_download")  # fmt: skip


def _sealing(client: Any) -> Any:
    """The client's sealing state, when it is encrypted and not inside ``raw()``."""
    sealing = getattr(client, "sealstore", None)
    return None if sealing is None or sealing.in_raw else sealing


def _door(replace: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make ``replace(sealing, self, arguments)`` the method for encrypted clients (arguments
    bound by name, defaults applied); everyone else calls the original."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def door(self: Any, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            arguments.update(arguments.pop("kwargs", {}))
            del arguments[next(iter(signature.parameters))]
            owner = self if isinstance(self, Client) else self.client
            sealing = _sealing(arguments.get("client") or owner)
            if sealing is None:
                return original(self, *args, **kwargs)
            return replace(sealing, self, arguments)

        door.sealstore_original = original  # type: ignore[attr-defined]
        return door

    return wrap


def _rest(arguments: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in arguments.items() if k not in names and k not in _TRANSPORT}


def _upload(sealing: Any, blob: Any, a: dict[str, Any]) -> None:
    """Uploads: sealed (``GCSSealing.upload``)."""
    sealing.upload(blob, a["file_obj"], **_rest(a, "file_obj"))


def _download(sealing: Any, blob: Any, a: dict[str, Any]) -> None:
    """Downloads, whole or ``start``/``end``: verified plaintext (``GCSSealing.download``)."""
    sealing.download(blob, a["file_obj"], **_rest(a, "file_obj"))


def _download_file(sealing: Any, blob: Any, a: dict[str, Any]) -> Any:
    """``download_to_filename``: a download that fails to verify (tampered, cut, moved) leaves
    no file behind; the library removes it only for its own errors, and a file of the verified
    bytes before the failure would look whole."""
    original = Blob._handle_filename_and_download.sealstore_original
    args, filename = a.pop("args", ()), a.pop("filename")
    try:
        return original(blob, filename, *args, **a)
    except SealstoreError:
        with contextlib.suppress(FileNotFoundError):
            os.remove(filename)
        raise


def _open(sealing: Any, blob: Any, a: dict[str, Any]) -> Any:
    """``blob.open()``: a reader of verified plaintext, a writer that seals (``files.py``)."""
    text = {k: a.get(k) for k in ("encoding", "errors", "newline")}
    extra = _rest(a, "mode", "chunk_size", "ignore_flush", "encoding", "errors", "newline")
    return open_blob(sealing, blob, a["mode"], a.get("chunk_size"), text, extra)


def _refuse_conditions(what: str, a: dict[str, Any], *allowed: str) -> None:
    odd = sorted(
        k for k, v in a.items() if k.startswith("if_") and k not in allowed and v is not None
    )
    if odd or a.get("destination_contexts"):
        raise UnsupportedOperation(
            f"{what} on an encrypted client supports {', '.join(allowed)} only, not "
            f"{', '.join(odd or ['destination_contexts'])}"
        )


def _copy_blob(sealing: Any, bucket: Any, a: dict[str, Any]) -> Any:
    """``bucket.copy_blob`` (and ``rename_blob``): a server-side copy would keep the source's
    location binding, so the source is read through the client and sealed for the destination
    (with its metadata and content headers; the new object gets the bucket's default ACL)."""
    _refuse_conditions("copy_blob", a, "if_generation_match", "if_source_generation_match")
    source = a["blob"]
    if source.bucket.name != bucket.name:
        source = bucket.blob(source.name, generation=source.generation)
    return sealing.copy(
        source, a["destination_bucket"].name, a.get("new_name") or source.name,
        source_generation=a.get("source_generation"),
        if_generation_match=a.get("if_generation_match"),
        if_source_generation_match=a.get("if_source_generation_match"),
    )  # fmt: skip


def _rewrite(sealing: Any, blob: Any, a: dict[str, Any]) -> tuple[None, int, int]:
    """``blob.rewrite(source)`` (and ``update_storage_class``): re-sealed as ``blob`` in one
    call, so the answer is done (no token): ``(None, bytes, bytes)`` in plaintext bytes."""
    _refuse_conditions("rewrite", a, "if_generation_match", "if_source_generation_match")
    from .store import WRITABLE

    changed = {k: blob._properties[k] for k in blob._changes if k in WRITABLE}
    new = sealing.copy(
        a["source"], blob.bucket.name, blob.name,
        metadata=blob.metadata if "metadata" in blob._changes else None,
        properties=changed or None,
        if_generation_match=a.get("if_generation_match"),
        if_source_generation_match=a.get("if_source_generation_match"),
    )  # fmt: skip
    blob._set_properties(new._properties)
    size = int(blob.size or 0)
    return None, size, size


def _compose(sealing: Any, blob: Any, a: dict[str, Any]) -> None:
    raise UnsealedPath(
        "compose on an encrypted client would concatenate sealed objects, which is no object "
        "(each has its own header and key); download the parts and upload the whole instead"
    )


def _resumable_session(sealing: Any, blob: Any, a: dict[str, Any]) -> None:
    raise UnsealedPath(
        "create_resumable_upload_session on an encrypted client would hand out a URL that "
        "stores what is sent unsealed; upload through the client (upload_from_file is "
        "resumable and chunked) or create it inside client.sealstore.raw()"
    )


def _signed_url(sealing: Any, blob: Any, a: dict[str, Any]) -> Any:
    """Signed URLs run without the client: a PUT/POST/resumable URL would store what is sent
    as it is, a GET URL would return sealed bytes.  HEAD and DELETE carry no body."""
    method = str(a.get("method") or "GET").upper()
    if method in ("HEAD", "DELETE"):
        original = Blob.generate_signed_url.sealstore_original
        with sealing.raw():
            return original(blob, **{k: v for k, v in a.items()})
    what = (
        "would return the sealed bytes to whoever opens it"
        if method == "GET"
        else "would store what is sent unsealed"
    )
    raise UnsealedPath(
        f"a signed {method} URL from an encrypted client {what}; fetch or store through the "
        "client instead (sign inside client.sealstore.raw() to hand out the sealed bytes)"
    )


def _chunked_download(sealing: Any, blob: Any, a: dict[str, Any]) -> None:
    """``transfer_manager.download_chunks_concurrently``: each chunk is a sealed ranged
    download (authenticated); the whole-file CRC32C the library would compare is the stored
    (sealed) object's, so it is not computed over the plaintext."""
    original = transfer_manager.download_chunks_concurrently.sealstore_original
    a = {**a, "crc32c_checksum": False}
    return original(blob, **a)  # type: ignore[no-any-return]


def _post_policy(sealing: Any, client: Any, a: dict[str, Any]) -> None:
    raise UnsealedPath(
        "generate_signed_post_policy_v4 on an encrypted client would let a form upload "
        "unsealed; upload through the client (or sign inside client.sealstore.raw())"
    )


#: (class, method, replacement): the whole surface an encrypted client changes
DOORS: tuple[tuple[Any, str, Callable[..., Any]], ...] = (
    (Blob, "_prep_and_do_upload", _upload),
    (Blob, "_prep_and_do_download", _download),
    (Blob, "_handle_filename_and_download", _download_file),
    (Blob, "open", _open),
    (Bucket, "copy_blob", _copy_blob),
    (Blob, "rewrite", _rewrite),
    (Blob, "compose", _compose),
    (Blob, "create_resumable_upload_session", _resumable_session),
    (Blob, "generate_signed_url", _signed_url),
    (Client, "generate_signed_post_policy_v4", _post_policy),
    (transfer_manager, "download_chunks_concurrently", _chunked_download),
)

_installed = False
_install_lock = threading.Lock()


def _size(original: property) -> property:
    """``blob.size`` of an encrypted client's sealed object: its plaintext size (from the
    sealstore metadata and the stored size); the stored size otherwise."""

    def size(self: Any) -> Any:
        sealing = _sealing(self.client) if self.bucket is not None else None
        if sealing is not None:
            n = sealing.plaintext_size(self)
            if n is not None:
                return n
        return original.fget(self)  # type: ignore[misc]

    return property(size, doc=original.__doc__)


def install() -> None:
    """Replace the doors on the library's classes (once per process)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        for owner, name, replace in DOORS:
            setattr(owner, name, _door(replace)(getattr(owner, name)))
        Blob.size = _size(Blob.__dict__["size"])
        _installed = True


# ---- the transport guard ---------------------------------------------------------------------

_COPIES = re.compile(r"/o/[^/]+/(copyTo|rewriteTo)/b/|/o/[^/]+/compose$")
_BATCHED = re.compile(rb"copyTo|rewriteTo|/compose|alt=media|/upload/|/download/")


def moves_body(method: str, url: str, data: Any) -> bool:
    """Whether a request to the storage host sends or returns an object's body: media uploads
    and downloads, the XML API, copies, rewrites, composes (a batch holding one of them)."""
    parts = urlsplit(url)
    if "media" in parse_qs(parts.query).get("alt", []):
        return True
    if parts.path.startswith("/storage/v1/"):
        return bool(_COPIES.search(parts.path))
    if parts.path.startswith("/batch/"):
        body = data.encode() if isinstance(data, str) else bytes(data or b"")
        return bool(_BATCHED.search(body))
    return True  # /upload/..., /download/..., /BUCKET/OBJECT (XML)


def guard_transport(client: Any, sealing: Any) -> None:
    """Refuse, on ``client``'s HTTP session, every body-moving request that does not come from
    the sealed paths (see the module docstring)."""
    session = client._http
    host = urlsplit(client._connection.API_BASE_URL).netloc
    send = session.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        target = urlsplit(url).netloc
        ours = (
            target == host
            or target.endswith(".storage.googleapis.com")
            or (target.endswith(".googleapis.com") and target.split(".")[0] == "storage")
        )  # the JSON and XML hosts, mTLS and regional ones, virtual-hosted buckets
        data = kwargs.get("data", args[0] if args else None)
        if ours and not sealing.in_raw and moves_body(method, url, data):
            raise UnsealedPath(
                f"a {method} request that moves an object's body around the encrypted client's "
                "sealing (the XML API, a media link, a resumable session, a server-side copy) "
                "was refused before it was sent; use the Blob methods (docs/GCS.md)"
            )
        return send(method, url, *args, **kwargs)

    session.request = request


_CLASSES: dict[type, type] = {}


def encrypted_class(cls: type) -> type:
    """A subclass of the client's class that refuses to be pickled."""
    with _install_lock:
        if cls not in _CLASSES:

            def __reduce_ex__(self: Any, protocol: Any) -> Any:
                raise UnsealedPath(
                    "an encrypted client cannot be pickled: a process pool "
                    "(transfer_manager worker_type=PROCESS) would rebuild a plain client and move "
                    "bodies unsealed; use threads (the default)"
                )

            _CLASSES[cls] = type(cls.__name__, (cls,), {"__reduce_ex__": __reduce_ex__,
                                                        "__module__": cls.__module__})  # fmt: skip
        return _CLASSES[cls]
