"""Figures for docs/MEDIUM.md: what ``op.encrypt_column`` costs with and without the table
rewrite (``scrub``), and how long a live writer waits meanwhile.

    python tools/medium_figures.py URL [--rows 20000] [--runs 3]

For each run: a table of ``--rows`` rows (e-mail, SSN-shaped, notes), a writer thread that
updates a column that is not converted and inserts rows throughout (timing each write), then
``encrypt_column`` of ``ssn`` and ``notes`` in one Alembic-style migration; prints the
conversion's rows/s and the writer's longest wait, median of the runs, and per run the writes
committed, lost (committed but not in the table afterwards) and failed, for scrub on and off.
Plaintext copies are counted by tests/migrations/test_medium.py.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

import sealstore.migrations.alembic.ops  # noqa: F401
from sealstore.adapters.sqlalchemy import EncryptedString, EncryptedText
from sealstore.keyring import Keyring, use_keyring

TABLE = "med_fig"


def setup(engine, rows: int) -> None:
    meta = sa.MetaData()
    t = sa.Table(TABLE, meta, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("ssn", sa.String(11)), sa.Column("notes", sa.Text),
                 sa.Column("hits", sa.Integer))  # fmt: skip
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {TABLE}")
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(t), [{"id": i, "ssn": f"{i % 900 + 100:03d}-{i % 97:02d}-{i % 9999:04d}",
                                     "notes": f"allergic to penicillin; patient {i:06d}", "hits": 0}
                                    for i in range(rows)])  # fmt: skip


def writer(engine, rows: int, stop: threading.Event, waits: list, done: dict) -> None:
    """Updates and inserts until ``stop``; ``done`` counts the committed ones and the errors."""
    n = 0
    while not stop.is_set():
        n += 1
        t0 = time.perf_counter()
        try:
            with engine.begin() as conn:
                if n % 3:
                    conn.exec_driver_sql(
                        f"UPDATE {TABLE} SET hits = hits + 1 WHERE id = {(n * 7919) % rows}"
                    )
                else:
                    conn.exec_driver_sql(f"INSERT INTO {TABLE} (id, hits) VALUES ({rows + n}, 0)")
        except sa.exc.DBAPIError:
            done["errors"] += 1
        else:
            done["updates" if n % 3 else "inserts"] += 1
            waits.append(time.perf_counter() - t0)
        time.sleep(0.005)


def run(url: str, rows: int, scrub: bool) -> tuple[float, float, int, int, int]:
    """(values/s, longest write wait, writes committed, writes lost, writes failed)."""
    engine = sa.create_engine(url, connect_args={"timeout": 60} if url.startswith("sqlite") else {})
    setup(engine, rows)
    stop, waits, done = threading.Event(), [], {"updates": 0, "inserts": 0, "errors": 0}
    th = threading.Thread(target=writer, args=(engine, rows, stop, waits, done))
    th.start()
    time.sleep(0.5)
    t0 = time.perf_counter()
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"transaction_per_migration": True})
            op = Operations(ctx)
            with ctx.begin_transaction(_per_migration=True):
                op.encrypt_column(TABLE, "ssn", EncryptedString(11), scrub=scrub)
                op.encrypt_column(TABLE, "notes", EncryptedText(), scrub=scrub)
        elapsed = time.perf_counter() - t0
    finally:
        stop.set()
        th.join()
    with engine.begin() as conn:  # every committed write is in the table
        hits, count = conn.exec_driver_sql(f"SELECT sum(hits), count(*) FROM {TABLE}").one()
        conn.exec_driver_sql(f"DROP TABLE {TABLE}")
    engine.dispose()
    lost = (done["updates"] - int(hits)) + (rows + done["inserts"] - count)
    return 2 * rows / elapsed, max(waits), len(waits), lost, done["errors"]


def main() -> None:
    url = sys.argv[1]
    rows = int(sys.argv[sys.argv.index("--rows") + 1]) if "--rows" in sys.argv else 20000
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 3
    use_keyring(Keyring.generate(tag_size=32))
    out = {}
    for scrub in (True, False):
        got = [run(url, rows, scrub) for _ in range(runs)]
        out["scrub" if scrub else "no-scrub"] = {
            "values_per_s": round(statistics.median(g[0] for g in got)),
            "longest_write_wait_s": round(statistics.median(g[1] for g in got), 3),
            "writes": [g[2] for g in got],
            "writes_lost": [g[3] for g in got],
            "writes_failed": [g[4] for g in got],
            "runs": [[round(g[0]), round(g[1], 3)] for g in got],
        }
    print(json.dumps({"url": url.split("@")[-1], "rows": rows, **out}))


if __name__ == "__main__":
    main()
