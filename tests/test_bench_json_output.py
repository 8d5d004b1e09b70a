"""The ``--json PATH`` file of the benchmarks run on their own: ``columns_bench.main`` and
``aead.main`` write what their run returned, and nothing without ``--json``.  No figure is
checked: tests don't time anything."""

import json
import os

from sealstore.bench import aead, columns_bench, run
from sealstore.bench.json_output import write_json


def test_write_json_writes_the_result_and_nothing_without_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_json(None, {"rows": [1]})
    write_json("", {"rows": [1]})
    assert os.listdir(tmp_path) == []
    write_json(str(tmp_path / "out.json"), {"rows": [{"op": "seal", "gbps": 1.5}], "n": None})
    assert json.loads((tmp_path / "out.json").read_text()) == {
        "rows": [{"op": "seal", "gbps": 1.5}],
        "n": None,
    }


def test_columns_bench_main_writes_its_measurements(tmp_path):
    out = tmp_path / "columns.json"
    argv = ["--rows", "12", "--repeat", "1", "--variants", "plaintext,sealstore AEGIS"]
    assert columns_bench.main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["n"] == 12 and report["repeat"] == 1 and report["dialect"] == "sqlite"
    assert {(r["variant"], r["path"]) for r in report["rows"]} == {
        (v, p) for v in ("plaintext", "sealstore AEGIS") for p in columns_bench.PATHS
    }
    assert columns_bench.main(argv) == 0  # no --json: no file
    assert os.listdir(tmp_path) == ["columns.json"]


def test_columns_bench_main_without_a_database_writes_nothing(tmp_path, capsys):
    out = tmp_path / "columns.json"
    url = "sqlite:///" + str(tmp_path / "no" / "such" / "dir.db")
    assert columns_bench.main(["--rows", "5", "--db", url, "--json", str(out)]) == 2
    assert "columns bench: cannot connect" in capsys.readouterr().err
    assert not out.exists()


def test_aead_main_writes_what_its_run_returned(tmp_path, monkeypatch):
    result = {"rows": [{"algorithm": "AEGIS-128X4", "size": 65536, "gbps": 9.5}], "notes": []}
    rendered = []
    monkeypatch.setattr(aead, "run", lambda **kw: dict(result))
    monkeypatch.setattr(run, "render_section", lambda name, sec, console: rendered.append(name))
    out = tmp_path / "aead.json"
    assert aead.main(["--json", str(out)]) == 0
    assert json.loads(out.read_text()) == result and rendered == ["aead"]
    assert aead.main([]) == 0
    assert os.listdir(tmp_path) == ["aead.json"] and rendered == ["aead", "aead"]
