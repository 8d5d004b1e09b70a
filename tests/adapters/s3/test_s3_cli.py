"""``sealstore s3 rotate`` from the shell: a progress bar with the total and an ETA (stderr,
only on a terminal or when asked, never with --json), one total line, a JSON document that is
all of stdout and holds no key material, and the checkpoint file it resumes from."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import pytest
from fixtures_s3 import make_client
from sealstore.adapters.s3 import encrypt_client
from sealstore.adapters.objects.progress import make_object_progress, wants_bar
from sealstore.adapters.s3.rotate import default_checkpoint, pending_objects, rotate_objects
from sealstore.cli import main
from sealstore.config import load_config

BODIES = {f"data/{i:02d}": f"object body number {i} ".encode() * 40 for i in range(5)}


@pytest.fixture
def project(s3_endpoint, bucket, tmp_path, monkeypatch):
    """Objects sealed under the first key, then ``keys rotate``: all five need re-sealing."""
    for name in ("SEALSTORE_CONFIG", "SEALSTORE_KEY_SOURCE__PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the default checkpoints
    config = tmp_path / "sealstore.toml"
    config.write_text(f'[key_source]\ntype = "file"\npath = "{tmp_path / "keys.json"}"\n')
    assert main(["-c", str(config), "keys", "init"]) == 0
    kr = load_config(str(config)).load_keyring()
    s3 = encrypt_client(make_client(s3_endpoint), kr)
    for key, body in BODIES.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    kr.close()
    assert main(["-c", str(config), "keys", "rotate"]) == 0
    base = ["-c", str(config), "s3", "rotate", "--endpoint-url", s3_endpoint,
            "--region", "us-east-1"]  # fmt: skip
    return base, f"s3://{bucket}/data", tmp_path


def run(capsys, *argv):
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def forbidden(tmp_path, raw_s3, bucket) -> list[str]:
    out = [body.decode() for body in BODIES.values()]
    for k in json.loads((tmp_path / "keys.json").read_text())["keys"]:
        raw = base64.b64decode(k["material"])
        out += [k["material"], raw.hex(), raw.hex().upper()]
    for key in BODIES:
        sealed = raw_s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        out += [sealed[80:112].hex(), base64.b64encode(sealed[80:110]).decode()]
    return out


def test_json_is_all_of_stdout_and_holds_no_secrets(project, capsys, raw_s3, bucket):
    base, url, tmp_path = project
    before = forbidden(tmp_path, raw_s3, bucket)
    code, out, err = run(capsys, *base, url, "--json", "--progress", "bar",
                         "--checkpoint", str(tmp_path / "cp.json"))  # fmt: skip
    doc = json.loads(out)
    assert code == 0 and err == ""  # no bar with --json, even when asked
    assert (doc["scanned"], doc["resealed"], doc["complete"]) == (5, 5, True)
    assert doc["checkpoint"] == str(tmp_path / "cp.json") and doc["failures"] == []
    assert (
        doc["primary"]
        == load_config(str(tmp_path / "sealstore.toml")).load_keyring().primary.id_hex
    )
    for secret in before + forbidden(tmp_path, raw_s3, bucket):
        assert secret not in out


def test_bar_shows_total_and_eta_and_a_total_line(project, capsys):
    base, url, tmp_path = project
    code, out, err = run(capsys, *base, url, "--progress", "bar", "--checkpoint", "cp.json")
    assert code == 0
    assert "5/5" in err and "ETA" in err and "objects/s" in err  # the bar, on stderr
    assert err.count("resealed") == 5  # changed objects above the bar, not on stdout
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("5 objects in ") and "5 re-sealed" in lines[0]


def test_not_a_terminal_means_lines_and_no_counting(project, capsys, monkeypatch):
    base, url, tmp_path = project
    import sealstore.adapters.s3.rotate as s3_rotate

    counted = []
    monkeypatch.setattr(s3_rotate, "pending_objects", lambda *a, **k: counted.append(1) or 0)
    code, out, err = run(capsys, *base, url, "--checkpoint", "cp.json")  # --progress auto
    assert code == 0 and counted == [] and err == ""
    assert [line.split() for line in out.splitlines()[:5]] == [
        ["resealed", key] for key in sorted(BODIES)
    ]
    assert out.splitlines()[5].startswith("5 objects in ")


def test_auto_picks_the_bar_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert wants_bar("auto", Tty()) and not wants_bar("auto", io.StringIO())
    assert not wants_bar("auto", Tty(), json_output=True) and not wants_bar("lines", Tty())
    assert wants_bar("bar", io.StringIO()) and not wants_bar("bar", Tty(), json_output=True)
    with pytest.raises(ValueError, match="needs the total"):
        make_object_progress("bar", None)
    with pytest.raises(ValueError, match="progress mode"):
        make_object_progress("fancy", 3)


def test_default_checkpoint_in_the_state_directory_and_resume(project, capsys, s3_endpoint, bucket):
    base, url, tmp_path = project
    default = tmp_path / "state" / "sealstore"
    default /= f"rotate-{hashlib.sha256(url.encode()).hexdigest()[:12]}.json"
    assert default_checkpoint(url) == str(default)
    assert (default.parent.stat().st_mode & 0o777) == 0o700  # created private
    kr = load_config(str(tmp_path / "sealstore.toml")).load_keyring()
    s3 = encrypt_client(make_client(s3_endpoint), kr)

    def stop_after_two(report, key, outcome):
        if report.scanned == 2:
            raise KeyboardInterrupt  # Ctrl-C after the second object

    with pytest.raises(KeyboardInterrupt):
        rotate_objects(s3, bucket, "data", checkpoint=str(default), progress=stop_after_two)
    state = json.loads(default.read_text())
    assert (state["last_key"], state["complete"]) == ("data/01", False)
    assert pending_objects(s3, bucket, "data", checkpoint=str(default)) == 3
    assert pending_objects(s3, bucket, "data") == 5
    kr.close()

    code, out, err = run(capsys, *base, url, "--progress", "bar")  # no --checkpoint: the default
    assert code == 0
    assert "3/3" in err  # the total counted after the checkpoint's position
    assert out.splitlines()[0] == "resumed after 'data/01'"
    assert out.splitlines()[1].startswith("3 objects in ") and "3 re-sealed" in out
    assert json.loads(default.read_text())["complete"] is True
    assert (default.stat().st_mode & 0o777) == 0o600
    assert not list(tmp_path.glob(".sealstore-rotate-*"))  # nothing in the working directory
    code, out, _ = run(capsys, *base, url, "--progress", "none")  # complete: starts over
    assert code == 0 and out.startswith("5 objects in ") and "5 already under" in out


def test_dry_run_writes_no_checkpoint(project, capsys):
    base, url, tmp_path = project
    code, out, _ = run(capsys, *base, url, "--dry-run", "--progress", "none")
    assert code == 0 and out.startswith("dry run: 5 objects in ")
    assert not list((tmp_path / "state").glob("**/*.json"))


def test_a_missing_bucket_is_one_error_line(project, capsys):
    base, url, tmp_path = project
    for mode in ("bar", "lines"):  # the counting pass and the run itself
        code, out, err = run(capsys, *base, "s3://no-such-bucket-here/x", "--progress", mode)
        assert (code, out) == (1, "")
        assert err.startswith("sealstore: error: S3: ListObjectsV2: NoSuchBucket")
        assert "Traceback" not in err and len(err.splitlines()) == 1
