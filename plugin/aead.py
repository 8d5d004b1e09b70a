"""The AEAD classes: AEGIS-128L, AEGIS-128X2, AEGIS-128X4, AEGIS-256, AEGIS-256X2, AEGIS-256X4
(native kernels) and AES-GCM.

They mirror ``cryptography.hazmat.primitives.ciphers.aead``: the key goes to the constructor,
``encrypt(nonce, data, associated_data)`` returns the ciphertext with the tag appended, and
``decrypt`` raises :class:`sealstore.errors.InvalidTag` on any authentication failure.  Any
contiguous buffer is accepted without a copy.

``encrypt_into(nonce, data, associated_data, buf)``/``decrypt_into`` write into a caller's
buffer, in cryptography's argument order (>= 47: the buffer last; ``buf`` may be longer than
the output, the number of bytes written is returned).  Beyond cryptography's API, every class
has the prefixed-value calls the sealed-value format is built on:
``seal_prefixed(prefix, plaintext, ad)`` returns ``prefix || nonce || ciphertext || tag`` with a
fresh random nonce and ``prefix || ad`` authenticated, and ``open_prefixed`` reverses it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from cryptography.hazmat.primitives.ciphers import aead as _crypto_aead
from cryptography.exceptions import InvalidTag as _CryptoInvalidTag

from . import _speedups, native
from .errors import InvalidTag

if TYPE_CHECKING:
    from cryptography.utils import Buffer

__all__ = [
    "AEGIS128L",
    "AEGIS128X2",
    "AEGIS128X4",
    "AEGIS256",
    "AEGIS256X2",
    "AEGIS256X4",
    "AESGCM",
    "Cipher",
]


def _key_bytes(key: Buffer, sizes: tuple[int, ...]) -> memoryview:
    try:
        view = memoryview(key)
    except TypeError:
        raise TypeError(f"key must be a bytes-like object, not {type(key).__name__}") from None
    if view.nbytes not in sizes:
        expected = " or ".join(str(s) for s in sizes)
        raise ValueError(f"key must be {expected} bytes, got {view.nbytes}")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


_AEGIS_DOC = """An AEGIS cipher bound to one key and one native kernel.

    ``tag_size`` is 16 or 32 bytes (32 gives key commitment).  ``kernel`` names a native
    kernel (``"portable"``, ``"aesni"``, ``"avx2"``, ``"avx512"``, ``"armcrypto"``) for tests
    and benchmarks; by default the best one this CPU runs (or ``SEALSTORE_KERNEL``) is used.
    One object is safe to use from many threads.
    """

#: (instance attribute, native method): the entry points each instance takes from its context
_FAST = (
    ("encrypt", "encrypt"),
    ("decrypt", "decrypt"),
    ("encrypt_into", "encrypt_into"),
    ("decrypt_into", "decrypt_into"),
    ("seal_prefixed", "seal"),
    ("open_prefixed", "open"),
    ("seal_prefixed_many", "seal_many"),
    ("open_prefixed_many", "open_many"),
    ("seal_segments_into", "seal_segments_into"),
    ("open_segments_into", "open_segments_into"),
)


class _AEGIS:
    __doc__ = _AEGIS_DOC

    _variant = ""
    #: bytes of key and nonce, as the native library's variant table says (set per subclass)
    key_size: int = 0
    nonce_size: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.key_size, cls.nonce_size = native.variant_sizes(cls._variant)

    def __init__(self, key: Buffer, tag_size: int = 16, *, kernel: str | None = None) -> None:
        view = _key_bytes(key, (self.key_size,))
        if not isinstance(tag_size, int) or isinstance(tag_size, bool):
            raise TypeError(f"tag_size must be an int (16 or 32), not {type(tag_size).__name__}")
        if kernel is not None and not isinstance(kernel, str):
            raise TypeError(f"kernel must be a kernel name or None, not {type(kernel).__name__}")
        if tag_size not in (16, 32):
            raise ValueError(f"tag_size must be 16 or 32 bytes, got {tag_size!r}")
        self.tag_size = tag_size
        self._ctx, fast = native.new_fast_ctx(self._variant, view, tag_size, kernel)
        self.kernel: str = native.ctx_kernel(self._ctx)
        self._fast = fast
        # The hot entry points are the C methods themselves: no Python frame per call.
        for name, native_name in _FAST:
            setattr(self, name, getattr(fast, native_name))

    @classmethod
    def generate_key(cls) -> bytes:
        """A fresh random key from the OS CSPRNG."""
        return os.urandom(cls.key_size)

    def __repr__(self) -> str:
        return f"<sealstore.{type(self).__name__} tag_size={self.tag_size} kernel={self.kernel!r}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"{type(self).__name__} objects hold a key and cannot be pickled")

    # The methods below document the API; instances replace them with the C entry points.

    def encrypt(self, nonce: Buffer, data: Buffer, associated_data: Buffer | None = None) -> bytes:
        """Encrypt ``data``; returns the ciphertext with the tag appended."""
        return self._fast.encrypt(nonce, data, associated_data)

    def decrypt(self, nonce: Buffer, data: Buffer, associated_data: Buffer | None = None) -> bytes:
        """Decrypt and verify ``data`` (ciphertext || tag); raises InvalidTag."""
        return self._fast.decrypt(nonce, data, associated_data)

    def encrypt_into(
        self, nonce: Buffer, data: Buffer, associated_data: Buffer | None, buf: Buffer
    ) -> int:
        """Write ciphertext || tag into ``buf`` (cryptography's order: the buffer last);
        returns the number of bytes written.  ``buf`` may start exactly where ``data`` does (in
        place); any other overlap with an input raises OverlappingBuffers before anything is
        written."""
        return self._fast.encrypt_into(nonce, data, associated_data, buf)

    def decrypt_into(
        self, nonce: Buffer, data: Buffer, associated_data: Buffer | None, buf: Buffer
    ) -> int:
        """Write the plaintext into ``buf``; returns its length, ``len(data) - tag_size``.

        What ``buf`` holds: *while the call runs*, its first ``len(data) - tag_size`` bytes
        receive plaintext as it is decrypted, **before the tag is verified** (the tag is checked
        at the end); another thread reading ``buf`` meanwhile (the GIL is released from 32 KiB)
        can see unverified plaintext, which a forger chose the ciphertext of.  *After success*
        they hold the verified plaintext.  *After a failure* those bytes are wiped (zeros)
        before InvalidTag is raised; in place (``buf`` starting where ``data`` does) that
        wipes the ciphertext too.  Bytes of ``buf`` past the output are never touched.  Do not
        let other threads read ``buf`` until the call has returned.  Overlap: as
        encrypt_into."""
        return self._fast.decrypt_into(nonce, data, associated_data, buf)

    def seal_prefixed(
        self, prefix: Buffer, plaintext: Buffer, associated_data: Buffer | None = None
    ) -> bytes:
        """``prefix || nonce || ciphertext || tag`` with a random nonce; AD = prefix || ad."""
        return self._fast.seal(prefix, plaintext, associated_data)

    def open_prefixed(
        self, prefix_len: int, sealed: Buffer, associated_data: Buffer | None = None
    ) -> bytes:
        """Open a value made by :meth:`seal_prefixed`; raises InvalidTag."""
        return self._fast.open(prefix_len, sealed, associated_data)

    def seal_prefixed_many(
        self, prefix: Buffer, plaintexts: Iterable[Buffer], associated_data: Buffer | None = None
    ) -> list[bytes]:
        """:meth:`seal_prefixed` over a list, in one native call."""
        return self._fast.seal_many(prefix, plaintexts, associated_data)

    def open_prefixed_many(
        self, prefix_len: int, sealed: Iterable[Buffer], associated_data: Buffer | None = None
    ) -> list[bytes]:
        """:meth:`open_prefixed` over a list, in one native call; InvalidTag has ``.index``."""
        return self._fast.open_many(prefix_len, sealed, associated_data)

    def seal_segments_into(
        self,
        out: Buffer,
        data: Buffer,
        segment_size: int,
        nonce_prefix: Buffer,
        first_index: int,
        final: bool,
        associated_data: Buffer | None = None,
    ) -> int:
        """Seal ``data`` as segments ``first_index, ...`` of a stream, into ``out``.

        Segment i uses nonce ``nonce_prefix (nonce_size - 5 bytes: 11 for AEGIS-128, 27 for
        AEGIS-256) || BE32(i) || final flag``; each sealed
        segment is ciphertext || tag.  A non-final buffer holds whole segments; a final one
        ends with the stream's last segment (the remainder, possibly empty).  One native call
        for the whole buffer, without the GIL.  Returns the bytes written.  ``out`` may not
        overlap any input (not even in place: segment i moves by i tags): OverlappingBuffers.
        """
        return self._fast.seal_segments_into(
            out, data, segment_size, nonce_prefix, first_index, final, associated_data
        )

    def open_segments_into(
        self,
        out: Buffer,
        data: Buffer,
        segment_size: int,
        nonce_prefix: Buffer,
        first_index: int,
        final: bool,
        associated_data: Buffer | None = None,
    ) -> int:
        """Open what :meth:`seal_segments_into` wrote.  Any failing segment, or a length that
        cannot be a segment sequence (truncation, extension), raises InvalidTag with
        ``.index`` set to the segment; ``out`` is then wiped."""
        return self._fast.open_segments_into(
            out, data, segment_size, nonce_prefix, first_index, final, associated_data
        )


class AEGIS128L(_AEGIS):
    __doc__ = "AEGIS-128L (one lane). " + _AEGIS_DOC
    _variant = "AEGIS-128L"


class AEGIS128X2(_AEGIS):
    __doc__ = "AEGIS-128X2 (two lanes). " + _AEGIS_DOC
    _variant = "AEGIS-128X2"


class AEGIS128X4(_AEGIS):
    __doc__ = "AEGIS-128X4 (four lanes). " + _AEGIS_DOC
    _variant = "AEGIS-128X4"


class AEGIS256(_AEGIS):
    __doc__ = "AEGIS-256 (one lane; 32-byte keys and nonces). " + _AEGIS_DOC
    _variant = "AEGIS-256"


class AEGIS256X2(_AEGIS):
    __doc__ = "AEGIS-256X2 (two lanes; 32-byte keys and nonces). " + _AEGIS_DOC
    _variant = "AEGIS-256X2"


class AEGIS256X4(_AEGIS):
    __doc__ = "AEGIS-256X4 (four lanes; 32-byte keys and nonces). " + _AEGIS_DOC
    _variant = "AEGIS-256X4"


class AESGCM:
    """AES-128/192/256-GCM through ``cryptography`` (OpenSSL): the baseline and the
    compatibility suite.  12-byte nonces are the norm (cryptography accepts 8 to 128); the
    tag is 16 bytes."""

    nonce_size = 12
    tag_size = 16
    kernel = "openssl"

    def __init__(self, key: Buffer) -> None:
        view = _key_bytes(key, (16, 24, 32))
        self.key_size: int = view.nbytes
        # An immutable copy: cryptography (42.x at least) keeps a reference to the buffer it
        # is given, so a caller that wipes its bytearray afterwards would zero our key.
        self._aead = _crypto_aead.AESGCM(bytes(view))

    @classmethod
    def generate_key(cls, bit_length: int = 256) -> bytes:
        if bit_length not in (128, 192, 256):
            raise ValueError(f"bit_length must be 128, 192 or 256, got {bit_length!r}")
        return os.urandom(bit_length // 8)

    def __repr__(self) -> str:
        return f"<sealstore.AESGCM key_size={self.key_size}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError("AESGCM objects hold a key and cannot be pickled")

    def encrypt(self, nonce: Buffer, data: Buffer, associated_data: Buffer | None = None) -> bytes:
        return self._aead.encrypt(nonce, data, associated_data)

    def decrypt(self, nonce: Buffer, data: Buffer, associated_data: Buffer | None = None) -> bytes:
        try:
            return self._aead.decrypt(nonce, data, associated_data)
        except _CryptoInvalidTag:
            raise InvalidTag() from None

    def encrypt_into(
        self, nonce: Buffer, data: Buffer, associated_data: Buffer | None, buf: Buffer
    ) -> int:
        dst = _out_view(buf)  # first: a call in the old order (buffer first) fails here
        n = memoryview(data).nbytes + self.tag_size
        _check_room(dst, n)
        _speedups.check_disjoint(dst, n, True, data, nonce, associated_data)
        return self._aead.encrypt_into(nonce, data, associated_data, dst[:n])

    def decrypt_into(
        self, nonce: Buffer, data: Buffer, associated_data: Buffer | None, buf: Buffer
    ) -> int:
        """Write the plaintext into ``buf``; returns its length, ``len(data) - 16``.

        What ``buf`` holds: while the call runs, unverified plaintext may be written into its
        first ``len(data) - 16`` bytes before the tag is checked (cryptography/OpenSSL; other
        threads can see it); after success, the verified plaintext; after a failure, zeros
        (wiped before InvalidTag is raised; in place, the ciphertext is wiped too).  Bytes past
        the output are never touched.  Overlap: as encrypt_into."""
        dst = _out_view(buf)
        n = memoryview(data).nbytes - self.tag_size
        if n < 0:
            raise InvalidTag()
        _check_room(dst, n)
        _speedups.check_disjoint(dst, n, True, data, nonce, associated_data)
        try:
            return self._aead.decrypt_into(nonce, data, associated_data, dst[:n])
        except _CryptoInvalidTag:
            dst[:n] = bytes(n)
            raise InvalidTag() from None

    def seal_prefixed(
        self, prefix: Buffer, plaintext: Buffer, associated_data: Buffer | None = None
    ) -> bytes:
        head = bytes(prefix)
        nonce = os.urandom(self.nonce_size)
        ad = head + bytes(associated_data or b"")
        return head + nonce + self._aead.encrypt(nonce, plaintext, ad)

    def open_prefixed(
        self, prefix_len: int, sealed: Buffer, associated_data: Buffer | None = None
    ) -> bytes:
        view = memoryview(sealed)
        if prefix_len < 0:
            raise ValueError("prefix_len must be >= 0")
        if view.nbytes < prefix_len + self.nonce_size + self.tag_size:
            raise InvalidTag()
        ad = bytes(view[:prefix_len]) + bytes(associated_data or b"")
        nonce = view[prefix_len : prefix_len + self.nonce_size]
        try:
            return self._aead.decrypt(nonce, view[prefix_len + self.nonce_size :], ad)
        except _CryptoInvalidTag:
            raise InvalidTag() from None

    def seal_prefixed_many(
        self, prefix: Buffer, plaintexts: Iterable[Buffer], associated_data: Buffer | None = None
    ) -> list[bytes]:
        out = []
        for i, p in enumerate(plaintexts):
            try:
                out.append(self.seal_prefixed(prefix, p, associated_data))
            except TypeError as e:  # as the AEGIS ciphers do: name the list position
                setattr(e, "index", i)
                raise
        return out

    def seal_segments_into(
        self,
        out: Buffer,
        data: Buffer,
        segment_size: int,
        nonce_prefix: Buffer,
        first_index: int,
        final: bool,
        associated_data: Buffer | None = None,
    ) -> int:
        """As AEGIS's, with 12-byte nonces: ``nonce_prefix (7 bytes) || BE32(i) || flag``."""
        src = memoryview(data).cast("B")
        n, rest = divmod(src.nbytes, segment_size)
        if not final and rest:
            raise ValueError("a non-final buffer must hold whole segments")
        sizes = [segment_size] * n + ([rest] if final else [])
        dst = memoryview(out).cast("B")
        need = src.nbytes + len(sizes) * self.tag_size
        if dst.nbytes < need:
            raise ValueError(f"out must be at least {need} bytes, got {dst.nbytes}")
        _speedups.check_disjoint(dst, need, False, src, None, associated_data, nonce_prefix)
        pos = 0
        for i, size in enumerate(sizes):
            nonce = _gcm_segment_nonce(nonce_prefix, first_index + i, final and i == len(sizes) - 1)
            off = i * segment_size
            sealed = self._aead.encrypt(nonce, src[off : off + size], associated_data)
            dst[pos : pos + len(sealed)] = sealed
            pos += len(sealed)
        return pos

    def open_segments_into(
        self,
        out: Buffer,
        data: Buffer,
        segment_size: int,
        nonce_prefix: Buffer,
        first_index: int,
        final: bool,
        associated_data: Buffer | None = None,
    ) -> int:
        src = memoryview(data).cast("B")
        step = segment_size + self.tag_size
        n, rest = divmod(src.nbytes, step)
        if (final and rest < self.tag_size) or (not final and (rest or not n)):
            e = InvalidTag()
            e.index = first_index
            raise e
        sizes = [step] * n + ([rest] if final else [])
        dst = memoryview(out).cast("B")
        need = src.nbytes - len(sizes) * self.tag_size
        if dst.nbytes < need:
            raise ValueError(f"out must be at least {need} bytes, got {dst.nbytes}")
        _speedups.check_disjoint(dst, need, False, src, None, associated_data, nonce_prefix)
        for i, size in enumerate(sizes):
            nonce = _gcm_segment_nonce(nonce_prefix, first_index + i, final and i == len(sizes) - 1)
            try:
                plain = self._aead.decrypt(nonce, src[i * step : i * step + size], associated_data)
            except _CryptoInvalidTag:
                dst[:need] = bytes(need)
                e = InvalidTag()
                e.index = first_index + i
                raise e from None
            dst[i * segment_size : i * segment_size + len(plain)] = plain
        return need

    def open_prefixed_many(
        self, prefix_len: int, sealed: Iterable[Buffer], associated_data: Buffer | None = None
    ) -> list[bytes]:
        out = []
        for i, s in enumerate(sealed):
            try:
                out.append(self.open_prefixed(prefix_len, s, associated_data))
            except InvalidTag as e:
                e.index = i
                raise
        return out


def _gcm_segment_nonce(prefix: Buffer, index: int, final: bool) -> bytes:
    head = bytes(prefix)
    if len(head) != 7:
        raise ValueError(f"nonce_prefix must be 7 bytes, got {len(head)}")
    return head + index.to_bytes(4, "big") + (b"\x01" if final else b"\x00")


_INTO_ORDER = (
    "(encrypt_into and decrypt_into take the buffer last, as cryptography's do: "
    "(nonce, data, associated_data, buf))"
)


def _out_view(buf: Any) -> memoryview:
    """The caller's output buffer as bytes; a TypeError naming the argument order otherwise
    (a call in the old order passes the AD or None there)."""
    try:
        dst = memoryview(buf)
    except TypeError:
        raise TypeError(
            f"buf must be a writable, contiguous bytes-like object, not {type(buf).__name__} "
            + _INTO_ORDER
        ) from None
    if dst.readonly or not dst.contiguous:
        raise TypeError(
            "buf must be a writable, contiguous bytes-like object, not a read-only or "
            "non-contiguous one " + _INTO_ORDER
        )
    return dst.cast("B")


def _check_room(dst: memoryview, need: int) -> None:
    if dst.nbytes < need:
        raise ValueError(f"buf must be at least {need} bytes, got {dst.nbytes}")


#: Any cipher object a suite makes (``SuiteSpec.new_cipher``).
Cipher: TypeAlias = (
    "AEGIS128L | AEGIS128X2 | AEGIS128X4 | AEGIS256 | AEGIS256X2 | AEGIS256X4 | AESGCM"
)
