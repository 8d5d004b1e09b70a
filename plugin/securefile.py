"""Reading and writing files that hold secrets: checked on the open descriptor, replaced atomically.

Reading (:func:`read_secret_file`) opens the path once, with ``O_NOFOLLOW`` (a symlink as the
last component is refused), and checks what was opened, with ``fstat`` on that descriptor, so
a file swapped in after the check is never the one read:

* a regular file, owned by the current user or by root;
* no access at all for group or others (mode ``0600`` or ``0400``);
* its directory owned by the current user or by root and not writable by group or others
  (strict: a sticky world-writable directory such as ``/tmp`` is refused too, since anyone
  there can create the file before you do).

Each refusal is an :class:`~sealstore.errors.InsecureKeyFile` naming the fix.  On non-POSIX
systems only the read itself is done.

Writing (:func:`write_secret_file`) creates a temp file in the same directory with mode 0600,
fsyncs it, renames it over the target and fsyncs the directory.  Writers that read, change and
write a file hold :func:`exclusive_lock` (``flock`` on a ``.<name>.lock`` file beside it) for the
whole read-modify-write, so concurrent writers serialise instead of losing each other's change.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from .errors import InsecureKeyFile, KeySourceError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

__all__ = ["check_directory", "exclusive_lock", "read_secret_file", "write_secret_file"]

_POSIX = os.name == "posix"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _check_file(path: object, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise InsecureKeyFile(f"{path} is not a regular file; a key file must be a plain file")
    if not _trusted_owner(st.st_uid):
        raise InsecureKeyFile(
            f"{path} is owned by uid {st.st_uid}, not by the current user (uid {os.geteuid()}) "
            f"or root; run `chown {os.geteuid()} {path}` if you trust its content, or recreate it"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise InsecureKeyFile(
            f"{path} has mode {mode:04o}: a key file must not be readable or writable by group "
            f"or others; run `chmod 600 {path}`"
        )


def check_directory(directory: str | os.PathLike[str]) -> None:
    """Refuse a directory others could use to replace a key file in it (POSIX only)."""
    if not _POSIX:
        return
    st = os.stat(directory)
    if not _trusted_owner(st.st_uid):
        raise InsecureKeyFile(
            f"directory {directory} is owned by uid {st.st_uid}, not by the current user or "
            "root, so its owner can replace the key file; move the key file to a directory you own"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        raise InsecureKeyFile(
            f"directory {directory} has mode {mode:04o}: group or others can create, rename or "
            f"replace files in it; run `chmod go-w {directory}` or move the key file"
        )


def read_secret_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path`` after the checks above, made on the descriptor that is read."""
    path = Path(path)
    try:
        # O_NONBLOCK: a FIFO put in its place must not hang the open (refused below)
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise KeySourceError(f"{path} does not exist") from None
    except OSError as exc:
        if _NOFOLLOW and path.is_symlink():
            raise InsecureKeyFile(
                f"{path} is a symbolic link; key files are opened without following links: "
                "point the configuration at the real file"
            ) from None
        raise KeySourceError(f"{path} cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if _POSIX:
            _check_file(path, os.fstat(fd))
            check_directory(path.parent)
        return fh.read()


def _fsync_directory(directory: Path) -> None:
    if not _POSIX:
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_secret_file(
    path: str | os.PathLike[str], data: bytes, *, exclusive: bool = False
) -> None:
    """Write ``data`` to ``path`` with mode 0600, atomically and durably (see the module doc).

    ``exclusive``: never replace an existing file, even one created concurrently
    (KeySourceError); the temp file is hard-linked into place instead of renamed.
    """
    path = Path(path)
    check_directory(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        if _POSIX:
            os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise KeySourceError(f"{path} already exists; refusing to overwrite it") from None
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(path.parent)


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``.<name>.lock`` next to ``path`` (blocks until free).

    The lock file, not the key file, is locked: the key file is replaced by rename, and a lock
    on a replaced inode would not exclude the next writer.  Without ``fcntl`` (not POSIX) this
    does nothing, and concurrent writers are not excluded.
    """
    if fcntl is None:  # pragma: no cover - not POSIX
        yield
        return
    path = Path(path)
    check_directory(path.parent)
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
