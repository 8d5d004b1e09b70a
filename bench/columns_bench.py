"""Encrypted-column benchmark: insert and select N rows through Core and the ORM.

    python bench/columns_bench.py [--quick] [--rows N] [--db URL] [--repeat 5] [--json PATH]

Each row has one 100-byte and one 1 KiB text column.  Variants, all in one run and on the
same database: plaintext columns (the baseline); a no-crypto ``TypeDecorator`` (binary storage,
values encoded to UTF-8 and decoded by C callables, no cryptography: what SQLAlchemy's
per-value processors and the extra bytes objects cost whatever the processor does, the floor
of any plain ``TypeDecorator``; sealstore's selects go under it by opening at fetch); the
incumbent, sqlalchemy-utils'
``StringEncryptedType`` with ``AesGcmEngine`` (only if ``sqlalchemy-utils`` is installed:
``pip install 'sealstore[bench]'``; otherwise reported as "not installed"); sealstore with an
AES-256-GCM keyring; sealstore with the default AEGIS keyring (AEGIS-128X4, AEGIS-128L under
1 KiB); and the same with tenant-aware columns (``tenant="context"``, one tenant set for the
run, sealed under that tenant's own keyring: the per-row tenant lookup).  Paths: Core ``insert()`` executemany of all rows in one call, Core ``select()``
fetching all rows, ORM ``add_all`` + ``commit`` (objects built in the timed part, as an
application does), ORM ``select`` loading every object.

N is 100,000 by default and 10,000 with ``--quick``.  SQLite (a file in a temporary
directory) unless ``--db`` gives a SQLAlchemy URL (PostgreSQL: ``postgresql+psycopg://...``;
the benchmark creates and drops its own ``bench_cols_*`` tables).  Every figure is the median
of ``--repeat`` runs after an unmeasured warm-up (variants interleaved, their order rotated
from run to run), with the spread (high-low over median); slowdowns are ratios to the
plaintext baseline of the same run.  The client's CPU time per row is shown too: on a busy
machine it is steadier than wall time, and it excludes the database server's own work.  The
garbage collector stays on (it is a large share of ORM loads), but the input rows and what the
process held before are frozen out of its way (``gc.freeze()``), so each timed run pays for the
objects it creates, not for the benchmark's own fixtures.

Targets from issue 28: every path of the tenant variant takes at most 1.10x the time of the
single-tenant AEGIS variant in the same run.  Targets from issue 4, checked at the end: Core insert >= 70% of plaintext rows/s, Core select
>= 50%, ORM insert and select within 10% of plaintext, and every path >= 1.5x the incumbent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TextIO

import argparse
import functools
import gc
import os
import random
import statistics
import string
import sys
import tempfile
import time

from sqlalchemy import (
    Column, Integer, LargeBinary, String, Table, Text, TypeDecorator, create_engine, delete, insert, select, text,
)  # fmt: skip
from sqlalchemy.orm import DeclarativeBase, Session

from sealstore.adapters.sqlalchemy import EncryptedString, EncryptedText
from sealstore.bench.json_output import write_json
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.redact import mask_url

SMALL, LARGE = 100, 1024
PATHS = ("core_insert", "core_select", "orm_insert", "orm_select")
FLOOR = "no-crypto TypeDecorator"
TENANT = "sealstore AEGIS tenant"
VARIANTS = (
    "plaintext", FLOOR, "sqlalchemy-utils", "sealstore AES-256-GCM", "sealstore AEGIS", TENANT,
)  # fmt: skip
BENCH_TENANT = "bench_tenant"
#: the tenant path's goal against the single-tenant one, same run (issue 28)
TENANT_TARGET = 1.10
INCUMBENT = "sqlalchemy-utils"
TARGETS = {  # path -> minimum fraction of plaintext rows/s (issue 4)
    "core_insert": 0.70,
    "core_select": 0.50,
    "orm_insert": 0.90,
    "orm_select": 0.90,
}
INCUMBENT_FACTOR = 1.5


class NotAvailable(Exception):
    """A variant or the database cannot run here; the message says why."""


def _incumbent_types():
    try:
        from sqlalchemy_utils import StringEncryptedType
        from sqlalchemy_utils.types.encrypted.encrypted_type import AesGcmEngine
    except ImportError:
        raise NotAvailable("not installed (pip install sqlalchemy-utils)") from None
    key = "columns-bench-incumbent-key"
    # its storage is VARCHAR of base64 text: MySQL wants a length (4x covers base64, nonce, tag)
    return (StringEncryptedType(String(SMALL), key, AesGcmEngine, length=4 * SMALL),
            StringEncryptedType(Text, key, AesGcmEngine, length=4 * LARGE))  # fmt: skip


class _Utf8Blob(TypeDecorator):
    """The floor of a plain encrypted TypeDecorator: binary storage, values encoded to UTF-8
    on the way in and decoded on the way out by C callables in SQLAlchemy's per-value
    processors, no cryptography at all (and no NULL handling: the benchmark has none)."""

    impl = LargeBinary
    cache_ok = True

    def bind_processor(self, dialect):
        if dialect.name == "sqlite":  # as sealstore does: a bytearray binds without adaptation
            return functools.partial(bytearray, encoding="utf-8")
        return str.encode

    def result_processor(self, dialect, coltype):
        return bytes.decode


def _column_types(variant: str):
    if variant == "plaintext":
        return String(SMALL), Text()
    if variant == FLOOR:
        return _Utf8Blob(4 * SMALL), _Utf8Blob()
    if variant == INCUMBENT:
        return _incumbent_types()
    if variant == TENANT:  # sealed under the tenant's own keyring, bound to the tenant
        return EncryptedString(SMALL, tenant="context"), EncryptedText(tenant="context")
    name = {"sealstore AES-256-GCM": "bench-gcm", "sealstore AEGIS": "bench-aegis"}[variant]
    return EncryptedString(SMALL, keyring=name), EncryptedText(keyring=name)


def _model(variant: str, index: int):
    """A fresh Table and mapped class for ``variant``."""
    small, large = _column_types(variant)

    class Base(DeclarativeBase):
        pass

    table = Table(
        f"bench_cols_{index}",
        Base.metadata,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("small", small),
        Column("large", large),
    )
    model = type(f"Row{index}", (Base,), {"__table__": table})
    return table, model


def _data(n: int, seed: int = 4):
    rnd = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    pool_small = ["".join(rnd.choices(alphabet, k=SMALL)) for _ in range(512)]
    pool_large = ["".join(rnd.choices(alphabet, k=LARGE)) for _ in range(512)]
    return [
        {"id": i, "small": pool_small[i % 512], "large": pool_large[(i * 7) % 512]}
        for i in range(n)
    ]


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) for one call of ``fn``."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def _empty(engine, table) -> None:
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":  # no dead tuples left for the next variant
            conn.execute(text(f"TRUNCATE {table.name}"))
        else:
            conn.execute(delete(table))


def _one_round(engine, table, model, rows) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds per path for one variant; the table is emptied after each insert."""
    out = {}

    def core_insert():
        with engine.begin() as conn:
            conn.execute(insert(table), rows)

    def core_select():
        with engine.connect() as conn:
            got = conn.execute(select(table)).all()
        assert len(got) == len(rows)

    def orm_insert():
        with Session(engine) as session:
            session.add_all([model(**r) for r in rows])
            session.commit()

    def orm_select():
        with Session(engine) as session:
            got = session.scalars(select(model)).all()
        assert len(got) == len(rows)

    out["core_insert"] = _timed(core_insert)
    out["core_select"] = _timed(core_select)
    _empty(engine, table)
    out["orm_insert"] = _timed(orm_insert)
    out["orm_select"] = _timed(orm_select)
    _empty(engine, table)
    return out


def _connect(db_url: str | None):
    """(engine, temporary directory or None): ``db_url``, or SQLite in a temporary file;
    NotAvailable when the database cannot be reached."""
    tmp = None
    if db_url is None:
        tmp = tempfile.TemporaryDirectory(prefix="sealstore-columns-bench-")
        db_url = f"sqlite:///{os.path.join(tmp.name, 'bench.db')}"
    engine = create_engine(db_url)
    try:
        with engine.connect():
            pass
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        engine.dispose()
        if tmp:
            tmp.cleanup()
        raise NotAvailable(
            f"cannot connect to {mask_url(engine.url.render_as_string(hide_password=False))}: {exc}"
        ) from None
    return engine, tmp


def _models(variants) -> tuple[dict, dict[str, str]]:
    """(variant -> (table, model), variant -> why it cannot run)."""
    models, unavailable = {}, {}
    for i, variant in enumerate(variants):
        try:
            models[variant] = _model(variant, i)
        except NotAvailable as exc:
            unavailable[variant] = str(exc)
    return models, unavailable


def _timed_rounds(
    engine, models: dict[str, tuple[Any, Any]], rows, repeat: int, progress
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(variant, path) -> [(wall, CPU) per run]: the tables created, one unmeasured warm-up
    round, then ``repeat`` rounds with the variants' order rotated from round to round."""
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    order = list(models)
    for table, _ in models.values():
        table.drop(engine, checkfirst=True)
        table.create(engine)
    warmup = rows[: max(1, len(rows) // 20)]
    for variant in order:  # compile caches, file growth, connection pool: not measured
        _one_round(engine, *models[variant], warmup)
    for rep in range(repeat):
        for variant in order[rep % len(order) :] + order[: rep % len(order)]:  # rotate the order
            for path, seconds in _one_round(engine, *models[variant], rows).items():
                times.setdefault((variant, path), []).append(seconds)
            if progress:
                progress(f"run {rep + 1}/{repeat}: {variant}")
    return times


def _clean_up(engine, models: dict[str, tuple[Any, Any]], rings: dict[str, Keyring], tmp) -> None:
    for table, _ in models.values():
        table.drop(engine, checkfirst=True)
    engine.dispose()
    for name in rings:
        forget_keyring(name)
    if tmp:
        tmp.cleanup()


def _results(
    times: dict[tuple[str, str], list[tuple[float, float]]], n: int
) -> list[dict[str, Any]]:
    """One row per (variant, path): medians, spread, and the ratios to the plaintext, floor
    and incumbent rows of the same path; in PATHS, then VARIANTS order."""
    results: list[dict[str, Any]] = []
    for (variant, path), runs in times.items():
        secs = [wall for wall, _ in runs]
        med = statistics.median(secs)
        results.append({
            "variant": variant, "path": path, "rows": n, "seconds": med,
            "rows_per_s": n / med, "spread": (max(secs) - min(secs)) / med, "runs": len(secs),
            "client_cpu_us_per_row": statistics.median(cpu for _, cpu in runs) / n * 1e6,
        })  # fmt: skip
    base = {r["path"]: r["rows_per_s"] for r in results if r["variant"] == "plaintext"}
    inc = {r["path"]: r["rows_per_s"] for r in results if r["variant"] == INCUMBENT}
    floor = {r["path"]: r["rows_per_s"] for r in results if r["variant"] == FLOOR}
    single = {r["path"]: r for r in results if r["variant"] == "sealstore AEGIS"}
    for r in results:
        if r["variant"] == TENANT and r["path"] in single:  # time ratios: tenant / single-tenant
            one = single[r["path"]]
            r["vs_single_tenant"] = r["seconds"] / one["seconds"]
            r["vs_single_tenant_cpu"] = r["client_cpu_us_per_row"] / one["client_cpu_us_per_row"]
        r["vs_floor"] = r["rows_per_s"] / floor[r["path"]] if r["path"] in floor else None
        r["vs_plaintext"] = r["rows_per_s"] / base[r["path"]] if r["path"] in base else None
        r["slowdown"] = base[r["path"]] / r["rows_per_s"] if r["path"] in base else None
        r["vs_incumbent"] = r["rows_per_s"] / inc[r["path"]] if r["path"] in inc else None
    order = {v: i for i, v in enumerate(VARIANTS)}
    results.sort(key=lambda r: (PATHS.index(r["path"]), order.get(r["variant"], 99)))
    return results


def run(
    n: int,
    db_url: str | None = None,
    repeat: int = 5,
    variants: Sequence[str] = VARIANTS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure every variant and path; returns {"rows": [...], "unavailable": {...}, ...}."""
    engine, tmp = _connect(db_url)
    rings = {"bench-gcm": Keyring.generate("AES-256-GCM"), "bench-aegis": Keyring.generate()}
    for name, ring in rings.items():
        use_keyring(ring, name=name)
    models, unavailable = _models(variants)
    rows = _data(n)
    tenant_keys = None
    if TENANT in models:  # one tenant, its keyrings registered (what TenantKeys loads once)
        from sealstore import tenants

        tenant_keys = tenants.use_tenant_keys(tenants.TenantKeys())
        tenant_keys.register(BENCH_TENANT, Keyring.generate(), Keyring.generate())
    # The input rows (100,000 dicts) and whatever the process held before (other bench
    # sections) would otherwise be traversed by every full collection inside a timed run:
    # freeze them, so the collector sees what each run allocates, as in an application.
    gc.collect()
    gc.freeze()
    try:
        if tenant_keys is not None:  # the session's tenant, set once for the whole run
            with tenants.tenant(BENCH_TENANT):
                times = _timed_rounds(engine, models, rows, repeat, progress)
        else:
            times = _timed_rounds(engine, models, rows, repeat, progress)
    finally:
        gc.unfreeze()
        if tenant_keys is not None:
            tenants.use_tenant_keys(tenants.TenantKeys())  # closes the bench tenant's keyrings
        _clean_up(engine, models, rings, tmp)
    suites = {name: str(ring.suite) for name, ring in rings.items()}
    return {"rows": _results(times, n), "unavailable": unavailable, "n": n, "repeat": repeat,
            "db": mask_url(engine.url.render_as_string(hide_password=False)) if not tmp else "sqlite (temporary file)",
            "dialect": engine.dialect.name, "suites": suites}  # fmt: skip


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """docs/BENCH.md's goals for the sealstore AEGIS variant, next to what this run measured."""
    items = []
    for r in result["rows"]:
        if r.get("vs_single_tenant") is not None:
            items.append(
                {
                    "what": f"{r['path']}: time x single-tenant (tenant lookup per row)",
                    "measured": f"x{r['vs_single_tenant']:.2f} "
                    f"(client CPU x{r['vs_single_tenant_cpu']:.2f})",
                    "goal": f"<= x{TENANT_TARGET:.2f}",
                    "reached": r["vs_single_tenant"] <= TENANT_TARGET,
                }
            )
        if r["variant"] != "sealstore AEGIS":
            continue
        need = TARGETS[r["path"]]
        items.append(
            {
                "what": f"{r['path']}: rows/s x plaintext",
                "measured": f"x{r['vs_plaintext']:.2f}",
                "goal": f">= x{need:.2f}",
                "reached": r["vs_plaintext"] >= need,
            }
        )
        if r["vs_incumbent"] is not None:
            items.append(
                {
                    "what": f"{r['path']}: rows/s x {INCUMBENT}",
                    "measured": f"x{r['vs_incumbent']:.2f}",
                    "goal": f">= x{INCUMBENT_FACTOR:.2f}",
                    "reached": r["vs_incumbent"] >= INCUMBENT_FACTOR,
                }
            )
    return items


def render(result: dict[str, Any], out: TextIO = sys.stdout) -> None:
    """The section's table, as ``python bench/columns_bench.py`` prints it."""
    print(f"columns: {result['n']:,} rows x (100 B + 1 KiB), {result['db']}, "
          f"median of {result['repeat']}, suites {result['suites']}", file=out)  # fmt: skip
    print(f"{'path':<12} {'variant':<22} {'rows/s':>10} {'spread':>7} {'vs plain':>9} "
          f"{'slowdown':>9} {'vs incumbent':>13} {'client CPU us/row':>18}", file=out)  # fmt: skip
    for r in result["rows"]:
        vs_inc = f"x{r['vs_incumbent']:.2f}" if r["vs_incumbent"] is not None else "-"
        print(f"{r['path']:<12} {r['variant']:<22} {r['rows_per_s']:>10,.0f} {r['spread']:>7.0%} "
              f"{r['vs_plaintext']:>9.0%} {'x%.2f' % r['slowdown']:>9} {vs_inc:>13} "
              f"{r['client_cpu_us_per_row']:>18.1f}", file=out)  # fmt: skip
    for variant, reason in result["unavailable"].items():
        print(f"{variant}: {reason}", file=out)
    for t in targets(result):
        print(f"  {t['what']}: {t['measured']} (goal {t['goal']})", file=out)


def section(opts: argparse.Namespace) -> dict[str, Any]:
    """The columns section of ``sealstore bench`` (its tables: ``sealstore.bench.grids.columns``).
    A database that cannot be reached is a failure of this section, reported with the reason."""
    quick = getattr(opts, "quick", False)
    n = 10_000 if quick else 100_000
    try:
        result = run(
            n,
            getattr(opts, "db", None),
            repeat=3 if quick else 5,
            progress=getattr(opts, "progress", None),
        )
    except NotAvailable as exc:
        raise RuntimeError(str(exc)) from None
    result["targets"] = targets(result)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python bench/columns_bench.py", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="10,000 rows instead of 100,000")
    ap.add_argument("--rows", type=int, help="number of rows (overrides --quick)")
    ap.add_argument(
        "--db", metavar="URL", help="SQLAlchemy URL (default: SQLite in a temporary file)"
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement (median reported)")
    ap.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated subset of: " + ", ".join(VARIANTS),
    )
    ap.add_argument("--json", metavar="PATH", help="write the measurements as JSON")
    args = ap.parse_args(argv)
    n = args.rows or (10_000 if args.quick else 100_000)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = set(variants) - set(VARIANTS)
    if unknown or "plaintext" not in variants:
        ap.error(f"--variants must include plaintext and come from: {', '.join(VARIANTS)}")
    try:
        result = run(
            n, args.db, args.repeat, variants, progress=lambda s: print(s, file=sys.stderr)
        )
    except NotAvailable as exc:
        print(f"columns bench: {exc}", file=sys.stderr)
        return 2
    render(result)
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
