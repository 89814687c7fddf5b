"""Host cells: server memory, and host-local transports (Unix sockets, shared memory).

RSS: a fresh server per run; VmRSS (/proc/PID/status) once idle, then the
highest value seen (sampled every 0.1 s) while a client runs one TCP stream,
then four. Per stream = (RSS with 4 streams − idle) / 4.

Local transports (issue 12): `linerate rr --transport unix|shm` and
`linerate msg --transport tcp|unix|shm`, written from the issue's command
lines; the parsers follow docs/json.md (rr: the rr report; msg: cells[]).
Round trips compare like with like: each transport's default (Unix sockets
block; shared memory spins up to 20 µs, adaptive, then sleeps on a futex),
and `--busy-poll` on both (both spin up to 50 µs) in a cell of its own.
Under "split" pinning a local rr's serving process cannot be pinned with
`taskset` (it is the client's child and inherits the client's CPU, so both
would share one): the client pins both itself, `--cpus CLIENT,SERVER`.
"""

from __future__ import annotations

import dataclasses
import json
import time

from . import parse
from .cells import Cell, Ctx, Variant, anchor, need
from .core import RunFailed, Server
from .tools import Linerate, Tool

RSS_SAMPLE_S = 0.1
MSG_SIZES = ("56", "64K", "1M", "8M")   # issue 12's sweep, thinned to one size per decade-ish


def peak_rss(ctx: Ctx, server: Server, argv: list[str], base: str, ends_with_test: bool = False) -> float:
    """Runs a client to completion, sampling the server's VmRSS; the highest value, MiB.

    `ends_with_test`: the server exits when its one test does (neper), so
    once it is gone, or exiting, the samples so far are its peak; any other
    server gone is a failed run. An exiting process has no VmRSS before it
    is a zombie: the kernel drops its memory before it closes its files,
    which takes a while with 10,000 sockets (seen: neper's tcp_rr server at
    -F 10000 still running, without VmRSS, while the client finished).
    """
    out = ctx.rawdir / f"{base}.out"
    p = ctx.procs.spawn(ctx.path.client_argv(argv, ctx.cli_pin), out)
    peak, deadline, sampling = 0.0, time.monotonic() + ctx.time + 30, True
    try:
        while p.poll() is None:
            if time.monotonic() > deadline:
                raise RunFailed("client hung")
            if sampling:
                try:
                    peak = max(peak, parse.vm_rss_mib(server.pid))
                except RunFailed:
                    if not (ends_with_test and peak):
                        raise
                    sampling = False
            time.sleep(RSS_SAMPLE_S)
    finally:
        ctx.procs.stop(p)
    if p.returncode != 0:
        raise RunFailed(f"client exit status {p.returncode}: see {out.name}")
    return peak


def _rss_commands(ctx: Ctx, tool: str):
    """(server argv maker, client argv maker) for linerate's or iperf3's server."""
    if tool == "linerate":
        def server(addr: str, port: int) -> list[str]:
            return [ctx.lr.path, "server", "-B", addr, "-p", str(port)]

        def client(port: int, n: int) -> list[str]:
            return [ctx.lr.path, "tcp", ctx.addr(), "-p", str(port), "-t", str(ctx.time), "-P", str(n), "--json"]
    else:
        i3 = ctx.tools["iperf3"].path

        def server(addr: str, port: int) -> list[str]:
            return [i3, "-s", "-B", addr, "-p", str(port)]

        def client(port: int, n: int) -> list[str]:
            return [i3, "-c", ctx.addr(), "-p", str(port), "-t", str(ctx.time), "-P", str(n), "-J"]
    return server, client


def _rss(tool: str):
    def run(ctx: Ctx, base: str) -> dict:
        make, client = _rss_commands(ctx, tool)
        srv = ctx.servers.start(f"{tool}-rss", make, ctx.srv_pin, ctx.rawdir / f"{base}.server")
        try:
            time.sleep(0.5)
            idle = parse.vm_rss_mib(srv.pid)
            p1 = peak_rss(ctx, srv, client(srv.port, 1), f"{base}-P1")
            time.sleep(0.5)
            p4 = peak_rss(ctx, srv, client(srv.port, 4), f"{base}-P4")
        finally:
            ctx.servers.stop(srv)
        return {"idle_mib": idle, "p1_mib": p1, "p4_mib": p4, "per_stream_mib": (p4 - idle) / 4}
    return run


def rss_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    return [Cell("rss", "server memory (VmRSS): idle, and at its highest with TCP -P 1 and -P 4", "rss",
                 ["idle_mib", "per_stream_mib", "p1_mib", "p4_mib"],
                 [Variant("linerate server", False, _rss("linerate")),
                  anchor(tools, "iperf3", "-s", _rss("iperf3"))],
                 goal="idle ≤ 16 MiB; per TCP stream ≤ its buffers (--len, 1 MiB) + 2 MiB",
                 goal_metrics=["idle_mib", "per_stream_mib"])]


# ---- local transports (issue 12) ---------------------------------------------------------


def _lr_local_rr(transport: str, size: int, busy: bool = False):
    def run(ctx: Ctx, base: str) -> dict:
        argv = [ctx.lr.path, "rr", "--transport", transport, "-s", str(size), "-t", str(ctx.time), "--json"]
        if busy:
            argv.append("--busy-poll")
        if ctx.cli_pin and ctx.srv_pin:
            # `taskset -c N` prefixes: the CPUs are their last words.
            argv += ["--cpus", f"{ctx.cli_pin[-1]},{ctx.srv_pin[-1]}"]
            ctx = dataclasses.replace(ctx, cli_pin=[])
        return parse.linerate_rr(ctx.client(argv, base))
    return run


def _lr_msg(transport: str, size: str, conc: int):
    """Throughput (mean across trials) of the one cell `linerate msg --json` ran (docs/json.md:
    cells[].throughput_bps.mean); for `shm`, the bulk mode's cell (direct carries ≤ 56 B)."""
    want = "shm-bulk" if transport == "shm" else transport

    def run(ctx: Ctx, base: str) -> dict:
        text = ctx.client([ctx.lr.path, "msg", "--transport", transport, "--sizes", size,
                           "--concurrency", str(conc), "--trials", "5", "--json"], base,
                          limit=ctx.time * 10 + 60)
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RunFailed(f"unreadable JSON ({exc.msg})") from None
        cells = [c for c in doc.get("cells", []) if c.get("transport") == want and not c.get("skipped")]
        bps = (cells[0].get("throughput_bps") or {}).get("mean") if cells else None
        if bps is None:
            raise RunFailed(f"no {want} cell with throughput_bps in `linerate msg --json`")
        return {"msg_gbps": bps / 1e9}
    return run


def local_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    cells = []
    rr_why = None if lr.has("rr", "--transport") else "this build's `linerate rr` has no --transport (issue 12)"
    sp_why = need(tools, "sockperf", "unix") or "bench/run does not drive sockperf's Unix-socket mode yet"
    for size in (56, 1024):
        vs = [Variant(f"linerate rr --transport unix -s {size} (reference)", True,
                      None if rr_why else _lr_local_rr("unix", size), rr_why),
              Variant(f"linerate rr --transport shm -s {size}", False,
                      None if rr_why else _lr_local_rr("shm", size), rr_why),
              Variant(f"sockperf {tools['sockperf'].version} ping-pong, Unix socket", True, None, sp_why,
                      ("sockperf",))]
        cells.append(Cell(f"local-rr-{size}", f"host-local round trips, {size}-byte messages, each transport's "
                          "default waiting", "local",
                          ["p50_us", "p99_us", "tps"], vs, goal="shm direct p50 ≤ 0.5× the Unix-socket round trip",
                          pin="split", skip=rr_why))
        if size == 56:
            vs = [Variant(f"linerate rr --transport unix -s {size} --busy-poll (reference)", True,
                          None if rr_why else _lr_local_rr("unix", size, True), rr_why),
                  Variant(f"linerate rr --transport shm -s {size} --busy-poll", False,
                          None if rr_why else _lr_local_rr("shm", size, True), rr_why)]
            cells.append(Cell(f"local-rr-{size}-busy", f"host-local round trips, {size}-byte messages, both "
                              "spinning (--busy-poll)", "local", ["p50_us", "p99_us", "tps"], vs,
                              goal="shm direct p50 ≤ 0.5× the Unix-socket round trip", pin="split", skip=rr_why))
    msg_why = None if lr.help("msg") else "this build has no `linerate msg` (issue 12)"
    for size in MSG_SIZES:
        for conc in (1, 8):
            vs = [Variant(f"linerate msg --transport {t} --sizes {size} --concurrency {conc}", t != "shm",
                          None if msg_why else _lr_msg(t, size, conc), msg_why) for t in ("unix", "tcp", "shm")]
            cells.append(Cell(f"local-msg-{size}-c{conc}",
                              f"{size}-byte messages, each acknowledged, {conc} at a time: throughput by transport",
                              "local", ["msg_gbps"], vs,
                              goal="shm bulk ≥ 2× Unix-socket throughput" if size == "8M" else "", skip=msg_why))
    return cells
