"""Result rows with some columns passed through functions, in one native loop.

``map_columns(rows, plan)`` returns a list of new tuples: each row of ``rows`` (tuples, or any
sequences) with ``row[i]`` replaced by ``f(row[i])`` for every ``(i, f)`` pair of ``plan``, a
tuple of pairs with strictly increasing indexes.  An exception raised by ``f`` propagates and no
rows are returned.  The SQLAlchemy adapter uses it to open encrypted columns chunk by chunk as a
result is fetched (``native/python/rowmap.c`` tells why that is faster than opening afterwards).
"""

from ._speedups import map_columns

__all__ = ["map_columns"]
