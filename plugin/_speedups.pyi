"""Types of ``sealstore._speedups``, the CPython fast path (native/speedups.c, bound.c, rowmap.c).

Internal: the cipher classes of :mod:`sealstore.aead` and the keyring call it.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, final

from cryptography.utils import Buffer
from typing_extensions import CapsuleType

#: The name of the capsule a native context crosses in (``sealstore.native``).
CONTEXT_CAPSULE: Final[str]

@final
class Context:
    """A native cipher context's fast entry points."""

    def __init__(self, context: CapsuleType, owner: object) -> None: ...
    def encrypt(
        self, nonce: Buffer, data: Buffer, associated_data: Buffer | None = None
    ) -> bytes: ...
    def decrypt(
        self, nonce: Buffer, data: Buffer, associated_data: Buffer | None = None
    ) -> bytes: ...
    # the buffer last, as cryptography >= 47's AESGCM.encrypt_into / decrypt_into
    def encrypt_into(
        self, nonce: Buffer, data: Buffer, associated_data: Buffer | None, buf: Buffer
    ) -> int: ...
    def decrypt_into(
        self, nonce: Buffer, data: Buffer, associated_data: Buffer | None, buf: Buffer
    ) -> int: ...
    def seal(
        self, prefix: Buffer, plaintext: Buffer, associated_data: Buffer | None = None
    ) -> bytes: ...
    def open(
        self, prefix_len: int, sealed: Buffer, associated_data: Buffer | None = None
    ) -> bytes: ...
    def seal_many(
        self, prefix: Buffer, plaintexts: Iterable[Buffer], associated_data: Buffer | None = None
    ) -> list[bytes]: ...
    def open_many(
        self, prefix_len: int, sealed: Iterable[Buffer], associated_data: Buffer | None = None
    ) -> list[bytes]: ...
    def seal_segments_into(
        self,
        out: Buffer,
        data: Buffer,
        segment_size: int,
        nonce_prefix: Buffer,
        first_index: int,
        final: bool,
        associated_data: Buffer | None = None,
    ) -> int: ...
    def open_segments_into(
        self,
        out: Buffer,
        data: Buffer,
        segment_size: int,
        nonce_prefix: Buffer,
        first_index: int,
        final: bool,
        associated_data: Buffer | None = None,
    ) -> int: ...

@final
class NamedSealer:
    """Seals one column value through the keyring ``registry[name]`` (None stays None)."""

    def __new__(
        cls,
        registry: Any,
        name: object,
        associated_data: Buffer,
        fallback: Callable[[Any], bytes | bytearray | None],
        *,
        raw: int = 0,
        max_len: int = -1,
        encode: Callable[[Any], bytes] | None = None,
        out_bytearray: bool = False,
        max_overhead: int = -1,
    ) -> NamedSealer: ...
    def __call__(self, value: Any, /) -> bytes | bytearray | None: ...

@final
class NamedOpener:
    """Opens one column value through the keyring ``registry[name]`` (None stays None)."""

    def __new__(
        cls,
        registry: Any,
        name: object,
        associated_data: Buffer,
        fallback: Callable[[Any], Any],
        *,
        text: bool = False,
        decode: Callable[[Any], Any] | None = None,
    ) -> NamedOpener: ...
    def __call__(self, value: Any, /) -> Any: ...

def check_disjoint(
    out: Buffer,
    written: int,
    in_place: bool,
    data: Buffer | None,
    /,
    *others: Buffer | None,
) -> None:
    """Raise OverlappingBuffers when the first ``written`` bytes of ``out`` overlap an input."""

def map_columns(
    rows: Iterable[Sequence[Any]], plan: tuple[tuple[int, Callable[[Any], Any]], ...], /
) -> list[tuple[Any, ...]]:
    """Each row with ``row[i]`` replaced by ``f(row[i])`` for the ``(i, f)`` pairs of ``plan``."""
