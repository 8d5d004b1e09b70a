"""The bench's "versus libaegis, C level" comparison (sealstore.bench.libaegis_versus): both
libraries' C entry points called from one C loop on the same buffers, encrypt and decrypt.

No figure is checked, except that a kernel about a hundred times slower (the portable one) is
reported as the slower side whichever slot it is passed in: that is what shows the round-robin
order swap attributes each batch to the right function.
"""

import pytest

from sealstore import native
from sealstore.bench import aead, grids, libaegis_versus as lv
from sealstore.bench.cbuild import HarnessUnavailable
from sealstore.errors import InternalError

pytestmark = [pytest.mark.toolchain]  # builds versus_libaegis.c

aeg_loader = pytest.importorskip("aeg._loader")
X86 = [v for v in native.VARIANTS if native.selected_kernel(v) != "portable"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return lv._build(str(tmp_path_factory.mktemp("versus")))


def test_every_variant_size_and_direction_is_compared_on_the_selected_kernel():
    rows = lv.compare(rounds=3, batch_ms=0.05, every_kernel=False)
    assert {(r["variant"], r["size"], r["op"]) for r in rows} == {
        (v, s, op) for v in X86 for s in lv.SIZES for op in lv.OPS
    }
    for r in rows:
        assert r["kernel"] == native.selected_kernel(r["variant"]) and r["selected"]
        assert r["sealstore_gbps"] > 0 and r["libaegis_gbps"] > 0 and r["ratio"] > 0
        assert r["rounds"] == 3 and r["calls_per_batch"] >= 1


def test_every_kernel_mode_covers_each_x86_kernel_the_cpu_runs():
    rows = lv.compare(rounds=1, batch_ms=0.01, sizes=(1024,), every_kernel=True)
    expected = {
        (v, k) for v in native.VARIANTS for k in native.variant_kernels(v) if k != "portable"
    }
    assert {(r["variant"], r["kernel"]) for r in rows} == expected
    assert all(r["selected"] == (r["kernel"] == native.selected_kernel(r["variant"])) for r in rows)


@pytest.mark.skipif(not X86, reason="no x86 kernel on this machine")
def test_a_kernel_that_disagrees_with_libaegis_stops_the_comparison(monkeypatch):
    real = lv._entry_points

    def crossed(variant, kernel, aff, alib):  # AEGIS-128X4's functions passed as AEGIS-128L's
        other = "AEGIS-128X4" if variant != "AEGIS-128X4" else "AEGIS-128L"
        ours = real(other, native.selected_kernel(other), aff, alib)
        return {op: (ours[op][0], pair[1]) for op, pair in real(variant, kernel, aff, alib).items()}

    monkeypatch.setattr(lv, "_entry_points", crossed)
    with pytest.raises(InternalError, match="disagree") as e:
        lv.compare(rounds=1, batch_ms=0.01, sizes=(1024,), every_kernel=False)
    assert e.value.__cause__ is None and e.value.__context__ is None


@pytest.mark.skipif(not X86, reason="no x86 kernel on this machine")
def test_a_decryption_that_does_not_verify_is_an_error_not_a_figure(built):
    ffi, clib = built
    fns = lv._entry_points("AEGIS-128X2", native.selected_kernel("AEGIS-128X2"), *_aeg())
    bufs = lv._Buffers(ffi, 1024)
    lv._check_same(ffi, clib, bufs, "AEGIS-128X2", *fns["encrypt"])
    bufs.tag[0] ^= 1
    with pytest.raises(InternalError):
        lv._time(ffi, clib, bufs.case("decrypt"), *fns["decrypt"], rounds=2, batch_s=1e-5)
    bufs.tag[0] ^= 1
    bufs.c[1023] ^= 0x80
    with pytest.raises(InternalError):
        lv._time(ffi, clib, bufs.case("decrypt"), *fns["decrypt"], rounds=2, batch_s=1e-5)


@pytest.mark.skipif(not X86, reason="no x86 kernel on this machine")
@pytest.mark.parametrize("op", lv.OPS)
def test_each_batch_is_credited_to_the_function_that_ran_it(built, op):
    ffi, clib = built
    aff, alib = _aeg()
    slow = lv._entry_points("AEGIS-128L", "portable", aff, alib)
    fast = lv._entry_points("AEGIS-128L", native.selected_kernel("AEGIS-128L"), aff, alib)
    bufs = lv._Buffers(ffi, 1024)
    lv._check_same(ffi, clib, bufs, "AEGIS-128L", slow["encrypt"][0], fast["encrypt"][0])
    slow, fast = slow[op][0], fast[op][0]
    vc = bufs.case(op)
    slow_first = lv._time(ffi, clib, vc, slow, fast, rounds=6, batch_s=2e-4)
    fast_first = lv._time(ffi, clib, vc, fast, slow, rounds=6, batch_s=2e-4)
    assert slow_first["ratio"] < 0.5 < 2 < fast_first["ratio"]
    assert slow_first["ratio_median"] < 0.5 < 2 < fast_first["ratio_median"]


def test_the_grid_shows_encrypt_and_decrypt_per_size():
    rows = [
        dict(variant=v, kernel="avx2", selected=True, op=op, size=s, size_name=grids.size_name(s))
        | dict(sealstore_gbps=float(i + 1), libaegis_gbps=1.0, ratio=float(i + 1))
        for i, (v, s, op) in enumerate(
            (v, s, op)
            for v in ("AEGIS-128L", "AEGIS-128X4")
            for s in (1024, 16384)
            for op in lv.OPS
        )
    ]
    g = grids._libaegis(rows)
    assert "versus libaegis, C level" in g.title
    assert g.header == [
        "kernel",
        "1 KiB encrypt",
        "1 KiB decrypt",
        "16 KiB encrypt",
        "16 KiB decrypt",
    ]
    assert [row[0] for row in g.rows] == ["AEGIS-128L (avx2)", "AEGIS-128X4 (avx2)"]
    assert g.rows[1][1:] == ["5.00 (x5.00)", "6.00 (x6.00)", "7.00 (x7.00)", "8.00 (x8.00)"]
    assert not g.notes
    rows[0]["selected"] = False
    assert "libaegis's best" in grids._libaegis(rows).notes[0]


def test_the_aead_section_carries_the_comparison_or_says_why_not(monkeypatch):
    monkeypatch.setattr(aead, "run", lambda **kw: {"rows": []})
    monkeypatch.setattr(aead, "c_harness", lambda *a: {"results": []})
    calls = []

    def fake_compare(**kw):
        calls.append(kw)
        return [{"op": "decrypt"}]

    monkeypatch.setattr(lv, "compare", fake_compare)
    opts = type("Opts", (), {"quick": True})()
    assert aead.section(opts)["versus_libaegis"] == [{"op": "decrypt"}]
    assert calls[0]["every_kernel"] is False
    opts.quick = False
    aead.section(opts)
    assert calls[1]["every_kernel"] is True and calls[1]["rounds"] > calls[0]["rounds"]

    def no_compiler(**kw):
        raise HarnessUnavailable("no C compiler found")

    monkeypatch.setattr(lv, "compare", no_compiler)
    sec = aead.section(opts)
    assert "versus_libaegis" not in sec
    versus = [n for n in sec["notes"] if n.startswith("versus libaegis")]
    assert versus == ["versus libaegis, C level: not run: no C compiler found"]
    monkeypatch.setattr(lv, "compare", lambda **kw: None)
    notes = [n for n in aead.section(opts)["notes"] if n.startswith("versus libaegis")]
    assert len(notes) == 1 and "pip install 'sealstore[bench]'" in notes[0]


def _aeg():
    return aeg_loader.ffi, aeg_loader.lib
