"""sealstore.native: what kernels() / variant_kernels() / info() report, and that it agrees
with itself and with the CPU flags the kernel reports in /proc/cpuinfo (Linux x86-64)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest

import sealstore.native as native
from aead_cases import ALL_KERNELS, VARIANTS

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)


def test_kernels_shape():
    ks = native.kernels()
    assert isinstance(ks, list) and all(isinstance(k, str) for k in ks)
    assert "portable" in ks
    assert set(ks) <= set(ALL_KERNELS)
    assert len(ks) == len(set(ks))
    assert ks == sorted(ks, key=ALL_KERNELS.index)  # listed in order of preference
    ks.append("bogus")  # callers get their own copy
    assert "bogus" not in native.kernels()


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_kernels(variant):
    vk = native.variant_kernels(variant)
    assert isinstance(vk, list) and "portable" in vk
    assert set(vk) <= set(native.kernels())
    assert vk == sorted(vk, key=ALL_KERNELS.index)


@pytest.mark.parametrize("bad", ["AEGIS-512", "", "AEGIS-256X8"])
def test_variant_kernels_unknown_variant(bad):
    with pytest.raises((ValueError, LookupError)):
        native.variant_kernels(bad)


def test_info_shape():
    info = native.info()
    assert {"cpu", "features", "selected", "forced"} <= set(info)
    assert isinstance(info["cpu"], str)
    assert isinstance(info["features"], list)
    assert all(isinstance(f, str) for f in info["features"])
    assert set(info["selected"]) == set(VARIANTS)
    assert info["forced"] == (os.environ.get("SEALSTORE_KERNEL", "").lower() or None)


@pytest.mark.parametrize("variant", VARIANTS)
def test_selected_kernel_is_runnable_and_best(variant):
    info = native.info()
    sel = info["selected"][variant]
    vk = native.variant_kernels(variant)
    assert sel in vk
    if info["forced"] is None:
        assert sel == vk[-1], f"{variant}: selected {sel}, best runnable is {vk[-1]}"
    elif info["forced"] in vk:
        assert sel == info["forced"]


def test_info_is_stable():
    assert native.info() == native.info()
    assert native.kernels() == native.kernels()


def _cpuinfo_flags() -> set[str]:
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("CPU flag cross-check is for x86-64")
    p = Path("/proc/cpuinfo")
    if not p.exists():
        pytest.skip("no /proc/cpuinfo")
    for line in p.read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    pytest.skip("no flags line in /proc/cpuinfo")


def test_kernels_agree_with_cpuinfo():
    # Linux lists avx/avx2/avx512f only when the OS has enabled the register state (XSAVE),
    # so these flags are what the dispatcher's cpuid + xgetbv check should conclude.
    flags = _cpuinfo_flags()
    want = {"portable"}
    if "aes" in flags:
        want.add("aesni")
    if {"aes", "avx2", "vaes"} <= flags:
        want.add("avx2")
    if {"aes", "avx512f", "vaes"} <= flags:
        want.add("avx512")
    assert set(native.kernels()) == want, (
        native.kernels(),
        sorted(flags & {"aes", "avx2", "vaes", "avx512f"}),
    )


def test_features_agree_with_cpuinfo():
    flags = _cpuinfo_flags()
    feats = {f.lower().replace("-", "").replace("_", "") for f in native.info()["features"]}
    pairs = {
        "aes": ("aes", "aesni"),
        "avx2": ("avx2",),
        "vaes": ("vaes",),
        "avx512f": ("avx512f", "avx512"),
    }
    for flag, names in pairs.items():
        assert (flag in flags) == any(n in feats for n in names), (flag, sorted(feats))


def test_x4_has_a_wide_kernel_where_the_cpu_has_one():
    # AEGIS-128X4 is the variant the wide kernels exist for.
    ks = native.kernels()
    vk = native.variant_kernels("AEGIS-128X4")
    for k in ("avx2", "avx512"):
        if k in ks:
            assert k in vk


# --- dispatch on a CPU with fewer features (native.hide_features, a test-only hook) ----------

# hidden features -> kernels that must disappear from kernels()
HIDDEN = [
    (["avx512f"], {"avx512"}),
    (["os_zmm"], {"avx512"}),  # CPU has AVX-512 but the OS does not save ZMM state
    (["vaes"], {"avx2", "avx512"}),
    (["os_ymm"], {"avx2", "avx512"}),
    (["aesni"], {"aesni", "avx2", "avx512"}),
]


@pytest.fixture
def hide():
    yield native.hide_features
    native.hide_features([])


@pytest.mark.parametrize("hidden,gone", HIDDEN, ids=lambda x: "+".join(sorted(x)))
def test_hidden_features_remove_kernels(hide, hidden, gone):
    full = native.kernels()
    hide(hidden)
    ks = native.kernels()
    assert set(ks) == set(full) - gone
    for v in VARIANTS:
        vk = native.variant_kernels(v)
        assert "portable" in vk and set(vk) <= set(ks)
        assert native.info()["selected"][v] in vk
    hide([])
    assert native.kernels() == full


@pytest.mark.parametrize("hidden,gone", HIDDEN, ids=lambda x: "+".join(sorted(x)))
def test_kernel_the_cpu_lacks_is_unavailable(hide, hidden, gone):
    from sealstore import AEGIS128X4
    from sealstore.errors import KernelUnavailable

    before = AEGIS128X4(bytes(16))  # keeps the kernel it was created with
    hide(hidden)
    for k in gone & set(ALL_KERNELS):
        with pytest.raises(KernelUnavailable) as e:
            AEGIS128X4(bytes(16), kernel=k)
        assert k in str(e.value)
    now = AEGIS128X4(bytes(16))
    assert now.kernel not in gone
    assert now.encrypt(bytes(16), b"abc") == before.encrypt(bytes(16), b"abc")


def test_unknown_feature_name_is_rejected(hide):
    with pytest.raises(ValueError):
        hide(["sse9"])


# --- armcrypto: the aarch64 kernel (run under qemu by tools/cross_aarch64.sh) ---------------

ARM64 = platform.machine().lower() in ("aarch64", "arm64")


@pytest.mark.skipif(ARM64, reason="off aarch64 only")
def test_armcrypto_is_named_but_never_runnable_off_aarch64():
    from sealstore.errors import KernelUnavailable

    assert "armcrypto" in native.KERNELS
    assert "armcrypto" not in native.kernels()
    assert "arm_aes" not in native.features()
    assert all("armcrypto" not in native.variant_kernels(v) for v in VARIANTS)
    with pytest.raises(KernelUnavailable, match="armcrypto"):
        native.force_kernel("armcrypto")
    assert native.info()["forced"] is None
    # showing every x86 feature does not make it runnable either (it is not in this build)
    native.hide_features([])
    assert "armcrypto" not in native.kernels()


@pytest.mark.skipif(ARM64, reason="off aarch64 only")
def test_env_armcrypto_fails_at_import_off_aarch64():
    import subprocess
    import sys

    env = dict(os.environ, SEALSTORE_KERNEL="armcrypto")
    r = subprocess.run(
        [sys.executable, "-c", "import sealstore"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode > 0
    last = r.stderr.strip().splitlines()[-1]
    assert "KernelUnavailable" in last and "SEALSTORE_KERNEL=armcrypto" in last, last


@pytest.mark.skipif(not ARM64, reason="on aarch64 only")
def test_armcrypto_follows_the_cpu_on_aarch64(hide):
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = {f for line in text.splitlines() if line.startswith("Features") for f in line.split()}
    if not flags:
        pytest.skip("no Features line in /proc/cpuinfo")
    assert ("armcrypto" in native.kernels()) == ("aes" in flags)
    if "aes" in flags:
        assert all(native.info()["selected"][v] == "armcrypto" for v in VARIANTS)
        hide(["arm_aes"])
        assert native.kernels() == ["portable"]
