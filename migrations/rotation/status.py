"""Where each key is used, counted in SQL from the key id's fixed offset (nothing decrypted).

:func:`status` gives, per encrypted column (and blind-index column), the rows per key id, the
NULLs (for a blind index also the NULL index values whose source is set: never filled), and the
running jobs.  :func:`references` counts the values that name one key id, which
``sealstore keys retire`` requires to be zero.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, inspect, select
from sqlalchemy.engine import Connection, Engine

from ...errors import SealstoreError
from ...format import KEY_ID_OFFSET
from . import jobs
from .reseal import key_id_bytes, key_id_sql
from ..schema import JOBS_TABLE
from .spec import ColumnSpec, IndexSpec, specs_from_metadata
from .stored import check_spec
from ..transient import scrubbed

__all__ = [
    "ColumnStatus",
    "Reference",
    "StatusReport",
    "column_status",
    "references",
    "status",
]

_KID = struct.Struct(">I")
INDEX_KEY_ID_OFFSET = 0  # a blind-index value starts with its index key id


@dataclass
class ColumnStatus:
    """Rows of one column by key id (``None``: values too short to hold one)."""

    name: str
    kind: str  # "encrypted" or "blind index"
    rows: int
    nulls: int
    by_key: dict[int | None, int]
    primary_key_id: int | None
    #: blind index: NULL index values whose source value is set (rows written before the index
    #: existed, never filled: lookups miss them until ``sealstore reindex``); 0 for columns
    unfilled: int = 0
    #: the keyring name the primary is read from (None: not known)
    keyring: str | None = None
    #: a tenant-aware column: the tenant counted, and its values still sealed as before tenancy
    #: (under the column keyring, not bound to the tenant: ``sealstore rotate`` re-seals them)
    tenant: str | None = None
    legacy: int = 0

    @property
    def not_primary(self) -> int:
        """Non-NULL values whose key id is not the primary's."""
        return sum(n for k, n in self.by_key.items() if k != self.primary_key_id)

    @property
    def left(self) -> int:
        """Values a rotation or re-index still has to write: not under the primary (all of
        them while the primary is unknown), and unfilled index values."""
        return self.not_primary + self.unfilled


@dataclass
class StatusReport:
    """What :func:`status` found: each column's counts, and the jobs running now."""

    columns: list[ColumnStatus] = field(default_factory=list)
    jobs: list[jobs.Job] = field(default_factory=list)


@dataclass(frozen=True)
class Reference:
    """``count`` values of ``name`` (a column, or an object prefix's URL) name the key (``kind``:
    "encrypted", "blind index", or the object store's scheme, "s3")."""

    name: str
    count: int
    kind: str = "encrypted"


def _target(spec: ColumnSpec | IndexSpec):
    """(table, column, key-id offset, keyring) of a spec."""
    if isinstance(spec, IndexSpec):
        table = spec.source.sql_table(spec.column)
        return table, table.c[spec.column], INDEX_KEY_ID_OFFSET, spec.get_keyring
    table = spec.sql_table()
    return table, table.c[spec.column], KEY_ID_OFFSET, spec.get_keyring


def column_status(conn: Connection, spec: ColumnSpec | IndexSpec) -> ColumnStatus:
    """One GROUP BY over ``substr(column, offset + 1, 4)``."""
    table, col, offset, get_keyring = _target(spec)
    kid = key_id_sql(col, offset)
    by_key: dict[int | None, int] = {}
    rows = nulls = 0
    q = select(kid, func.count()).select_from(table).group_by(kid)
    owner = spec.source if isinstance(spec, IndexSpec) else spec
    rows_where = owner.rows_where(table)
    if rows_where is not None:
        q = q.where(rows_where)
    for raw, n in conn.execute(q):
        rows += n
        if raw is None:
            nulls += n
            continue
        raw = bytes(raw)
        k = _KID.unpack(raw)[0] if len(raw) == 4 else None
        by_key[k] = by_key.get(k, 0) + n
    try:
        primary = get_keyring().primary.key_id
    except SealstoreError:  # no keyring under that name (or closed): counts only
        primary = None
    unfilled = 0
    if isinstance(spec, IndexSpec):
        source = table.c[spec.source.column]
        unfilled = conn.execute(
            select(func.count()).select_from(table).where(col.is_(None), source.is_not(None))
        ).scalar_one()
        kind, keyring = "blind index", spec.type.keyring
    else:
        kind, keyring = "encrypted", spec.keyring
    legacy = 0
    if isinstance(spec, ColumnSpec) and spec.tenant is not None:
        try:
            legacy = sum(n for k, n in by_key.items() if spec.is_legacy(k))
        except SealstoreError:  # the tenant's keyring cannot be loaded: counts only
            legacy = 0
        keyring = f"tenant {spec.tenant}"
    return ColumnStatus(
        spec.name, kind, rows, nulls, by_key, primary, unfilled, keyring, owner.tenant, legacy
    )


def status(engine: Engine, columns: Any = (), indexes: Any = ()) -> StatusReport:
    """Per-column key-id counts and the running jobs (when the job table exists).

    ``columns`` takes what :func:`~sealstore.migrations.rotate` and ``verify`` take: a
    ColumnSpec, a list of specs, or models (MetaData, a declarative base, a mapped class, a
    Table, or a list of those), whose blind indexes are counted too.  ``indexes``: more
    IndexSpecs (or models, for their blind indexes only)."""
    columns, indexes = _split_specs(columns, indexes)
    return scrubbed("status", _status, engine, columns, indexes)


def _items(source) -> list:
    if isinstance(source, Iterable) and not isinstance(source, (str, bytes)):
        return list(source)
    return [source]


def _split_specs(columns, indexes) -> tuple[list[ColumnSpec], list[IndexSpec]]:
    """Specs kept as given; anything else goes through :func:`specs_from_metadata`."""
    out_cols: list[ColumnSpec] = []
    out_idx: list[IndexSpec] = []
    for source, with_columns in ((columns, True), (indexes, False)):
        items = _items(source)
        models = [i for i in items if not isinstance(i, (ColumnSpec, IndexSpec))]
        out_cols += [i for i in items if isinstance(i, ColumnSpec)]
        out_idx += [i for i in items if isinstance(i, IndexSpec)]
        if models:
            found_cols, found_idx = specs_from_metadata(models)
            out_cols += found_cols if with_columns else []
            out_idx += found_idx
    return out_cols, out_idx


def _status(engine: Engine, columns, indexes) -> StatusReport:
    report = StatusReport()
    with engine.connect() as conn:
        for spec in [*columns, *indexes]:
            check_spec(conn, spec)  # a text column would end in a TypeError or an SQL error
            report.columns.append(column_status(conn, spec))
        if inspect(conn).has_table(JOBS_TABLE):
            report.jobs = jobs.running_jobs(conn)
    return report


def references(
    engine: Engine, specs: Iterable[ColumnSpec | IndexSpec], key_id: int
) -> list[Reference]:
    """Columns among ``specs`` with values naming ``key_id``, and how many (counted in SQL)."""
    out = []
    with engine.connect() as conn:
        for spec in specs:
            check_spec(conn, spec)
            table, col, offset, _ = _target(spec)
            q = (
                select(func.count())
                .select_from(table)
                .where(col.is_not(None), key_id_sql(col, offset) == key_id_bytes(key_id))
            )
            n = conn.execute(q).scalar_one()
            if n:
                kind = "blind index" if isinstance(spec, IndexSpec) else "encrypted"
                out.append(Reference(spec.name, n, kind))
    return out
