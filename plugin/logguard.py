"""Withhold the log records other libraries make while sealstore hands them a secret.

botocore logs what it sends and receives at DEBUG: ``botocore.endpoint`` the request
parameters (KMS ``Encrypt``'s ``Plaintext``), ``botocore.parsers`` the response body (the
``Plaintext`` of ``GenerateDataKey`` and ``Decrypt``: key material in base64).  Inside
:func:`withheld`, every record a logger outside ``sealstore`` creates *on this thread* is
rewritten before any handler sees it: its message becomes a fixed line naming the logger and
the operation, and its arguments, exception, stack and extra attributes are dropped (level,
logger name, source line and time are kept, so an operator still sees that a call happened).
Records of other threads and records made outside the block are untouched.

Three independent layers, so no single mechanism has to be perfect:

1. the log record factory (:func:`logging.setLogRecordFactory`), which every standard
   ``Logger`` goes through whichever logger emits; it is put back on top (wrapping whatever
   factory the application installed since) each time a block is entered;
2. a filter on botocore's, boto3's, urllib3's and s3transfer's emitting loggers (by name, and
   every such logger that exists when a block is entered);
3. the same filter on every handler attached to any logger (root included) when a block is
   entered: a handler filter runs for propagated records too, so a custom ``Logger`` class
   that bypasses the factory is still caught.

The rewrite is idempotent, so a record passing all three layers is rewritten once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["WITHHELD", "withheld"]

#: The message of a withheld record (``%s``: the emitting logger, the operation).
WITHHELD = "record withheld by sealstore: %s logged it during %s"

# loggers known to log request parameters, response bodies or prepared requests
_KNOWN = (
    "botocore.endpoint", "botocore.parsers", "botocore.hooks", "botocore.auth",
    "botocore.retryhandler", "botocore.client", "botocore.awsrequest", "botocore.httpsession",
    "botocore.httpchecksum", "botocore.regions", "botocore.endpoint_provider", "botocore.utils",
    "botocore.retries.standard", "botocore.retries.special", "botocore.retries.adaptive",
    "botocore.credentials", "botocore.configprovider", "botocore.loaders", "botocore.handlers",
    "boto3.resources.action", "urllib3.connectionpool", "urllib3.connection",
    "urllib3.util.retry", "s3transfer.utils", "s3transfer.tasks", "s3transfer.futures",
)  # fmt: skip
_FAMILIES = ("botocore", "boto3", "urllib3", "s3transfer", "aiobotocore")
# the attributes every LogRecord has (anything else came from ``extra=`` or a factory)
_STANDARD = frozenset(logging.LogRecord("n", 0, "p", 0, "m", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "_sealstore_withheld",
}

_local = threading.local()
_lock = threading.Lock()


def _active() -> str | None:
    stack: list[str] | None = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def _withhold(record: logging.LogRecord) -> logging.LogRecord:
    what = _active()
    if what is None or getattr(record, "_sealstore_withheld", False):
        return record
    name = record.name
    if name == "sealstore" or name.startswith("sealstore."):
        return record  # sealstore's own records never carry secrets (tests/core/test_logging.py)
    for attr in [a for a in record.__dict__ if a not in _STANDARD]:
        delattr(record, attr)
    record.msg = WITHHELD
    record.args = (name, what)
    record.exc_info = None
    record.exc_text = None
    record.stack_info = None
    record.__dict__.pop("message", None)
    record._sealstore_withheld = True
    return record


class _Factory:
    """A log record factory wrapping the one installed before it."""

    def __init__(self, inner: Callable[..., logging.LogRecord]) -> None:
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        return _withhold(self.inner(*args, **kwargs))


class _Filter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        _withhold(record)
        return True


_FILTER = _Filter()


def _install() -> None:
    """Put the three layers in place (cheap when they already are)."""
    with _lock:
        factory = logging.getLogRecordFactory()
        if not isinstance(factory, _Factory):
            logging.setLogRecordFactory(_Factory(factory))
        manager = logging.Logger.manager
        for name in _KNOWN:
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)
        loggers: list[logging.Logger] = [logging.getLogger()]
        for name, entry in list(manager.loggerDict.items()):
            if not isinstance(entry, logging.Logger):
                continue  # a PlaceHolder: no handlers, no filters
            loggers.append(entry)
            if name.split(".", 1)[0] in _FAMILIES and _FILTER not in entry.filters:
                entry.addFilter(_FILTER)
        for logger in loggers:
            for handler in list(logger.handlers):
                if _FILTER not in handler.filters:
                    handler.addFilter(_FILTER)


@contextlib.contextmanager
def withheld(what: str) -> Iterator[None]:
    """Inside the block, records other libraries make on this thread are withheld (``what``
    names the operation in their place, e.g. ``"KMS decrypt"``; it must hold no secret)."""
    _install()
    stack: list[str] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(what)
    try:
        yield
    finally:
        stack.pop()
