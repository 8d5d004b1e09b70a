"""pydantic field types shared by the config file's model and the key stores' own (key file)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from .format import Suite

__all__ = ["SuiteName"]

#: a suite by name, id or Suite, kept as its canonical name ("AEGIS-128X4")
SuiteName = Annotated[str, AfterValidator(lambda v: str(Suite.parse(v)))]
