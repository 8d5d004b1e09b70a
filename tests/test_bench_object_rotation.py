"""The plumbing of ``bench/rotate_bench.py --objects`` (bench/object_rotation.py): the option
reaches the object bench, the latency proxy forwards bytes both ways, the CPU counters read
/proc, the summary takes medians, and a small run of the real command on moto and PostgreSQL
passes its own check (every object rotated exactly once).  No timing is asserted."""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest
from sealstore.bench import object_rotation as orot
from sealstore.bench import rotate_bench


def test_the_objects_option_reaches_the_object_bench(monkeypatch):
    seen = []
    monkeypatch.setattr(orot, "main", lambda argv: seen.append(argv) or 0)
    assert rotate_bench.main(["--objects", "--workers", "1,2", "--latency", "0,10"]) == 0
    assert seen == [["--objects", "--workers", "1,2", "--latency", "0,10"]]


def test_parser_defaults_and_refusals():
    args = orot.parser().parse_args(["--objects"])
    assert (args.server, args.workers, args.runs, args.latency) == ("moto", "1,2,4", 3, "0")
    assert orot._counts("0, 10,30", "--latency") == [0.0, 10.0, 30.0]
    for bad in ("", "ten", "-1"):
        with pytest.raises(SystemExit):
            orot._counts(bad, "--latency")
    with pytest.raises(SystemExit, match="not that kind of store"):
        orot.main(["--objects", "--server", "gcs", "--store", "s3"])
    with pytest.raises(SystemExit, match="SQLite"):
        orot.main(["--objects", "--db", "sqlite:///x.db", "--endpoint", "http://127.0.0.1:1"])


def _echo_server() -> tuple[socket.socket, int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def test_the_latency_proxy_forwards_both_ways_in_order():
    listener, port = _echo_server()
    proxy = orot.LatencyProxy(("127.0.0.1", port), 0.005).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as conn:
            sent = b"".join(b"chunk %d;" % i for i in range(2000))
            conn.sendall(sent)
            conn.shutdown(socket.SHUT_WR)
            got = b""
            while data := conn.recv(65536):
                got += data
        assert got == sent.upper() and proxy.connections == 1
    finally:
        proxy.stop()
        listener.close()


def test_cpu_counters_read_proc():
    assert orot.tree_cpu(os.getpid()) >= 0
    assert orot.tree_cpu(1 << 30) == 0  # no such process: nothing
    first = orot.machine_busy()
    sum(range(100_000))
    assert orot.machine_busy() >= first > 0


def test_summary_takes_medians_per_setting():
    cpu = dict.fromkeys(("server", "database", "workers", "proxy", "other", "machine"), 0.5)
    runs = [
        orot.RunResult(w, lat, rate, 10.0, 12.0, 4, [4 // w] * w, cpu)
        for lat in (0, 10)
        for w, rates in ((1, (5.0, 7.0, 6.0)), (2, (11.0, 12.0, 13.0)))
        for rate in rates
    ]
    rows = orot.summarize(runs)
    assert [(r["latency_ms"], r["workers"], r["objects_per_s"]) for r in rows] == [
        (0, 1, 6.0), (0, 2, 12.0), (10, 1, 6.0), (10, 2, 12.0)]  # fmt: skip
    assert rows[1]["batches_per_worker"] == [2, 2] and rows[1]["server_cpu"] == 0.5
    text = orot.table(rows, "moto")
    assert "| moto | 10 ms | 2 | 12.0 (x2.00) | 11.0 / 12.0 / 13.0 |" in text


@pytest.mark.toolchain
def test_a_small_run_of_the_command_passes_its_check(tmp_path, pg_url, s3_endpoint, capsys):
    out = tmp_path / "r.json"
    assert orot.main(["--objects", "--endpoint", s3_endpoint, "--db", pg_url,
                      "--objects-count", "6", "--batch-size", "2", "--workers", "1,2",
                      "--runs", "1", "--latency", "0,2", "--json", str(out)]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    assert [(r["latency_ms"], r["workers"]) for r in report["rows"]] == [
        (0, 1), (0, 2), (2, 1), (2, 2)]  # fmt: skip
    assert all(sum(r["batches_per_worker"]) == 3 for r in report["rows"])
    assert capsys.readouterr().out.count(": checked") == 4


def test_a_started_server_answers_and_is_stopped(tmp_path):
    import urllib.error
    import urllib.request

    with orot.start_server("moto") as (url, pid):
        assert orot.tree_cpu(pid) >= 0
        try:
            urllib.request.urlopen(url + "/", timeout=30).close()
        except urllib.error.HTTPError:
            pass  # it answers
    with pytest.raises(OSError):
        os.kill(pid, 0)  # stopped (and waited for)
