"""The suite registry: one record per suite, read by every layer (format, keyring, streams,
adapters, CLI, bench, tools).

A suite is what byte 1 of every sealed value and byte 5 of every object header names: an AEAD,
its key, nonce and tag sizes, the native variant that runs it (``None`` for ciphers that come
from ``cryptography``) and the cipher class.  The ids are part of the stored format
(``docs/FORMAT.md``): they are never changed or reused.

Adding a suite is its native directory (``native/src/<variant>/``), one :class:`SuiteSpec`
entry in ``_SPECS`` below with its :class:`Suite` member, and its vectors (see
``docs/CONTRIBUTING.md``, "Adding a suite").
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .aead import (
    AEGIS128L,
    AEGIS128X2,
    AEGIS128X4,
    AEGIS256,
    AEGIS256X2,
    AEGIS256X4,
    AESGCM,
    Cipher,
)

__all__ = [
    "COLUMN_OVERHEAD",
    "HEADER_SIZE",
    "SUITES",
    "Suite",
    "SuiteSpec",
    "by_label",
    "by_native_variant",
    "native_variants",
    "spec",
]

#: Bytes of the v1 sealed-value header (version, suite, key id, flags): see ``sealstore.format``.
HEADER_SIZE = 7


class Suite(enum.IntEnum):
    """Algorithm identifiers stored in byte 1.  ``str(suite)`` is the name used in config."""

    AEGIS_128L = 0x01
    AEGIS_128X2 = 0x02
    AEGIS_128X4 = 0x03
    AEGIS_256 = 0x04
    AEGIS_256X2 = 0x05
    AEGIS_256X4 = 0x06
    AES_256_GCM = 0x10

    @property
    def label(self) -> str:
        """The suite's public name, e.g. ``"AEGIS-128X4"``."""
        return _BY_ID[self].label

    @property
    def spec(self) -> SuiteSpec:
        """The registry record of this suite."""
        return _BY_ID[self]

    @classmethod
    def parse(cls, value: Suite | str | int) -> Suite:
        """Accept a Suite, its name (``"AEGIS-128X4"``, case-insensitive) or its byte value."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return by_label(value).suite
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                raise ValueError(f"unknown suite id 0x{value:02x}") from None
        raise TypeError(f"suite must be a Suite, str or int, not {type(value).__name__}")

    def __str__(self) -> str:
        return _BY_ID[self].label


def _new_aes_gcm(key: bytes | bytearray | memoryview, tag_size: int) -> AESGCM:
    return AESGCM(key)  # the tag size is the record's only one, checked by SuiteSpec.new_cipher


@dataclass(frozen=True)
class SuiteSpec:
    """Everything the library knows about one suite.

    ``family``: suites whose keys are interchangeable (a key of one opens values of every suite
    of its family; subkeys are derived per suite).  ``small_suite``: the suite of the same
    family a keyring seals short values with (size-adaptive sealing), or None.
    ``factory(key, tag_size)``: builds the cipher; None means ``cipher(key, tag_size=...)``.
    """

    suite: Suite
    label: str
    family: str
    key_size: int
    nonce_size: int
    tag_sizes: tuple[int, ...]
    default_tag_size: int
    native_variant: str | None
    cipher: type[Any]
    factory: Callable[[Any, int], Any] | None = None
    small_suite: Suite | None = None

    @property
    def id(self) -> int:
        """The byte stored in every value and object of this suite."""
        return int(self.suite)

    def overhead(self, tag_size: int | None = None) -> int:
        """Bytes a v1 sealed value adds to its plaintext: header + nonce + tag."""
        tag = self.default_tag_size if tag_size is None else tag_size
        self.check_tag_size(tag)
        return HEADER_SIZE + self.nonce_size + tag

    def check_tag_size(self, tag_size: int) -> None:
        """Raise ValueError unless ``tag_size`` is one this suite allows."""
        if tag_size not in self.tag_sizes:
            sizes = " or ".join(map(str, self.tag_sizes))
            raise ValueError(f"{self.label} tag_size must be {sizes}, not {tag_size!r}")

    def tag_size_for(self, preferred: int) -> int:
        """The tag size new values of this suite get when a keyring prefers ``preferred``:
        the preferred one when the suite allows it, else the suite's default."""
        return preferred if preferred in self.tag_sizes else self.default_tag_size

    def new_cipher(self, key: bytes | bytearray | memoryview, tag_size: int) -> Cipher:
        """The cipher object of this suite keyed with ``key``, with ``tag_size``-byte tags."""
        self.check_tag_size(tag_size)
        if self.factory is not None:
            cipher: Cipher = self.factory(key, tag_size)
        else:
            cipher = self.cipher(key, tag_size=tag_size)
        return cipher


_SPECS = (
    SuiteSpec(Suite.AEGIS_128L, "AEGIS-128L", "AEGIS-128", 16, 16, (16, 32), 32,
              "AEGIS-128L", AEGIS128L),
    SuiteSpec(Suite.AEGIS_128X2, "AEGIS-128X2", "AEGIS-128", 16, 16, (16, 32), 32,
              "AEGIS-128X2", AEGIS128X2, small_suite=Suite.AEGIS_128L),
    SuiteSpec(Suite.AEGIS_128X4, "AEGIS-128X4", "AEGIS-128", 16, 16, (16, 32), 32,
              "AEGIS-128X4", AEGIS128X4, small_suite=Suite.AEGIS_128L),
    SuiteSpec(Suite.AEGIS_256, "AEGIS-256", "AEGIS-256", 32, 32, (16, 32), 16,
              "AEGIS-256", AEGIS256),
    SuiteSpec(Suite.AEGIS_256X2, "AEGIS-256X2", "AEGIS-256", 32, 32, (16, 32), 16,
              "AEGIS-256X2", AEGIS256X2, small_suite=Suite.AEGIS_256),
    SuiteSpec(Suite.AEGIS_256X4, "AEGIS-256X4", "AEGIS-256", 32, 32, (16, 32), 16,
              "AEGIS-256X4", AEGIS256X4, small_suite=Suite.AEGIS_256),
    SuiteSpec(Suite.AES_256_GCM, "AES-256-GCM", "AES-256-GCM", 32, 12, (16,), 16,
              None, AESGCM, factory=_new_aes_gcm),
)  # fmt: skip

#: Every suite's record, in id order.
SUITES: tuple[SuiteSpec, ...] = tuple(sorted(_SPECS, key=lambda s: s.id))
_BY_ID = {s.suite: s for s in SUITES}
_BY_LABEL = {s.label: s for s in SUITES}
_BY_VARIANT = {s.native_variant: s for s in SUITES if s.native_variant is not None}

#: The widest v1 overhead a column is sized for (55: AEGIS with a 32-byte tag).  Pinned, not
#: computed: a suite that needs more must change column sizing on purpose (tests check it).
COLUMN_OVERHEAD = 55


def spec(suite: Suite | str | int) -> SuiteSpec:
    """The record of ``suite`` (a Suite, its label or its id byte)."""
    return _BY_ID[Suite.parse(suite)]


def by_label(label: str) -> SuiteSpec:
    """The record named ``label`` (case-insensitive; ``_`` reads as ``-``)."""
    try:
        return _BY_LABEL[label.strip().upper().replace("_", "-")]
    except KeyError:
        raise ValueError(
            f"unknown suite {label!r}; expected one of {', '.join(_BY_LABEL)}"
        ) from None


def by_native_variant(variant: str) -> SuiteSpec:
    """The record whose native kernels are ``variant`` (e.g. ``"AEGIS-128X4"``)."""
    try:
        return _BY_VARIANT[variant]
    except (KeyError, TypeError):
        raise ValueError(f"unknown native variant {variant!r}") from None


def native_variants() -> tuple[str, ...]:
    """The native variant names, in suite-id order."""
    return tuple(_BY_VARIANT)
