"""The native entry points under inputs changed by other threads during the call (issue 17).

Each scenario of ``tests/native_stress.py`` runs in its own interpreter, so a crash fails one
test instead of the whole run; ``tools/sanitize.sh asan`` runs this file under AddressSanitizer
(the subprocess inherits the sanitized modules and LD_PRELOAD).  ``SEALSTORE_STRESS_SECONDS``
sets the time per scenario (default 1.5).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

STRESS = Path(__file__).resolve().parent.parent / "native_stress.py"
SECONDS = os.environ.get("SEALSTORE_STRESS_SECONDS", "1.5")


@pytest.mark.parametrize("scenario", ["many", "resize", "rows", "named"])
def test_inputs_changed_by_other_threads_never_crash_nor_give_wrong_results(scenario):
    r = subprocess.run(
        [sys.executable, str(STRESS), scenario, SECONDS],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-4000:]}"
    assert r.stdout.startswith(f"ok {scenario} calls=")
    assert int(r.stdout.split("calls=")[1]) > 0
