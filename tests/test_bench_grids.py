"""The AEAD section's grid of the portable kernel against its baseline (bench/grids.py)."""

from __future__ import annotations

from sealstore.bench import grids


def _row(variant, op, size, speedup):
    return {
        "variant": variant,
        "op": op,
        "size": size,
        "reps": 101,
        "baseline_gbps": 0.05,
        "portable_gbps": 0.05 * speedup,
        "speedup_median": speedup,
        "speedup_min": 0.5,
        "speedup_max": 100.0,
        "speedup_of_fastest": speedup,
    }


def test_portable_baseline_grid_has_a_row_per_variant_and_op():
    rows = [
        _row(v, op, n, s)
        for v, s in (("AEGIS-128L", 10.9), ("AEGIS-128X4", 7.2))
        for op in ("encrypt", "decrypt")
        for n in (1024, 16384)
    ]
    sec = {"rows": [], "c_harness": {"results": [], "portable_baseline": rows}}
    g = next(g for g in grids.aead(sec) if "baseline" in g.title)
    assert g.header == ["variant", "op", "1 KiB", "16 KiB"]
    assert [r[:2] for r in g.rows] == [
        ["AEGIS-128L", "encrypt"],
        ["AEGIS-128L", "decrypt"],
        ["AEGIS-128X4", "encrypt"],
        ["AEGIS-128X4", "decrypt"],
    ]
    assert g.rows[0][3] == "0.545 vs 0.050 (x10.9)"
    assert g.rows[2][2] == "0.360 vs 0.050 (x7.2)"
    assert "101 alternating batches" in g.notes[0]


def test_a_harness_without_baseline_rows_adds_no_grid():
    sec = {"rows": [], "c_harness": {"results": []}}
    assert not any("baseline" in g.title for g in grids.aead(sec))
