"""Reading and writing the files sealstore keeps: checked on the open descriptor, replaced atomically.

Reading (:func:`read_secret_file`: key files, master key files, rotation checkpoints) opens the
path once, with ``O_NOFOLLOW`` (a symlink as the last component is refused) and ``O_NONBLOCK``
(a FIFO put there cannot hang the open), and checks what was opened, with ``fstat`` on that
descriptor, so a file swapped in after the check is never the one read:

* a regular file (a FIFO, a device such as ``/dev/zero``, a directory or a socket is refused);
* at most ``limit`` bytes (:data:`SECRET_FILE_LIMIT` unless the caller says otherwise): the
  size is checked on the descriptor and at most ``limit + 1`` bytes are ever read;
* owned by the current user or by root;
* no access at all for group or others (mode ``0600`` or ``0400``);
* its directory owned by the current user or by root and not writable by group or others
  (strict: a sticky world-writable directory such as ``/tmp`` is refused too, since anyone
  there can create the file before you do);
* every directory above it (the path as written and the path with its links resolved) owned
  by the current user or by root, and not writable by group or others unless it is sticky
  (``/tmp`` above a private directory is fine; a world-writable, non-sticky directory anywhere
  up the chain lets anyone rename the whole subtree and is refused).

Each refusal is an :class:`~sealstore.errors.InsecureKeyFile` naming the fix (a file too large
is a :class:`~sealstore.errors.ConfigError`).  Configuration files are read by
:func:`read_config_file` with the same descriptor checks, but links followed and group/other
read access allowed; it also says whether anyone but its owner could have written the file.
On non-POSIX systems only the read itself (and the size bound) is done.

Writing (:func:`write_secret_file`) checks the directory as above, creates a temp file with a
random name (``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600; never a fixed name, never through a
link) in the same directory, fsyncs it, renames it over the target (a link planted at the
target is replaced, not followed) and fsyncs the directory: a crash at any point leaves the old
file whole (and perhaps a stray ``.<name>.*.tmp`` file).  Writers that read, change and write a
file hold :func:`exclusive_lock` (``flock`` on a ``.<name>.lock`` file beside it) for the
whole read-modify-write, so concurrent writers serialise instead of losing each other's change.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from .errors import ConfigError, InsecureKeyFile, KeySourceError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

__all__ = [
    "CONFIG_FILE_LIMIT",
    "SECRET_FILE_LIMIT",
    "check_directory",
    "exclusive_lock",
    "private_directory",
    "read_config_file",
    "read_secret_file",
    "state_directory",
    "write_secret_file",
]

_POSIX = os.name == "posix"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _check_file(path: object, st: os.stat_result, what: str = "key file") -> None:
    if not stat.S_ISREG(st.st_mode):
        raise InsecureKeyFile(f"{path} is not a regular file; a {what} must be a plain file")
    if not _trusted_owner(st.st_uid):
        raise InsecureKeyFile(
            f"{path} is owned by uid {st.st_uid}, not by the current user (uid {os.geteuid()}) "
            f"or root; run `chown {os.geteuid()} {path}` if you trust its content, or recreate it"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise InsecureKeyFile(
            f"{path} has mode {mode:04o}: a {what} must not be readable or writable by group "
            f"or others; run `chmod 600 {path}`"
        )


def _ancestors(directory: str | os.PathLike[str]) -> list[str]:
    """The directories above ``directory``: of the path as written and of its resolved form."""
    out: list[str] = []
    for start in (os.path.abspath(directory), os.path.realpath(directory)):
        d = os.path.dirname(start)
        while True:
            if d not in out:
                out.append(d)
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    return out


def _ancestor_problem(d: str) -> str | None:
    """Why others could rename or replace what is below directory ``d`` (None: they cannot)."""
    try:
        st = os.stat(d)
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    if not _trusted_owner(st.st_uid):
        return f"is owned by uid {st.st_uid}, not by the current user or root"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022 and not mode & stat.S_ISVTX:
        return f"has mode {mode:04o}: group or others can rename what is in it (and no sticky bit)"
    return None


def check_directory(directory: str | os.PathLike[str], *, what: str = "key file") -> None:
    """Refuse a directory others could use to replace a file in it, itself or through any
    directory above it (POSIX only; see the module doc)."""
    if not _POSIX:
        return
    try:
        st = os.stat(directory)
    except OSError as exc:
        raise KeySourceError(f"directory {directory} cannot be examined ({exc.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise KeySourceError(f"{directory} is not a directory")
    if not _trusted_owner(st.st_uid):
        raise InsecureKeyFile(
            f"directory {directory} is owned by uid {st.st_uid}, not by the current user or "
            f"root, so its owner can replace the {what}; move the {what} to a directory you own"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        raise InsecureKeyFile(
            f"directory {directory} has mode {mode:04o}: group or others can create, rename or "
            f"replace files in it; run `chmod go-w {directory}` or move the {what}"
        )
    for d in _ancestors(directory):
        problem = _ancestor_problem(d)
        if problem is not None:
            raise InsecureKeyFile(
                f"directory {d}, above the {what} in {directory}, {problem}, so others can "
                f"replace the {what}; run `chmod go-w {d}` (or `chmod +t`) or move the {what}"
            )


SECRET_FILE_LIMIT = 16 * 1024 * 1024  # bytes: a key file of ~50,000 keys
CONFIG_FILE_LIMIT = 1024 * 1024  # bytes

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _read_bounded(fd: int, path: object, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of the open regular file ``fd`` (ConfigError beyond)."""
    if os.fstat(fd).st_size > limit:
        raise ConfigError(f"{what} {path} is larger than {limit} bytes; refused")
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:  # grew while being read
        raise ConfigError(f"{what} {path} is larger than {limit} bytes; refused")
    return b"".join(chunks)


def read_secret_file(
    path: str | os.PathLike[str], *, limit: int = SECRET_FILE_LIMIT, what: str = "key file"
) -> bytes:
    """The bytes of ``path`` after the checks above, made on the descriptor that is read."""
    path = Path(path)
    try:
        # O_NONBLOCK: a FIFO put in its place must not hang the open (refused below)
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
    except FileNotFoundError:
        raise KeySourceError(f"{path} does not exist") from None
    except OSError as exc:
        if _NOFOLLOW and path.is_symlink():
            raise InsecureKeyFile(
                f"{path} is a symbolic link; a {what} is opened without following links: "
                "point the configuration at the real file"
            ) from None
        raise KeySourceError(f"{path} cannot be opened ({exc.strerror})") from None
    try:
        if _POSIX:
            _check_file(path, os.fstat(fd), what)
            check_directory(path.parent, what=what)
        try:
            return _read_bounded(fd, path, limit, what)
        except OSError as exc:
            raise KeySourceError(f"{path} cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)


def read_config_file(
    path: str | os.PathLike[str], *, limit: int = CONFIG_FILE_LIMIT
) -> tuple[bytes, str | None]:
    """``(content, untrusted)`` of a configuration file: opened once (links followed, so a
    mounted configuration works; ``O_NONBLOCK`` so a FIFO cannot hang the open), refused unless
    the opened descriptor is a regular file of at most ``limit`` bytes (ConfigError).
    ``untrusted``: None when only its owner (the current user or root) can write it and no
    directory above it lets others replace it (the file's directory and those above it, as
    written and resolved, may be sticky), else why not."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | _CLOEXEC | _NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(
                f"config file {path} is not a regular file (a FIFO, device or directory); refused"
            )
        try:
            data = _read_bounded(fd, path, limit, "config file")
        except OSError as exc:
            raise ConfigError(f"config file {path} cannot be read ({exc.strerror})") from None
        return data, _untrusted_reason(path, st)
    finally:
        os.close(fd)


def _untrusted_reason(path: Path, st: os.stat_result) -> str | None:
    if not _POSIX:
        return None
    if not _trusted_owner(st.st_uid):
        return f"it is owned by uid {st.st_uid}, not by the current user or root"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        return f"it has mode {mode:04o} (writable by group or others)"
    real = os.path.realpath(path)
    for d in [os.path.dirname(os.path.abspath(path)), os.path.dirname(real)]:
        for a in [d, *_ancestors(d)]:
            problem = _ancestor_problem(a)
            if problem is not None:
                return f"directory {a} {problem}"
    return None


def _fsync_directory(directory: Path) -> None:
    if not _POSIX:
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")


_TEMP_TRIES = 8


def _create_temp(path: Path, what: str) -> tuple[Path, int]:
    """A new temp file beside ``path``: random name, O_EXCL | O_NOFOLLOW, mode 0600."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(_TEMP_TRIES):
        tmp = _temp_name(path)
        try:
            return tmp, os.open(tmp, flags, 0o600)
        except FileExistsError:  # something (a planted link?) holds that name: another name
            continue
        except OSError as exc:
            raise KeySourceError(
                f"cannot create a temporary file beside the {what} {path} ({exc.strerror})"
            ) from None
    raise KeySourceError(
        f"cannot create a temporary file beside the {what} {path}: {_TEMP_TRIES} random names "
        "were all taken"
    )


def write_secret_file(
    path: str | os.PathLike[str], data: bytes, *, exclusive: bool = False, what: str = "key file"
) -> None:
    """Write ``data`` to ``path`` with mode 0600, atomically and durably (see the module doc).

    ``exclusive``: never replace an existing file, even one created concurrently
    (KeySourceError); the temp file is hard-linked into place instead of renamed.
    """
    path = Path(path)
    check_directory(path.parent, what=what)
    tmp, fd = _create_temp(path, what)
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


def private_directory(directory: str | os.PathLike[str], *, what: str) -> Path:
    """``directory``, created with mode 0700 if missing (its parents as ``mkdir -p`` does),
    then checked as :func:`check_directory` does."""
    directory = Path(directory)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise KeySourceError(f"cannot create directory {directory} ({exc.strerror})") from None
    check_directory(directory, what=what)
    return directory


def state_directory() -> Path:
    """sealstore's directory for state it keeps between runs (rotation checkpoints):
    ``$XDG_STATE_HOME/sealstore``, or ``~/.local/state/sealstore`` (not created here)."""
    base = os.environ.get("XDG_STATE_HOME")
    if not base or not os.path.isabs(base):
        home = os.path.expanduser("~")
        if home == "~" or not os.path.isabs(home):
            raise KeySourceError(
                "no state directory: set XDG_STATE_HOME or HOME, or give the file's path"
            )
        base = os.path.join(home, ".local", "state")
    return Path(base) / "sealstore"


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
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC | _NONBLOCK, 0o600)
    except OSError as exc:
        if _NOFOLLOW and lock.is_symlink():
            raise InsecureKeyFile(
                f"{lock} is a symbolic link; the lock file is opened without following links: "
                "remove it"
            ) from None
        raise KeySourceError(f"{lock} cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _trusted_owner(st.st_uid):
            raise InsecureKeyFile(
                f"{lock} is not a regular file of the current user or root; remove it"
            )
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
