"""sealstore._speedups on the limited API (issue 19): the same sources build one abi3 module
for every CPython >= 3.12 (native/build_speedups.py), kept building and running here although
the package does not ship it (docs/BENCH.md, "The limited API": the column path costs more).

* the installed module is the version-specific one (the package's build);
* the sources compile warning-free with ``Py_LIMITED_API`` against the headers of every Python
  >= 3.12 found here (gcc and clang);
* the module compiled once, against the oldest such headers, imports and runs under every
  Python >= 3.12 found here, the building one and the later ones: what abi3 promises.

Pythons are found as .ci/run finds them (PATH, then pyenv's versions); locally a missing one
skips, under CI (``CI=true``) it fails.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import sealstore._speedups

pytestmark = [
    pytest.mark.toolchain
]  # compilers, builds, whole runs: pytest -m 'not toolchain' skips them

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
IN_CI = os.environ.get("CI", "").lower() == "true"
WARN = ["-Wall", "-Wextra", "-Werror"]


def _build_speedups():
    sys.path.insert(0, str(NATIVE))  # it imports build_ffi, as setup.py does
    try:
        spec = importlib.util.spec_from_file_location(
            "_sealstore_build_speedups", NATIVE / "build_speedups.py"
        )
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(NATIVE))
    return mod


BUILD = _build_speedups()
LIMITED_MACRO = "-DPy_LIMITED_API=0x%02X%02X0000" % BUILD.LIMITED_API


def missing(what: str):
    if IN_CI:
        pytest.fail(f"{what} is missing in CI")
    pytest.skip(f"{what} is not installed")


def python_info(exe: str) -> dict | None:
    code = (
        "import json, sys, sysconfig; print(json.dumps({'version': list(sys.version_info[:2]),"
        " 'include': sysconfig.get_paths()['include'],"
        " 'gil_disabled': bool(sysconfig.get_config_var('Py_GIL_DISABLED'))}))"
    )
    try:
        proc = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def find_pythons() -> list[tuple[str, dict]]:
    """One interpreter per CPython minor >= LIMITED_API here (with the GIL), oldest first."""
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found: dict[tuple[int, int], tuple[str, dict]] = {}
    candidates = [sys.executable]
    for minor in range(BUILD.LIMITED_API[1], 20):
        v = f"3.{minor}"
        candidates.append(shutil.which(f"python{v}") or "")
        candidates += sorted(glob.glob(f"{pyenv}/versions/{v}.*/bin/python{v}"))
    for exe in filter(None, candidates):
        info = python_info(exe)
        if info and not info["gil_disabled"] and tuple(info["version"]) >= BUILD.LIMITED_API:
            found.setdefault(tuple(info["version"]), (exe, info))
    return [found[v] for v in sorted(found)]


PYTHONS = find_pythons()


def need_pythons(n: int) -> list[tuple[str, dict]]:
    if len(PYTHONS) < n:
        missing(f"{n} CPython versions >= {BUILD.LIMITED_API} (found {len(PYTHONS)})")
    return PYTHONS


def test_installed_module_is_the_full_api_build():
    name = Path(sealstore._speedups.__file__).name
    assert name == "_speedups" + sysconfig.get_config_var("EXT_SUFFIX"), name


def test_the_two_builds():
    limited, full = BUILD.extension(limited=True), BUILD.extension()
    assert limited.py_limited_api and limited.define_macros == [("Py_LIMITED_API", "0x030C0000")]
    assert not full.py_limited_api and full.define_macros == []
    assert limited.sources == full.sources and all((ROOT / s).is_file() for s in full.sources)


_MODULES: dict[tuple[str, str], tuple[list[str], Path | None]] = {}


def build_module(cc: str, include: str, tmp_path_factory) -> tuple[list[str], Path | None]:
    """The limited-API module compiled by ``cc`` against the headers in ``include`` (each source
    in parallel, -Werror), once per session: (the error reports, the module or None)."""
    key = (cc, include)
    if key not in _MODULES:
        out = tmp_path_factory.mktemp("abi3")

        def one(src: str):
            obj = out / (Path(src).stem + ".o")
            cmd = [cc, "-c", "-fPIC", "-O2", *WARN, LIMITED_MACRO, f"-I{NATIVE / 'include'}",
                   f"-I{include}", str(ROOT / src), "-o", str(obj)]  # fmt: skip
            r = subprocess.run(cmd, capture_output=True, text=True)
            return (f"{src}:\n{r.stderr}" if r.returncode else None), str(obj)

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = list(pool.map(one, BUILD.SOURCES))
        errors = [e for e, _ in results if e]
        module = out / "_speedups.abi3.so"
        if not errors:
            link = [cc, "-shared", "-o", str(module), *(o for _, o in results)]
            r = subprocess.run(link, capture_output=True, text=True)
            errors = [r.stderr] if r.returncode else []
        _MODULES[key] = errors, None if errors else module
    return _MODULES[key]


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_sources_compile_warning_free_on_the_limited_api(compiler, tmp_path_factory):
    cc = shutil.which(compiler) or missing(compiler)
    for exe, info in need_pythons(1):
        errors, _ = build_module(cc, info["include"], tmp_path_factory)
        assert not errors, f"{exe} ({info['version']}):\n" + "\n".join(errors)[-4000:]


# Run under each Python: the module alone (no sealstore installed there), through what needs no
# native context: the functions, the heap types (vectorcall, GC, pickling refused, immutable),
# the errors that name a type.
PROBE = textwrap.dedent(
    """
    import gc, importlib.util, inspect, json, pickle, sys
    spec = importlib.util.spec_from_file_location("sealstore._speedups", sys.argv[1])
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    out = {"version": list(sys.version_info[:2])}
    out["rows"] = m.map_columns([(b"a", 1), [b"b", 2]], ((0, bytes.hex),))
    m.check_disjoint(bytearray(4), 4, True, b"abcd", None, b"n")
    def fails(fn, *args):
        try:
            fn(*args)
        except Exception as exc:
            return [type(exc).__name__, str(exc)]
    out["context"] = fails(m.Context, 0, 1)
    out["buffer"] = fails(m.check_disjoint, 1, 4, True, b"abcd")
    seen = []
    sealer = m.NamedSealer({}, "n", b"ad", lambda v: seen.append(v) or "sealed")
    opener = m.NamedOpener({}, "n", b"ad", lambda v: seen.append(v) or "opened", text=True)
    out["calls"] = [sealer(b"x"), sealer(None), opener(b"y"), len(seen)]
    out["one_arg"] = fails(sealer, b"x", b"y")
    out["pickle"] = fails(pickle.dumps, sealer)
    out["immutable"] = fails(setattr, m.NamedOpener, "x", 1)
    registry = {}
    cyclic = m.NamedOpener(registry, "n", b"ad", len)
    registry["self"] = cyclic  # a cycle through the opener: the collector's traverse and clear
    del sealer, opener, cyclic, registry
    gc.collect()
    out["collected"] = not any(type(o).__name__ == "NamedOpener" for o in gc.get_objects())
    out["signature"] = str(inspect.signature(m.NamedSealer))
    out["module"] = [m.Context.__module__, m.NamedSealer.__qualname__]
    print(json.dumps(out))
    """
)


def test_one_limited_build_runs_under_every_python_from_the_limited_api_version(
    tmp_path, tmp_path_factory
):
    pythons = need_pythons(2)  # the building one and at least one later
    cc = shutil.which("gcc") or shutil.which("clang") or missing("a C compiler")
    errors, module = build_module(cc, pythons[0][1]["include"], tmp_path_factory)
    assert module is not None, "\n".join(errors)[-4000:]
    for exe, info in pythons:
        run = subprocess.run(
            [exe, "-I", "-c", PROBE, str(module)], capture_output=True, text=True, cwd=tmp_path
        )
        assert run.returncode == 0, f"{exe}:\n{run.stderr[-3000:]}"
        out = json.loads(run.stdout)
        assert out["version"] == info["version"]
        assert out["rows"] == [["61", 1], ["62", 2]]
        assert out["context"] == [
            "TypeError",
            "context must be a native context capsule from sealstore.native, not int",
        ]
        assert out["buffer"] == [
            "TypeError",
            "out must be a contiguous bytes-like object, not int",
        ]
        assert out["calls"] == ["sealed", None, "opened", 2]
        assert out["one_arg"] == ["TypeError", "NamedSealer takes exactly one positional argument"]
        assert out["pickle"] == ["TypeError", "NamedSealer objects cannot be pickled"]
        assert out["immutable"][0] == "TypeError" and out["collected"]
        assert out["signature"].startswith("(registry, name, associated_data, fallback, *")
        assert out["module"] == ["sealstore._speedups", "NamedSealer"]
