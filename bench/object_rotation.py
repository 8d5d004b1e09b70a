"""Object rotation throughput: objects/s of ``sealstore rotate --objects`` with 1, 2 and 4
worker processes sharing one job through the database, on an object server, at a chosen
network latency.

    python bench/rotate_bench.py --objects [--store s3|gs] [--server moto|localstack|gcs]
        [--endpoint URL [--server-pid PID]] [--db URL] [--objects-count N] [--size BYTES]
        [--batch-size N] [--workers 1,2,4] [--runs 3] [--latency 0,10,30] [--json PATH]

``--objects-count`` objects (default 120) of ``--size`` random bytes (default 4096) are sealed
under a prefix of a new bucket (versioned on S3); then, for each run, the keyring is rotated
(``sealstore keys rotate``), sealstore's job tables are emptied and N processes of the real
command, ``python -m sealstore rotate --objects URL --db URL --endpoint-url URL --json``,
are started together and share the job.  Each run is verified: every object opens under the
new primary key, the workers' ``resealed`` add up to the object count with no conflict,
failure or object found ``current`` (an object done twice would be found current by its
second worker), the job's batches are all done, and on S3 every object has exactly one new
version per run.  A run that fails its check stops the bench (exit 1).

Reported per worker count and latency: objects/s over the job's time (the job row's
``started_at`` to ``finished_at``: from the first worker's start to the job's end, the late
workers' start-up included) as the median of ``--runs``, the processes' wall time, and the CPU
used meanwhile by the object server, the database server, the workers and the rest of the
machine (``/proc``; seconds of CPU per second of wall time, 1.0 = one core busy).

``--latency D[,D...]`` (milliseconds, default ``0``) puts a TCP proxy in front of the server
(asyncio, in this process) that delivers every chunk of bytes D ms after it arrived, in each
direction: a request and its answer each wait D ms, as on the way to a real cloud region, so
the workers wait on the network rather than on the local server's CPU (the production case).
``--server`` starts the object server (moto: ``python -m moto.server``; LocalStack: the test
suite's runtime, installed by ``tools/localstack.sh``; ``gcs``: ``gcp-storage-emulator``);
``--endpoint`` uses a running one instead (``--server-pid`` to count its CPU).  The database
is a throwaway PostgreSQL (as ``rotate_bench.py`` starts it) unless ``--db`` is given; SQLite
runs one worker at a time, so it is refused here.  The exit status is 0 when every run ran and
passed its check: scaling is reported, never asserted (the machine's 2 cores are shared).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

#: where the objects are, in their bucket
PREFIX: str = "data/"
#: the object servers ``--server`` starts, and the scheme of their store
SERVERS: dict[str, str] = {"moto": "s3", "localstack": "s3", "gcs": "gs"}


# ---- a latency-injecting TCP proxy ----------------------------------------------------------


class LatencyProxy:
    """A TCP proxy on 127.0.0.1 that forwards to ``upstream`` (host, port), each chunk of bytes
    delivered ``delay`` seconds after it arrived, in both directions (one-way latency, order
    kept, no bandwidth limit).  Runs its own event loop in a thread; ``url`` once started."""

    def __init__(self, upstream: tuple[str, int], delay: float) -> None:
        self.upstream: tuple[str, int] = upstream
        self.delay: float = delay
        self.connections: int = 0  #: connections accepted so far
        self.port: int = 0  #: where it listens, once started
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LatencyProxy:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        fut.result(30)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                wait = due - self._loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(65536)
                queue.put_nowait((self._loop.time() + self.delay, data))
                if not data:
                    break
            await sender  # the other direction may go on after this one's end (half-close)
        except (ConnectionError, OSError):
            sender.cancel()
            raise

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except (ConnectionError, OSError):
            pass  # one side went away: both are closed below
        finally:
            writer.close()
            up_writer.close()

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


# ---- CPU accounting from /proc ----------------------------------------------------------------


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its descendants (the live ones,
    and those that ended and were waited for: a server's finished connections)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid = int(fields[1])
        children.setdefault(ppid, []).append(int(entry))
        # user + system, and that of its children it has waited for (ended connections)
        stats[int(entry)] = sum(int(v) for v in fields[11:15]) / _ticks()
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, 0.0)
        todo.extend(children.get(p, []))
    return total


def machine_busy() -> float:
    """CPU seconds all processors have spent busy (not idle, not waiting) since boot."""
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / _ticks()


# ---- servers ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            pass
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            raise RuntimeError(f"the server at {url} did not start")
        time.sleep(0.2)


@contextmanager
def start_server(kind: str) -> Iterator[tuple[str, int]]:
    """Start an object server of ``kind`` (``SERVERS``); yields (url, pid)."""
    tests = Path(__file__).resolve().parents[1] / "tests"
    root = Path(tempfile.mkdtemp(prefix="sealstore-bench-server-"))
    log = open(root / "server.log", "w+b")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if kind == "moto":
        cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        env = dict(os.environ)
    elif kind == "gcs":
        cmd = [sys.executable, "-m", "gcp_storage_emulator", "-d", str(root / "data"), "start",
               "--host", "127.0.0.1", "--port", str(port), "-q"]  # fmt: skip
        env = dict(os.environ)
    elif kind == "localstack":
        sys.path.insert(0, str(tests))
        try:
            from fixtures_s3 import LOCALSTACK_PY, localstack_env  # type: ignore[import-not-found]
        finally:
            sys.path.pop(0)
        python = os.environ.get("SEALSTORE_LOCALSTACK_PY", LOCALSTACK_PY)
        cmd = [python, "-m", "localstack.runtime.main"]
        env = localstack_env(port, str(root))
    else:
        raise ValueError(f"unknown server {kind!r}")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        probe = f"{url}/_localstack/health" if kind == "localstack" else url + "/"
        _wait_http(probe, proc, 120)
        if kind == "localstack":
            _wait_localstack(url, proc)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _wait_localstack(url: str, proc: subprocess.Popen[bytes]) -> None:
    import urllib.request

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/_localstack/health", timeout=2) as resp:
                if json.load(resp).get("services", {}).get("s3") in ("available", "running"):
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise RuntimeError("LocalStack did not report S3 up")


# ---- the objects and one run ------------------------------------------------------------------


@dataclass
class World:
    """The config, environment and bucket of a bench; ``store`` reaches the server directly."""

    scheme: str
    endpoint: str
    db: str
    config: Path
    env: dict[str, str]
    bucket: str
    count: int
    store: Any = None
    runs_done: int = 0
    keys: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.bucket}/{PREFIX}"


def _cli(world: World, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "sealstore", "-c", str(world.config), *args],
                   env=world.env, check=True, stdout=subprocess.DEVNULL)  # fmt: skip


def _raw_store(scheme: str, endpoint: str) -> Any:
    if scheme == "s3":
        import boto3
        from botocore.config import Config
        from sealstore.adapters.s3.store import S3Store

        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              config=Config(s3={"addressing_style": "path"}))  # fmt: skip
        return S3Store(client)
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    from sealstore.adapters.gcs.store import GCSStore

    client = storage.Client(project="sealstore-bench", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": endpoint})  # fmt: skip
    return GCSStore(client)


def make_world(scheme: str, endpoint: str, db: str, directory: Path, count: int,
               size: int) -> World:  # fmt: skip
    """A key file config, a new bucket of ``count`` sealed objects of ``size`` random bytes."""
    from sealstore.adapters.objects.engine import ObjectSealing
    from sealstore.config import load_config

    config = directory / "sealstore.toml"
    config.write_text(f'[key_source]\ntype = "file"\npath = "{directory / "keys.json"}"\n')
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SEALSTORE_") or k == "SEALSTORE_KERNEL"}  # fmt: skip
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1", GOOGLE_CLOUD_PROJECT="sealstore-bench")  # fmt: skip
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
    world = World(scheme, endpoint, db, config, env, f"rot-{uuid.uuid4().hex[:16]}", count)
    _cli(world, "keys", "init")
    world.store = store = _raw_store(scheme, endpoint)
    if scheme == "s3":
        store.client.create_bucket(Bucket=world.bucket)
        store.client.put_bucket_versioning(
            Bucket=world.bucket, VersioningConfiguration={"Status": "Enabled"}
        )
    else:
        store.client.create_bucket(world.bucket)
    keyring = load_config(str(config)).load_keyring()
    sealing = ObjectSealing(keyring, bind_location=True)
    world.keys = [f"{PREFIX}{i:05d}" for i in range(count)]
    for key in world.keys:
        sealing.seal(store, world.bucket, key, os.urandom(size))
    keyring.close()
    return world


def _reset_jobs(db: str) -> None:
    import sqlalchemy as sa
    from sealstore.migrations import create_tables, drop_tables

    engine = sa.create_engine(db)
    try:
        drop_tables(engine)
        create_tables(engine)
    finally:
        engine.dispose()


def _job_seconds(db: str) -> tuple[float, int, list[str]]:
    """(job seconds, its batches, the worker of each batch) of the one job in the tables."""
    import sqlalchemy as sa
    from sealstore.migrations.schema import sealstore_job_batches as b
    from sealstore.migrations.schema import sealstore_jobs as j

    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            job = conn.execute(sa.select(j)).one()
            rows = conn.execute(sa.select(b.c.state, b.c.worker)).all()
    finally:
        engine.dispose()
    if job.status != "done" or job.finished_at is None or {r.state for r in rows} != {"done"}:
        raise RuntimeError(f"the job is {job.status}, batches {sorted({r.state for r in rows})}")
    return (job.finished_at - job.started_at).total_seconds(), len(rows), [r.worker for r in rows]


def verify(world: World, docs: Sequence[dict[str, Any]]) -> list[str]:
    """What is wrong after a run (empty: every object rotated exactly once, none missed)."""
    from sealstore.adapters.objects.engine import ObjectSealing
    from sealstore.config import load_config

    problems = []
    resealed = sum(d["resealed"] for d in docs)
    if resealed != world.count:
        problems.append(f"{resealed} objects re-sealed in all, {world.count} expected")
    for what in ("current", "not_sealed"):
        if sum(d[what] for d in docs):
            problems.append(f"{sum(d[what] for d in docs)} objects found {what}")
    for what in ("conflicts", "failures"):
        if any(d[what] for d in docs):
            problems.append(f"{what}: {[d[what] for d in docs]}")
    if not any(d["complete"] for d in docs):
        problems.append("no worker saw the job complete")
    keyring = load_config(str(world.config)).load_keyring()
    sealing = ObjectSealing(keyring, bind_location=True)
    primary = keyring.primary.key_id
    listed = [o.key for o in world.store.list(world.bucket, PREFIX)]
    if listed != world.keys:
        problems.append(f"{len(listed)} objects listed, {world.count} expected")
    stale = 0
    for key in world.keys:
        found = sealing.header(world.store, world.store.head(world.bucket, key))
        if found is None or found[0].key_id != primary:
            stale += 1
    if stale:
        problems.append(f"{stale} objects not under the new primary key")
    if world.scheme == "s3":  # versioned: one new version per object per run
        versions: dict[str, int] = {}
        for v in world.store.versions(world.bucket, PREFIX):
            versions[v.key] = versions.get(v.key, 0) + 1
        wrong = {k: n for k, n in versions.items() if n != world.runs_done + 1}
        if wrong or len(versions) != world.count:
            problems.append(f"{len(wrong)} objects without exactly {world.runs_done + 1} "
                            f"versions (e.g. {sorted(wrong.items())[:3]})")  # fmt: skip
    keyring.close()
    return problems


@dataclass
class RunResult:
    workers: int
    latency_ms: float
    objects_per_s: float
    job_seconds: float
    wall_seconds: float
    batches: int
    batches_per_worker: list[int]
    cpu: dict[str, float]  #: CPU seconds per wall second: server, database, workers, other


def one_run(world: World, endpoint: str, workers: int, batch_size: int, latency_ms: float,
            server_pid: int | None, db_pid: int | None) -> RunResult:  # fmt: skip
    """Rotate the keyring, then ``workers`` processes of the command share the job; checked."""
    _cli(world, "keys", "rotate")
    _reset_jobs(world.db)
    env = dict(world.env)
    if world.scheme == "gs":
        env["STORAGE_EMULATOR_HOST"] = endpoint
    cmd = [sys.executable, "-m", "sealstore", "-c", str(world.config), "rotate", "--objects",
           world.url, "--db", world.db, "--endpoint-url", endpoint,
           "--objects-batch-size", str(batch_size), "--json"]  # fmt: skip

    def trees() -> tuple[float, float]:  # the server's and the database's CPU seconds
        return (tree_cpu(server_pid) if server_pid else 0.0, tree_cpu(db_pid) if db_pid else 0.0)

    before = (*trees(), _own_cpu(), machine_busy(), _children_cpu())
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(workers)]  # fmt: skip
    outs = [p.communicate(timeout=3600) for p in procs]
    wall = time.perf_counter() - t0
    after = (*trees(), _own_cpu(), machine_busy(), _children_cpu())
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"a worker exited {p.returncode}: {err.decode()[-2000:]}")
    docs = [json.loads(out)["objects"][0] for out, _ in outs]
    world.runs_done += 1
    problems = verify(world, docs)
    if problems:
        raise RuntimeError("run check failed: " + "; ".join(problems))
    seconds, batches, owners = _job_seconds(world.db)
    server = after[0] - before[0]
    database = after[1] - before[1]
    mine = after[2] - before[2]  # this process: the latency proxy
    spent = after[4] - before[4]  # the workers, waited for
    busy = after[3] - before[3]
    other = busy - server - database - mine - spent
    cpu = {
        "server": server / wall,
        "database": database / wall,
        "workers": spent / wall,
        "proxy": mine / wall,
        "other": max(other, 0.0) / wall,
        "machine": busy / wall,
    }
    return RunResult(workers, latency_ms, world.count / seconds, seconds, wall, batches,
                     sorted((owners.count(w) for w in set(owners)), reverse=True), cpu)  # fmt: skip


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _own_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---- the bench --------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rotate_bench.py --objects",
                                description=__doc__.splitlines()[0])  # fmt: skip
    p.add_argument("--objects", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--store", choices=("s3", "gs"), help="the store (default: the server's)")
    p.add_argument("--server", choices=sorted(SERVERS), default="moto",
                   help="the object server to start (default moto)")  # fmt: skip
    p.add_argument("--endpoint", metavar="URL", help="a running server instead of --server")
    p.add_argument("--server-pid", type=int, help="--endpoint: its process, to count its CPU")
    p.add_argument("--db", metavar="URL", help="database URL (default: a temporary PostgreSQL)")
    p.add_argument("--objects-count", type=int, default=120, metavar="N",
                   help="objects under the prefix (default 120)")  # fmt: skip
    p.add_argument("--size", type=int, default=4096, help="plaintext bytes per object (4096)")
    p.add_argument("--batch-size", type=int, default=5, help="objects per batch (default 5)")
    p.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    p.add_argument("--runs", type=int, default=3, help="runs per setting; the median counts")
    p.add_argument("--latency", default="0", metavar="MS[,MS...]",
                   help="added one-way latency per direction, ms (default 0: no proxy)")  # fmt: skip
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p


def _counts(text: str, what: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"{what}: a comma-separated list of numbers") from None
    if not values or min(values) < 0:
        raise SystemExit(f"{what}: at least one value, none negative")
    return values


def summarize(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """One row per (latency, workers): the medians of its runs."""
    rows = []
    for key in sorted({(r.latency_ms, r.workers) for r in results}):
        runs = [r for r in results if (r.latency_ms, r.workers) == key]
        rates = [r.objects_per_s for r in runs]
        mid = sorted(runs, key=lambda r: r.objects_per_s)[len(runs) // 2]
        rows.append({
            "latency_ms": key[0], "workers": key[1],
            "objects_per_s": statistics.median(rates), "runs": rates,
            "job_seconds": statistics.median(r.job_seconds for r in runs),
            "wall_seconds": statistics.median(r.wall_seconds for r in runs),
            "batches_per_worker": mid.batches_per_worker,
            **{f"{what}_cpu": statistics.median(r.cpu[what] for r in runs)
               for what in ("server", "database", "workers", "proxy", "other", "machine")},
        })  # fmt: skip
    return rows


def table(rows: Sequence[dict[str, Any]], server: str) -> str:
    lines = ["| server | latency | workers | objects/s (median) | runs | job s | wall s | "
             "batches per worker | CPU: server | db | workers | proxy | other |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        base = [x for x in rows if x["latency_ms"] == r["latency_ms"] and x["workers"] == 1]
        ratio = f" (x{r['objects_per_s'] / base[0]['objects_per_s']:.2f})" if base else ""
        lines.append(
            f"| {server} | {r['latency_ms']:g} ms | {r['workers']} | "
            f"{r['objects_per_s']:.1f}{ratio} | "
            f"{' / '.join(f'{v:.1f}' for v in r['runs'])} | {r['job_seconds']:.1f} | "
            f"{r['wall_seconds']:.1f} | {'/'.join(map(str, r['batches_per_worker']))} | "
            f"{r['server_cpu']:.2f} | {r['database_cpu']:.2f} | {r['workers_cpu']:.2f} | "
            f"{r['proxy_cpu']:.2f} | {r['other_cpu']:.2f} |"
        )
    return "\n".join(lines)


def _database(args: argparse.Namespace, stack: ExitStack) -> tuple[str, int | None]:
    if args.db:
        if args.db.startswith("sqlite"):
            raise SystemExit("--db: SQLite runs one worker at a time; use PostgreSQL or MySQL")
        return args.db, None
    from sealstore.bench.pg_server import start_postgres

    server, url = start_postgres()
    if url is None:
        raise SystemExit("no --db and no PostgreSQL binaries: nothing to measure")
    stack.callback(server.stop)
    pid = int((server.data / "postmaster.pid").read_text().split()[0])
    return url, pid


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    workers = [int(w) for w in _counts(args.workers, "--workers")]
    latencies = _counts(args.latency, "--latency")
    scheme = args.store or SERVERS[args.server]
    if args.endpoint is None and SERVERS[args.server] != scheme:
        raise SystemExit(f"--store {scheme} on --server {args.server}: not that kind of store")
    name = args.endpoint or args.server
    results: list[RunResult] = []
    with ExitStack() as stack:
        db, db_pid = _database(args, stack)
        if args.endpoint:
            endpoint, server_pid = args.endpoint.rstrip("/"), args.server_pid
        else:
            endpoint, server_pid = stack.enter_context(start_server(args.server))
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        world = make_world(scheme, endpoint, db, directory, args.objects_count, args.size)
        print(f"{name} ({scheme}): {args.objects_count} objects of {args.size} bytes, "
              f"batches of {args.batch_size}, {args.runs} runs per setting, database "
              f"{db.split(':')[0]}", flush=True)  # fmt: skip
        for latency in latencies:
            proxy = None
            target = endpoint
            if latency:
                host, port = endpoint.split("//", 1)[1].split(":")
                proxy = LatencyProxy((host, int(port)), latency / 1000).start()
                target = proxy.url
            try:
                for run in range(args.runs):  # interleaved: a slow spell hits every count
                    for n in workers:
                        r = one_run(world, target, n, args.batch_size, latency, server_pid,
                                    db_pid)  # fmt: skip
                        results.append(r)
                        print(f"  {latency:g} ms, {n} workers, run {run + 1}: "
                              f"{r.objects_per_s:.1f} objects/s ({r.job_seconds:.1f} s, "
                              f"batches {r.batches_per_worker}, server CPU "
                              f"{r.cpu['server']:.2f}, workers {r.cpu['workers']:.2f}, other "
                              f"{r.cpu['other']:.2f}): "
                              "checked", flush=True)  # fmt: skip
            finally:
                if proxy is not None:
                    proxy.stop()
        rows = summarize(results)
        print(table(rows, name))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"server": name, "store": scheme, "objects": args.objects_count,
                           "size": args.size, "batch_size": args.batch_size,
                           "rows": rows, "runs": [r.__dict__ for r in results]}, fh, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
