"""The per-object key: one HKDF over the keyring key gives the object key, the nonce prefix and
the key commitment; :class:`ObjectCipher` seals and opens the segments of one object."""

from __future__ import annotations

import hmac
import os
from typing import TYPE_CHECKING, Any, NoReturn

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import (
    KeyCommitmentMismatch,
    KeyNotUsable,
    MalformedObject,
    WrongLocation,
)
from ..format import Suite, context_digest
from ..keyring.keys import make_cipher

if TYPE_CHECKING:
    from cryptography.utils import Buffer

    from ..keyring import Key, Keyring
from .header import (
    _BOUND_INFO,
    _CHECK_INFO,
    _CHECK_SIZE,
    _COMMIT_SIZE,
    _FIXED,
    _INFO,
    _SEGMENT_NONCE_TAIL,
    DEFAULT_SEGMENT_SIZE,
    FLAG_LOCATION,
    FLAG_TAG256,
    MAGIC,
    VERSION,
    ObjectHeader,
    _segment_log2,
    parse_object_header,
    plaintext_size,
    sealed_size,
)


def _usable_key(keyring: Keyring, key_id: int, allow_retired: bool) -> Key:
    key = keyring.get(key_id)  # UnknownKeyId
    state = str(key.state)
    if state == "destroyed":
        raise KeyNotUsable(f"key {key.id_hex} is destroyed")
    if state == "retired" and not (allow_retired or keyring.allow_retired):
        raise KeyNotUsable(
            f"key {key.id_hex} is retired; pass allow_retired=True to open its objects"
        )
    return key


def _key_and_prefix_sizes(suite: Suite) -> tuple[int, int]:
    """Object key bytes and segment-nonce prefix bytes of ``suite`` (the nonce less the index
    and final flag)."""
    nonce_size = suite.spec.nonce_size
    return suite.spec.key_size, nonce_size - _SEGMENT_NONCE_TAIL


def _derive(
    material: bytes, header_head: bytes, salt: bytes, suite: Suite, context: bytes
) -> tuple[bytes, bytes, bytes]:
    key_len, prefix_len = _key_and_prefix_sizes(suite)
    okm = HKDF(
        algorithm=hashes.SHA256(),
        length=key_len + prefix_len + _COMMIT_SIZE,
        salt=salt,
        info=_INFO + header_head + context_digest(context),
    ).derive(material)
    return (
        okm[:key_len],
        okm[key_len : key_len + prefix_len],
        okm[key_len + prefix_len :],
    )


def _location_check(
    material: bytes, header_head: bytes, random_salt: bytes, context: bytes, location: bytes
) -> bytes:
    """The keyed location check a bound object stores at the end of its salt."""
    return HKDF(
        algorithm=hashes.SHA256(),
        length=_CHECK_SIZE,
        salt=random_salt,
        info=_CHECK_INFO + header_head + context_digest(context) + context_digest(location),
    ).derive(material)


def _derive_bound(
    material: bytes, header_head: bytes, salt: bytes, suite: Suite, context: bytes, location: bytes
) -> tuple[bytes, bytes]:
    """Object key and nonce prefix of a bound object (they depend on the location)."""
    key_len, prefix_len = _key_and_prefix_sizes(suite)
    okm = HKDF(
        algorithm=hashes.SHA256(),
        length=key_len + prefix_len,
        salt=salt,
        info=_BOUND_INFO + header_head + context_digest(context) + context_digest(location),
    ).derive(material)
    return okm[:key_len], okm[key_len:]


def _location_matches(
    material: bytes, head: bytes, salt: bytes, context: bytes, location: bytes
) -> bool:
    """Whether a bound object's stored location check is the one of ``location``.  Returns
    instead of raising, so no key material is in the locals of a frame that raises."""
    random_salt, stored = salt[: 32 - _CHECK_SIZE], salt[32 - _CHECK_SIZE :]
    return hmac.compare_digest(
        _location_check(material, head, random_salt, context, location), stored
    )


_NO_LOCATION = (
    "the object is bound to the location it was sealed for, and no location was given to open it"
)
_OTHER_LOCATION = (
    "the object was sealed for another location (moved or copied by a tool other "
    "than sealstore?); it opens only where it was written"
)


class ObjectCipher:
    """The derived key of one object and its segment loop.

    ``ObjectCipher.create(keyring)`` starts a new object under the primary key (fresh salt);
    ``ObjectCipher.from_header(keyring, header)`` re-derives the key of an existing object and
    checks its commitment before anything is decrypted (UnknownKeyId, KeyNotUsable,
    MalformedObject or KeyCommitmentMismatch).  Safe to share between threads.
    """

    __slots__ = (
        "_cipher",
        "_prefix",
        "header",
        "header_bytes",
        "segment_size",
        "tag_size",
    )

    def __init__(self, header: ObjectHeader, cipher: Any, prefix: bytes) -> None:
        self.header: ObjectHeader = header
        self.header_bytes: bytes = header.pack()
        self.segment_size: int = header.segment_size
        self.tag_size: int = header.tag_size
        self._cipher = cipher
        self._prefix = prefix

    @classmethod
    def create(
        cls,
        keyring: Keyring,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        context: bytes = b"",
        location: bytes | None = None,
    ) -> ObjectCipher:
        """``location``: bytes naming where the object will live (None: not bound)."""
        seg_log2 = _segment_log2(segment_size)
        key = keyring.primary
        suite = key.suite
        tag_size = suite.spec.tag_size_for(keyring.tag_size)
        flags = (FLAG_TAG256 if tag_size == 32 else 0) | (0 if location is None else FLAG_LOCATION)
        salt = os.urandom(32)
        head = _FIXED.pack(MAGIC, VERSION, suite, flags, seg_log2, key.key_id, salt, b"")[:12]
        material = key.reveal_material()
        if location is not None:
            random_salt = salt[: 32 - _CHECK_SIZE]
            salt = random_salt + _location_check(material, head, random_salt, context, location)
        okey, prefix, commit = _derive(material, head, salt, suite, context)
        if location is not None:
            okey, prefix = _derive_bound(material, head, salt, suite, context, location)
        header = ObjectHeader(VERSION, suite, flags, seg_log2, key.key_id, salt, commit)
        return cls(header, make_cipher(suite, okey, tag_size), prefix)

    @classmethod
    def from_header(
        cls,
        keyring: Keyring,
        header: ObjectHeader | bytes,
        *,
        context: bytes = b"",
        location: bytes | None = None,
        allow_retired: bool = False,
    ) -> ObjectCipher:
        """``location``: where the object is read from; it must be the one a bound object was
        sealed for (WrongLocation otherwise) and is ignored for objects that are not bound."""
        h = header if isinstance(header, ObjectHeader) else parse_object_header(header)
        key = _usable_key(keyring, h.key_id, allow_retired)
        if key.suite.spec.family != h.suite.spec.family:
            raise MalformedObject(
                f"object names suite {h.suite} but key {key.id_hex} is a {key.suite} key"
            )
        keyring.check_tag_size(h.suite, h.tag_size, h.key_id)  # ShortTagRefused
        material, head = key.reveal_material(), h.pack()[:12]
        okey, prefix, commit = _derive(material, head, h.salt, h.suite, context)
        if not hmac.compare_digest(commit, h.commit):
            # no key material, derived key or expected commitment in the locals of a frame that
            # raises: error reporters record them
            del okey, prefix, commit, material
            raise KeyCommitmentMismatch(
                f"object header does not match key {key.id_hex} (edited header, another key "
                "with this id, or a different context)"
            )
        if h.bound:
            if location is None or not _location_matches(material, head, h.salt, context, location):
                del okey, prefix, commit, material
                raise WrongLocation(_NO_LOCATION if location is None else _OTHER_LOCATION)
            okey, prefix = _derive_bound(material, head, h.salt, h.suite, context, location)
        return cls(h, make_cipher(h.suite, okey, h.tag_size), prefix)

    def __repr__(self) -> str:
        h = self.header
        return (
            f"<ObjectCipher suite={h.suite} key_id={h.key_id_hex} segment_size={self.segment_size} "
            f"tag_size={self.tag_size}>"
        )

    def __reduce__(self) -> NoReturn:
        raise TypeError("ObjectCipher objects hold a key and cannot be pickled")

    @property
    def kernel(self) -> str:
        return str(self._cipher.kernel)

    def sealed_size(self, n: int) -> int:
        return sealed_size(n, self.segment_size, self.tag_size)

    def plaintext_size(self, sealed: int) -> int:
        return plaintext_size(sealed, self.segment_size, self.tag_size)

    def segments_size(self, n: int, final: bool) -> int:
        """Sealed bytes of ``n`` plaintext bytes sealed as a run of segments (no header)."""
        seg = self.segment_size
        if not final and n % seg:
            raise ValueError(f"a non-final run must hold whole segments of {seg} bytes, not {n}")
        return n + (n // seg + (1 if final else 0)) * self.tag_size

    def seal_into(self, out: Buffer, data: Buffer, first_index: int, final: bool) -> int:
        """Seal ``data`` as segments ``first_index, ...`` into ``out`` (one native call)."""
        written: int = self._cipher.seal_segments_into(
            out,
            data,
            self.segment_size,
            self._prefix,
            first_index,
            final,
            self.header_bytes,
        )
        return written

    def open_into(self, out: Buffer, data: Buffer, first_index: int, final: bool) -> int:
        """Open sealed segments ``first_index, ...`` into ``out``; InvalidTag has ``.index``."""
        written: int = self._cipher.open_segments_into(
            out,
            data,
            self.segment_size,
            self._prefix,
            first_index,
            final,
            self.header_bytes,
        )
        return written

    def seal(self, data: Buffer, first_index: int = 0, final: bool = True) -> bytes:
        """The sealed segments of ``data`` as bytes (no header)."""
        view = memoryview(data).cast("B")
        out = bytearray(self.segments_size(len(view), final))
        self.seal_into(out, view, first_index, final)
        return bytes(out)
