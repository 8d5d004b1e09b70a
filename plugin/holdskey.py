"""A base for objects that hold key material: they refuse pickling and copying.

``pickle``, ``copy.copy`` and ``copy.deepcopy`` all go through ``__reduce_ex__``, which calls
the ``__reduce__`` below, so none of them can write the material somewhere it is never wiped
(a pickle file, a cache, a copy the owner does not know about).  The cipher classes in
:mod:`sealstore.aead` refuse the same way.
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["HoldsKey"]


class HoldsKey:
    """Mixin: ``pickle``/``copy``/``deepcopy`` raise TypeError naming the class."""

    __slots__ = ()

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__} objects hold key material and cannot be pickled or copied"
        )

    def __copy__(self) -> NoReturn:
        self.__reduce__()

    def __deepcopy__(self, memo: object) -> NoReturn:
        self.__reduce__()
