"""sealstore.rowmap.map_columns: result rows with some columns passed through functions."""

from __future__ import annotations

import gc
import sys

import pytest
from sealstore.errors import InvalidTag
from sealstore.rowmap import map_columns

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)


def test_map_columns():
    rows = [(1, b"a", b"bc"), [2, b"d", b""]]
    assert map_columns(rows, ((1, bytes.decode), (2, len))) == [(1, "a", 2), (2, "d", 0)]
    assert map_columns(rows, ()) == [(1, b"a", b"bc"), (2, b"d", b"")]
    assert map_columns([], ((0, len),)) == []
    assert map_columns(((5,),), ((0, str),)) == [("5",)]


@pytest.mark.parametrize(
    "plan, error",
    [
        (((1, len), (1, len)), ValueError),
        (((2, len), (1, len)), ValueError),
        (((-1, len),), ValueError),
        (((0, "not callable"),), TypeError),
        ([(0, len)], TypeError),
        (((0, len, 1),), TypeError),
        (((3, len),), IndexError),
    ],
)
def test_map_columns_refuses_bad_plans(plan, error):
    with pytest.raises(error):
        map_columns([(b"a", b"b", b"c")], plan)


def test_map_columns_propagates_errors_and_returns_nothing():
    calls = []

    def fail_on_third(v):
        calls.append(v)
        if len(calls) == 3:
            raise InvalidTag("x")
        return v

    with pytest.raises(InvalidTag):
        map_columns([(i,) for i in range(5)], ((0, fail_on_third),))
    assert calls == [0, 1, 2]
    with pytest.raises(TypeError):
        map_columns([(1,), 5], ((0, str),))
    with pytest.raises(TypeError):
        map_columns(None, ((0, str),))


def test_map_columns_keeps_no_references():
    value, fn_out = b"x" * 100, object()
    rows = [(value,)] * 3
    before = sys.getrefcount(value), sys.getrefcount(fn_out)
    for _ in range(100):
        assert map_columns(rows, ((0, lambda v: fn_out),)) == [(fn_out,)] * 3
        with pytest.raises(ZeroDivisionError):
            map_columns(rows, ((0, lambda v: 1 / 0),))
    gc.collect()
    assert (sys.getrefcount(value), sys.getrefcount(fn_out)) == before


def test_map_columns_survives_a_callable_that_clears_the_rows():
    """The callable is Python code: emptying the rows list and every row (lists here) from it
    frees what an unprotected loop would read next (SIGSEGV before issue 17).  The loop keeps
    the rows list as it was and the row it is on; a row emptied before the loop reaches it is
    the usual IndexError."""
    rows = [[i, b"v%d" % i, object()] for i in range(64)]

    def clear_everything(v):
        for r in rows:
            r.clear()
        rows.clear()
        return v.upper()

    with pytest.raises(IndexError, match="a row of 0 columns has no column 1"):
        map_columns(rows, ((1, clear_everything),))
    assert rows == []


def test_map_columns_snapshot_results_are_exact():
    rows = [[i, b"v%d" % i, i * 2] for i in range(64)]
    expected = [(i, b"V%d" % i, i * 2) for i in range(64)]
    seen = []

    def shuffle(v):
        seen.append(v)
        rows.clear()  # frees the list's item array
        rows.extend([[-1, b"new", -1]] * 1000)  # a larger array elsewhere
        return v.upper()

    assert map_columns(rows, ((1, shuffle),)) == expected
    assert seen == [b"v%d" % i for i in range(64)]


def test_map_columns_row_changed_by_the_callable_keeps_its_snapshot():
    row = [b"a", b"b", b"c"]

    def clear_row(v):
        row.clear()  # frees the row's items while the loop is on it
        return v + b"!"

    assert map_columns([row], ((0, clear_row), (2, bytes.upper))) == [(b"a!", b"b", b"C")]
    row2 = [b"a", b"b", b"c"]

    def grow_row(v):
        row2.extend([b"x"] * 100)
        row2[1] = b"replaced"
        return v

    assert map_columns([row2], ((0, grow_row),)) == [(b"a", b"b", b"c")]
