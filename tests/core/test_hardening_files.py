"""The files sealstore writes and reads (issue 27), tested as an adversary would set them up.

Writes (key files, master key files, S3 rotation checkpoints, through ``sealstore.securefile``):
a symbolic link planted at every name the write may use is never followed (its target stays
unchanged), the file ends up 0600 whatever the umask, and a writer killed between writing and
renaming leaves the previous file whole.  Reads: a FIFO, a device (``/dev/zero``), a directory,
a link to one, an oversized file, a file in a directory others can write into (anywhere up the
chain, unless sticky) are refused with a documented ``sealstore.errors`` exception before their
content is used; a configuration others could have written may not say where keys come from.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sealstore import securefile
from sealstore.config import load_config
from sealstore.errors import ConfigError, InsecureConfig, InsecureKeyFile, KeySourceError
from sealstore.keyring import Keyring
from sealstore.keysources.file import KeyFile
from sealstore.wrapping import MasterKeyWrapper

ROOT = os.geteuid() == 0
posix = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
pytestmark = posix

OLD = b'{"old": "content that must survive"}\n'


@pytest.fixture
def private(tmp_path: Path) -> Path:
    d = tmp_path / "private"
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file a planted link points at; its content must never change."""
    v = tmp_path / "victim"
    v.write_bytes(b"victim's content")
    return v


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


# ---- writes ------------------------------------------------------------------------------------


WRITERS = {
    "write_secret_file": lambda p: securefile.write_secret_file(p, b"new content"),
    "key file init": lambda p: KeyFile(p).init(),
    "master key file": lambda p: MasterKeyWrapper.create_file(p),
    "checkpoint": lambda p: _save_checkpoint(p),
}


def _save_checkpoint(path: Path) -> None:
    pytest.importorskip("boto3")
    from sealstore.adapters.objects.rotation import RotationReport, _save_checkpoint

    _save_checkpoint(str(path), RotationReport("bucket", "p/", "00000001", last_key="p/1"))


@pytest.mark.parametrize("writer", WRITERS)
def test_a_link_planted_at_the_target_is_replaced_not_followed(private, victim, writer):
    target = private / "file.json"
    target.symlink_to(victim)
    if writer in ("key file init", "master key file"):  # these refuse an existing name
        with pytest.raises(KeySourceError, match="already"):
            WRITERS[writer](target)
        assert target.is_symlink()
    else:
        WRITERS[writer](target)
        assert not target.is_symlink() and target.is_file() and mode(target) == 0o600
    assert victim.read_bytes() == b"victim's content"


@pytest.mark.parametrize("writer", WRITERS)
def test_a_link_planted_at_the_temporary_name_is_not_followed(private, victim, writer, monkeypatch):
    """The temp names are random (no fixed ``<name>.tmp``); even a name guessed right is
    created with O_EXCL | O_NOFOLLOW, and the writer takes another."""
    names = iter(["guessed", "guessed", "fresh"])
    monkeypatch.setattr(securefile.secrets, "token_hex", lambda n: next(names))
    target = private / "file.json"
    planted = private / f".file.json.{os.getpid()}.guessed.tmp"
    planted.symlink_to(victim)
    WRITERS[writer](target)
    assert victim.read_bytes() == b"victim's content"
    assert planted.is_symlink() and target.is_file() and not target.is_symlink()
    assert mode(target) == 0o600
    assert not list(private.glob("*.fresh.tmp"))  # the temp file it used is gone


def test_every_temporary_name_taken_is_an_error_not_a_followed_link(private, victim, monkeypatch):
    monkeypatch.setattr(securefile.secrets, "token_hex", lambda n: "always")
    (private / f".f.{os.getpid()}.always.tmp").symlink_to(victim)
    with pytest.raises(KeySourceError, match="random names"):
        securefile.write_secret_file(private / "f", b"x")
    assert victim.read_bytes() == b"victim's content" and not (private / "f").exists()


def test_no_fixed_temporary_name_in_the_checkpoint(private, victim):
    """The issue's attack: a link at ``<checkpoint>.tmp`` overwrote its target."""
    target = private / "cp.json"
    Path(f"{target}.tmp").symlink_to(victim)
    _save_checkpoint(target)
    assert victim.read_bytes() == b"victim's content" and mode(target) == 0o600


def test_a_link_planted_at_the_lock_name_is_refused(private, victim):
    path = private / "keys.json"
    KeyFile(path).init()
    (private / ".keys.json.lock").unlink(missing_ok=True)
    (private / ".keys.json.lock").symlink_to(victim)
    with pytest.raises(InsecureKeyFile, match="symbolic link"):
        KeyFile(path).rotate()
    assert victim.read_bytes() == b"victim's content"


@pytest.mark.parametrize("writer", WRITERS)
def test_written_0600_whatever_the_umask(private, writer):
    old = os.umask(0)
    try:
        WRITERS[writer](private / "file.json")
    finally:
        os.umask(old)
    assert mode(private / "file.json") == 0o600


_KILLED_WRITER = """
import os, signal
from sealstore import securefile

def killed(src, dst):  # the data is written and fsynced; the rename never happens
    os.kill(os.getpid(), signal.SIGKILL)

os.replace = killed
{call}
"""


@pytest.mark.parametrize(
    "call",
    [
        "securefile.write_secret_file({path!r}, b'new content')",
        "from sealstore.keysources.file import KeyFile; KeyFile({path!r}).rotate()",
        "from sealstore.adapters.objects.rotation import RotationReport, _save_checkpoint; "
        "_save_checkpoint({path!r}, RotationReport('b', 'p', '00000001', last_key='x'))",
    ],
    ids=["write_secret_file", "key file rotate", "checkpoint"],
)
def test_a_writer_killed_before_the_rename_leaves_the_old_file_whole(private, call):
    path = private / "file.json"
    if "KeyFile" in call:
        KeyFile(path).init()
    else:
        securefile.write_secret_file(path, OLD)
    before = path.read_bytes()
    code = _KILLED_WRITER.format(call=call.format(path=str(path)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert path.read_bytes() == before and mode(path) == 0o600
    leftovers = [p for p in private.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1 and mode(leftovers[0]) == 0o600  # written, never renamed
    if "KeyFile" in call:
        KeyFile(path).rotate()  # the next writer is not disturbed by the leftover
        assert len(KeyFile(path).load().keys) == 2


def test_the_default_checkpoint_lives_in_a_private_state_directory(tmp_path, monkeypatch):
    pytest.importorskip("boto3")
    from sealstore.adapters.objects.rotation import default_checkpoint

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = Path(default_checkpoint("s3://bucket/prefix"))
    assert path.parent == tmp_path / "state" / "sealstore" and mode(path.parent) == 0o700
    assert path.name.startswith("rotate-") and path.suffix == ".json"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = Path(default_checkpoint("s3://bucket/prefix"))
    assert path.parent == tmp_path / "home" / ".local" / "state" / "sealstore"
    os.chmod(path.parent, 0o777)  # someone opened it up: refused, not used
    with pytest.raises(InsecureKeyFile, match="chmod go-w"):
        default_checkpoint("s3://bucket/prefix")


# ---- reads: what is opened -----------------------------------------------------------------------


def _fifo(path: Path) -> Path:
    os.mkfifo(path, 0o600)
    return path


def _reader_of(kind: str):
    if kind == "key file":
        return lambda p: KeyFile(p).load()
    if kind == "master key file":
        return lambda p: MasterKeyWrapper.from_file(p)
    if kind == "checkpoint":
        pytest.importorskip("boto3")
        from sealstore.adapters.objects.rotation import _load_checkpoint

        return lambda p: _load_checkpoint(str(p), "b", "p", "00000001")
    raise AssertionError(kind)


def _no_hang(fn, *args, **kwargs):
    """Run ``fn`` in a thread; a hang (a FIFO opened blocking) fails instead of hanging CI."""
    box: dict[str, object] = {}

    def run():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the read hung (a FIFO was opened blocking)"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


@pytest.mark.parametrize("kind", ["key file", "master key file", "checkpoint"])
@pytest.mark.parametrize("what", ["fifo", "directory", "link to /dev/zero", "dev zero link dir"])
def test_secret_files_that_are_not_regular_files_are_refused(private, kind, what):
    read = _reader_of(kind)
    path = private / "file.json"
    if what == "fifo":
        _fifo(path)
    elif what == "directory":
        path.mkdir(mode=0o700)
    elif what == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    else:  # the directory is a link: the last component is /dev/zero itself
        (private / "dev").symlink_to("/dev")
        path = private / "dev" / "zero"
    with pytest.raises((InsecureKeyFile, KeySourceError)):
        _no_hang(read, path)


@pytest.mark.parametrize("kind", ["key file", "master key file", "checkpoint"])
def test_oversized_secret_files_are_refused_without_reading_them(private, kind):
    path = private / "file.json"
    with open(path, "wb") as f:
        f.truncate(8 * 1024**3)  # 8 GiB, sparse: reading it would take the memory
    os.chmod(path, 0o600)
    with pytest.raises(ConfigError, match="larger than"):
        _reader_of(kind)(path)


@pytest.mark.parametrize("name", ["/dev/zero", "link.toml", "link.json", "fifo.toml", "dir.json"])
def test_config_files_that_are_not_regular_files_are_refused(tmp_path, name, monkeypatch):
    if name == "/dev/zero":
        path = Path(name)
    else:
        path = tmp_path / name
        if name.startswith("link"):
            path.symlink_to("/dev/zero")
        elif name.startswith("fifo"):
            _fifo(path)
        else:
            path.mkdir()
    with pytest.raises(ConfigError):
        _no_hang(load_config, str(path), env={})
    monkeypatch.setenv("SEALSTORE_CONFIG", str(path))
    with pytest.raises(ConfigError):
        _no_hang(load_config)


def test_an_oversized_config_is_refused(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b"# " + b"x" * securefile.CONFIG_FILE_LIMIT + b"\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_config(str(path), env={})
    with open(path, "wb") as f:
        f.truncate(8 * 1024**3)
    with pytest.raises(ConfigError, match="larger than"):
        load_config(str(path), env={})


def test_a_config_behind_a_link_to_a_regular_file_still_loads(tmp_path):
    """(mounted configurations, e.g. a Kubernetes ConfigMap, are links)"""
    real = tmp_path / "real.toml"
    real.write_text('suite = "AEGIS-128L"\n')
    (tmp_path / "sealstore.toml").symlink_to(real)
    assert load_config(str(tmp_path / "sealstore.toml"), env={}).suite == "AEGIS-128L"


# ---- reads: who could have written it ------------------------------------------------------------


def _key_dir(tmp_path: Path, *chain: tuple[str, int]) -> Path:
    d = tmp_path
    for name, m in chain:
        d = d / name
        d.mkdir()
        os.chmod(d, m)
    return d


@pytest.mark.parametrize(
    "chain,refused",
    [
        ([("ww", 0o777), ("a", 0o755), ("keys", 0o700)], "ww"),  # world-writable, two levels up
        ([("gw", 0o775), ("keys", 0o700)], "gw"),  # group-writable, not sticky
        ([("sticky", 0o1777), ("a", 0o755), ("keys", 0o700)], None),  # like /tmp: fine
        ([("ok", 0o755), ("keys", 0o700)], None),
    ],
    ids=["world-writable-up-the-chain", "group-writable-parent", "sticky", "private"],
)
def test_a_key_directory_below_a_directory_others_can_write_is_refused(tmp_path, chain, refused):
    directory = _key_dir(tmp_path, *chain)
    path = directory / "keys.json"
    if refused is None:
        KeyFile(path.with_name("k2.json")).init()
        assert KeyFile(path.with_name("k2.json")).load()
        return
    with pytest.raises(InsecureKeyFile, match=f"directory .*/{refused}, above"):
        KeyFile(path).init()  # writing
    os.chmod(tmp_path / refused, 0o755)
    KeyFile(path).init()
    os.chmod(tmp_path / refused, 0o777)
    with pytest.raises(InsecureKeyFile, match=f"directory .*/{refused}, above"):
        KeyFile(path).load()  # reading


def test_a_link_in_the_chain_is_checked_on_both_sides(tmp_path):
    """``/private/keys-link -> /ww/keys``: the resolved chain passes through ``ww``."""
    real = _key_dir(tmp_path, ("ww", 0o777), ("keys", 0o700))
    os.chmod(tmp_path / "ww", 0o755)
    KeyFile(real / "keys.json").init()
    os.chmod(tmp_path / "ww", 0o777)
    (tmp_path / "p").mkdir(mode=0o700)
    (tmp_path / "p" / "link").symlink_to(real)
    with pytest.raises(InsecureKeyFile, match="ww"):
        KeyFile(tmp_path / "p" / "link" / "keys.json").load()


@pytest.mark.skipif(not ROOT, reason="chown to another user needs root")
def test_a_directory_up_the_chain_owned_by_another_user_is_refused(tmp_path):
    d = _key_dir(tmp_path, ("theirs", 0o755), ("keys", 0o700))
    KeyFile(d / "keys.json").init()
    os.chown(tmp_path / "theirs", 65534, 65534)
    with pytest.raises(InsecureKeyFile, match="owned by uid 65534"):
        KeyFile(d / "keys.json").load()


@pytest.mark.parametrize(
    "content",
    [
        '[key_source]\ntype = "file"\npath = "/attacker/keys.json"\n',
        '[key_source]\ntype = "database"\nurl = "sqlite:///x.db"\n'
        '[key_source.wrapping]\ntype = "aws-kms"\nkms_key_id = "alias/k"\n'
        'endpoint_url = "http://attacker.example"\n',
        "allow_retired = true\n",
        "accept_short_tags = true\n",
        "tag_size = 16\n",
    ],
    ids=["key path", "kms endpoint", "allow_retired", "accept_short_tags", "tag_size"],
)
@pytest.mark.parametrize("how", ["world-writable", "group-writable", "in a world-writable dir"])
def test_a_config_others_could_write_may_not_redirect_keys(tmp_path, content, how):
    d = tmp_path / "etc"
    d.mkdir(mode=0o755)
    path = d / "sealstore.toml"
    path.write_text(content)
    os.chmod(path, 0o644)
    assert load_config(str(path), env={})  # trusted: loads
    if how == "world-writable":
        os.chmod(path, 0o666)
    elif how == "group-writable":
        os.chmod(path, 0o664)
    else:
        os.chmod(d, 0o777)
    with pytest.raises(InsecureConfig, match="refused") as err:
        load_config(str(path), env={})
    assert isinstance(err.value, PermissionError) and isinstance(err.value, ConfigError)
    assert "attacker" not in str(err.value)  # names the settings, not their values


def test_an_untrusted_config_without_guarded_settings_loads_with_a_warning(tmp_path, caplog):
    path = tmp_path / "sealstore.toml"
    path.write_text('suite = "AEGIS-128L"\n')
    os.chmod(path, 0o666)
    with caplog.at_level(logging.WARNING, logger="sealstore.config"):
        assert load_config(str(path), env={}).suite == "AEGIS-128L"
    assert any("could have been written by others" in r.getMessage() for r in caplog.records)


def test_environment_variables_still_set_the_key_source(tmp_path):
    """The environment is the operator's: an untrusted file may hold the suite, the
    environment says where the keys are."""
    path = tmp_path / "sealstore.toml"
    path.write_text('suite = "AEGIS-128L"\n')
    os.chmod(path, 0o666)
    env = {"SEALSTORE_CONFIG": str(path), "SEALSTORE_KEY_SOURCE__PATH": str(tmp_path / "k.json")}
    cfg = load_config(env=env)
    assert cfg.key_source.path == tmp_path / "k.json"


@pytest.mark.skipif(not ROOT, reason="chown to another user needs root")
def test_a_config_owned_by_another_user_may_not_redirect_keys(tmp_path):
    path = tmp_path / "sealstore.toml"
    path.write_text('[key_source]\npath = "/elsewhere/keys.json"\n')
    os.chown(path, 65534, 65534)
    with pytest.raises(InsecureConfig, match="owned by uid 65534"):
        load_config(str(path), env={})


# ---- the checkpoint's content ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[1, 2]", b'{"last_key": 5}', b"[" * 100000, b"\xff\xfe"],
    ids=["text", "list", "int key", "deep", "not utf-8"],
)
def test_a_checkpoint_sealstore_did_not_write_is_an_error_not_a_silent_restart(private, content):
    read = _reader_of("checkpoint")
    path = private / "cp.json"
    securefile.write_secret_file(path, content)
    with pytest.raises(ConfigError, match="delete it"):
        read(path)


def test_a_checkpoint_others_can_read_or_write_is_refused(private):
    read = _reader_of("checkpoint")
    path = private / "cp.json"
    securefile.write_secret_file(path, json.dumps({"last_key": "p/9"}).encode())
    os.chmod(path, 0o644)
    with pytest.raises(InsecureKeyFile, match="chmod 600"):
        read(path)


def test_concurrent_writers_leave_one_whole_version_and_no_temp_file(private):
    """Processes replacing one checkpoint at once: every read sees one writer's whole file."""
    path = private / "cp.json"
    securefile.write_secret_file(path, json.dumps({"writer": -1, "pad": "x" * 50_000}).encode())
    code = (
        "import json, sys\n"
        "from sealstore import securefile\n"
        "w = int(sys.argv[2])\n"
        "for i in range(40):\n"
        "    doc = {'writer': w, 'i': i, 'pad': str(w) * 50_000}\n"
        "    securefile.write_secret_file(sys.argv[1], json.dumps(doc).encode())\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(w)]) for w in range(4)]
    while any(p.poll() is None for p in procs):
        doc = json.loads(securefile.read_secret_file(path, what="checkpoint"))
        assert doc["pad"] in ("x" * 50_000, str(doc["writer"]) * 50_000)  # never mixed
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert json.loads(path.read_bytes())["i"] == 39 and mode(path) == 0o600
    assert [p.name for p in private.iterdir()] == ["cp.json"]


@pytest.mark.parametrize("where", ["missing", "world-writable"])
def test_a_checkpoint_that_cannot_be_written_is_refused_before_any_object(tmp_path, where):
    """Checked before the listing: no object is re-sealed and then left without its position."""
    from sealstore.adapters.objects.engine import ObjectSealing
    from sealstore.adapters.objects.rotation import rotate_objects

    class Untouchable:  # any store call would be an error of the test
        scheme = "memory"

        def __getattr__(self, name):
            raise AssertionError(f"the store was called ({name}) before the checkpoint check")

    d = tmp_path / "d"
    if where == "world-writable":
        d.mkdir()
        os.chmod(d, 0o777)
    with pytest.raises((KeySourceError, InsecureKeyFile)):
        rotate_objects(
            ObjectSealing(Keyring.generate()), Untouchable(), "bucket", "p/",
            checkpoint=str(d / "cp.json"), errors=(),
        )  # fmt: skip
