"""S3 objects benchmark: encrypted put/get against an S3 server, and the stream layer alone.

    python bench/objects_bench.py [--quick] [--s3-endpoint URL] [--json PATH]
    sealstore bench --only objects [--quick] [--s3-endpoint URL]

Part 1 (network): ``put_object``/``get_object`` of 1 MiB and 256 MiB objects (``--quick``: 1 and
16 MiB), plaintext vs AES-256-GCM vs AEGIS-128X4 through :func:`encrypt_client`, plus
``upload_fileobj``/``download_fileobj`` (parallel parts, parallel ranged GETs) for the large
size.  Default server: moto on 127.0.0.1 in this process (its own costs dominate: compare the
ratios, not the absolute numbers); ``--s3-endpoint`` for a real one (credentials from boto3's
usual settings).

Part 3 (``--tenants``, no network): objects of a tenant (tenant from a key rule, sealed under
the tenant's keyring) against untenanted ones through the engine over the in-memory store, same
run, medians: what the per-object tenant lookup costs (issue 28).  The S3 part also runs a
tenant-aware AEGIS-128X4 client (``AEGIS-128X4 tenant``).

Part 2 (no network): sealing and opening throughput of the stream layer (``SealingReader`` /
``OpeningReader`` over an in-memory object, read into a reused buffer) next to the raw kernel
(one ``encrypt_into``/``decrypt_into`` per 2 MiB message of the same data), on one thread and on
two threads (two objects at once; the GIL is released in the native calls).  Targets: stream
>= 80% of raw on one core, and close to 2x with two.  Every figure is the median of repeated
runs; the spread column is (max - min) / median.
"""

from __future__ import annotations

from collections.abc import Callable

from typing import Any

import argparse
import io
import json
import os
import statistics
import sys
import threading
import time
import uuid

MiB = 1 << 20


def _median_rate(fn, nbytes: int, repeats: int) -> tuple[float, float]:
    """(median bytes/s, spread) over ``repeats`` timed calls of ``fn``."""
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        rates.append(nbytes / (time.perf_counter() - t0))
    med = statistics.median(rates)
    return med, (max(rates) - min(rates)) / med


# ---- part 2: the stream layer without the network ---------------------------------------------


class _StreamWork:
    """Two objects of ``size`` random bytes, sealed by the stream layer and by the raw kernel in
    2 MiB messages, and the four timed operations on object ``i`` (0 or 1)."""

    def __init__(self, size: int) -> None:
        import sealstore
        from sealstore import stream as S
        from sealstore.keyring import Keyring
        from sealstore.stream.sources import _batch_segments

        keyring = Keyring.generate("AEGIS-128X4", 32)
        self.size = size
        self.data = [os.urandom(size), os.urandom(size)]
        self.seg = S.DEFAULT_SEGMENT_SIZE
        self.sealing_reader, self.opening_reader = S.SealingReader, S.OpeningReader
        self.batch = _batch_segments(self.seg) * self.seg
        self.ciphers = [S.ObjectCipher.create(keyring) for _ in self.data]
        self.sealed = [b"".join(S.seal_stream(d, keyring)) for d in self.data]
        self.openers = [S.ObjectCipher.from_header(keyring, s) for s in self.sealed]
        self.raw = sealstore.AEGIS128X4(os.urandom(16), tag_size=32)
        self.nonce = bytes(16)
        self.sealed_batch = _batch_segments(self.seg) * (self.seg + 32) + 32
        self.header_size = S.HEADER_SIZE
        batch = self.batch
        self.raw_sealed = [
            [self.raw.encrypt(self.nonce, d[off : off + batch]) for off in range(0, size, batch)]
            for d in self.data
        ]

    def raw_seal(self, i: int) -> None:
        batch, raw, nonce = self.batch, self.raw, self.nonce
        out = bytearray(batch + 32)
        view = memoryview(self.data[i])
        for off in range(0, self.size, batch):
            raw.encrypt_into(nonce, view[off : off + batch], None, out)

    def raw_open(self, i: int) -> None:
        raw, nonce = self.raw, self.nonce
        out = bytearray(self.batch)
        for message in self.raw_sealed[i]:
            raw.decrypt_into(nonce, message, None, out)

    def stream_seal(self, i: int) -> None:
        out = bytearray(self.sealed_batch)
        reader = self.sealing_reader(self.ciphers[i], self.data[i])
        while reader.readinto(out):
            pass

    def stream_open(self, i: int) -> None:
        out = bytearray(self.batch)
        reader = self.opening_reader(
            self.openers[i], memoryview(self.sealed[i])[self.header_size :]
        )
        while reader.readinto(out):
            pass


def _on_two_threads(fn):
    """A call that runs ``fn(0)`` and ``fn(1)`` at once, on two threads."""

    def run():
        threads = [threading.Thread(target=fn, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return run


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _alternating_times(raw_fn, stream_fn, repeats: int) -> dict[str, list[float]]:
    """Seconds per run of raw and stream, one and two threads.  The runs alternate, so a busy
    machine slows both alike."""
    t: dict[str, list[float]] = {key: [] for key in ("raw1", "st1", "raw2", "st2")}
    for _ in range(repeats):
        t["raw1"].append(_timed(lambda: raw_fn(0)))
        t["st1"].append(_timed(lambda: stream_fn(0)))
        t["raw2"].append(_timed(_on_two_threads(raw_fn)))
        t["st2"].append(_timed(_on_two_threads(stream_fn)))
    return t


def _op_rows(op: str, t: dict[str, list[float]], size: int, kernel: str) -> list[dict[str, Any]]:
    """The raw kernel's and the stream layer's rows for one operation: median rates, and the
    median of the paired ratios (the stream row's ``vs_raw_*``)."""
    rows = []
    for name, one, both in (
        ("raw kernel", "raw1", "raw2"),
        ("stream layer", "st1", "st2"),
    ):
        r1 = [size / x for x in t[one]]
        r2 = [2 * size / x for x in t[both]]
        m1, m2 = statistics.median(r1), statistics.median(r2)
        rows.append(
            {
                "op": op,
                "path": name,
                "kernel": kernel,
                "gb_per_s_1t": m1 / 1e9,
                "best_1t": max(r1) / 1e9,
                "spread_1t": (max(r1) - min(r1)) / m1,
                "gb_per_s_2t": m2 / 1e9,
                "scaling_2t": statistics.median(a / b for a, b in zip(t[one], t[both])) * 2,
            }
        )
    rows[-1]["vs_raw_1t"] = statistics.median(a / b for a, b in zip(t["raw1"], t["st1"]))
    rows[-1]["vs_raw_2t"] = statistics.median(a / b for a, b in zip(t["raw2"], t["st2"]))
    return rows


def stream_rows(
    size: int, repeats: int, progress: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Sealing and opening rates of the stream layer next to the raw kernel's (part 2)."""
    work = _StreamWork(size)
    rows = []
    for op, raw_fn, stream_fn in (
        ("seal", work.raw_seal, work.stream_seal),
        ("open", work.raw_open, work.stream_open),
    ):
        times = _alternating_times(raw_fn, stream_fn, repeats)
        rows += _op_rows(op, times, size, work.raw.kernel)
        if progress:
            progress(f"stream layer {op}")
    return rows


# ---- part 3: a tenant's objects vs untenanted ones, the engine over an in-memory store --------


def tenant_engine_rows(
    sizes: tuple[int, ...] = (4096,), count: int = 200, repeats: int = 9
) -> list[dict[str, Any]]:
    """Seal and open ``count`` objects of each size through :class:`ObjectSealing` over the
    in-memory store, without and with a tenancy (the tenant from a key rule: the per-object
    tenant lookup), alternating the two in each repeat; medians of objects/s and their ratio
    (no network, so the lookup's cost is not hidden by a server's)."""
    from sealstore import tenants
    from sealstore.adapters.objects import MemoryStore, ObjectSealing
    from sealstore.adapters.objects.tenancy import ObjectTenancy
    from sealstore.keyring import Keyring

    keys = tenants.use_tenant_keys(tenants.TenantKeys())
    keys.register(
        BENCH_TENANT, Keyring.generate("AEGIS-128X4", 32), Keyring.generate("AEGIS-128X4", 32)
    )
    own = Keyring.generate("AEGIS-128X4", 32)
    engines = {
        "single": ObjectSealing(own),
        "tenant": ObjectSealing(own, tenancy=ObjectTenancy(prefix="tenants/{tenant}/")),
    }
    rows = []
    try:
        for size in sizes:
            data = os.urandom(size)
            store = MemoryStore()
            store.create_bucket("b")
            keys_ = [f"tenants/{BENCH_TENANT}/{i}" for i in range(count)]
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(repeats):
                for name, eng in engines.items():
                    t0 = time.perf_counter()
                    for k in keys_:
                        eng.seal(store, "b", k, data)
                    t1 = time.perf_counter()
                    for k in keys_:
                        eng.open(store, "b", k).read()
                    t2 = time.perf_counter()
                    times.setdefault((name, "seal"), []).append(t1 - t0)
                    times.setdefault((name, "open"), []).append(t2 - t1)
            for op in ("seal", "open"):
                single = statistics.median(times[("single", op)])
                tenant = statistics.median(times[("tenant", op)])
                rows.append({"size": size, "op": op, "objects": count,
                             "single_per_s": count / single, "tenant_per_s": count / tenant,
                             "tenant_time_ratio": tenant / single})  # fmt: skip
    finally:
        tenants.use_tenant_keys(tenants.TenantKeys())
    return rows


# ---- part 1: against an S3 server --------------------------------------------------------------


def _client(endpoint: str | None):
    import boto3
    from botocore.config import Config

    kwargs = {}
    if endpoint is None or "127.0.0.1" in endpoint or "localhost" in endpoint:
        kwargs = dict(
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        config=Config(s3={"addressing_style": "path"}),
        **kwargs,
    )


def _start_moto():
    """(a ThreadedMotoServer on a free port of 127.0.0.1, its URL); Unavailable without moto."""
    import logging
    import socket

    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        from .run import Unavailable

        raise Unavailable(
            "the in-process S3 server needs moto[server]: pip install 'sealstore[bench]' "
            "(or point --s3-endpoint at an S3-compatible server)"
        ) from None

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


#: the tenant-aware variant: AEGIS-128X4 under the tenant's own keyring, bound to the tenant
TENANT = "AEGIS-128X4 tenant"
BENCH_TENANT = "bench_tenant"


def _suite_clients(endpoint: str | None, plain) -> dict[str, Any]:
    """suite -> client: ``plain`` itself, encrypting clients for AES-256-GCM and AEGIS-128X4,
    and a tenant-aware AEGIS-128X4 client (issue 28: objects of a tenant, same run)."""
    from sealstore import tenants
    from sealstore.adapters.s3 import encrypt_client
    from sealstore.keyring import Keyring

    keys = tenants.use_tenant_keys(tenants.TenantKeys())
    keys.register(
        BENCH_TENANT, Keyring.generate("AEGIS-128X4", 32), Keyring.generate("AEGIS-128X4", 32)
    )
    own = Keyring.generate("AEGIS-128X4", 32)
    return {
        "plaintext": plain,
        "AES-256-GCM": encrypt_client(_client(endpoint), Keyring.generate("AES-256-GCM", 16)),
        "AEGIS-128X4": encrypt_client(_client(endpoint), Keyring.generate("AEGIS-128X4", 32)),
        TENANT: encrypt_client(_client(endpoint), own, tenant=BENCH_TENANT),
    }


def _put_and_get(
    client, bucket: str, key: str, data: bytes, put_name: str, get_name: str, transfer
):
    """The (put, get) calls timed for one object: ``put_object``/``get_object`` (the body read
    to the end), or ``upload_fileobj``/``download_fileobj`` with ``transfer``."""

    def put():
        if put_name == "put_object":
            client.put_object(Bucket=bucket, Key=key, Body=data)
        else:
            client.upload_fileobj(io.BytesIO(data), bucket, key, Config=transfer)

    def get():
        if get_name == "get_object":
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            while body.read(MiB):
                pass
        else:
            client.download_fileobj(bucket, key, _Sink(), Config=transfer)

    return put, get


def _size_rows(
    clients: dict[str, Any], bucket: str, size: int, repeats: int, transfer, progress
) -> list[dict[str, Any]]:
    """Every operation on one ``size`` through every client, each rate also as a ratio to the
    first client's (plaintext) for the same operation."""
    data = os.urandom(size)
    reps = repeats if size <= 16 * MiB else max(2, repeats // 3)
    ops = [("put_object", "get_object")]
    if size > 8 * MiB:
        ops.append(("upload_fileobj", "download_fileobj"))
    rows = []
    for put_name, get_name in ops:
        base: dict[str, Any] = {}
        for suite, client in clients.items():
            key = f"{suite}-{size}"
            put, get = _put_and_get(client, bucket, key, data, put_name, get_name, transfer)
            for op, fn in ((put_name, put), (get_name, get)):
                rate, spread = _median_rate(fn, size, reps)
                base.setdefault(op, rate)
                rows.append(
                    {
                        "size_mib": size / MiB,
                        "op": op,
                        "suite": suite,
                        "mb_per_s": rate / 1e6,
                        "spread": spread,
                        "vs_plaintext": rate / base[op],
                    }
                )
                if progress:
                    progress(f"S3 {size // MiB} MiB {op} {suite}")
    return rows


def _delete_bucket(client, bucket: str) -> None:
    for obj in client.list_objects_v2(Bucket=bucket).get("Contents", []):
        client.delete_object(Bucket=bucket, Key=obj["Key"])
    client.delete_bucket(Bucket=bucket)


def s3_rows(
    endpoint: str | None,
    sizes: list[int],
    repeats: int,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Put/get rates through plaintext and encrypting clients, and where they ran (part 1)."""
    from boto3.s3.transfer import TransferConfig

    server = None
    if endpoint is None:
        server, endpoint = _start_moto()
        where = "moto (in-process, HTTP on 127.0.0.1)"
    else:
        where = endpoint
    rows = []
    try:
        plain = _client(endpoint)
        bucket = f"sealstore-bench-{uuid.uuid4().hex[:12]}"
        plain.create_bucket(Bucket=bucket)
        clients = _suite_clients(endpoint, plain)
        transfer = TransferConfig(
            multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB, max_concurrency=4
        )
        for size in sizes:
            rows += _size_rows(clients, bucket, size, repeats, transfer, progress)
        _delete_bucket(plain, bucket)
    finally:
        from sealstore import tenants

        tenants.use_tenant_keys(tenants.TenantKeys())  # the bench tenant's keyrings closed
        if server is not None:
            server.stop()
    return rows, where


def tenant_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tenant-aware client's median rate over the untenanted AEGIS-128X4 client's, per
    object size and operation (same run)."""
    base = {(r["size_mib"], r["op"]): r["mb_per_s"] for r in rows if r["suite"] == "AEGIS-128X4"}
    return [
        {"size_mib": r["size_mib"], "op": r["op"], "tenant_vs_single": r["mb_per_s"] / b}
        for r in rows
        if r["suite"] == TENANT and (b := base.get((r["size_mib"], r["op"])))
    ]


class _Sink(io.RawIOBase):
    """A seekable, writable file that keeps nothing (download_fileobj target)."""

    def __init__(self):
        self._pos = 0

    def writable(self):
        return True

    def seekable(self):
        return True

    def write(self, b):
        n = memoryview(b).nbytes
        self._pos += n
        return n

    def seek(self, pos, whence=0):
        self._pos = pos
        return pos

    def tell(self):
        return self._pos


# ---- entry points ------------------------------------------------------------------------------


def run(
    quick: bool = False,
    endpoint: str | None = None,
    network: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    sizes = [MiB, 16 * MiB] if quick else [MiB, 256 * MiB]
    stream = stream_rows(32 * MiB if quick else 128 * MiB, 5 if quick else 9, progress)
    result: dict[str, Any] = {"stream": stream, "s3": [], "s3_endpoint": None}
    if network:
        result["s3"], result["s3_endpoint"] = s3_rows(endpoint, sizes, 3 if quick else 7, progress)
    return result


def section(opts: argparse.Namespace) -> dict[str, Any]:
    """The objects section of ``sealstore bench`` (its tables: ``sealstore.bench.grids.objects``)."""
    result = run(
        getattr(opts, "quick", False),
        getattr(opts, "s3_endpoint", None),
        progress=getattr(opts, "progress", None),
    )
    return {
        "rows": result,
        "notes": [
            "stream layer: SealingReader/OpeningReader with the default 256 KiB segments, "
            "2 MiB per native call; raw kernel: AEGIS-128X4 encrypt_into/decrypt_into of 2 MiB messages",
            "in-process moto dominates the network figures; compare suites by their ratio to plaintext",
        ],
    }


def _print(result: dict[str, Any]) -> None:
    print("stream layer alone vs raw kernel (GB/s, medians)")
    for r in result["stream"]:
        extra = ""
        if "vs_raw_1t" in r:
            extra = f"  vs raw: {r['vs_raw_1t']:.0%} (1t) {r['vs_raw_2t']:.0%} (2t)"
        print(
            f"  {r['op']:<5} {r['path']:<13} 1t {r['gb_per_s_1t']:6.2f} (best {r['best_1t']:.2f}, ±{r['spread_1t']:.0%})"
            f"  2t {r['gb_per_s_2t']:6.2f}  x{r['scaling_2t']:.2f}{extra}"
        )
    if result["s3"]:
        print(f"S3 through {result['s3_endpoint']} (MB/s, medians)")
        for r in result["s3"]:
            print(
                f"  {r['size_mib']:>5.0f} MiB {r['op']:<17} {r['suite']:<12} {r['mb_per_s']:8.1f}"
                f" (±{r['spread']:.0%})  x{r['vs_plaintext']:.2f} of plaintext"
            )
        for r in tenant_ratios(result["s3"]):
            print(
                f"  {r['size_mib']:>5.0f} MiB {r['op']:<17} tenant / single-tenant AEGIS-128X4:"
                f" x{r['tenant_vs_single']:.2f}"
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    p.add_argument(
        "--s3-endpoint",
        metavar="URL",
        help="a real S3-compatible endpoint (default: moto)",
    )
    p.add_argument("--no-network", action="store_true", help="only the stream layer part")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument(
        "--tenants", action="store_true", help="only objects with a tenant vs without (engine)"
    )
    args = p.parse_args(argv)
    if args.tenants:
        for r in tenant_engine_rows():
            print(
                f"  {r['size']:>8} B {r['op']:<5} single {r['single_per_s']:9.0f}/s  tenant "
                f"{r['tenant_per_s']:9.0f}/s  time x{r['tenant_time_ratio']:.2f}"
            )
        return 0
    result = run(args.quick, args.s3_endpoint, network=not args.no_network)
    _print(result)
    if args.json:
        from sealstore import native

        with open(args.json, "w") as f:
            json.dump({"info": native.info(), **result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
