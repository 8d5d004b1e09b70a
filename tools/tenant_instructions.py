"""The tenant path's cost against the single-tenant path, in instructions (issue 28's goal:
at most 1.10x on Core and ORM insert/select).

Wall-clock ratios on a shared 2-core machine swing by tens of percent (``sealstore bench
--only columns`` reports them, with client CPU); callgrind's instruction counts do not move
with the load and repeat exactly, so this is the figure of record.  Each case runs in its own
process under ``valgrind --tool=callgrind --collect-atstart=no``: the columns bench's two column
types (``EncryptedString(64)`` and ``EncryptedText()``, with ``tenant="context"`` for the tenant
path) on an in-memory SQLite database, a warm-up statement, then only the measured statement
counted (a tiny C helper toggles collection around it).  Needs valgrind, its headers and gcc.

    python tools/tenant_instructions.py [--rows 2000]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

OPS = ("core_insert", "core_select", "orm_insert", "orm_select")
GOAL = 1.10

TOGGLE_C = "#include <valgrind/callgrind.h>\nvoid cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"

CASE = r"""
import ctypes, sys
from sqlalchemy import Column, Integer, create_engine, insert, select
from sqlalchemy.orm import DeclarativeBase, Session
from sealstore import Keyring, tenants, use_keyring
from sealstore.adapters.sqlalchemy import EncryptedString, EncryptedText

toggle = ctypes.CDLL(sys.argv[1]).cg_toggle
mode, op, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
use_keyring(Keyring.generate())
tenants.use_tenant_keys(tenants.TenantKeys()).register("t1", Keyring.generate(), Keyring.generate())
kw = {"tenant": "context"} if mode == "tenant" else {}

class Base(DeclarativeBase):
    pass

class Row(Base):
    __tablename__ = "t"
    id = Column(Integer, primary_key=True)
    small = Column(EncryptedString(64, **kw))
    large = Column(EncryptedText(**kw))

engine = create_engine("sqlite://")
Base.metadata.create_all(engine)
t = Row.__table__
rows = [{"id": i, "small": f"user{i:06d}@example.com", "large": "x" * 900 + str(i)}
        for i in range(n + 10)]
with tenants.tenant("t1"):
    if op.endswith("select"):
        with engine.begin() as conn:
            conn.execute(insert(t), rows)
        with engine.connect() as conn:  # warm: statement caches, the tenant's keyrings
            conn.execute(select(t).where(t.c.id < 5)).all()
        with Session(engine) as s:
            s.scalars(select(Row).where(Row.id < 5)).all()
        toggle()
        if op == "core_select":
            with engine.connect() as conn:
                got = conn.execute(select(t).where(t.c.id < n)).all()
        else:
            with Session(engine) as s:
                got = s.scalars(select(Row).where(Row.id < n)).all()
        toggle()
        assert len(got) == n
    else:
        warm, measured = rows[n:n + 5], rows[:n]
        for batch, counted in ((warm, False), (measured, True)):
            if counted:
                toggle()
            if op == "core_insert":
                with engine.begin() as conn:
                    conn.execute(insert(t), batch)
            else:
                with Session(engine) as s:
                    s.add_all([Row(**r) for r in batch])
                    s.commit()
            if counted:
                toggle()
"""


def instructions(lib: str, script: str, mode: str, op: str, rows: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--callgrind-out-file=/dev/null",
         sys.executable, script, lib, mode, op, str(rows)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    m = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode or not m:
        raise SystemExit(
            f"{mode} {op}: callgrind failed (exit {proc.returncode})\n{proc.stderr[-2000:]}"
        )
    return int(m.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, lib, script = (os.path.join(tmp, n) for n in ("t.c", "libtoggle.so", "case.py"))
        with open(src, "w") as f:
            f.write(TOGGLE_C)
        with open(script, "w") as f:
            f.write(CASE)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
        print(f"| path | single-tenant Ir/row | tenant Ir/row | tenant / single (goal <= {GOAL}) |")
        print("| --- | --- | --- | --- |")
        worst = 0.0
        for op in OPS:
            one, ten = (instructions(lib, script, m, op, args.rows) for m in ("single", "tenant"))
            worst = max(worst, ten / one)
            print(f"| {op} | {one / args.rows:,.0f} | {ten / args.rows:,.0f} | {ten / one:.3f} |")
    print(f"worst ratio {worst:.3f}: goal {'reached' if worst <= GOAL else 'MISSED'}")
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
