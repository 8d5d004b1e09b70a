"""Whether a column's stored type and contents are what its model declares, checked before a
command reads or writes it.

A column declared with a sealstore encrypted type stores sealed bytes, so its database type
must be a binary one (``BYTEA``, ``BLOB``, ``VARBINARY``).  A declared encrypted column whose
database type is still text (the conversion has not run) raises
:class:`~sealstore.errors.ColumnNotConverted`; any other non-binary type, a text column that
holds sealed bytes (SQLite keeps whatever it is given), or a plain model column whose values
are sealed (the conversion ran, the model was not updated) raises
:class:`~sealstore.errors.ColumnTypeMismatch`.  Each message names ``table.column``, the
stored type, the expected one and the fix.  Nothing here opens a value: types come from the
inspector, contents from the format header of a sample.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...errors import ColumnNotConverted, ColumnTypeMismatch, MalformedCiphertext
from ...format import parse_header
from .spec import ColumnSpec, IndexSpec

__all__ = ["SAMPLE", "check_plain_columns", "check_spec", "check_specs", "sealed_in_sample"]

#: how many values of a column are read to tell whether it holds sealed values
SAMPLE = 200


def _stored_columns(conn: Connection, table: str, schema: str | None) -> dict[str, Any]:
    """{column name: reflected type} of ``table`` ({} when it does not exist)."""
    insp = sa.inspect(conn)
    if not insp.has_table(table, schema=schema):
        return {}
    return {c["name"]: c["type"] for c in insp.get_columns(table, schema=schema)}


def _is_binary(type_: Any) -> bool:
    # NullType: SQLite reports a type it does not know (a column declared without one) that way
    return isinstance(type_, (sa.types._Binary, sa.types.NullType))


def _ddl(type_: Any, dialect: Any) -> str:
    try:
        return str(type_.compile(dialect=dialect))
    except Exception:  # noqa: BLE001 - a type a dialect cannot render: its class name
        return type(type_).__name__


def _declared(spec_type: Any, dialect: Any) -> str:
    """``EncryptedString(100) (stored as BYTEA)``: the model's type and its column type."""
    if spec_type is None:
        return f"sealed bytes (a binary type, {_ddl(sa.LargeBinary(), dialect)})"
    length = getattr(spec_type, "length", None)
    name = type(spec_type).__name__ + (f"({length})" if length else "")
    impl = spec_type.load_dialect_impl(dialect)
    return f"{name} (stored as {_ddl(impl, dialect)})"


def sealed_in_sample(
    conn: Connection, table: Any, column: Any, where: Any = None
) -> tuple[int, int]:
    """(values whose header parses as a sealed value's, values read) among up to ``SAMPLE``
    non-NULL values of ``column`` (and ``where``); on SQLite only the values stored as BLOBs
    are read."""
    q = sa.select(column).select_from(table).where(column.is_not(None))
    if where is not None:
        q = q.where(where)
    if conn.dialect.name == "sqlite":
        q = q.where(sa.func.typeof(column) == "blob")
    sealed = seen = 0
    for (value,) in conn.execute(q.limit(SAMPLE)):
        seen += 1
        if isinstance(value, str):
            continue
        try:
            parse_header(bytes(value))
        except MalformedCiphertext:
            continue
        sealed += 1
    return sealed, seen


def _sqlite_blobs(conn: Connection, table: Any, column: Any) -> int:
    q = sa.select(sa.func.count()).select_from(table).where(sa.func.typeof(column) == "blob")
    return int(conn.execute(q).scalar_one())


def _raw_table(name: str, column: str, schema: str | None) -> sa.Table:
    return sa.Table(name, sa.MetaData(), sa.Column(column, sa.LargeBinary), schema=schema)


def _shadow(column: str) -> str | None:
    """The column a conversion of ``column`` fills (None without Alembic installed)."""
    try:
        from ..alembic.names import shadow_name
    except ImportError:
        return None
    return shadow_name(column)


def check_spec(conn: Connection, spec: ColumnSpec | IndexSpec, *, fix: str | None = None) -> None:
    """Raise ColumnNotConverted / ColumnTypeMismatch when ``spec``'s column is not stored as
    sealed bytes (for an index spec: its source column, then the index column).  ``fix``: the
    command line that converts it, when the caller knows a better one than the default."""
    if isinstance(spec, IndexSpec):
        check_spec(conn, spec.source, fix=fix)
        _check_column(conn, spec.source.table, spec.column, spec.source.schema, spec.type,
                      spec.name, fix, index=True)  # fmt: skip
        return
    _check_column(conn, spec.table, spec.column, spec.schema, spec.type, spec.name, fix)


def _check_column(conn, table, column, schema, spec_type, name, fix, *, index=False) -> None:
    stored = _stored_columns(conn, table, schema)
    if column not in stored:
        return  # a missing table or column: the statement that needs it says so
    stored_type = stored[column]
    if _is_binary(stored_type):
        return
    dialect = conn.dialect
    expected = _declared(spec_type, dialect)
    shown = _ddl(stored_type, dialect)
    what = "blind index" if index else "encrypted column"
    # a spec from a model has its type; one from --column / ColumnSpec.reflect does not
    claim = "the model declares" if spec_type is not None else "named as an encrypted column:"
    models = "--models MODULE" if spec_type is not None else "--type string:N|text|binary"
    stay = "declare its plaintext type in the model" if spec_type is not None else "leave it out"
    raw = _raw_table(table, column, schema)
    blobs = _sqlite_blobs(conn, raw, raw.c[column]) if dialect.name == "sqlite" else 0
    if blobs:
        raise ColumnTypeMismatch(
            f"{name}: {claim} an {what} {expected} but the database column is "
            f"{shown}, a text type, holding {blobs} binary values: change the column's type to "
            f"{_ddl(sa.LargeBinary(), dialect)} (on SQLite: rebuild the table with that type, "
            "copying the values as they are) before running this",
            column=name, stored=shown, expected=expected,
        )  # fmt: skip
    if isinstance(stored_type, sa.String) and not index:
        convert = fix or (
            f"sealstore encrypt-column {table}.{column} {models} (or "
            f"op.encrypt_column('{table}', '{column}', ...) in an Alembic revision)"
        )
        shadow = _shadow(column)
        if shadow in stored:
            convert = (
                f"a conversion is under way or was interrupted (its column {shadow} is there): "
                f"let it finish, or run it again to resume: {convert}"
            )
        raise ColumnNotConverted(
            f"{name}: {claim} {expected} but the database column is {shown}, still "
            f"plaintext (not converted): run the conversion first, {convert}; or, if the column "
            f"is meant to stay plaintext, {stay}",
            column=name, stored=shown, expected=expected,
        )  # fmt: skip
    fix_index = (
        "add the index column with its model type (BlindIndex: a binary type) and run "
        "`sealstore reindex`"
        if index
        else "fix the model, or convert the column to a binary type"
    )
    raise ColumnTypeMismatch(
        f"{name}: {claim} {expected} but the database column is {shown}: a "
        f"{what} needs a binary column; {fix_index}",
        column=name, stored=shown, expected=expected,
    )  # fmt: skip


def check_specs(conn: Connection, specs: Any) -> None:
    """:func:`check_spec` on each of ``specs``."""
    for spec in specs:
        check_spec(conn, spec)


def check_plain_columns(conn: Connection, tables: Any) -> None:
    """The reverse check: a column the models declare as a plain string type whose
    stored values are sealed (the column was converted and the model not updated; reading it
    through the model would return ciphertext) raises ColumnTypeMismatch.  Only columns that
    can hold bytes are sampled (binary columns, and on SQLite any column holding BLOBs)."""
    from ...adapters.sqlalchemy import BlindIndex, EncryptedType

    dialect = conn.dialect
    for table in tables:
        stored = _stored_columns(conn, table.name, table.schema)
        for col in table.columns:
            if isinstance(col.type, (EncryptedType, BlindIndex)) or col.name not in stored:
                continue
            if not isinstance(col.type, sa.String):
                continue  # a plain binary column may hold what the application sealed itself
            if dialect.name != "sqlite" and not _is_binary(stored[col.name]):
                continue
            raw = _raw_table(table.name, col.name, table.schema)
            sealed, seen = sealed_in_sample(conn, raw, raw.c[col.name])
            if not sealed:
                continue
            name = f"{table.schema}.{table.name}" if table.schema else table.name
            declared = _ddl(col.type, dialect)
            shown = _ddl(stored[col.name], dialect)
            raise ColumnTypeMismatch(
                f"{name}.{col.name}: the model declares a plaintext {declared} but the database "
                f"column ({shown}) holds sealed values ({sealed} of {seen} read): the column was "
                "encrypted and the model not updated; declare its sealstore encrypted type in "
                f"the model (or run `sealstore decrypt-column {name}.{col.name} ...` to bring "
                "the plaintext back)",
                column=f"{name}.{col.name}", stored=shown, expected=declared,
            )  # fmt: skip
