"""What the migrations commands print: the lines of ``rotate``/``reindex``/``verify``/``status``/
``keys retire``/``db init`` and their ``--json`` documents (one JSON document on stdout and
nothing else there; warnings go to stderr).  Nothing here prints plaintext or key material:
rows are named by primary key, keys by id.
"""

from __future__ import annotations

import json
import sys

from .cli_setup import _index_hint


def _pk(pk: tuple) -> str:
    return ", ".join(map(str, pk)) if len(pk) > 1 else str(pk[0])


def _report_workers(args, results, verb: str, done: str) -> int:
    """Print a rotate/reindex run (lines, or JSON with --json); the exit code: 0 when clean."""
    lines, clean = [], True
    for r in results:
        if r.dry_run:
            per_key = ", ".join(
                f"{'-' if k is None else f'{k:08x}'}: {n}"
                for k, n in sorted(r.by_key.items(), key=str)
            )
            lines.append(
                f"{r.name}: would {verb} {r.total_estimate} values"
                + (f" ({per_key})" if per_key else "")
            )
            continue
        lines.append(
            f"{r.name}: job {r.job_id} {r.status}; this worker {done} {r.resealed} values in "
            f"{r.batches} batches ({r.conflicted} changed meanwhile, re-read; {r.failed} failed); "
            f"{r.remaining} values not under {r.target_key_id:08x}"
        )
        for pk, key_id, error in r.failures:
            kid = "-" if key_id is None else f"{key_id:08x}"
            lines.append(f"  failed: {r.name} row {_pk(pk)} (key {kid}): {error}")
        if r.status != "done" or r.failed or r.remaining:
            clean = False
    print(_results_json(results) if args.json else "\n".join(lines))
    return 0 if clean or args.dry_run else 1


def _results_json(results) -> str:
    out = []
    for r in results:
        out.append({
            "column": r.name, "job_id": r.job_id, "status": r.status, "target_key_id": f"{r.target_key_id:08x}",
            "batches": r.batches, "rewritten": r.resealed, "conflicted": r.conflicted, "failed": r.failed,
            "remaining": r.remaining, "total_estimate": r.total_estimate, "dry_run": r.dry_run,
            "by_key": {("-" if k is None else f"{k:08x}"): n for k, n in r.by_key.items()},
            "failures": [{"pk": list(map(str, pk)), "key_id": None if k is None else f"{k:08x}", "error": e}
                         for pk, k, e in r.failures],
        })  # fmt: skip
    return json.dumps(out, indent=2)


def _report_verify(args, results) -> int:
    """Print a verify run (lines, or JSON with --json); the exit code: 1 when a value failed."""
    bad = 0
    for r in results:
        bad += r.failed
        if args.json:
            continue
        print(f"{r.name}: {r.checked} values checked, {r.failed} failed")
        for f in r.failures:
            print(f"  failed: {r.name} row {_pk(f.pk)} (key {f.key_id_hex}): {f.error}")
    if args.json:
        print(json.dumps([{
            "column": r.name, "checked": r.checked, "failed": r.failed,
            "failures": [{"pk": list(map(str, f.pk)), "key_id": f.key_id_hex, "error": f.error} for f in r.failures],
        } for r in results], indent=2))  # fmt: skip
    return 1 if bad else 0


def _report_status(args, report, states: dict, missing: list[str]) -> int:
    """Print a status report (the key table and the jobs, or JSON with --json) and, on
    stderr, what is left; the exit code: 1 while anything is left."""
    if args.json:
        print(_status_json(report))
    else:
        _print_key_table(report, states)
        _print_jobs(report.jobs)
    # exit 1 while anything is left: values under old keys (or holding no key id), index
    # values never filled, blind indexes whose keyring is unknown
    for name in missing:
        print(
            f"sealstore: the keyring {name!r} of the blind indexes is not configured, so their "
            f"primary key is unknown: {_index_hint(name)}",
            file=sys.stderr,
        )
    columns = [c for c in report.columns if c.kind == "encrypted"]
    indexes = [c for c in report.columns if c.kind != "encrypted"]
    old_values = sum(c.not_primary for c in columns)
    old_index = sum(c.not_primary for c in indexes if c.primary_key_id is not None)
    unfilled = sum(c.unfilled for c in indexes)
    if old_values:
        print(
            f"sealstore: {old_values} values are not under their primary key (run sealstore rotate)",
            file=sys.stderr,
        )
    legacy = sum(c.legacy for c in columns)
    if legacy:
        print(
            f"sealstore: {legacy} of them were sealed before their column was tenant-aware "
            "(not bound to their tenant: sealstore rotate --tenant re-seals them)",
            file=sys.stderr,
        )
    if old_index:
        print(
            f"sealstore: {old_index} blind-index values are not under the index keyring's primary "
            "key (run sealstore reindex)",
            file=sys.stderr,
        )
    if unfilled:
        print(
            f"sealstore: {unfilled} blind-index values are NULL while their source is set (an "
            "index added to existing rows; lookups through it raise IndexIncomplete: run "
            "sealstore reindex)",
            file=sys.stderr,
        )
    return 1 if old_values or old_index or unfilled or missing else 0


def _status_json(report) -> str:
    from sealstore.migrations.rotation.jobs import is_dead

    return json.dumps({
        "columns": [{
            "column": c.name, "kind": c.kind, "rows": c.rows, "nulls": c.nulls,
            "primary": None if c.primary_key_id is None else f"{c.primary_key_id:08x}",
            "by_key": {("-" if k is None else f"{k:08x}"): n for k, n in c.by_key.items()},
            "not_primary": c.not_primary, "keyring": c.keyring,
            **({"tenant": c.tenant, "legacy": c.legacy} if c.tenant is not None else {}),
            **({"unfilled": c.unfilled} if c.kind == "blind index" else {}),
        } for c in report.columns],
        "jobs": [{
            "job_id": j.job_id, "kind": j.kind, "column": f"{j.table_name}.{j.column_name}",
            "target_key_id": f"{j.target_key_id:08x}", "done": j.done, "total_estimate": j.total_estimate,
            "heartbeat_at": j.heartbeat_at.isoformat() if j.heartbeat_at else None, "worker": j.worker,
            "dead": is_dead(j),
        } for j in report.jobs],
    }, indent=2)  # fmt: skip


def _print_key_table(report, states: dict) -> None:
    """COLUMN / KEY ID / STATE / ROWS, most used key first, then each column's NULLs."""
    table = [("COLUMN", "KEY ID", "STATE", "ROWS")]
    for c in report.columns:
        for k, n in sorted(c.by_key.items(), key=lambda kv: -kv[1]):
            if k is None:
                state = "malformed"
            elif c.kind == "blind index":
                if c.primary_key_id is None:
                    state = "unknown-keyring"
                else:
                    state = "primary" if k == c.primary_key_id else "index key"
            else:
                state = states.get(k, "unknown")
            table.append((c.name, "-" if k is None else f"{k:08x}", state, str(n)))
        if c.kind == "blind index" and c.unfilled:
            table.append((c.name, "NULL", "unfilled", str(c.unfilled)))  # source set
            if c.nulls - c.unfilled:
                table.append((c.name, "NULL", "-", str(c.nulls - c.unfilled)))
        else:
            table.append((c.name, "NULL", "-", str(c.nulls)))
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def _print_jobs(jobs) -> None:
    """One line per running job: progress, last heartbeat, and whether its lease ran out."""
    from datetime import datetime, timezone

    from sealstore.migrations.rotation.jobs import LEASE_SECONDS, is_dead

    now = datetime.now(timezone.utc)
    for j in jobs:
        total = f"/{j.total_estimate}" if j.total_estimate is not None else ""
        beat = "never"
        if j.heartbeat_at is not None:
            hb = (
                j.heartbeat_at
                if j.heartbeat_at.tzinfo
                else j.heartbeat_at.replace(tzinfo=timezone.utc)
            )
            beat = f"{int((now - hb).total_seconds())}s ago by {j.worker}"
        dead = (
            f" -- DEAD (no heartbeat for over {LEASE_SECONDS:g}s; the next run takes it over)"
            if is_dead(j, at=now) else ""
        )  # fmt: skip
        # an object job names a prefix URL (table_name scheme://bucket, column_name the prefix)
        what = f"{j.table_name}/{j.column_name}" if "://" in j.table_name else (
            f"{j.table_name}.{j.column_name}"
        )  # fmt: skip
        print(
            f"job {j.job_id}: {j.kind} {what} to {j.target_key_id:08x}: "
            f"{j.done}{total} done, heartbeat {beat}{dead}"
        )
    if not jobs:
        print("no running jobs")


def _retire_json(key, action: str, refs, checked: list[str], *, done: bool) -> str:
    return json.dumps({
        "key_id": key.id_hex, "action": action, "done": done, "state": key.state.value,
        "forced": bool(refs) and done, "checked": checked,
        "references": [{"name": r.name, "count": r.count, "kind": r.kind} for r in refs],
    }, indent=2)  # fmt: skip


def _report_db_init(args, where: str) -> None:
    """``db init``'s one line, or its JSON document."""
    if args.json:
        print(json.dumps({"database": where, "tables": "ready"}, indent=2))
    else:
        print(f"sealstore tables ready in {where}")
