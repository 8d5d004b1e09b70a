"""Reading and writing files that hold secrets: mode 0600, atomic replace, refusal when exposed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import InsecureKeyFile, KeySourceError

__all__ = ["check_permissions", "read_secret_file", "write_secret_file"]


def check_permissions(path: str | os.PathLike) -> None:
    """Refuse ``path`` if group or others have any access to it (POSIX only)."""
    if os.name != "posix":
        return
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        raise InsecureKeyFile(
            f"{path} has mode {mode:04o}: a key file must not be readable or writable by group "
            f"or others; run `chmod 600 {path}`"
        )


def read_secret_file(path: str | os.PathLike) -> bytes:
    """The bytes of ``path`` after the permission check (KeySourceError if it is missing)."""
    try:
        check_permissions(path)
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise KeySourceError(f"{path} does not exist") from None


def write_secret_file(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600, atomically (temp file + rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        if os.name == "posix":
            os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
