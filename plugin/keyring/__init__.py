"""Keyrings: keys with ids, suites and states, and the seal/open entry points on top of them.

A :class:`Keyring` holds :class:`Key` objects (32 bytes of root material each) and exactly one
primary.  Values are sealed under a per-(key, suite, tag size) subkey derived with HKDF-SHA256
and kept as a ready cipher object, so the per-value path is one dictionary look-up and one C
call.  The format is in :mod:`sealstore.format` and ``docs/FORMAT.md``.

Key states: ``primary`` seals and opens; ``active`` opens; ``retired`` opens only when asked
explicitly (``allow_retired``); ``destroyed`` has no material left.

Thread safety: seal/open read immutable snapshots and never lock; changes (rotate, state
changes, first use of a key) build new snapshots under a lock and swap them in.

Modules: ``keys`` (keys, subkey slots, ciphers), ``values`` (the value path), ``ring`` (the
Keyring), ``named`` (named keyrings and the column path).
"""

from __future__ import annotations

from .keys import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_SUITE,
    DEFAULT_TAG_SIZE,
    KEY_SIZE,
    Key,
    KeyState,
    _derive_subkey,  # noqa: F401  (tests check the derivation)
    make_cipher,  # noqa: F401  (the object stream keys its segments with it)
)
from .named import forget_keyring, get_keyring, named_opener, named_sealer, use_keyring
from .ring import Keyring

__all__ = [
    "DEFAULT_ADAPTIVE_THRESHOLD",
    "DEFAULT_SUITE",
    "DEFAULT_TAG_SIZE",
    "KEY_SIZE",
    "Key",
    "KeyState",
    "Keyring",
    "forget_keyring",
    "get_keyring",
    "named_opener",
    "named_sealer",
    "use_keyring",
]
