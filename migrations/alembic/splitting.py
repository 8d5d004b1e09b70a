"""What sealstore's autogenerate rewriter does to a revision that converts columns, after the
``String`` -> encrypted type changes became ``op.encrypt_column`` / ``op.decrypt_column``.

* **Order.** An index, a UNIQUE or FOREIGN KEY constraint on a column being converted is
  dropped *before* the conversion and created *after* it, in both directions: the upgrade
  drops ``ix_users_email`` and then encrypts ``email``; the downgrade decrypts ``email`` and
  then recreates ``ix_users_email`` on the plaintext column.  (The conversion refuses a column
  that is still covered by one: see :meth:`_Converter._refuse_dependents`.)
* **One conversion per revision.** A conversion commits its batches as it goes and a
  PostgreSQL revision is one transaction only until the first conversion, so two conversions
  in one revision could leave ``alembic_version`` behind a column already converted.  The
  rewriter writes one revision for everything else (dropping the indexes, adding columns...),
  then one revision per conversion, chained (``<rev>``, ``<rev>_2``, ``<rev>_3``...), then one
  for what must follow the conversions (an index created on a converted column).  Every
  conversion also resumes or does nothing when it is run again, so an interrupted ``alembic
  upgrade`` is finished by running it again.
* **Imports.** Every sealstore type the revisions name is imported (its module), whether or
  not ``render_item`` is set: the files run with Alembic's unedited ``script.py.mako``.
"""

from __future__ import annotations

from typing import Any

from alembic.operations import ops as alembic_ops

__all__ = ["arrange"]

_DROPS = (alembic_ops.DropIndexOp, alembic_ops.DropConstraintOp)
_CREATES = (
    alembic_ops.CreateIndexOp,
    alembic_ops.CreateUniqueConstraintOp,
    alembic_ops.CreateForeignKeyOp,
    alembic_ops.CreateCheckConstraintOp,
    alembic_ops.AddConstraintOp,
)


def _names(items) -> set[str]:
    out: set[str] = set()
    for c in items or ():
        if isinstance(c, str):
            out.add(c)
        else:
            name = getattr(c, "name", None)
            if isinstance(name, str):
                out.add(name)
            for sub in getattr(c, "base_columns", ()) or ():  # expressions over columns
                if isinstance(getattr(sub, "name", None), str):
                    out.add(sub.name)
    return out


def _columns_of(op) -> set[str]:
    """The columns an index or constraint operation covers (empty when it cannot tell)."""
    if isinstance(op, alembic_ops.CreateIndexOp):
        return _names(op.columns)
    if isinstance(op, alembic_ops.CreateUniqueConstraintOp):
        return _names(op.columns)
    if isinstance(op, alembic_ops.CreateForeignKeyOp):
        return _names(op.local_cols)
    if isinstance(op, alembic_ops.DropIndexOp):
        rev = getattr(op, "_reverse", None)
        return _columns_of(rev) if rev is not None else set()
    if isinstance(op, alembic_ops.DropConstraintOp):
        rev = getattr(op, "_reverse", None)
        return _columns_of(rev) if rev is not None else set()
    if isinstance(op, alembic_ops.AddConstraintOp):
        try:
            constraint = op.to_constraint()
        except Exception:  # noqa: BLE001 - an operation we cannot read: leave it in place
            return set()
        cols = getattr(constraint, "columns", None)
        if cols is not None:
            return _names(cols)
        return _names(getattr(constraint, "column_keys", ()))
    return set()


def _flatten(container) -> list[tuple[Any, Any]]:
    """[(ModifyTableOps or None, op)] in order."""
    out: list[tuple[Any, Any]] = []
    for op in container.ops:
        if isinstance(op, alembic_ops.ModifyTableOps):
            out += [(op, sub) for sub in op.ops]
        else:
            out.append((None, op))
    return out


def _table_of(parent, op) -> tuple[Any, Any]:
    if parent is not None:
        return (parent.schema, parent.table_name)
    return (getattr(op, "schema", None), getattr(op, "table_name", None))


def _regroup(items, container_cls):
    """A container of ``items`` ([(ModifyTableOps or None, op)]), consecutive operations on
    one table grouped again in a ModifyTableOps."""
    ops: list[Any] = []
    for parent, op in items:
        if parent is None:
            ops.append(op)
            continue
        last = ops[-1] if ops else None
        if isinstance(last, alembic_ops.ModifyTableOps) and (last.schema, last.table_name) == (
            parent.schema,
            parent.table_name,
        ):
            last.ops.append(op)
        else:
            ops.append(alembic_ops.ModifyTableOps(parent.table_name, [op], schema=parent.schema))
    return container_cls(ops=ops)


def _filled_after(items, converted: set) -> set:
    """(schema, table, column) of the blind indexes ``add_blind_index`` fills from a converted
    column (its ``index_source``): they can only be filled once that column is encrypted."""
    out = set()
    for parent, op in items:
        source = getattr(op, "index_source", None)
        if source is not None and (*_table_of(parent, op), source) in converted:
            out.add((*_table_of(parent, op), op.column_name))
    return out


def _follows_fill(op, table, filled: set) -> bool:
    """Whether ``op`` adds one of the ``filled`` blind indexes, or creates an index or
    constraint on one: it goes after the conversions, in its original order."""
    if getattr(op, "index_source", None) is not None:
        return (*table, op.column_name) in filled
    return isinstance(op, _CREATES) and bool({(*table, c) for c in _columns_of(op)} & filled)


def _classify(items, converted: set, conv_cls) -> tuple[list, dict, list, list]:
    """(before, {column: conversion ops}, after, rest): drops of an index or constraint on a
    converted column go before the conversions, creates after them."""
    before, after, rest = [], [], []
    conv: dict[Any, list] = {}
    filled = _filled_after(items, converted)
    for parent, op in items:
        table = _table_of(parent, op)
        if filled and _follows_fill(op, table, filled):
            after.append((parent, op))
            continue
        if isinstance(op, conv_cls):
            conv.setdefault((*table, op.column_name), []).append((parent, op))
            continue
        col = getattr(op, "column_name", None)
        if isinstance(op, alembic_ops.AlterColumnOp) and (*table, col) in converted:
            conv.setdefault((*table, col), []).append((parent, op))  # nullable, comment...
            continue
        covered = {(*table, c) for c in _columns_of(op)} & converted
        if covered and isinstance(op, _DROPS):
            before.append((parent, op))
        elif covered and isinstance(op, _CREATES):
            after.append((parent, op))
        else:
            rest.append((parent, op))
    return before, conv, after, rest


def _imports(script, ops_list) -> None:
    """Import the module of every sealstore type in ``ops_list`` (Alembic renders a type it
    does not know as ``<its module>.<repr>`` when no ``render_item`` hook is set)."""
    from ...adapters.sqlalchemy import BlindIndex, EncryptedType

    found: set[str] = set()

    def visit(type_):
        if isinstance(type_, (EncryptedType, BlindIndex)):
            found.add(type(type_).__module__)
        for variant in (getattr(type_, "_variant_mapping", None) or {}).values():
            visit(variant)

    def walk(op):
        if isinstance(op, alembic_ops.OpContainer):
            for sub in op.ops:
                walk(sub)
            return
        if isinstance(op, alembic_ops.AddColumnOp):
            visit(op.column.type)
        elif isinstance(op, alembic_ops.CreateTableOp):
            for c in op.columns:
                if hasattr(c, "type"):
                    visit(c.type)
        elif isinstance(op, alembic_ops.AlterColumnOp):
            for t in (op.modify_type, op.existing_type):
                if t is not None:
                    visit(t)

    for container in ops_list:
        walk(container)
    if found:
        script.imports = set(script.imports)  # Alembic's default is one shared set()
        script.imports.add("import sealstore.adapters.sqlalchemy")
        script.imports.update(f"import {m}" for m in sorted(found))


def _in_alembic_check() -> bool:
    """Whether ``alembic check`` (``alembic.command.check``) is what runs the hook: it lists
    the operations of the last generated revision only, so it must see them all in one."""
    import sys

    from alembic import command

    code = getattr(command.check, "__code__", None)
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def arrange(context: Any, revision: Any, directives: list[Any], conv_cls: Any) -> None:
    """The ``process_revision_directives`` step described in the module docstring;
    ``conv_cls`` is the class of the conversion operations (each has ``column_name`` and
    ``diff_name``)."""
    for script in directives:
        _imports(script, script.upgrade_ops_list + script.downgrade_ops_list)
    if len(directives) != 1:
        return  # several already (another hook split them): leave the split as it is
    script = directives[0]
    if len(script.upgrade_ops_list) != 1 or len(script.downgrade_ops_list) != 1:
        return  # multiple-metadata environments: one revision, conversions left in place
    up_items, down_items = _flatten(script.upgrade_ops), _flatten(script.downgrade_ops)
    converted = {(*_table_of(p, op), op.column_name) for p, op in up_items + down_items
                 if isinstance(op, conv_cls)}  # fmt: skip
    if not converted:
        return
    up_before, up_conv, up_after, up_rest = _classify(up_items, converted, conv_cls)
    down_before, down_conv, down_after, down_rest = _classify(down_items, converted, conv_cls)
    # upgrade: rest + drops | one conversion each | creates; downgrade of each, in reverse
    first_up = up_rest + up_before
    first_down = down_after + down_rest  # runs last going down: after every reverse conversion
    keys = list(up_conv) + [k for k in down_conv if k not in up_conv]
    pieces: list[tuple[list, list, str]] = []
    if first_up or first_down:
        pieces.append((first_up, first_down, ""))
    for key in keys:
        ups, downs = up_conv.get(key, []), down_conv.get(key, [])
        verb = next((op.diff_name for _, op in ups if isinstance(op, conv_cls)), "convert")
        pieces.append((ups, downs, f"{verb} {key[1]}.{key[2]}"))
    if up_after or down_before:
        pieces.append((up_after, down_before, "indexes on the converted columns"))
    if len(pieces) == 1:  # one conversion and nothing else: already one per revision
        return
    if _in_alembic_check():  # ``alembic check`` reads the last revision only: keep one, ordered
        conv_up = [item for key in keys for item in up_conv.get(key, [])]
        conv_down = [item for key in keys for item in down_conv.get(key, [])]
        script.upgrade_ops = _regroup(up_rest + up_before + conv_up + up_after,
                                      alembic_ops.UpgradeOps)  # fmt: skip
        script.downgrade_ops = _regroup(down_before + conv_down + down_after + down_rest,
                                        alembic_ops.DowngradeOps)  # fmt: skip
        return
    base_id, message = script.rev_id, script.message or ""
    scripts: list[alembic_ops.MigrationScript] = []
    for n, (ups, downs, what) in enumerate(pieces):
        first = n == 0
        rev_id = base_id if first else f"{base_id}_{n + 1}"
        new = alembic_ops.MigrationScript(
            rev_id,
            _regroup(ups, alembic_ops.UpgradeOps),
            _regroup(downs, alembic_ops.DowngradeOps),
            message=f"{message} ({what})" if what and message else (what or message),
            imports=set(script.imports),
            head=script.head if first else scripts[-1].rev_id,
            splice=script.splice if first else False,
            branch_label=script.branch_label if first else None,
            version_path=script.version_path,
            depends_on=script.depends_on if first else None,
        )
        scripts.append(new)
    directives[:] = scripts
