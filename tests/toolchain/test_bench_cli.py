"""`sealstore bench --quick`: it runs, reports every section, and writes valid JSON and a PNG.

Only the shape is checked, never a number: tests don't time anything.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sealstore.suites import native_variants

pytestmark = [
    pytest.mark.toolchain
]  # compilers, builds, whole runs: pytest -m 'not toolchain' skips them

SECTIONS = {"aead", "keyring", "columns", "objects"}


#: CI (.ci/run) has just run this very command in the same virtualenv as its main job (with
#: COLUMNS=160, stdout and stderr to files): this names that run's directory (report.json,
#: report.png, stdout.txt, stderr.txt), which the checks below read instead of running the
#: whole quick bench a second time.  Set but incomplete is a failure, never a skip.
REUSE = "SEALSTORE_BENCH_QUICK_DIR"


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    if os.environ.get(REUSE):
        done = Path(os.environ[REUSE])
        names = ("report.json", "report.png", "stdout.txt", "stderr.txt")
        missing = [n for n in names if not (done / n).is_file()]
        assert not missing, f"${REUSE}={done} lacks {missing}"
        with open(done / "report.json") as f:
            report = json.load(f)
        stdout, stderr = ((done / n).read_text() for n in ("stdout.txt", "stderr.txt"))
        return report, stdout, done, stderr
    out = tmp_path_factory.mktemp("bench")
    cmd = [
        sys.executable,
        "-m",
        "sealstore",
        "bench",
        "--quick",
        "--json",
        str(out / "report.json"),
        "--plot",
        str(out / "report.png"),
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ, COLUMNS="160")
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "report.json") as f:
        return json.load(f), proc.stdout, out, proc.stderr


def test_every_section_ran(quick_report):
    report, stdout, _, _ = quick_report
    assert report["schema"] == "sealstore.bench/1"
    assert set(report["sections"]) == SECTIONS
    for name, sec in report["sections"].items():
        assert sec["status"] == "ok", f"{name}: {sec.get('reason')}"
        assert sec["rows"], name
        assert name in stdout


def test_report_names_cpu_kernels_and_versions(quick_report):
    report, stdout, _, _ = quick_report
    env = report["environment"]
    assert set(env["native"]["selected"]) == set(native_variants())
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
        else:  # a memory copy is no AEAD: no ratio to AES-256-GCM
            assert r["speedup_vs_aes256gcm"] is None


def test_plot_is_a_png(quick_report):
    _, _, out, _ = quick_report
    with open(out / "report.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_unknown_section_is_a_usage_error():
    proc = subprocess.run(
        [sys.executable, "-m", "sealstore", "bench", "--only", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "unknown section" in proc.stderr


def test_every_part_of_every_section_ran(quick_report):
    """The README's main command installs what every part needs: the incumbent, libaegis, moto
    and the C harness built from the installed package's own kernel sources."""
    report, stdout, _, _ = quick_report
    sections = report["sections"]
    assert sections["aead"]["c_harness"]["results"]
    # the portable kernel against its pre-bitsliced baseline, same run, every variant
    base = sections["aead"]["c_harness"]["portable_baseline"]
    assert {(r["variant"], r["op"], r["size"]) for r in base} == {
        (v, op, n)
        for v in ("AEGIS-128L", "AEGIS-128X2", "AEGIS-128X4")
        for op in ("encrypt", "decrypt")
        for n in (1024, 16384)
    }
    assert all(r["speedup_median"] > 1 for r in base), base
    assert sections["aead"]["versus_libaegis"]
    # the aarch64 instruction mix needs the cross binutils (system packages CI installs)
    notes = [n for n in sections["aead"]["notes"] if not n.startswith("aarch64 instruction mix")]
    assert not notes, notes
    if os.environ.get("CI", "").lower() == "true":
        assert sections["aead"]["aarch64_loop"], sections["aead"]["notes"]
    assert not sections["columns"]["unavailable"], sections["columns"]["unavailable"]
    assert {r["variant"] for r in sections["columns"]["rows"]} >= {
        "plaintext",
        "sqlalchemy-utils",
        "sealstore AEGIS",
    }
    assert sections["objects"]["rows"]["s3"]


def test_output_is_grids_with_goals_not_error_lines(quick_report):
    _, stdout, _, _ = quick_report
    assert "MISS" not in stdout and "(target" not in stdout
    assert "encrypt, GB/s (x AES-256-GCM of this run)" in stdout
    assert "goals (docs/BENCH.md) and this run" in stdout
    assert "memory copy (no ratio)" in stdout
    assert "sections: aead ok; keyring ok; columns ok; objects ok" in stdout


def test_a_log_gets_a_line_per_finished_case(quick_report):
    _, _, _, stderr = quick_report  # stdout is a pipe here, as in CI
    lines = stderr.splitlines()
    for section in SECTIONS:
        assert any(f"] {section}: started" in line for line in lines), section
        assert any(f"] {section}: ok in " in line for line in lines), section
    assert sum("] aead: " in line for line in lines) > 20
    assert any("columns: run 1/3: sealstore AEGIS" in line for line in lines)
    assert any("objects: S3 1 MiB put_object AEGIS-128X4" in line for line in lines)


def _bench(tmp_path, *args, timeout=300):
    path = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "sealstore", "bench", "--quick", *args, "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc, (json.loads(path.read_text()) if path.exists() else None)


def test_an_unreachable_database_fails_its_section_and_the_run_goes_on(tmp_path):
    proc, report = _bench(
        tmp_path,
        "--only",
        "columns,keyring",
        "--db",
        "postgresql+psycopg://nobody@127.0.0.1:1/none",
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    sec = report["sections"]["columns"]
    assert (
        sec["status"] == "failed"
        and "cannot connect" in sec["reason"]
        and "127.0.0.1:1" in sec["reason"]
    )
    assert "rows" not in sec
    assert report["sections"]["keyring"]["status"] == "ok" and report["sections"]["keyring"]["rows"]
    assert "columns failed" in proc.stdout and "keyring ok" in proc.stdout


def test_an_unparsable_database_url_fails_its_section(tmp_path):
    proc, report = _bench(tmp_path, "--only", "columns", "--db", "not a url")
    assert proc.returncode == 1
    assert report["sections"]["columns"]["status"] == "failed"
    assert "Traceback" not in proc.stderr + proc.stdout


def test_an_unreachable_s3_endpoint_fails_its_section(tmp_path):
    proc, report = _bench(tmp_path, "--only", "objects", "--s3-endpoint", "http://127.0.0.1:1")
    assert proc.returncode == 1
    sec = report["sections"]["objects"]
    assert sec["status"] == "failed" and "127.0.0.1:1" in sec["reason"]


def test_plot_needs_are_checked_before_measuring(tmp_path):
    code = (
        "import sys; sys.modules['matplotlib'] = None; from sealstore.bench.run import main; "
        f"sys.exit(main(['--quick', '--plot', {str(tmp_path / 'p.png')!r}, '--json', {str(tmp_path / 'r.json')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--plot needs matplotlib" in proc.stderr and "sealstore[bench]" in proc.stderr
    assert not (tmp_path / "r.json").exists()  # nothing was measured
