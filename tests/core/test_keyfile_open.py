"""Opening a key file: one open with O_NOFOLLOW, checks on the opened descriptor (owner, mode,
file type, directory), each refusal an InsecureKeyFile that says what to fix; a file swapped
between a 0600 and a 0644 inode is never read in its 0644 state."""

from __future__ import annotations

import os
import threading
import time

import pytest
from sealstore.errors import InsecureKeyFile, KeySourceError
from sealstore.keysources.file import KeyFile
from sealstore.wrapping import MasterKeyWrapper

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file ownership and modes")
as_root = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="needs root (chown)")
NOBODY = 65534


@pytest.fixture
def keyfile(tmp_path):
    path = tmp_path / "keys.json"
    KeyFile(path).init()
    return path


def test_a_good_file_loads(keyfile):
    assert len(KeyFile(keyfile).load()) == 1


@as_root
def test_file_owned_by_another_user_is_refused(keyfile):
    os.chown(keyfile, NOBODY, -1)  # still 0600: the mode check alone accepted it
    with pytest.raises(InsecureKeyFile, match=f"owned by uid {NOBODY}.*chown"):
        KeyFile(keyfile).load()


@as_root
def test_directory_owned_by_another_user_is_refused(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o755)
    KeyFile(d / "keys.json").init()
    os.chown(d, NOBODY, -1)
    with pytest.raises(InsecureKeyFile, match=f"directory {d} is owned by uid {NOBODY}"):
        KeyFile(d / "keys.json").load()


def test_symlink_is_refused_even_to_a_good_file(keyfile, tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(keyfile)
    with pytest.raises(InsecureKeyFile, match="symbolic link.*real file"):
        KeyFile(link).load()


def test_group_or_world_readable_file_is_refused(keyfile):
    os.chmod(keyfile, 0o644)
    with pytest.raises(InsecureKeyFile, match="mode 0644.*chmod 600"):
        KeyFile(keyfile).load()


@pytest.mark.parametrize("dir_mode", [0o777, 0o1777, 0o775, 0o757])
def test_directory_writable_by_others_is_refused(tmp_path, dir_mode):
    d = tmp_path / "shared"
    d.mkdir()
    KeyFile(d / "keys.json").init()
    os.chmod(d, dir_mode)
    try:
        with pytest.raises(InsecureKeyFile, match=f"mode {dir_mode & 0o7777:04o}.*chmod go-w"):
            KeyFile(d / "keys.json").load()
        with pytest.raises(InsecureKeyFile, match="chmod go-w"):  # and nothing is written there
            KeyFile(d / "other.json").init()
        assert not (d / "other.json").exists()
    finally:
        os.chmod(d, 0o700)


def test_fifo_in_place_of_the_file_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "keys.json"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(InsecureKeyFile, match="not a regular file"):
        KeyFile(fifo).load()


def test_master_key_file_gets_the_same_checks(tmp_path):
    path = MasterKeyWrapper.create_file(tmp_path / "master.key")
    link = tmp_path / "master-link.key"
    link.symlink_to(path)
    with pytest.raises(InsecureKeyFile, match="symbolic link"):
        MasterKeyWrapper.from_file(link)
    os.chmod(path, 0o640)
    with pytest.raises(InsecureKeyFile, match="0640"):
        MasterKeyWrapper.from_file(path)


def test_swapping_a_0600_and_a_0644_file_never_serves_the_0644_keys(tmp_path):
    path = tmp_path / "keys.json"
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    KeyFile(good).init()
    bad_key = KeyFile(bad).init().primary.key_id
    os.chmod(bad, 0o644)
    os.link(good, path)
    stop = threading.Event()

    def swap():
        tmp = tmp_path / "swap.tmp"
        while not stop.is_set():
            for src in (bad, good):
                os.link(src, tmp)
                os.replace(tmp, path)  # the path always exists, alternating inodes

    swapper = threading.Thread(target=swap)
    swapper.start()
    loaded = refused = 0
    deadline = time.monotonic() + 300  # a hang guard: the loop ends on counts, not on time
    try:
        while (loaded < 200 or refused < 200) and time.monotonic() < deadline:
            try:
                ring = KeyFile(path).load()
            except InsecureKeyFile:
                refused += 1
                continue
            assert bad_key not in ring  # the 0644 file's keys are never served
            loaded += 1
    finally:
        stop.set()
        swapper.join()
    assert loaded >= 200 and refused >= 200  # both states were really seen, many times


def test_master_key_creation_never_replaces_a_concurrently_created_one(tmp_path, monkeypatch):
    path = tmp_path / "master.key"
    real_exists = type(path).exists
    made_by_other = b"b3RoZXI=\n"

    def racing_exists(self):  # another process creates the file right after the check
        if self == path and not real_exists(self):
            path.write_bytes(made_by_other)
            os.chmod(path, 0o600)
            return False
        return real_exists(self)

    monkeypatch.setattr(type(path), "exists", racing_exists)
    with pytest.raises(KeySourceError, match="already exists"):
        MasterKeyWrapper.create_file(path)
    assert path.read_bytes() == made_by_other
    assert [p.name for p in tmp_path.iterdir()] == ["master.key"]  # no temp file left
