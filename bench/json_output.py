"""The ``--json PATH`` file of a benchmark run on its own (``python bench/columns_bench.py``,
``python -m sealstore.bench.aead``): its result, as it returned it."""

from __future__ import annotations

from typing import Any

import json


def write_json(path: str | None, result: dict[str, Any]) -> None:
    """Write ``result`` to ``path`` as indented JSON; nothing when no path was given."""
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
