"""What the S3 handler mixins (``uploads``, ``downloads``) use of the ``S3Sealing`` object they are
mixed into (``handlers.py``, which imports them), declared once for type checkers only."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any


class SealingState:
    """The state and helpers of ``S3Sealing`` its mixins rely on (nothing at run time)."""

    if TYPE_CHECKING:
        keyring: Any
        engine: Any
        store: Any

        @property
        def segment_size(self) -> int: ...
        @property
        def passthrough(self) -> bool: ...
        @property
        def allow_retired(self) -> bool: ...
        @property
        def context(self) -> bytes: ...
        @property
        def tenancy(self) -> Any: ...

        _local: threading.local

        @property
        def _raw_depth(self) -> int: ...

        _lock: threading.Lock
        _uploads: dict[Any, Any]

        def raw(self) -> AbstractContextManager[Any]: ...
        def _remember_layout(self, bucket: Any, key: Any, header: Any) -> None: ...
        def _layout_guess(self, bucket: Any, key: Any) -> tuple[int, int]: ...
