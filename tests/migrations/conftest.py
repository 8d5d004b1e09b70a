"""Every test under tests/migrations/ carries the ``migrations`` marker, so a run can select or
leave out the migrations layer's tests by marker (``-m 'not migrations'``: .ci/run's
lowest-versions step) instead of by a hand-kept list of paths."""

from __future__ import annotations

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    # this conftest's hooks see only the items collected under its directory
    item.add_marker(pytest.mark.migrations)
