"""Named keyrings, for adapters that refer to a keyring by name (``use_keyring``,
``get_keyring``), and the one-call column path over them (``named_sealer``/``named_opener``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..errors import (
    UnknownKeyring,
)
from ..format import (
    context_digest,
)

_NAMED: dict[str, Keyring] = {}
from .. import _speedups
from .ring import Keyring

_NAMED_LOCK = threading.Lock()


def use_keyring(keyring: Keyring, name: str = "default") -> Keyring:
    """Register ``keyring`` under ``name`` (replacing any previous one) and return it."""
    if not isinstance(keyring, Keyring):
        raise TypeError(f"keyring must be a Keyring, not {type(keyring).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError("name must be a non-empty str")
    with _NAMED_LOCK:
        _NAMED[name] = keyring
    return keyring


def get_keyring(name: str = "default") -> Keyring:
    """The keyring registered under ``name``; UnknownKeyring if there is none."""
    try:
        return _NAMED[name]
    except KeyError:
        raise UnknownKeyring(
            f"no keyring registered as {name!r}; call sealstore.use_keyring(keyring, name={name!r})"
        ) from None


def forget_keyring(name: str = "default") -> Keyring | None:
    """Unregister ``name``; returns the keyring that was registered, if any."""
    with _NAMED_LOCK:
        return _NAMED.pop(name, None)


def named_sealer(
    name: str,
    context: bytes,
    fallback: Callable[[Any], bytes | None],
    *,
    raw: type | None = None,
    max_length: int | None = None,
    encode: Callable[[Any], bytes] | None = None,
    out: type = bytes,
    max_overhead: int | None = None,
) -> Callable[[Any], bytes | bytearray | None]:
    """One callable that seals a value with the keyring registered as ``name``, bound to
    ``context``: what an encrypted column calls for every value it writes.

    Same result as ``get_keyring(name).seal(encode(value), context)`` (None stays None), in one
    native call: the name is looked up on every call, so swapping or rotating the registered
    keyring takes effect at once.  ``raw=str`` seals an exact ASCII ``str`` as it is, ``raw=bytes``
    an exact ``bytes``, when no longer than ``max_length``; any other value goes through
    ``encode`` (which raises for bad values) or, without one, through ``fallback``.
    ``out=bytearray`` returns sealed values as bytearrays: Python's sqlite3 binds those
    directly, while a ``bytes`` parameter goes through its adapter lookup (about 0.3 us
    each).  ``fallback(value)`` also serves whatever the native path does not: no keyring under the
    name (it should raise UnknownKeyring), a closed keyring, AES-256-GCM, and Keyring
    subclasses that override ``seal``.  ``max_overhead`` (a bounded column's allowance for
    header + nonce + tag): a value whose overhead would pass it goes to ``fallback``, which
    raises the column's error.
    """
    kinds = {None: 0, bytes: 1, str: 2}
    if raw not in kinds:
        raise ValueError("raw must be None, bytes or str")
    if out not in (bytes, bytearray):
        raise ValueError("out must be bytes or bytearray")
    return _speedups.NamedSealer(
        _NAMED, name, context_digest(context), fallback, raw=kinds[raw],
        max_len=-1 if max_length is None else max_length, encode=encode,
        out_bytearray=out is bytearray,
        max_overhead=-1 if max_overhead is None else max_overhead,
    )  # fmt: skip


def named_opener(
    name: str,
    context: bytes,
    fallback: Callable[[Any], Any],
    *,
    text: bool = False,
    decode: Callable[[bytes | str], Any] | None = None,
) -> Callable[[Any], Any]:
    """One callable that opens a value sealed by :func:`named_sealer` (or ``Keyring.seal``).

    Same result as ``decode(get_keyring(name).open(value, context))`` (None stays None;
    ``text=True`` decodes the plaintext as UTF-8 first, into a wiped scratch buffer).  Headers
    of keys the keyring cannot open without asking, values too short to be whole, non-buffer
    values, AES-256-GCM values, everything :func:`named_sealer` hands to its fallback, and
    values whose tag fails or whose plaintext does not decode go to ``fallback(value)``, which
    raises the precise error (an encrypted column's names the column); the decoder's own
    exception, which would carry the plaintext, is dropped.
    """
    return _speedups.NamedOpener(
        _NAMED, name, context_digest(context), fallback, text=text, decode=decode
    )
