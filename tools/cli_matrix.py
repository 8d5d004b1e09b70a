"""Every ``sealstore`` command of an install, run bare, with ``--help`` and with a bad option,
plus the inputs issue 27 named (a database key source whose SQLite file cannot be opened or
whose URL is bad and holds a password, AWS KMS wrapping, per-tenant KMS keys, ``gs://``
prefixes, ``--config /dev/zero``, an unknown command, no command).  One row per call: the exit
status, the number of stderr lines and the first one.  Exit 1 if a call breaks the CLI's rules
(README "Install only what you use"): a status other than 0-3, more than one stderr line (help
pages aside), a traceback, or the password.

    python tools/cli_matrix.py      # with the python of the install to check (a venv's)

Run it in a core install and in one per extra: the commands whose extra is missing must answer
one line naming ``pip install 'sealstore[EXTRA]'``.  It runs in a scratch directory and HOME,
with no ``SEALSTORE_*`` variable set.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile

PASSWORD = "hunter2-cli-matrix"
COMMANDS = [
    "keys init", "keys list", "keys rotate", "keys retire", "keys destroy",
    "tenants create", "tenants list", "tenants rotate", "tenants shred",
    "bench", "rotate", "reindex", "status", "verify", "encrypt-column", "decrypt-column",
    "medium-check", "db", "db init", "s3", "s3 rotate", "migrations",
]  # fmt: skip


def _file(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def calls(tmp: str) -> list[list[str]]:
    master = _file(os.path.join(tmp, "master.key"), base64.b64encode(bytes(range(32))).decode())
    wrap = f'[key_source.wrapping]\ntype = "master-key"\npath = "{master}"\n'
    unopenable = _file(
        os.path.join(tmp, "c.toml"),
        '[key_source]\ntype = "database"\nurl = "sqlite:////nonexistent/dir/x.db"\n' + wrap,
    )
    bad_url = _file(
        os.path.join(tmp, "d.toml"),
        f'[key_source]\ntype = "database"\nurl = "notaurl://user:{PASSWORD}@x"\n' + wrap,
    )
    kms = _file(
        os.path.join(tmp, "k.toml"),
        f'[key_source]\npath = "{tmp}/kk.json"\n'
        '[key_source.wrapping]\ntype = "aws-kms"\nkms_key_id = "alias/k"\n',
    )
    out: list[list[str]] = []
    for command in COMMANDS:
        words = command.split()
        bare = [] if command == "bench" else [words]  # bare, the bench runs: not an error
        out += [*bare, [*words, "--help"], [*words, "--no-such-option"]]
    out += [
        ["--config", unopenable, "keys", "list"],
        ["--config", bad_url, "keys", "list"],
        ["--config", kms, "keys", "init"],
        ["tenants", "create", "t1", "--dir", f"{tmp}/tenants", "--kms-alias-prefix", "alias/x-"],
        ["rotate", "--objects", "gs://b/p"],
        ["keys", "retire", "1", "--objects", "gs://b/p"],
        ["--config", "/dev/zero", "keys", "list"],
        ["nosuchcommand"],
        [],
    ]
    return out


def main() -> int:
    exe = os.path.join(os.path.dirname(sys.executable), "sealstore")
    tmp = tempfile.mkdtemp(prefix="sealstore-cli-matrix.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEALSTORE")}
    env["HOME"] = tmp
    bad = 0
    all_calls = calls(tmp)
    for argv in all_calls:
        r = subprocess.run(
            [exe, *argv], capture_output=True, text=True, timeout=120, env=env, cwd=tmp,
            stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        err = [line for line in r.stderr.splitlines() if line.strip()]
        helped = "--help" in argv and r.returncode == 0
        ok = (
            r.returncode in (0, 1, 2, 3)
            and (helped or len(err) <= 1)
            and "Traceback" not in r.stderr
            and PASSWORD not in r.stderr + r.stdout
        )
        if r.returncode == 0 and not helped and argv:  # a success says nothing on stderr
            ok = ok and all(line.startswith("sealstore: WARNING") for line in err)
        bad += not ok
        first = (err[0] if err else (r.stdout.splitlines() or [""])[0])[:150]
        shown = " ".join(argv)
        print(
            f"{'ok ' if ok else 'BAD'} rc={r.returncode:<3} lines={len(err)} {shown!r:60} {first}"
        )
    print(f"{len(all_calls)} calls, {bad} breaking the rules")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
