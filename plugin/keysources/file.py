"""The local key file: a JSON keyring for development and the embedded default.

Written with mode 0600 (atomically), refused when group or others can access it, validated on
load with errors naming the field.  Material is stored in plain base64 unless a wrapper is
given, in which case only wrapped blobs are stored (see ``docs/FORMAT.md``, "Key file")::

    {"sealstore_keyring": 1,
     "wrapping": {"type": "none"},
     "keys": [{"id": "0a1b2c3d", "suite": "AEGIS-128X4", "state": "primary",
               "created_at": "2025-01-01T00:00:00+00:00", "rotated_at": null,
               "material": "<base64, 32 bytes>"}]}
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import ConfigError, KeySourceError
from ..fields import SuiteName
from ..format import Suite
from .metadata import StoreMeta
from ..keyring import KeyState
from .base import KeyRecord, KeySource
from ..securefile import exclusive_lock, read_secret_file, write_secret_file
from ..wrapping import Wrapper

__all__ = ["KeyFile", "validation_message"]

log: logging.Logger = logging.getLogger(__name__)


def _b64(value: str | None, size: int | None = None) -> str | None:
    if value is None:
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        raise ValueError("not valid base64") from None
    if size is not None and len(raw) != size:
        raise ValueError(f"must decode to {size} bytes, not {len(raw)}")
    return value


class _KeyEntry(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    id: str
    suite: SuiteName
    state: KeyState
    created_at: datetime
    rotated_at: datetime | None = None
    material: str | None = None
    wrapped: str | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if len(v) != 8 or any(c not in "0123456789abcdef" for c in v):
            raise ValueError("must be 8 lowercase hex digits")
        return v

    @field_validator("material")
    @classmethod
    def _material(cls, v: str | None) -> str | None:
        return _b64(v, 32)

    @field_validator("wrapped")
    @classmethod
    def _wrapped(cls, v: str | None) -> str | None:
        return _b64(v)

    @model_validator(mode="after")
    def _one_form(self) -> _KeyEntry:
        has = (self.material is not None) + (self.wrapped is not None)
        if self.state is KeyState.DESTROYED and has:
            raise ValueError("a destroyed key must not keep material or wrapped material")
        if self.state is not KeyState.DESTROYED and has != 1:
            raise ValueError("exactly one of 'material' or 'wrapped' is required")
        return self


class _KeyFileModel(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    sealstore_keyring: Literal[1, 2]  # 2: wrapped keys with authenticated metadata
    # bumped by every write; absent in older files (the metadata tag covers it as 8 bytes)
    version: int = Field(default=0, ge=0, lt=2**63)
    wrapping: dict[str, Any] = {"type": "none"}
    metadata_key: str | None = None  # format 2: the wrapped metadata key
    metadata_tag: str | None = None  # format 2: HMAC-SHA256 over the metadata
    keys: list[_KeyEntry]

    @field_validator("metadata_key", "metadata_tag")
    @classmethod
    def _meta_b64(cls, v: str | None) -> str | None:
        return _b64(v)

    @model_validator(mode="after")
    def _format(self) -> _KeyFileModel:
        tagged = (self.metadata_key is not None, self.metadata_tag is not None)
        if self.sealstore_keyring == 2 and tagged != (True, True):
            raise ValueError("format 2 needs 'metadata_key' and 'metadata_tag'")
        if self.sealstore_keyring == 2 and self.wrapping.get("type") == "none":
            raise ValueError("format 2 is for wrapped keys; plain key files are format 1")
        if self.sealstore_keyring == 1 and any(tagged):
            raise ValueError("'metadata_key'/'metadata_tag' need format 2")
        return self

    @field_validator("wrapping")
    @classmethod
    def _wrapping(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(v.get("type"), str):
            raise ValueError("needs a string 'type'")
        return v


def validation_message(where: str, err: ValidationError) -> str:
    """One line per pydantic error: ``where: field.path: problem``."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {loc}: {msg}")
    return "\n".join(lines)


class KeyFile(KeySource):
    """A keyring in a local JSON file (plain material, or wrapped by ``wrapper``)."""

    def __init__(self, path: str | os.PathLike[str], wrapper: Wrapper | None = None) -> None:
        super().__init__(wrapper)
        self.path: Path = Path(path)
        self.version: int = 0  # the ``version`` of the file as last read or written here

    def __repr__(self) -> str:
        return f"KeyFile({str(self.path)!r})"

    __str__ = __repr__

    def exists(self) -> bool:
        return self.path.exists()

    def _version(self) -> int:
        return self.version

    @contextlib.contextmanager
    def _exclusive(self, *, create: bool = False) -> Iterator[None]:
        with exclusive_lock(self.path):
            yield

    def _read(self) -> list[KeyRecord]:
        log.debug("reading key file %s", self.path)
        raw = read_secret_file(self.path)
        try:
            data = json.loads(raw)
        except ValueError as exc:  # not UTF-8, not JSON, an integer past Python's digit limit
            text = str(exc)
            text = text if len(text) <= 200 else text[:200] + "..."
            raise ConfigError(f"key file {self.path}: not valid JSON ({text})") from None
        except RecursionError:
            raise ConfigError(f"key file {self.path}: not valid JSON (nested too deeply)") from None
        del raw
        try:
            model = _KeyFileModel.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(validation_message(f"key file {self.path}", exc)) from None
        except RecursionError:  # (pydantic's own guard normally answers first)
            raise ConfigError(f"key file {self.path}: nested too deeply") from None
        stored = model.wrapping["type"]
        wanted = self.wrapper.kind if self.wrapper is not None else "none"
        if stored != wanted:
            raise KeySourceError(
                f"key file {self.path} holds keys wrapped by {stored!r} but the configured "
                f"wrapping is {wanted!r}"
            )
        field = "material" if stored == "none" else "wrapped"
        for i, e in enumerate(model.keys):
            if e.state is not KeyState.DESTROYED and getattr(e, field) is None:
                raise ConfigError(
                    f"key file {self.path}: keys.{i}.{field}: required when wrapping is {stored!r}"
                )
        ids = [e.id for e in model.keys]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"key file {self.path}: keys: duplicate key id")
        self.version = model.version
        self._stored_meta = StoreMeta(
            model.sealstore_keyring,
            base64.b64decode(model.metadata_key) if model.metadata_key else None,
            base64.b64decode(model.metadata_tag) if model.metadata_tag else None,
        )
        try:
            return [self._record(model.sealstore_keyring, e) for e in model.keys]
        except ValueError as exc:  # from KeyRecord's checks: names the field, never its value
            raise ConfigError(f"key file {self.path}: keys: {exc}") from None

    @staticmethod
    def _record(fmt: int, e: _KeyEntry) -> KeyRecord:
        return KeyRecord(
            key_id=int(e.id, 16),
            suite=Suite.parse(e.suite),
            state=e.state,
            created_at=e.created_at,
            rotated_at=e.rotated_at,
            material=base64.b64decode(e.material) if e.material else None,
            wrapped=base64.b64decode(e.wrapped) if e.wrapped else None,
            wrap_format=fmt,
        )

    def _next_version(self, create: bool) -> int:
        return 1 if create else self.version + 1

    def _write(self, records: list[KeyRecord], *, create: bool, meta: StoreMeta) -> None:
        if create and self.path.exists():
            raise KeySourceError(f"{self.path} already exists; refusing to overwrite it")
        if not create and not self.path.exists():
            raise KeySourceError(f"{self.path} does not exist; run `sealstore keys init` first")
        version = self._next_version(create)
        doc = {
            "sealstore_keyring": meta.fmt,
            "version": version,
            "wrapping": self.wrapper.describe() if self.wrapper else {"type": "none"},
            **(
                {
                    "metadata_key": base64.b64encode(meta.key_and_tag()[0]).decode(),
                    "metadata_tag": base64.b64encode(meta.key_and_tag()[1]).decode(),
                }
                if meta.fmt >= 2
                else {}
            ),
            "keys": [
                {
                    "id": f"{r.key_id:08x}",
                    "suite": str(r.suite),
                    "state": r.state.value,
                    "created_at": r.created_at.isoformat(),
                    "rotated_at": r.rotated_at.isoformat() if r.rotated_at else None,
                    **({"material": base64.b64encode(r.material).decode()} if r.material else {}),
                    **({"wrapped": base64.b64encode(r.wrapped).decode()} if r.wrapped else {}),
                }
                for r in records
            ],
        }
        write_secret_file(self.path, (json.dumps(doc, indent=2) + "\n").encode())
        self.version = version
        log.debug(
            "wrote key file %s: version %d, %d keys, format %d", self.path, version, len(records),
            meta.fmt,
        )  # fmt: skip
