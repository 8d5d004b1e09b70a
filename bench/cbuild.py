"""Finding a C compiler and running it, for the bench's C parts (the kernel harness and the
C-level libaegis comparison)."""

from __future__ import annotations

import os
import shutil
import subprocess


class HarnessUnavailable(Exception):
    """The C harness cannot be built here; the message says why and what to install."""


def compiler() -> str:
    import sysconfig

    candidates = [
        os.environ.get("CC"),
        (sysconfig.get_config_var("CC") or "").split(" ")[0],
        "cc",
        "gcc",
        "clang",
    ]
    for name in filter(None, candidates):
        path = shutil.which(name)
        if path:
            return path
    raise HarnessUnavailable(
        "no C compiler found (tried $CC, Python's CC, cc, gcc, clang); "
        "install gcc or clang, or set CC"
    )


def run_build(cmd: list[str], cc: str, what: str = "kernel_bench.c") -> None:
    build = subprocess.run(cmd, capture_output=True, text=True)
    if build.returncode != 0:
        raise HarnessUnavailable(f"{cc} failed to build {what}: {build.stderr.strip()[-400:]}")
