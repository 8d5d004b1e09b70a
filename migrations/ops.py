"""Alembic operations for users' columns: encrypt a plaintext column in place, and back.

::

    import sealstore.migrations.ops  # registers op.encrypt_column / op.decrypt_column

    def upgrade():
        op.encrypt_column("users", "ssn", EncryptedString(11))

    def downgrade():
        op.decrypt_column("users", "ssn", EncryptedString(11), plain_type=sa.String(11))

How: a shadow column ``_ss_<column>`` is added, filled in primary-key order in batches
(keyset pagination; each value sealed with the context the encrypted type will open it with,
i.e. bound to the *final* ``table.column``), then the plaintext column is dropped and the
shadow renamed (``batch_alter_table``, so SQLite works too).  With ``commit_batches=True``
(the default, online migrations only) every batch is committed on its own, so a migration that
is interrupted resumes where it stopped when it runs again: the shadow column and the values
already in it are kept.  Application writes to the column during the backfill are not
carried over: run it with writes to that column stopped (see docs/ROTATION.md).

Autogenerate: pass :data:`rewriter` as ``process_revision_directives`` in ``env.py`` and a
change from ``String`` to an encrypted type is written as ``op.encrypt_column`` (and the
downgrade as ``op.decrypt_column``) instead of an ``alter_column`` that would fail, and
operations on sealstore's own tables are removed (:mod:`sealstore.migrations.ownership`);
:func:`sealstore.migrations.autogen.alembic_options` sets it with the other hooks.
"""

from __future__ import annotations

import logging

from alembic.autogenerate import renderers
from alembic.autogenerate import rewriter as _rewriter
from alembic.operations import MigrateOperation, Operations
from alembic.operations import ops as alembic_ops
from sqlalchemy import (
    Column,
    LargeBinary,
    MetaData,
    Table,
    and_,
    bindparam,
    func,
    inspect,
    select,
    update,
)

from ..errors import ColumnBindingError
from . import ownership
from .cursor import after

__all__ = ["DecryptColumnOp", "EncryptColumnOp", "rewriter", "shadow_name"]

log = logging.getLogger("sealstore.migrations")

DEFAULT_BATCH_SIZE = 1000
_PREFIX = "_ss_"
_MAX_NAME = 63  # PostgreSQL's identifier limit, the smallest of the common databases


def shadow_name(column: str) -> str:
    """The temporary column a conversion fills: ``_ss_<column>`` (cut to 63 characters)."""
    return (_PREFIX + column)[:_MAX_NAME]


def _encrypted(type_):
    from ..adapters.sqlalchemy import EncryptedType

    if not isinstance(type_, EncryptedType):
        raise TypeError(f"expected a sealstore encrypted type, not {type_!r}")
    return type_


class _ColumnConversionOp(MigrateOperation):
    """What encrypt_column and decrypt_column both take; each one's reverse is the other."""

    def __init__(
        self,
        table_name: str,
        column_name: str,
        type_,
        *,
        plain_type=None,
        schema: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        commit_batches: bool = True,
    ) -> None:
        self.table_name = table_name
        self.column_name = column_name
        self.type_ = _encrypted(type_)
        self.plain_type = plain_type
        self.schema = schema
        self.batch_size = batch_size
        self.commit_batches = commit_batches

    def to_diff_tuple(self) -> tuple:
        """What ``alembic check`` lists for this operation (no values, types by repr)."""
        return (self.diff_name, self.schema, self.table_name, self.column_name,
                self.plain_type, self.type_)  # fmt: skip

    def _as(self, cls):
        return cls(
            self.table_name, self.column_name, self.type_, plain_type=self.plain_type,
            schema=self.schema, batch_size=self.batch_size, commit_batches=self.commit_batches,
        )  # fmt: skip


@Operations.register_operation("encrypt_column")
class EncryptColumnOp(_ColumnConversionOp):
    """Seal the values of a plaintext column and make it an encrypted column of ``type_``."""

    diff_name = "encrypt_column"

    @classmethod
    def encrypt_column(cls, operations, table_name, column_name, type_, **kw):
        """``op.encrypt_column(table, column, EncryptedString(11), plain_type=None,
        schema=None, batch_size=1000, commit_batches=True)``: seal a plaintext column in place.
        ``plain_type`` reads the existing values (default: the reflected column type)."""
        return operations.invoke(cls(table_name, column_name, type_, **kw))

    def reverse(self) -> DecryptColumnOp:
        if self.plain_type is None:
            raise ValueError("encrypt_column() needs plain_type= to be reversible")
        return self._as(DecryptColumnOp)


@Operations.register_operation("decrypt_column")
class DecryptColumnOp(_ColumnConversionOp):
    """Open the values of an encrypted column of ``type_`` and store them as ``plain_type``."""

    diff_name = "decrypt_column"

    def __init__(self, table_name: str, column_name: str, type_, *, plain_type, **kw) -> None:
        if plain_type is None:
            raise ValueError("decrypt_column() needs plain_type= (the column's new type)")
        super().__init__(table_name, column_name, type_, plain_type=plain_type, **kw)

    @classmethod
    def decrypt_column(cls, operations, table_name, column_name, type_, *, plain_type, **kw):
        """``op.decrypt_column(table, column, EncryptedString(11), plain_type=sa.String(11))``:
        the reverse of ``encrypt_column``."""
        return operations.invoke(cls(table_name, column_name, type_, plain_type=plain_type, **kw))

    def reverse(self) -> EncryptColumnOp:
        return self._as(EncryptColumnOp)


# ---- implementation --------------------------------------------------------------------------


def _can_autocommit(ctx) -> bool:
    """autocommit_block() works unless the caller began the transaction outside Alembic."""
    in_txn = ctx.connection is not None and ctx.connection.in_transaction()
    return not in_txn or getattr(ctx, "_transaction", None) is not None


class _Converter:
    """Shared steps of both operations: shadow column, batched backfill, swap."""

    def __init__(self, operations, op, *, shadow_type, read_type, write) -> None:
        self.operations = operations
        self.op = op
        self.shadow = shadow_name(op.column_name)
        self.shadow_type = shadow_type
        self.read_type = read_type
        self.write = write  # (bound type, rows [(pk, value)]) -> [new values]

    def run(self) -> None:
        operations, op = self.operations, self.op
        ctx = operations.get_context()
        if ctx.as_sql:
            raise NotImplementedError(
                f"{type(op).__name__} rewrites data: it cannot run in offline (--sql) mode"
            )
        conn = operations.get_bind()
        insp = inspect(conn)
        cols = {c["name"]: c for c in insp.get_columns(op.table_name, schema=op.schema)}
        name, shadow = op.column_name, self.shadow
        if (
            name not in cols and shadow in cols
        ):  # interrupted after the drop: finish the swap
            self._swap(None)
            return
        if name not in cols:
            raise ColumnBindingError(f"table {op.table_name} has no column {name}")
        original = cols[name]
        pk = insp.get_pk_constraint(op.table_name, schema=op.schema)[
            "constrained_columns"
        ]
        if not pk:
            raise ColumnBindingError(
                f"table {op.table_name} has no primary key to paginate on"
            )
        if shadow not in cols:
            operations.add_column(
                op.table_name,
                Column(shadow, self.shadow_type, nullable=True),
                schema=op.schema,
            )
        table = Table(
            op.table_name,
            MetaData(),
            *[Column(n, cols[n]["type"], primary_key=True) for n in pk],
            Column(
                name, self.read_type if self.read_type is not None else original["type"]
            ),
            Column(shadow, _raw(self.shadow_type)),
            schema=op.schema,
        )
        if op.commit_batches and _can_autocommit(ctx):
            with ctx.autocommit_block():
                self._backfill(operations.get_bind(), table, pk, per_batch_commit=True)
        else:
            self._backfill(conn, table, pk, per_batch_commit=False)
        self._swap(original.get("nullable", True))

    def _backfill(self, conn, table, pk_names, *, per_batch_commit: bool) -> None:
        op = self.op
        pk_cols = [table.c[n] for n in pk_names]
        col, shadow = table.c[op.column_name], table.c[self.shadow]
        bound = op.type_.bound_to(op.table_name, op.column_name)
        key = {f"k{i}": c for i, c in enumerate(pk_cols)}
        stmt = (
            update(table)
            .where(
                *[c == bindparam(k, type_=c.type) for k, c in key.items()],
                shadow.is_(None),
            )
            .values({shadow: bindparam("v", type_=shadow.type)})
        )
        cursor, done = None, 0
        while True:
            cond = [col.is_not(None), shadow.is_(None)]
            if cursor is not None:
                cond.append(after(pk_cols, cursor))
            q = (
                select(*pk_cols, col)
                .where(and_(*cond))
                .order_by(*pk_cols)
                .limit(op.batch_size)
            )
            if per_batch_commit:
                conn.exec_driver_sql("BEGIN")
            try:
                rows = conn.execute(q).all()
                if rows:
                    n = len(pk_cols)
                    items = [(tuple(r[:n]), r[n]) for r in rows]
                    news = self.write(bound, items)
                    params = []
                    for (pkv, _), new in zip(items, news):
                        p = {f"k{i}": v for i, v in enumerate(pkv)}
                        p["v"] = new
                        params.append(p)
                    conn.execute(stmt, params)
                if per_batch_commit:
                    conn.exec_driver_sql("COMMIT")
            except BaseException:
                if per_batch_commit:
                    conn.exec_driver_sql("ROLLBACK")
                raise
            if not rows:
                break
            done += len(rows)
            cursor = tuple(rows[-1][: len(pk_cols)])
        left = conn.execute(
            select(func.count())
            .select_from(table)
            .where(col.is_not(None), shadow.is_(None))
        ).scalar_one()
        if left:
            raise RuntimeError(
                f"{left} rows of {op.table_name}.{op.column_name} were written during the "
                "conversion and have no converted value; run the migration again"
            )
        log.info(
            "%s %s.%s: %d values converted",
            type(op).__name__,
            op.table_name,
            op.column_name,
            done,
        )

    def _swap(self, nullable) -> None:
        op = self.op
        kw = {} if nullable is None else {"nullable": nullable}
        with self.operations.batch_alter_table(
            op.table_name, schema=op.schema
        ) as batch:
            if nullable is not None:
                batch.drop_column(op.column_name)
            batch.alter_column(
                self.shadow,
                new_column_name=op.column_name,
                existing_type=_stored_as(self.shadow_type, self.operations.get_bind().dialect),
                **kw,
            )


def _stored_as(type_, dialect):
    """The column type ``type_`` creates on ``dialect`` (VARBINARY(n) on MySQL, not BLOB):
    what the rename restates, as MySQL's ``CHANGE`` writes the whole column definition."""
    from ..adapters.sqlalchemy import EncryptedType

    return type_.load_dialect_impl(dialect) if isinstance(type_, EncryptedType) else type_


def _raw(type_):
    """The type to write a shadow column through: raw bytes for encrypted types (the values
    are sealed here, the type must not seal them again)."""
    from ..adapters.sqlalchemy import EncryptedType

    return LargeBinary() if isinstance(type_, EncryptedType) else type_


def _seal_rows(bound, items):
    from ..keyring import get_keyring

    keyring = get_keyring(bound.keyring_name)
    encode = bound.codec.encode
    if not bound.bind_row:
        return keyring.seal_many([encode(v) for _, v in items], bound.context())
    return [keyring.seal(encode(v), bound.context(pk)) for pk, v in items]


def _open_rows(bound, items):
    from ..keyring import get_keyring

    keyring = get_keyring(bound.keyring_name)
    decode = bound.codec.decoded  # UndecodableValue, without the plaintext
    if not bound.bind_row:
        return [
            decode(p)
            for p in keyring.open_many([bytes(v) for _, v in items], bound.context())
        ]
    return [decode(keyring.open(bytes(v), bound.context(pk))) for pk, v in items]


@Operations.implementation_for(EncryptColumnOp)
def _encrypt_column(operations, op: EncryptColumnOp) -> None:
    _Converter(
        operations, op, shadow_type=op.type_, read_type=op.plain_type, write=_seal_rows
    ).run()


@Operations.implementation_for(DecryptColumnOp)
def _decrypt_column(operations, op: DecryptColumnOp) -> None:
    _Converter(
        operations,
        op,
        shadow_type=op.plain_type,
        read_type=LargeBinary(),
        write=_open_rows,
    ).run()


# ---- autogenerate ----------------------------------------------------------------------------

rewriter = _rewriter.Rewriter()
ownership.install(rewriter)  # never touch sealstore's own tables


@rewriter.rewrites(alembic_ops.AlterColumnOp)
def _alter_column(context, revision, op):
    """String -> encrypted type becomes encrypt_column; encrypted -> plain, decrypt_column."""
    from ..adapters.sqlalchemy import EncryptedType

    new, old = op.modify_type, op.existing_type
    if new is None:
        return op
    new_enc, old_enc = isinstance(new, EncryptedType), isinstance(old, EncryptedType)
    if new_enc == old_enc:
        return op
    if new_enc:
        out = [
            EncryptColumnOp(
                op.table_name, op.column_name, new, plain_type=old, schema=op.schema
            )
        ]
    else:
        out = [
            DecryptColumnOp(
                op.table_name, op.column_name, old, plain_type=new, schema=op.schema
            )
        ]
    if op.modify_nullable is not None or op.modify_name is not None:
        op.modify_type = None  # keep the other changes as a plain alter_column
        out.append(op)
    return out


def _render(name: str, autogen_context, op) -> str:
    from alembic.autogenerate.render import _repr_type

    imports = autogen_context.imports
    if imports is not None:
        imports.add("import sealstore.adapters.sqlalchemy")
        imports.add(
            "import sealstore.migrations.ops  # noqa: F401  (op.encrypt_column)"
        )
    args = [
        repr(op.table_name),
        repr(op.column_name),
        _repr_type(op.type_, autogen_context),
    ]
    if op.plain_type is not None:
        args.append(f"plain_type={_repr_type(op.plain_type, autogen_context)}")
    if op.schema is not None:
        args.append(f"schema={op.schema!r}")
    return f"op.{name}({', '.join(args)})"


@renderers.dispatch_for(EncryptColumnOp)
def _render_encrypt(autogen_context, op) -> str:
    return _render("encrypt_column", autogen_context, op)


@renderers.dispatch_for(DecryptColumnOp)
def _render_decrypt(autogen_context, op) -> str:
    return _render("decrypt_column", autogen_context, op)
