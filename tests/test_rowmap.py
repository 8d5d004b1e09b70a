"""sealstore.rowmap.map_columns: result rows with some columns passed through functions."""

from __future__ import annotations

import gc
import sys

import pytest
from sealstore.errors import InvalidTag
from sealstore.rowmap import map_columns


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
