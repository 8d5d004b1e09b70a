"""Open every stored value of encrypted columns and report the rows that fail, by primary key.

Nothing is written and no plaintext leaves this module: a failure is reported as (primary
key, key id read from the value's header, exception class name).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import struct
from dataclasses import dataclass, field

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Engine

from ...errors import SealstoreError
from ...format import KEY_ID_OFFSET, KEY_ID_SIZE
from ..cursor import PrimaryKey, after
from .reseal import as_column_specs
from .spec import ColumnSpec
from .stored import check_spec
from ..transient import scrubbed

__all__ = ["Failure", "VerifyResult", "verify"]

_KID = struct.Struct(">I")


@dataclass(frozen=True)
class Failure:
    """Row ``pk`` of a column did not open: ``error`` is the exception class name."""

    pk: PrimaryKey
    key_id: int | None
    error: str

    @property
    def key_id_hex(self) -> str:
        return "-" if self.key_id is None else f"{self.key_id:08x}"


@dataclass
class VerifyResult:
    name: str
    checked: int = 0
    failed: int = 0
    failures: list[Failure] = field(default_factory=list)  # the first ``max_failures``

    @property
    def ok(self) -> bool:
        return self.failed == 0


def _key_id(value: bytes) -> int | None:
    chunk = value[KEY_ID_OFFSET : KEY_ID_OFFSET + KEY_ID_SIZE]
    return _KID.unpack(chunk)[0] if len(chunk) == KEY_ID_SIZE else None


def _verify_column(engine, spec: ColumnSpec, batch_size, progress, max_failures) -> VerifyResult:
    result = VerifyResult(spec.name)
    keyring = spec.get_keyring()
    table = spec.sql_table()
    col = table.c[spec.column]
    pk_cols = [table.c[n] for n in spec.pk]
    n = len(pk_cols)
    with engine.connect() as conn:
        check_spec(conn, spec)  # plaintext in a column declared encrypted: say so, once
        rows_where = spec.rows_where(table)  # a tenant column: that tenant's rows only
        counted = col.is_not(None) if rows_where is None else and_(rows_where, col.is_not(None))
        total = conn.execute(select(func.count()).select_from(table).where(counted)).scalar_one()
    if progress is not None:
        progress.start(f"verify {spec.name}", total)
    cursor = None
    try:
        while True:
            cond = after(pk_cols, cursor)
            where = col.is_not(None) if cond is None else and_(cond, col.is_not(None))
            rows_where = spec.rows_where(table)  # a tenant column: that tenant's rows only
            if rows_where is not None:
                where = and_(rows_where, where)
            q = select(*pk_cols, col).where(where).order_by(*pk_cols).limit(batch_size)
            with engine.connect() as conn:
                rows = conn.execute(q).all()
            if not rows:
                break
            cursor = tuple(rows[-1][:n])
            keys = [tuple(r[:n]) for r in rows]
            values = [bytes(r[n]) for r in rows]
            bad = _check(spec, keyring, keys, values)
            result.checked += len(rows)
            result.failed += len(bad)
            for i, exc in bad:
                if len(result.failures) < max_failures:
                    result.failures.append(Failure(keys[i], _key_id(values[i]), exc))
            if progress is not None:
                progress.update(result.checked)
    finally:
        if progress is not None:
            progress.finish()
    return result


def _check(spec: ColumnSpec, keyring, keys, values) -> list[tuple[int, str]]:
    """Positions that fail to open, with the exception class name."""
    if not spec.row_bound:
        try:
            keyring.open_many(values, spec.context_of(None))
            return []
        except SealstoreError:
            pass  # find every failing position, one by one
    bad = []
    for i, (pk, value) in enumerate(zip(keys, values)):
        try:
            # a tenant spec: legacy values too; a retired key's values fail, as in the app
            spec.open_value(keyring, value, pk, allow_retired=False)
        except SealstoreError as exc:
            bad.append((i, type(exc).__name__))
    return bad


def verify(
    engine: Engine,
    columns: Iterable[Any],
    *,
    batch_size: int = 1000,
    progress: Any = None,
    max_failures: int = 1000,
) -> list[VerifyResult]:
    """Open every non-NULL value of ``columns`` (specs or models) with its own context.

    Values of retired keys count as failures (``KeyNotUsable``) unless the keyring allows
    retired keys, so a clean verify also proves nothing needs a retired key any more.
    """
    return [
        scrubbed(
            f"verify {spec.name}", _verify_column, engine, spec, batch_size, progress, max_failures
        )  # fmt: skip
        for spec in as_column_specs(columns)
    ]
