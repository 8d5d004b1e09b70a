"""Test cases shared by the AEAD tests: the vector files and the kernel matrix.

Vector ids follow the source and the variant (``draft18-AEGIS-128X4-TV1-tag256``).  The
kernel matrix of a variant holds every kernel it has here, plus, as skipped parameters with
the reason, every kernel this CPU cannot run, so the report shows what was not covered.  A
kernel the CPU runs but the variant was built without (AVX-512 for AEGIS-128L) is left out.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

from sealstore.suites import SUITES, by_native_variant, native_variants

VECTORS = Path(__file__).parent / "vectors"
VARIANTS = native_variants()
#: A suite id no suite has (the lowest free one): a header naming it is malformed.  Taken from
#: the registry, so the suite that takes the next id leaves the tests of unknown ids alone.
UNUSED_SUITE_ID = min(set(range(1, 256)) - {s.id for s in SUITES})
ALL_KERNELS = ("portable", "aesni", "avx2", "avx512", "armcrypto")


@lru_cache(maxsize=None)
def load_draft() -> dict:
    return json.loads((VECTORS / "aegis-draft.json").read_text())


@lru_cache(maxsize=None)
def load_wycheproof(name: str) -> dict:
    return json.loads((VECTORS / "wycheproof" / name).read_text())


def _tv(vec: dict) -> str:
    return "TV" + re.sub(r"\D", "", vec["name"])


def draft_aead_cases() -> list:
    """(vector, tag_size) for every AEGIS-128L/128X2/128X4 AEAD vector, both tag sizes."""
    out = []
    for vec in load_draft()["vectors"]:
        if vec["kind"] != "aead" or vec["alg"] not in VARIANTS:
            continue
        for tag_size in (16, 32):
            vid = f"draft18-{vec['alg']}-{_tv(vec)}-tag{8 * tag_size}"
            out.append(pytest.param(vec, tag_size, id=vid))
    return out


def cipher_class(variant: str):
    return by_native_variant(variant).cipher


def kernel_matrix(variant: str) -> list[tuple[str, str | None]]:
    """(kernel, skip reason or None) for every kernel ``variant`` is tested on."""
    import sealstore.native as native

    runnable, cpu = native.variant_kernels(variant), native.kernels()
    out = []
    for k in ALL_KERNELS:
        if k in runnable:
            out.append((k, None))
        elif k not in cpu:
            out.append((k, f"this CPU cannot run the {k} kernel (runnable: {cpu})"))
    return out


def kernel_params(variant: str) -> list:
    """The kernel matrix of ``variant`` as pytest params, the unrunnable ones skipped."""
    out = []
    for k, reason in kernel_matrix(variant):
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        out.append(pytest.param(k, id=k, marks=marks))
    return out


def variant_kernel_params() -> list:
    """(variant, kernel) for every variant and every kernel name."""
    out = []
    for v in VARIANTS:
        for p in kernel_params(v):
            out.append(pytest.param(v, p.values[0], id=f"{v}-{p.id}", marks=p.marks))
    return out


def runnable_variant_kernels() -> list[tuple[str, str]]:
    import sealstore.native as native

    return [(v, k) for v in VARIANTS for k in native.variant_kernels(v)]
