"""Request/response cells: round trips (blocking and busy-polled) and connection rate.

Like is compared with like. Blocking linerate rr runs against blocking
sockperf ping-pong (blocking server too), qperf tcp_lat/udp_lat and netperf
TCP_RR/UDP_RR; `linerate rr --busy-poll`, which spins on both sides, runs
against sockperf with --nonblocked on BOTH client and server (the server
then spins too). The old bench/rr.sh pointed a spinning sockperf client at
a blocking sockperf server, which made sockperf look slower and inflated
linerate's busy-poll ratios (issue 8: 0.59/0.27 where like-with-like gives
1.14 TCP / 0.90 UDP).
"""

from __future__ import annotations

from . import parse
from .cells import Cell, Ctx, Variant, anchor, engine_args, engine_label, linerate_server, per_run_server
from .tools import Linerate, Tool

SOCKPERF_MIN = 14   # sockperf's smallest message: its own header


def _lr_rr(engines: list[str], e: str | None, proto: str, size: int, busy: bool, kind: str = "rr"):
    def run(ctx: Ctx, base: str) -> dict:
        srv = linerate_server(ctx, engines, e)
        out = ctx.client([ctx.lr.path, kind, ctx.addr(), "-p", str(srv.port), "--proto", proto, "-s", str(size),
                          "-t", str(ctx.time), "--json", *(["--busy-poll"] if busy else []),
                          *engine_args(engines, e)], base)
        m = parse.linerate_rr(out)
        if kind == "crr":
            m["cps"] = m.pop("tps")
        return m
    return run


def _sockperf_pp(proto: str, size: int, nonblocked: bool):
    nb = ["--nonblocked"] if nonblocked else []
    tcp = ["--tcp"] if proto == "tcp" else []

    def run(ctx: Ctx, base: str) -> dict:
        sp = ctx.tools["sockperf"].path
        make = lambda addr, port: [sp, "server", *tcp, "-i", addr, "-p", str(port), *nb]  # noqa: E731
        body = lambda srv: ctx.client(  # noqa: E731
            [sp, "ping-pong", *tcp, "-i", ctx.addr(), "-p", str(srv.port), "-m", str(max(size, SOCKPERF_MIN)),
             "-t", str(ctx.time), "--full-rtt", *nb], base)
        if nonblocked:
            # A --nonblocked server spins at ~95% of a CPU even while no
            # client talks to it: one per run, so it never takes the CPU
            # of the variants run between sockperf's runs.
            out, _ = per_run_server(ctx, f"sockperf-{proto}-nb", make, body, base)
            return parse.sockperf_pingpong(out)
        return parse.sockperf_pingpong(body(ctx.server(f"sockperf-{proto}", make)))
    return run


def _qperf(proto: str, size: int):
    def run(ctx: Ctx, base: str) -> dict:
        qp = ctx.tools["qperf"].path
        srv = ctx.server("qperf", lambda addr, port: [qp, "--listen_port", str(port)])
        return parse.qperf_lat(ctx.client(
            [qp, ctx.addr(), "--listen_port", str(srv.port), "-m", str(size), "-t", str(ctx.time),
             f"{proto}_lat"], base))
    return run


def _netperf(test: str, size: int, crr: bool = False):
    def run(ctx: Ctx, base: str) -> dict:
        t = ctx.tools["netperf"]
        ns = t.extra["netserver"]
        srv = ctx.server("netserver", lambda addr, port: [ns, "-D", "-p", str(port), "-L", addr])
        m = parse.netperf_omni(ctx.client(
            [t.path, "-H", ctx.addr(), "-p", str(srv.port), "-t", test, "-l", str(ctx.time), "-P", "0",
             "--", "-r", f"{size},{size}", "-o", "P50_LATENCY,P99_LATENCY,TRANSACTION_RATE"], base))
        if crr:
            m["cps"] = m.pop("tps")
        return m
    return run


def rr_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    # `rr --engine` drove only the --under-load streams before the engines
    # reached rr; a variant per engine only once it drives the messages.
    engines = lr.engines("rr") if "load streams" not in lr.help("rr") else []
    engines = engines or [None]
    cells = []
    for proto in ("tcp", "udp"):
        for size in (1, 64, 1024):
            sp_note = f" (at {SOCKPERF_MIN} B: its minimum)" if size < SOCKPERF_MIN else ""
            paths = ("lo", "veth1500", "veth9000") if size == 64 else ("lo",)
            test = "TCP_RR" if proto == "tcp" else "UDP_RR"
            blocking = [Variant(f"linerate rr --proto {proto}{engine_label(engines, e)}", False,
                                _lr_rr(engines, e, proto, size, False)) for e in engines]
            blocking += [
                anchor(tools, "sockperf", f"ping-pong{sp_note}", _sockperf_pp(proto, size, False)),
                anchor(tools, "qperf", f"{proto}_lat (mean round trip, no percentiles)", _qperf(proto, size)),
                anchor(tools, "netperf", f"{test} -r {size},{size}", _netperf(test, size))]
            cells.append(Cell(
                f"rr-{proto}-{size}", f"{proto.upper()} round trips, {size}-byte messages, blocking sockets",
                "rr", ["p50_us", "p99_us", "tps"], blocking, goal="p50 and p99 ≤ 0.95× the best anchor",
                goal_metrics=["p50_us", "p99_us"], pin="split", paths=paths))
            busy = [Variant(f"linerate rr --proto {proto} --busy-poll{engine_label(engines, e)}", False,
                            _lr_rr(engines, e, proto, size, True)) for e in engines]
            busy.append(anchor(tools, "sockperf", f"ping-pong --nonblocked, server --nonblocked{sp_note}",
                                _sockperf_pp(proto, size, True)))
            p50 = "0.9" if proto == "udp" else "0.97"
            cells.append(Cell(
                f"rr-{proto}-{size}-bp", f"{proto.upper()} round trips, {size}-byte messages, both sides spinning",
                "rr", ["p50_us", "p99_us", "tps"], busy, goal=f"p50 ≤ {p50}×, p99 ≤ 0.9× sockperf --nonblocked",
                goal_metrics=["p50_us", "p99_us"], pin="split", paths=paths))
    return cells


def crr_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    engines = lr.engines("crr") if "load streams" not in lr.help("crr") else []
    engines = engines or [None]
    vs = [Variant(f"linerate crr -s 1{engine_label(engines, e)}", False, _lr_rr(engines, e, "tcp", 1, False, "crr"))
          for e in engines]
    # Both sides spinning (connect, accept and the messages): netperf has no
    # such mode, so this row is linerate's best configuration, not like for
    # like; the blocking rows above are.
    if "accept spin" in " ".join(lr.help("crr").split()):
        vs.append(Variant("linerate crr -s 1 --busy-poll (both sides spin; netperf cannot)", False,
                          _lr_rr(engines, None, "tcp", 1, True, "crr")))
    vs.append(anchor(tools, "netperf", "TCP_CRR -r 1,1", _netperf("TCP_CRR", 1, crr=True)))
    return [Cell("crr", "TCP connect, 1-byte request and response, close: connections/s", "crr",
                 ["cps", "p50_us", "p99_us"], vs, goal="≥ 1.2× netperf TCP_CRR")]
