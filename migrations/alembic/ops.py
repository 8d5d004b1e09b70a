"""Alembic operations for users' columns: encrypt a plaintext column in place, and back.

::

    import sealstore.migrations.alembic.ops  # registers op.encrypt_column / op.decrypt_column

    def upgrade():
        op.encrypt_column("users", "ssn", EncryptedString(11))

    def downgrade():
        op.decrypt_column("users", "ssn", EncryptedString(11), plain_type=sa.String(11))

How: a shadow column ``_ss_<column>`` is added, filled in primary-key order in batches
(keyset pagination; each value sealed with the context the encrypted type will open it with,
i.e. bound to the *final* ``table.column``), then the plaintext column is dropped and the
shadow renamed (``batch_alter_table``, so SQLite works too).  Safe beside live writers (see
:mod:`sealstore.migrations.alembic.inplace`): a trigger clears the shadow value of every row the
application writes meanwhile, each batch guards on the value it read, the backfill repeats
until a pass finds nothing, and the last pass, dropping the triggers and the swap run under a
lock that blocks writers.  After ``encrypt_column`` a CHECK on the sealed-value header refuses
plaintext (PostgreSQL, MySQL/MariaDB).  With ``commit_batches=True`` (the default, online
migrations only) every batch, and the final pass with the swap, is committed on its own and
run again after a deadlock or lock timeout; a batch locks its rows in primary-key order with
``SKIP LOCKED``, so it never waits on the application.  Running an operation again after an
interruption at any point finishes it: it finds the shadow column half filled (and carries
on), or the column already converted (and does nothing); it never seals a value twice.  A
column covered by an index, a UNIQUE / FOREIGN KEY constraint or a CHECK is refused before any
write (drop it first).

Afterwards ``encrypt_column`` rewrites the table so the database's files keep no plaintext
(:mod:`sealstore.migrations.medium`: ``VACUUM (FULL)``, ``ALTER TABLE ... FORCE``, SQLite's
``secure_delete`` and ``VACUUM``) and logs what sealstore cannot clean (WAL, replicas,
backups); ``scrub=False`` skips it with a warning saying what stays.  The rewrite needs the
online mode on PostgreSQL and SQLite: without it the operation raises
:class:`~sealstore.errors.MediumScrubFailed` before writing anything.

Autogenerate: pass :data:`rewriter` as ``process_revision_directives`` in ``env.py`` and a
change from ``String`` to an encrypted type is written as ``op.encrypt_column`` (and the
downgrade as ``op.decrypt_column``) instead of an ``alter_column`` that would fail, one
conversion per revision, indexes on a converted column dropped before it and created after the
reverse one, every sealstore type imported (:mod:`sealstore.migrations.alembic.splitting`), and
operations on sealstore's own tables are removed (:mod:`sealstore.migrations.alembic.ownership`);
:func:`sealstore.migrations.alembic.autogen.alembic_options` sets it with the other hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import logging
import re
import time

from alembic.autogenerate import renderers
from alembic.autogenerate import rewriter as _rewriter
from alembic.operations import MigrateOperation, Operations
from alembic.operations import ops as alembic_ops
from sqlalchemy import (
    VARBINARY,
    Column,
    LargeBinary,
    MetaData,
    Table,
    and_,
    bindparam,
    cast,
    func,
    inspect,
    select,
    text,
    update,
)

from sqlalchemy.types import _Binary

from ...adapters.sqlalchemy.read_errors import with_primary_key  # read errors name the row
from ...errors import ColumnBindingError, InternalError, SealstoreError
from . import inplace, ownership
from .names import shadow_name
from ..cursor import after
from ..transient import RetryPolicy, scrubbed

if TYPE_CHECKING:
    from sqlalchemy.types import TypeEngine

    from ...adapters.sqlalchemy.types import EncryptedType
    from ..rotation.progress import Progress

__all__ = [
    "AddBlindIndexOp",
    "DecryptColumnOp",
    "DropBlindIndexOp",
    "EncryptColumnOp",
    "rewriter",
    "shadow_name",
]

log: logging.Logger = logging.getLogger("sealstore.migrations")

DEFAULT_BATCH_SIZE = 1000
_ROW_LOCKING = ("postgresql", "mysql", "mariadb")  # SELECT ... FOR UPDATE SKIP LOCKED
_LOCK_TIMEOUT = "5s"  # PostgreSQL: the final pass's wait for its lock, per attempt
_PASSES = 5  # backfill passes before the final one (each catches the rows written meanwhile)


def _encrypted(type_):
    from ...adapters.sqlalchemy import EncryptedType

    if not isinstance(type_, EncryptedType):
        raise TypeError(f"expected a sealstore encrypted type, not {type_!r}")
    return type_


class _ColumnConversionOp(MigrateOperation):
    """What encrypt_column and decrypt_column both take; each one's reverse is the other."""

    diff_name: str  # each operation's name in ``alembic check``

    def __init__(
        self,
        table_name: str,
        column_name: str,
        type_: EncryptedType,
        *,
        plain_type: TypeEngine[Any] | None = None,
        schema: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        commit_batches: bool = True,
        progress: Progress | None = None,
        retry: RetryPolicy | None = None,
        scrub: bool | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.progress: Progress | None = progress  # .update(values converted), for the CLI
        self.retry: RetryPolicy | None = retry  # of each committed batch (default 60 s)
        self.table_name: str = table_name
        self.column_name: str = column_name
        self.type_: EncryptedType = _encrypted(type_)
        self.plain_type: TypeEngine[Any] | None = plain_type
        self.schema: str | None = schema
        self.batch_size: int = batch_size
        self.commit_batches: bool = commit_batches
        #: rewrite the table afterwards (sealstore.migrations.medium); None: encrypt_column
        #: does, decrypt_column does not (what it leaves behind is sealed)
        self.scrub: bool | None = scrub

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """What ``alembic check`` lists for this operation (no values, types by repr)."""
        return (self.diff_name, self.schema, self.table_name, self.column_name,
                self.plain_type, self.type_)  # fmt: skip

    def _as(self, cls):
        return cls(
            self.table_name, self.column_name, self.type_, plain_type=self.plain_type,
            schema=self.schema, batch_size=self.batch_size, commit_batches=self.commit_batches,
            progress=self.progress, retry=self.retry, scrub=self.scrub,
        )  # fmt: skip


@Operations.register_operation("encrypt_column")
class EncryptColumnOp(_ColumnConversionOp):
    """Seal the values of a plaintext column and make it an encrypted column of ``type_``."""

    diff_name = "encrypt_column"

    @classmethod
    def encrypt_column(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str,
        type_: EncryptedType,
        **kw: Any,
    ) -> None:
        """``op.encrypt_column(table, column, EncryptedString(11), plain_type=None,
        schema=None, batch_size=1000, commit_batches=True, scrub=True)``: seal a plaintext
        column in place.  ``plain_type`` reads the existing values (default: the reflected
        column type); ``scrub=False`` skips the table rewrite that removes the old values
        from the database's files (a warning says what stays; docs/MEDIUM.md)."""
        return operations.invoke(cls(table_name, column_name, type_, **kw))

    def reverse(self) -> DecryptColumnOp:
        """The ``decrypt_column`` that undoes this (needs ``plain_type``)."""
        if self.plain_type is None:
            raise ValueError("encrypt_column() needs plain_type= to be reversible")
        return self._as(DecryptColumnOp)


@Operations.register_operation("decrypt_column")
class DecryptColumnOp(_ColumnConversionOp):
    """Open the values of an encrypted column of ``type_`` and store them as ``plain_type``."""

    diff_name = "decrypt_column"

    def __init__(
        self,
        table_name: str,
        column_name: str,
        type_: EncryptedType,
        *,
        plain_type: TypeEngine[Any],
        **kw: Any,
    ) -> None:
        if plain_type is None:
            raise ValueError("decrypt_column() needs plain_type= (the column's new type)")
        super().__init__(table_name, column_name, type_, plain_type=plain_type, **kw)

    @classmethod
    def decrypt_column(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str,
        type_: EncryptedType,
        *,
        plain_type: TypeEngine[Any],
        **kw: Any,
    ) -> None:
        """``op.decrypt_column(table, column, EncryptedString(11), plain_type=sa.String(11))``:
        the reverse of ``encrypt_column``."""
        return operations.invoke(cls(table_name, column_name, type_, plain_type=plain_type, **kw))

    def reverse(self) -> EncryptColumnOp:
        """The ``encrypt_column`` that undoes this."""
        return self._as(EncryptColumnOp)


# ---- implementation --------------------------------------------------------------------------


def _can_autocommit(ctx) -> bool:
    """autocommit_block() works unless the caller began the transaction outside Alembic."""
    in_txn = ctx.connection is not None and ctx.connection.in_transaction()
    return not in_txn or getattr(ctx, "_transaction", None) is not None


class _Converter:
    """Shared steps of both operations: shadow column, batched backfill, swap."""

    def __init__(self, operations, op, *, shadow_type, read_type, write, sealing) -> None:
        self.operations = operations
        self.op = op
        self.sealing = sealing  # encrypting: add the header CHECK after the swap
        self.retry = op.retry or RetryPolicy()
        self.what = f"{type(op).__name__} {op.table_name}.{op.column_name} batch"
        self.shadow = shadow_name(op.column_name)
        self.shadow_type = shadow_type
        self.read_type = read_type
        self.write = write  # (bound type, rows [(pk, value)]) -> [new values]
        self.rewrite: bool = sealing if op.scrub is None else op.scrub  # (medium.scrub)

    def run(self) -> str | None:
        """Convert, with database errors scrubbed of their parameters (plaintext values), then
        rewrite the table so its files keep no old row versions (:func:`_medium`); returns
        the final notice (what was rewritten, what sealstore cannot clean)."""
        op = self.op
        scrubbed(f"{type(op).__name__} {op.table_name}.{op.column_name}", self._run)
        return _medium(self.operations, op, self.rewrite, self.retry)

    def _run(self) -> None:
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
        pk = insp.get_pk_constraint(op.table_name, schema=op.schema)["constrained_columns"]
        if name not in cols and shadow in cols:  # interrupted after the drop: finish the swap
            _medium_precheck(operations, op, self.rewrite)  # (before any write)
            self._swap(None)
            self._ensure_check(conn)
            return
        if name not in cols:
            raise ColumnBindingError(f"table {op.table_name} has no column {name}")
        if not pk:
            raise ColumnBindingError(f"table {op.table_name} has no primary key to paginate on")
        if name in pk:
            raise ColumnBindingError(
                f"{op.table_name}.{name} is part of the primary key: it cannot be converted"
            )
        original = cols[name]
        if shadow not in cols and self._done(conn, insp, original, pk):
            log.info(
                "%s %s.%s: already done (an earlier run converted it): nothing to convert",
                type(op).__name__, op.table_name, name,
            )  # fmt: skip
            inplace.drop_tracking(conn, op.table_name, op.schema, name)
            self._ensure_check(conn)
            return
        self._refuse_dependents(insp)
        _medium_precheck(operations, op, self.rewrite)  # (before any write)
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
            Column(name, self.read_type if self.read_type is not None else original["type"]),
            Column(shadow, _raw(self.shadow_type)),
            schema=op.schema,
        )
        nullable = original.get("nullable", True)
        if op.commit_batches and _can_autocommit(ctx):
            with ctx.autocommit_block():
                live = operations.get_bind()
                self.retry.call(  # DDL: may meet a deadlock with the application
                    lambda: inplace.create_tracking(
                        live, op.table_name, op.schema, name, shadow, pk
                    ),
                    f"{type(op).__name__} {op.table_name}.{name} write tracking",
                )
                self._backfill(live, table, pk, per_batch_commit=True)

                # the final pass and the swap: one transaction of their own, run again after
                # a deadlock or a lock timeout (each attempt looks at what is there first)
                def final():
                    if live.dialect.name == "postgresql":  # a long application transaction
                        # makes the lock wait time out (retried) instead of queueing readers
                        live.exec_driver_sql(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'")
                    self._final(live, table, pk, nullable)

                self.retry.call(
                    lambda: _committed(live, final),
                    f"{type(op).__name__} {op.table_name}.{name} final pass and swap",
                )
        else:
            inplace.create_tracking(conn, op.table_name, op.schema, name, shadow, pk)
            self._backfill(conn, table, pk, per_batch_commit=False)
            self._final(operations.get_bind(), table, pk, nullable)

    def _done(self, conn, insp, original, pk) -> bool:
        """Whether an earlier run already converted the column (no shadow is left): encrypting,
        the column holds sealed values; decrypting, it no longer does.  Decided by the stored
        type and the first non-NULL value (opened under the type's keyring: a plaintext value
        never opens); a binary column whose values do not open while the other side is not
        binary raises ColumnBindingError (another keyring, or not sealstore's values)."""
        op = self.op
        stored_binary = isinstance(original["type"], _Binary)
        plain = op.plain_type if op.plain_type is not None else original["type"]
        plain_binary = isinstance(plain, _Binary)
        if self.sealing and _has_check(insp, op):
            return True  # encrypt_column's header CHECK: added with the swap
        if not stored_binary:
            return not self.sealing and not plain_binary
        opens = self._first_value_opens(conn, pk)
        if opens is None:  # no value to look at: decide by the types
            return self.sealing and not plain_binary
        if opens:
            return self.sealing
        if not plain_binary:
            raise ColumnBindingError(
                f"{op.table_name}.{op.column_name} is stored as binary but its values do not "
                f"open under keyring {op.type_.keyring_name!r}: not sealstore's values, or "
                "another keyring; nothing was changed"
            )
        return not self.sealing

    def _first_value_opens(self, conn, pk) -> bool | None:
        op = self.op
        probe = Table(
            op.table_name, MetaData(),
            *[Column(n, primary_key=True) for n in pk], Column(op.column_name, LargeBinary()),
            schema=op.schema,
        )  # fmt: skip
        c = probe.c[op.column_name]
        row = conn.execute(
            select(*[probe.c[n] for n in pk], c).where(c.is_not(None)).limit(1)
        ).first()
        if row is None:
            return None
        bound = op.type_.bound_to(op.table_name, op.column_name)
        key = tuple(row[: len(pk)])
        try:
            bound.open(bytes(row[len(pk)]), key if bound.bind_row else None)
        except SealstoreError:
            return False
        return True

    def _refuse_dependents(self, insp) -> None:
        """Refuse (before any write) a column that an index, a UNIQUE or FOREIGN KEY
        constraint or a CHECK of the application's covers: dropping the plaintext column
        would drop them with it on some databases and keep them broken on others.  Drop them
        first (the autogenerate rewriter orders ``drop_index`` before the conversion and
        ``create_index`` after the reverse one); a lookup on a sealed column needs a
        BlindIndex."""
        op = self.op
        name, t, s = op.column_name, op.table_name, op.schema
        what = f"{type(op).__name__} {t}.{name}"
        for fk in insp.get_foreign_keys(t, schema=s):
            if name in fk.get("constrained_columns", ()):
                raise ColumnBindingError(
                    f"{what}: the column is in foreign key {fk.get('name')!r}; a sealed value "
                    "cannot reference another table's key: drop the constraint first"
                )
        for ix in insp.get_indexes(t, schema=s):
            if name in (ix.get("column_names") or ()):
                raise ColumnBindingError(
                    f"{what}: the column is in index {ix.get('name')!r}; drop it first "
                    f"(op.drop_index({ix.get('name')!r}, table_name={t!r})) and recreate it "
                    "after decrypting; lookups on a sealed column go through a BlindIndex"
                )
        for uq in insp.get_unique_constraints(t, schema=s):
            if name in (uq.get("column_names") or ()):
                raise ColumnBindingError(
                    f"{what}: the column is in unique constraint {uq.get('name')!r}; drop it "
                    "first (uniqueness of a sealed column goes through a unique BlindIndex)"
                )
        ours = inplace.check_name(t, name)
        word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])", re.IGNORECASE)
        try:
            checks = insp.get_check_constraints(t, schema=s)
        except NotImplementedError:
            checks = []
        for ck in checks:
            if ck.get("name") != ours and word.search(str(ck.get("sqltext") or "")):
                raise ColumnBindingError(
                    f"{what}: CHECK constraint {ck.get('name')!r} names the column; drop it "
                    "first (it would test the sealed bytes, or be dropped with the column)"
                )

    def _ensure_check(self, conn) -> None:
        """Encrypting: the header CHECK is there (an earlier run may have stopped before it)."""
        op = self.op
        check = inplace.header_check_sql(conn, op.column_name)
        if not self.sealing or check is None or _has_check(inspect(conn), op):
            return
        self.operations.create_check_constraint(
            inplace.check_name(op.table_name, op.column_name), op.table_name, text(check),
            schema=op.schema,
        )  # fmt: skip

    def _backfill(self, conn, table, pk_names, *, per_batch_commit: bool) -> None:
        """Passes over the rows without a converted value, until one finds none (or
        ``_PASSES`` passes: the final pass, under the lock, converts what is left)."""
        op, total = self.op, 0
        for _ in range(_PASSES):
            n = self._pass(conn, table, pk_names, per_batch_commit=per_batch_commit)
            total += n
            if not n:
                break
        log.info(
            "%s %s.%s: %d values converted before the final pass",
            type(op).__name__, op.table_name, op.column_name, total,
        )  # fmt: skip

    def _statement(self, conn, table, pk_cols):
        """UPDATE shadow WHERE pk = :k AND shadow IS NULL AND column = the value read."""
        col, shadow = table.c[self.op.column_name], table.c[self.shadow]
        old = bindparam("o", type_=col.type)
        if conn.dialect.name in ("mysql", "mariadb"):  # exact: collations ignore case
            same = cast(col, LargeBinary) == cast(old, LargeBinary)
        else:
            same = col == old
        return (
            update(table)
            .where(
                *[c == bindparam(f"k{i}", type_=c.type) for i, c in enumerate(pk_cols)],
                shadow.is_(None),
                same,
            )
            .values({shadow: bindparam("v", type_=shadow.type)})
        )

    def _pass(self, conn, table, pk_names, *, per_batch_commit: bool) -> int:
        """One pass in primary-key order; returns the values converted."""
        op = self.op
        pk_cols = [table.c[n] for n in pk_names]
        col, shadow = table.c[op.column_name], table.c[self.shadow]
        bound = op.type_.bound_to(op.table_name, op.column_name)
        stmt = self._statement(conn, table, pk_cols)
        n = len(pk_cols)
        state: dict[str, Any] = {"cursor": None, "done": 0}

        def batch():
            cond = [col.is_not(None), shadow.is_(None)]
            if state["cursor"] is not None:
                cond.append(after(pk_cols, state["cursor"]))
            q = select(*pk_cols, col).where(and_(*cond)).order_by(*pk_cols).limit(op.batch_size)
            if per_batch_commit and conn.dialect.name in _ROW_LOCKING:
                # the rows' locks are taken here, in primary-key order, without waiting: a row
                # an application transaction holds is skipped (a later pass converts it), so
                # a batch never waits on the application and cannot be half of a deadlock
                q = q.with_for_update(skip_locked=True)
            rows = conn.execute(q).all()
            if rows:
                items = [(tuple(r[:n]), r[n]) for r in rows]
                news = self.write(bound, items)
                params = []
                for (pkv, old), new in zip(items, news):
                    p = {f"k{i}": v for i, v in enumerate(pkv)}
                    p["o"], p["v"] = old, new
                    params.append(p)
                conn.execute(stmt, params)
            return rows

        while True:
            t0 = time.perf_counter()
            if per_batch_commit:
                rows = self.retry.call(lambda: _committed(conn, batch), self.what)
                if conn.dialect.name == "sqlite":  # let waiting writers in
                    time.sleep(min(1.0, time.perf_counter() - t0))
            else:
                rows = batch()
            if not rows:
                return state["done"]
            state["done"] += len(rows)
            state["cursor"] = tuple(rows[-1][:n])
            if op.progress is not None:
                op.progress.update(state["done"])

    def _final(self, conn, table, pk_names, nullable) -> None:
        """Under a lock that blocks writers: convert what is left, drop the triggers, swap the
        columns (and, encrypting, add the header CHECK).  Looks first: an earlier attempt
        (MySQL/MariaDB, whose DDL commits) may have swapped already."""
        op = self.op
        col, shadow = table.c[op.column_name], table.c[self.shadow]
        inplace.lock_writers(conn, op.table_name, op.schema, self.shadow)
        try:
            names = {c["name"] for c in inspect(conn).get_columns(op.table_name, schema=op.schema)}
            if self.shadow not in names:  # swapped by an earlier attempt
                inplace.drop_tracking(conn, op.table_name, op.schema, op.column_name)
                self._ensure_check(conn)
                return
            if op.column_name not in names:  # dropped, not renamed yet
                self._swap(None)
                self._ensure_check(conn)
                return
            self._pass(conn, table, pk_names, per_batch_commit=False)
            left = conn.execute(
                select(func.count()).select_from(table).where(col.is_not(None), shadow.is_(None))
            ).scalar_one()
            if left:  # writers are blocked: this would be a bug, never a lost write
                raise InternalError(
                    f"{left} rows of {op.table_name}.{op.column_name} have no converted value "
                    "under the lock; nothing was dropped: run the migration again"
                )
            inplace.drop_tracking(conn, op.table_name, op.schema, op.column_name)
            self._drop_header_check(conn)
            self._swap(nullable)
            self._ensure_check(conn)
        finally:
            inplace.unlock_writers(conn)

    def _drop_header_check(self, conn) -> None:
        op = self.op
        name = inplace.check_name(op.table_name, op.column_name)
        checks = inspect(conn).get_check_constraints(op.table_name, schema=op.schema)
        if any(c.get("name") == name for c in checks):
            self.operations.drop_constraint(name, op.table_name, type_="check", schema=op.schema)

    def _swap(self, nullable) -> None:
        op = self.op
        conn = self.operations.get_bind()
        stored = _stored_as(self.shadow_type, conn.dialect)
        if nullable is not None and conn.dialect.name in ("mysql", "mariadb"):
            # one ALTER: MySQL's DDL commits, two statements would leave a window without
            # either column
            q = conn.dialect.identifier_preparer.quote
            t = f"{q(op.schema)}.{q(op.table_name)}" if op.schema else q(op.table_name)
            ddl = stored.compile(dialect=conn.dialect)
            conn.exec_driver_sql(
                f"ALTER TABLE {t} DROP COLUMN {q(op.column_name)}, CHANGE COLUMN "
                f"{q(self.shadow)} {q(op.column_name)} {ddl} {'NULL' if nullable else 'NOT NULL'}"
            )
            return
        kw = {} if nullable is None else {"nullable": nullable}
        with self.operations.batch_alter_table(op.table_name, schema=op.schema) as batch:
            if nullable is not None:
                batch.drop_column(op.column_name)
            batch.alter_column(
                self.shadow,
                new_column_name=op.column_name,
                existing_type=stored,
                **kw,
            )


def _has_check(insp, op) -> bool:
    name = inplace.check_name(op.table_name, op.column_name)
    try:
        checks = insp.get_check_constraints(op.table_name, schema=op.schema)
    except NotImplementedError:
        return False
    return any(c.get("name") == name for c in checks)


def _medium_precheck(operations, op, rewrite: bool) -> None:
    """Before any write: the rewrite needs a connection outside the migration's transaction
    (PostgreSQL's VACUUM and SQLite's cannot run in one), so it needs the online mode; SQLite
    zeroes what the conversion frees from the start (``secure_delete``)."""
    from ...errors import MediumScrubFailed

    ctx = operations.get_context()
    conn = operations.get_bind()
    if ctx.as_sql or not rewrite:
        return
    # as _run will see it: its first statement begins the caller's transaction if none is open
    online = op.commit_batches and getattr(ctx, "_transaction", None) is not None
    if conn.dialect.name in ("postgresql", "sqlite") and not online:
        raise MediumScrubFailed(
            f"{op.table_name}.{op.column_name}: nothing was changed; the table rewrite that "
            "removes the old values from the database's files cannot run inside this "
            "transaction: use commit_batches=True in an Alembic-managed transaction, or pass "
            "scrub=False and rewrite the table later (docs/MEDIUM.md)"
        )
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA secure_delete = ON")


def _medium(operations, op, rewrite: bool, retry: RetryPolicy) -> str | None:
    """After the conversion: rewrite the table (default) or warn what stays on the medium; the
    last log record says what sealstore cannot clean."""
    from ...errors import MediumScrubFailed
    from .. import medium

    conn = operations.get_bind()
    qualified = inplace._qt(conn, op.table_name, op.schema)
    if not rewrite:
        if not isinstance(op, EncryptColumnOp):
            return None  # decrypting: what stays behind is sealed
        notice = medium.leftover_notice(op.table_name, op.column_name, conn.dialect.name,
                                        qualified)  # fmt: skip
        log.warning("%s", notice)
        return notice
    what = f"rewrite of {op.table_name} after converting {op.column_name}"
    ctx = operations.get_context()
    why = None
    try:
        if _can_autocommit(ctx):
            with ctx.autocommit_block():
                live = operations.get_bind()
                ran = retry.call(lambda: medium.scrub(live, op.table_name, op.schema), what)
        elif conn.dialect.name in ("mysql", "mariadb"):  # its DDL commits anyway
            ran = retry.call(lambda: medium.scrub(conn, op.table_name, op.schema), what)
        else:  # _medium_precheck refused this before any write
            raise InternalError(f"{what}: no connection outside the migration's transaction")
    except Exception as exc:  # noqa: BLE001 - re-raised below, without the chain
        from ..transient import describe

        why = str(exc) if isinstance(exc, SealstoreError) else describe(exc)  # no parameters
    if why is not None:
        raise MediumScrubFailed(
            f"{op.table_name}.{op.column_name} is converted and committed, but the {what} "
            f"failed ({why}): the old values stay in the table's files until "
            f"{'; '.join(medium.scrub_sql(conn.dialect.name, qualified))} runs "
            "(sealstore medium-check tells when it is clean)"
        )
    notice = medium.final_notice(op.table_name, op.column_name, conn.dialect.name, ran)
    log.warning("%s", notice)
    return notice


def _committed(conn, fn):
    """``fn()`` in its own transaction on an autocommit connection (SQLite: BEGIN IMMEDIATE,
    so the batch waits for the write lock before reading instead of failing to upgrade)."""
    if conn.dialect.name in ("mysql", "mariadb"):  # no gap locks: inserts behind never wait
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.dialect.name == "sqlite" else "BEGIN")
    try:
        out = fn()
        conn.exec_driver_sql("COMMIT")
    except BaseException:
        conn.exec_driver_sql("ROLLBACK")
        raise
    return out


def _stored_as(type_, dialect):
    """The column type ``type_`` creates on ``dialect`` (VARBINARY(n) on MySQL, not BLOB):
    what the rename restates, as MySQL's ``CHANGE`` writes the whole column definition."""
    from ...adapters.sqlalchemy import EncryptedType

    return type_.load_dialect_impl(dialect) if isinstance(type_, EncryptedType) else type_


def _raw(type_):
    """The type to write a shadow column through: raw bytes for encrypted types (the values
    are sealed here, the type must not seal them again)."""
    from ...adapters.sqlalchemy import EncryptedType

    return LargeBinary() if isinstance(type_, EncryptedType) else type_


def _seal_rows(bound, items):
    from ...keyring import get_keyring

    keyring = get_keyring(bound.keyring_name)
    encode = bound.codec.encode
    if not bound.bind_row:
        sealed = keyring.seal_many([encode(v) for _, v in items], bound.context())
    else:
        sealed = [keyring.seal(encode(v), bound.context(pk)) for pk, v in items]
    return [bound.check_fits(s) for s in sealed]  # ValueTooLong before any row is written


def _open_rows(bound, items):
    try:
        return _open_batch(bound, items)
    except SealstoreError:
        pass  # opened again one by one: the error raised names the column and the row
    return [_open_one(bound, pk, value) for pk, value in items]


def _open_one(bound, pk, value):
    try:
        return bound.open(value, pk if bound.bind_row else None)
    except SealstoreError as exc:
        failure = exc
    raise with_primary_key(failure, pk)


def _open_batch(bound, items):
    from ...keyring import get_keyring

    keyring = get_keyring(bound.keyring_name)
    decode = bound.codec.decoded  # UndecodableValue, without the plaintext
    if not bound.bind_row:
        return [decode(p) for p in keyring.open_many([bytes(v) for _, v in items], bound.context())]
    return [decode(keyring.open(bytes(v), bound.context(pk))) for pk, v in items]


@Operations.implementation_for(EncryptColumnOp)
def _encrypt_column(operations, op: EncryptColumnOp) -> str | None:
    return _Converter(
        operations,
        op,
        shadow_type=op.type_,
        read_type=op.plain_type,
        write=_seal_rows,
        sealing=True,
    ).run()


@Operations.implementation_for(DecryptColumnOp)
def _decrypt_column(operations, op: DecryptColumnOp) -> str | None:
    return _Converter(
        operations,
        op,
        shadow_type=op.plain_type,
        read_type=LargeBinary(),
        write=_open_rows,
        sealing=False,
    ).run()


# ---- autogenerate ----------------------------------------------------------------------------


class _Rewriter(_rewriter.Rewriter):
    """Alembic's Rewriter, then :func:`sealstore.migrations.alembic.splitting.arrange`: indexes
    on converted columns ordered around the conversion, one conversion per revision, every
    sealstore type imported."""

    def __call__(self, context, revision, directives) -> None:
        from .splitting import arrange

        super().__call__(context, revision, directives)
        arrange(context, revision, directives, _ColumnConversionOp)


#: the ``process_revision_directives`` hook (see the module docstring)
rewriter: _rewriter.Rewriter = _Rewriter()
ownership.install(rewriter)  # never touch sealstore's own tables


@rewriter.rewrites(alembic_ops.AlterColumnOp)
def _alter_column(context, revision, op):
    """String -> encrypted type becomes encrypt_column; encrypted -> plain, decrypt_column."""
    from ...adapters.sqlalchemy import EncryptedType

    new, old = op.modify_type, op.existing_type
    if new is None:
        return op
    new_enc, old_enc = isinstance(new, EncryptedType), isinstance(old, EncryptedType)
    if new_enc == old_enc:
        return op
    if new_enc:
        out = [
            EncryptColumnOp(op.table_name, op.column_name, new, plain_type=old, schema=op.schema)
        ]
    else:
        out = [
            DecryptColumnOp(op.table_name, op.column_name, old, plain_type=new, schema=op.schema)
        ]
    if op.modify_nullable is not None or op.modify_name is not None:
        op.modify_type = None  # keep the other changes as a plain alter_column
        out.append(op)
    return out


def _add_imports(autogen_context, what: str) -> None:
    """The imports a rendered sealstore operation needs, so an unedited script.py.mako runs it."""
    imports = autogen_context.imports
    if imports is not None:
        imports.add("import sealstore.adapters.sqlalchemy")
        imports.add(f"import sealstore.migrations.alembic.ops  # noqa: F401  ({what})")


def _render(name: str, autogen_context, op) -> str:
    from alembic.autogenerate.render import _repr_type

    _add_imports(autogen_context, "op.encrypt_column")
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


# ---- blind indexes added to existing rows ----------------------------------------------------

#: reindex passes ``add_blind_index`` makes at most (each catches rows written meanwhile)
INDEX_FILL_PASSES = 3


@Operations.register_operation("add_blind_index")
class AddBlindIndexOp(MigrateOperation):
    """Add a BlindIndex column to a table that has rows, and fill it (see ``add_blind_index``)."""

    diff_name = "add_blind_index"

    def __init__(
        self,
        table_name: str,
        column_name: str,
        type_: Any,
        *,
        source_type: EncryptedType,
        schema: str | None = None,
        index: bool = True,
        unique: bool = False,
        index_name: str | None = None,
        batch_size: int = 2000,
        retry: RetryPolicy | None = None,
    ) -> None:
        from ...adapters.sqlalchemy import BlindIndex

        if not isinstance(type_, BlindIndex):
            raise TypeError(f"expected a sealstore BlindIndex type, not {type_!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.table_name: str = table_name
        self.column_name: str = column_name
        self.type_: Any = type_
        self.source_type: EncryptedType = _encrypted(source_type)
        self.schema: str | None = schema
        self.index: bool = index or unique
        self.unique: bool = unique
        self.index_name: str = index_name or f"ix_{table_name}_{column_name}"
        self.batch_size: int = batch_size
        self.retry: RetryPolicy | None = retry

    @classmethod
    def add_blind_index(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str,
        type_: Any,
        **kw: Any,
    ) -> None:
        """``op.add_blind_index("users", "email_index", BlindIndex("email"),
        source_type=EncryptedString(320), unique=False, index=True, index_name=None,
        schema=None, batch_size=2000)``: add the index column when it is missing, fill it from
        the source column in committed batches (the re-index job: online, resumable by running
        the revision again), then create its index (UNIQUE with ``unique=True``).
        ``source_type`` is the source column's type exactly as the model declares it (its
        values are opened with that type's context).  Needs sealstore's job tables
        (``depends_on = "sealstore"``) and the index keyring registered.  Rows that writers
        without the BlindIndex in their models add meanwhile stay NULL: the op says how many,
        lookups raise IndexIncomplete until ``sealstore reindex`` fills them."""
        return operations.invoke(cls(table_name, column_name, type_, **kw))

    @property
    def index_source(self) -> str:
        """The source column's name (the autogenerate rewriter puts this operation after a
        revision's conversion of that column: see ``splitting.py``)."""
        return str(self.type_.source)

    def to_diff_tuple(self) -> tuple[Any, ...]:
        return (self.diff_name, self.schema, self.table_name, self.column_name, self.type_)

    def reverse(self) -> DropBlindIndexOp:
        return DropBlindIndexOp(
            self.table_name, self.column_name, schema=self.schema,
            index_name=self.index_name if self.index else None,
        )  # fmt: skip


@Operations.register_operation("drop_blind_index")
class DropBlindIndexOp(MigrateOperation):
    """Drop a blind-index column and its index (the reverse of ``add_blind_index``)."""

    diff_name = "drop_blind_index"

    def __init__(
        self,
        table_name: str,
        column_name: str,
        *,
        schema: str | None = None,
        index_name: str | None = None,
    ) -> None:
        self.table_name: str = table_name
        self.column_name: str = column_name
        self.schema: str | None = schema
        self.index_name: str | None = index_name

    @classmethod
    def drop_blind_index(
        cls, operations: Operations, table_name: str, column_name: str, **kw: Any
    ) -> None:
        """``op.drop_blind_index("users", "email_index", index_name="ix_users_email_index")``:
        drop the index (when it exists) and the column."""
        return operations.invoke(cls(table_name, column_name, **kw))

    def to_diff_tuple(self) -> tuple[Any, ...]:
        return (self.diff_name, self.schema, self.table_name, self.column_name)


def _index_table(op: AddBlindIndexOp, conn) -> tuple[Table, str]:
    """A private model of the table: its primary key, the source column with its sealstore
    type (bound as the application's model binds it) and the BlindIndex column."""
    insp = inspect(conn)
    pk = insp.get_pk_constraint(op.table_name, schema=op.schema)["constrained_columns"]
    if not pk:
        raise ColumnBindingError(f"table {op.table_name} has no primary key to paginate on")
    cols = {c["name"]: c for c in insp.get_columns(op.table_name, schema=op.schema)}
    source = op.type_.source
    if source not in cols:
        raise ColumnBindingError(f"table {op.table_name} has no column {source}")
    table = Table(
        op.table_name,
        MetaData(),
        *[Column(n, cols[n]["type"], primary_key=True) for n in pk],
        Column(source, op.source_type.copy()),
        Column(op.column_name, op.type_.copy()),
        schema=op.schema,
    )
    return table, source


@Operations.implementation_for(AddBlindIndexOp)
def _add_blind_index(operations, op: AddBlindIndexOp) -> None:
    scrubbed(f"add_blind_index {op.table_name}.{op.column_name}", _fill_index, operations, op)


def _fill_index(operations, op: AddBlindIndexOp) -> None:
    from ...adapters.sqlalchemy.index_state import forget
    from ..rotation.reindex import ReindexTask
    from ..rotation.spec import specs_from_metadata
    from ..rotation.worker import _check_tables, run

    ctx = operations.get_context()
    if ctx.as_sql:
        raise NotImplementedError("add_blind_index fills the column: it cannot run in --sql mode")
    if not _can_autocommit(ctx):
        raise ColumnBindingError(
            "add_blind_index commits its batches: run it in a migration Alembic began "
            "(not inside a transaction the caller opened)"
        )
    conn = operations.get_bind()
    engine = conn.engine
    _check_tables(engine)  # MigrationRequired before anything changes
    with ctx.autocommit_block():
        live = operations.get_bind()
        insp = inspect(live)
        names = {c["name"] for c in insp.get_columns(op.table_name, schema=op.schema)}
        table, _ = _index_table(op, live)
        if op.column_name not in names:
            n = op.type_.storage_length
            mysql = live.dialect.name in ("mysql", "mariadb")
            stored = VARBINARY(n) if mysql else LargeBinary(n)
            operations.add_column(
                op.table_name, Column(op.column_name, stored, nullable=True), schema=op.schema
            )
        (spec,) = [s for s in specs_from_metadata(table)[1] if s.column == op.column_name]
        task = ReindexTask(spec)
        left = None
        for _ in range(INDEX_FILL_PASSES):
            result = run(engine, task, batch_size=op.batch_size, retry=op.retry)
            left = result.remaining
            if not left:
                break
        existing = {ix["name"] for ix in inspect(live).get_indexes(op.table_name, schema=op.schema)}
        if op.index and op.index_name not in existing:
            operations.create_index(
                op.index_name, op.table_name, [op.column_name], unique=op.unique,
                schema=op.schema,
            )  # fmt: skip
    forget()  # this process's lookups (every engine) ask again
    if left:
        log.warning(
            "add_blind_index %s.%s: %d rows written meanwhile have no index value yet (writers "
            "whose models lack the BlindIndex); lookups through it raise IndexIncomplete until "
            "`sealstore reindex --models <your models> --table %s` fills them",
            op.table_name, op.column_name, left, op.table_name,
        )  # fmt: skip
        print(
            f"sealstore: {op.table_name}.{op.column_name}: {left} rows have no index value "
            f"yet; once every process runs the models with the BlindIndex, run `sealstore "
            f"reindex --models <your models> --table {op.table_name}` (lookups raise "
            "IndexIncomplete until then)"
        )


@Operations.implementation_for(DropBlindIndexOp)
def _drop_blind_index(operations, op: DropBlindIndexOp) -> None:
    conn = operations.get_bind()
    insp = inspect(conn)
    if op.index_name is not None:
        existing = {ix["name"] for ix in insp.get_indexes(op.table_name, schema=op.schema)}
        if op.index_name in existing:
            operations.drop_index(op.index_name, table_name=op.table_name, schema=op.schema)
    names = {c["name"] for c in insp.get_columns(op.table_name, schema=op.schema)}
    if op.column_name in names:
        with operations.batch_alter_table(op.table_name, schema=op.schema) as batch:
            batch.drop_column(op.column_name)


# ---- autogenerate: a new BlindIndex column on an existing table ------------------------------


@rewriter.rewrites(alembic_ops.AddColumnOp)
def _add_blind_index_column(context, revision, op):
    """``add_column`` of a BlindIndex column (autogenerate emits it for a table that exists)
    becomes ``add_blind_index`` with ``index=False``: the column is added and filled, and the
    ``create_index`` autogenerate writes after it runs on the filled column."""
    from ...adapters.sqlalchemy import BlindIndex, EncryptedType

    column = op.column
    type_ = column.type
    table = getattr(column, "table", None)
    if not isinstance(type_, BlindIndex) or table is None:
        return op
    source = table.c.get(type_.source)
    if source is None:
        source = next((c for c in table.c if c.name == type_.source), None)
    if source is None or not isinstance(source.type, EncryptedType):
        return op  # the type itself reports the missing source when it is used
    return AddBlindIndexOp(
        op.table_name, column.name, BlindIndex(type_.source, type_.size, keyring=type_.keyring),
        source_type=source.type, schema=op.schema, index=False,
    )  # fmt: skip


@renderers.dispatch_for(AddBlindIndexOp)
def _render_add_blind_index(autogen_context, op) -> str:
    from alembic.autogenerate.render import _repr_type

    _add_imports(autogen_context, "op.add_blind_index")
    args = [
        repr(op.table_name),
        repr(op.column_name),
        _repr_type(op.type_, autogen_context),
        f"source_type={_repr_type(op.source_type, autogen_context)}",
    ]
    if not op.index:
        args.append("index=False")
    elif op.unique:
        args.append("unique=True")
    if op.schema is not None:
        args.append(f"schema={op.schema!r}")
    return f"op.add_blind_index({', '.join(args)})"


@renderers.dispatch_for(DropBlindIndexOp)
def _render_drop_blind_index(autogen_context, op) -> str:
    args = [repr(op.table_name), repr(op.column_name)]
    if op.index_name is not None:
        args.append(f"index_name={op.index_name!r}")
    if op.schema is not None:
        args.append(f"schema={op.schema!r}")
    return f"op.drop_blind_index({', '.join(args)})"
