"""The ``sealstore keys`` commands: init, list, rotate; never printing material."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys

import pytest
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.keysources.file import KeyFile

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)


@pytest.fixture
def keyfile(tmp_path, monkeypatch):
    path = tmp_path / "keys.json"
    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("SEALSTORE_KEY_SOURCE__PATH", str(path))
    return path


def materials(path) -> list[str]:
    keys = json.loads(path.read_text())["keys"]
    out = []
    for k in keys:
        raw = base64.b64decode(k["material"])
        out += [k["material"], raw.hex(), raw.hex().upper()]
    return out


def test_init_list_rotate(keyfile, capsys):
    assert main(["keys", "init", "--suite", "AEGIS-128X2"]) == 0
    out = capsys.readouterr().out
    first = json.loads(keyfile.read_text())["keys"][0]["id"]
    assert first in out and "AEGIS-128X2" in out
    assert stat.S_IMODE(os.stat(keyfile).st_mode) == 0o600

    assert main(["keys", "rotate"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(keyfile.read_text())
    second = [k for k in doc["keys"] if k["state"] == "primary"][0]
    assert second["id"] in out and second["suite"] == "AEGIS-128X4"  # config default suite
    assert f"{first} is now active" in out

    assert main(["keys", "list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "SUITE", "STATE", "CREATED", "AGE", "ROTATED"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows[first][1:3] == ["AEGIS-128X2", "active"]
    assert rows[second["id"]][1:3] == ["AEGIS-128X4", "primary"]
    assert rows[second["id"]][-1] == "-"
    for secret in materials(keyfile):
        assert secret not in out

    assert main(["keys", "list", "--json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out)
    assert [r["state"] for r in rows] == ["active", "primary"]
    assert set(rows[0]) == {"id", "suite", "state", "created_at", "age_seconds", "rotated_at"}
    assert rows[0]["rotated_at"] is not None and rows[0]["age_seconds"] >= 0
    for secret in materials(keyfile):
        assert secret not in out


def test_rotate_with_suite_and_keys_still_open(keyfile, capsys):
    main(["keys", "init"])
    kr = KeyFile(keyfile).load()
    v = kr.seal(b"before rotation")
    assert main(["keys", "rotate", "--suite", "AES-256-GCM"]) == 0
    kr2 = KeyFile(keyfile).load()
    assert str(kr2.primary.suite) == "AES-256-GCM"
    assert kr2.open(v) == b"before rotation"


def test_errors_exit_1_with_message(keyfile, capsys):
    assert main(["keys", "list"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["keys", "init"]) == 0
    assert main(["keys", "init"]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    os.chmod(keyfile, 0o644)
    assert main(["keys", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sealstore: error: ") and "chmod 600" in err


def test_config_file_option_and_bad_config(tmp_path, keyfile, capsys, monkeypatch):
    monkeypatch.delenv("SEALSTORE_KEY_SOURCE__PATH")  # the environment would win over the file
    cfg = tmp_path / "s.toml"
    cfg.write_text(f'tag_size = 16\n[key_source]\npath = "{tmp_path / "other.json"}"\n')
    assert main(["--config", str(cfg), "keys", "init"]) == 0
    assert (tmp_path / "other.json").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text("tag_size = 3\n")
    assert main(["-c", str(bad), "keys", "list"]) == 1
    assert "tag_size: must be 16 or 32" in capsys.readouterr().err


def test_usage_errors_exit_2(keyfile, capsys):
    with pytest.raises(SystemExit) as info:
        main(["keys"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["keys", "init", "--suite", "ROT13"])
    assert info.value.code == 2


def test_python_dash_m(keyfile):
    env = dict(os.environ)
    r = subprocess.run(
        [sys.executable, "-m", "sealstore", "keys", "init"], env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "sealstore", "keys", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and json.loads(r.stdout)[0]["state"] == "primary"


def test_init_plain_keys_warns_loudly(keyfile, capsys):
    assert main(["keys", "init"]) == 0
    out, err = capsys.readouterr()
    assert "wrapping: none" in out
    assert "WARNING" in err and "PLAIN, UNWRAPPED keys" in err and str(keyfile) in err
    for secret in materials(keyfile):
        assert secret not in out + err


def test_init_json_plain(keyfile, capsys):
    assert main(["keys", "init", "--json", "--suite", "AEGIS-128L"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)  # the whole of stdout is one document
    key = json.loads(keyfile.read_text())["keys"][0]
    assert doc == {
        "key_source": f"KeyFile({str(keyfile)!r})",
        "wrapping": "none",
        "wrapped": False,
        "primary": {"id": key["id"], "suite": "AEGIS-128L"},
        "warning": doc["warning"],
    }
    assert "PLAIN, UNWRAPPED" in doc["warning"] and doc["warning"] in err
    for secret in materials(keyfile):
        assert secret not in out + err


def test_init_with_a_master_key_writes_wrapped_keys_without_warning(
    keyfile, tmp_path, capsys, monkeypatch
):
    from sealstore.wrapping.master import MasterKeyWrapper

    master = MasterKeyWrapper.create_file(tmp_path / "master.key")
    monkeypatch.setenv("SEALSTORE_KEY_SOURCE__WRAPPING__TYPE", "master-key")
    monkeypatch.setenv("SEALSTORE_KEY_SOURCE__WRAPPING__PATH", str(master))
    assert main(["keys", "init", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert (doc["wrapping"], doc["wrapped"], doc["warning"]) == ("master-key", True, None)
    assert "WARNING" not in err
    stored = json.loads(keyfile.read_text())
    assert stored["sealstore_keyring"] == 2 and stored["wrapping"] == {"type": "master-key"}
    (key,) = stored["keys"]
    assert "material" not in key and key["wrapped"] and key["id"] == doc["primary"]["id"]
    master_b64 = master.read_text().strip()
    raw_master = base64.b64decode(master_b64)
    for secret in (master_b64, raw_master.hex(), key["wrapped"], stored["metadata_key"]):
        assert secret not in out + err
    kr = load_config().load_keyring()  # the configured wrapping opens what init wrote
    material = kr.primary.reveal_material()
    for secret in (base64.b64encode(material).decode(), material.hex()):
        assert secret not in out + err
    kr.close()
    assert main(["keys", "rotate", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["previous"] == {"id": key["id"], "state": "active"}
    assert all("material" not in k for k in json.loads(keyfile.read_text())["keys"])


def test_rotate_json(keyfile, capsys):
    main(["keys", "init"])
    capsys.readouterr()
    assert main(["keys", "rotate", "--json", "--suite", "AES-256-GCM"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    keys = {k["state"]: k for k in json.loads(keyfile.read_text())["keys"]}
    assert doc == {
        "primary": {"id": keys["primary"]["id"], "suite": "AES-256-GCM"},
        "previous": {"id": keys["active"]["id"], "state": "active"},
    }
    assert err == ""
    for secret in materials(keyfile):
        assert secret not in out


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"sealstore {version('sealstore')}"


def test_version_without_distribution_metadata(monkeypatch):
    import importlib.metadata

    from sealstore import cli

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert cli.version().startswith("unknown (no installed sealstore distribution")


def test_log_level_goes_to_stderr_and_leaves_json_alone(keyfile, capsys):
    import logging

    assert main(["--log-level", "debug", "keys", "init", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["wrapped"] is False  # stdout is still the one document
    assert "DEBUG sealstore.keysources.file: wrote key file" in err
    assert "INFO sealstore.keysources.base: created a keyring" in err
    assert main(["--log-level", "info", "keys", "rotate"]) == 0
    out, err = capsys.readouterr()
    assert "INFO sealstore.keyring.ring: key" in err and "DEBUG" not in err
    assert "sealstore." not in out
    for secret in materials(keyfile):
        assert secret not in out + err
    logger = logging.getLogger("sealstore")
    assert not any(isinstance(h, logging.StreamHandler) for h in logger.handlers)
    assert main(["keys", "list"]) == 0
    assert (
        "sealstore.keysources.file" not in capsys.readouterr().err
    )  # off again without the option


# ---- every failure is one line and a documented status -----------------------------------------


def _database_config(tmp_path, url: str):
    master = tmp_path / "master.key"
    master.write_text(base64.b64encode(os.urandom(32)).decode())
    master.chmod(0o600)
    cfg = tmp_path / "db.toml"
    cfg.write_text(
        f'[key_source]\ntype = "database"\nurl = "{url}"\n'
        f'[key_source.wrapping]\ntype = "master-key"\npath = "{master}"\n'
    )
    cfg.chmod(0o600)
    return cfg


def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "url, says",
    [
        ("not a url", "URL"),
        ("nosuchdialect://u:hunter2@h/db", "nosuchdialect"),
        ("sqlite:///{tmp}/no/such/dir/keys.db", "unable to open database file"),
        ("sqlite:///{tmp}", "unable to open database file"),  # a directory
        ("postgresql+psycopg://u:hunter2@127.0.0.1:{port}/db", "refused"),
        ("mysql+pymysql://u:hunter2@127.0.0.1:{port}/db", "refused"),
    ],
)
def test_keys_list_with_a_bad_database_key_source_is_one_line_and_exit_1(
    tmp_path, keyfile, monkeypatch, url, says
):
    """The issue's 32- and 137-line tracebacks: a bad URL, a SQLite file that cannot be opened,
    a server that refuses; the password never shows."""
    monkeypatch.delenv("SEALSTORE_KEY_SOURCE__PATH")
    cfg = _database_config(tmp_path, url.format(tmp=tmp_path, port=_closed_port()))
    proc = subprocess.run(
        [sys.executable, "-m", "sealstore", "-c", str(cfg), "keys", "list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("sealstore: error: ") and says in proc.stderr, proc.stderr
    assert "hunter2" not in proc.stderr and "Traceback" not in proc.stderr


def _boom(message: str, kind: type[BaseException] = RuntimeError):
    def run(args):
        raise kind(message)

    return run


SECRET_MESSAGE = (
    "failed for postgresql://app:hunter2@db.example/x with password=hunter3 and more\n"
    "second line: the statement [SQL: INSERT ...] [parameters: ('plaintext',)]"
)


def test_an_unexpected_exception_is_one_line_exit_70_without_secrets(keyfile, capsys, monkeypatch):
    monkeypatch.delenv("SEALSTORE_DEBUG", raising=False)
    monkeypatch.setattr("sealstore.cli._cmd_list", _boom(SECRET_MESSAGE))
    assert main(["keys", "list"]) == 70
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("sealstore: error: unexpected RuntimeError: failed for ")
    assert "postgresql://app:***@db.example/x" in captured.err and "password=***" in captured.err
    for secret in ("hunter2", "hunter3", "plaintext", "parameters"):
        assert secret not in captured.err
    assert "--debug prints the traceback" in captured.err


@pytest.mark.parametrize("how", ["option", "environment"])
def test_debug_prints_the_traceback_before_the_line(keyfile, capsys, monkeypatch, how):
    monkeypatch.setattr("sealstore.cli._cmd_list", _boom("kaput"))
    if how == "option":
        monkeypatch.delenv("SEALSTORE_DEBUG", raising=False)
        argv = ["--debug", "keys", "list"]
    else:
        monkeypatch.setenv("SEALSTORE_DEBUG", "1")
        argv = ["keys", "list"]
    assert main(argv) == 70
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "RuntimeError: kaput\n" in err
    assert (
        err.splitlines()[-1]
        == "sealstore: error: unexpected RuntimeError: kaput (please report it)"
    )


@pytest.mark.parametrize(
    "kind, status, line",
    [
        (KeyboardInterrupt, 130, "sealstore: interrupted"),
        (PermissionError, 1, "sealstore: error: PermissionError: kaput"),
        (MemoryError, 70, "sealstore: error: unexpected MemoryError: kaput"),
    ],
)
def test_interrupts_and_os_errors_have_their_status(
    keyfile, capsys, monkeypatch, kind, status, line
):
    monkeypatch.delenv("SEALSTORE_DEBUG", raising=False)
    monkeypatch.setattr("sealstore.cli._cmd_list", _boom("kaput", kind))
    assert main(["keys", "list"]) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(line), err


def test_a_broken_entry_point_is_one_line_not_a_traceback(keyfile, capsys, monkeypatch):
    """An install whose command modules fail to import for another reason than a missing extra
    (a broken upgrade): every command answers one line, exit 70, even ``keys list``."""
    import sealstore.cli as cli

    def broken(group):
        raise ImportError("cannot import name 'x' from 'sealstore.migrations.rotation'")

    monkeypatch.delenv("SEALSTORE_DEBUG", raising=False)
    monkeypatch.setattr(cli, "_entry_points", broken)
    assert main(["keys", "list"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected ImportError: cannot import name" in err
