"""Running the ``sealstore`` CLI in a test: a fresh project directory with a key-file
configuration, and none of the caller's ``SEALSTORE_*`` settings."""

from __future__ import annotations

import json
import os

from sealstore.cli import main


def key_file_project(tmp_path, monkeypatch, config: str = "c.json", keys: str = "keys.json"):
    """Make ``tmp_path`` the working directory (importable, for ``--models``) and write
    ``config`` there naming the key file ``keys``, initialised by ``sealstore keys init``.
    Every ``SEALSTORE_*`` variable but ``SEALSTORE_KERNEL`` is unset for the test."""
    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / config).write_text(
        json.dumps({"key_source": {"type": "file", "path": str(tmp_path / keys)}})
    )
    assert main(["--config", config, "keys", "init"]) == 0
    return tmp_path / config
