"""`sealstore bench --quick`: it runs, reports every section, and writes valid JSON and a PNG.

Only the shape is checked, never a number: tests don't time anything.
"""

import json
import os
import subprocess
import sys

import pytest

SECTIONS = {"aead", "keyring", "columns", "objects"}


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    cmd = [sys.executable, "-m", "sealstore", "bench", "--quick",
           "--json", str(out / "report.json"), "--plot", str(out / "report.png")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, COLUMNS="160"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "report.json") as f:
        return json.load(f), proc.stdout, out


def test_every_section_ran(quick_report):
    report, stdout, _ = quick_report
    assert report["schema"] == "sealstore.bench/1"
    assert set(report["sections"]) == SECTIONS
    for name, sec in report["sections"].items():
        assert sec["status"] == "ok", f"{name}: {sec.get('reason')}"
        assert sec["rows"], name
        assert name in stdout


def test_report_names_cpu_kernels_and_versions(quick_report):
    report, stdout, _ = quick_report
    env = report["environment"]
    assert set(env["native"]["selected"]) == {"AEGIS-128L", "AEGIS-128X2", "AEGIS-128X4"}
    for lib in ("python", "cryptography", "sqlalchemy", "boto3"):
        assert env["versions"][lib]
    assert env["native"]["cpu"] in stdout
    assert "AEGIS-128X4 -> " in stdout


def test_aead_rows_have_ratios_against_aes_gcm_of_the_same_run(quick_report):
    rows = quick_report[0]["sections"]["aead"]["rows"]
    algorithms = {r["algorithm"] for r in rows}
    assert {"AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305", "AEGIS-128X4"} <= algorithms
    for r in rows:
        assert r["gbps"] > 0 and r["batches"] >= 5
        if r["algorithm"] != "memcpy":
            assert r["speedup_vs_aes256gcm"] > 0


def test_plot_is_a_png(quick_report):
    _, _, out = quick_report
    with open(out / "report.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_unknown_section_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "sealstore", "bench", "--only", "nope"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "unknown section" in (proc.stderr + proc.stdout)


def test_a_section_that_cannot_run_says_so(tmp_path):
    path = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "sealstore", "bench", "--quick", "--only", "columns",
         "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none", "--json", str(path)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sec = json.loads(path.read_text())["sections"]["columns"]
    assert sec["status"] == "unavailable" and sec["reason"]
    assert "rows" not in sec
