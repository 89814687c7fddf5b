"""Many-flows cells (issue 26): thousands of connections on two threads per side, against neper.

neper (github.com/google/neper) multiplexes F flows over T threads with
epoll on each side, the model `linerate --flows F --threads T` follows, so
it is the anchor: `tcp_stream`, `tcp_rr` and `tcp_crr` with `-T 2 -F N`.
Each run starts a fresh server of its tool (neper's serves one test and
exits; linerate's is started per run too, so both are measured alike), and
the CPU both processes spent comes from the kernel's accounting of each:
the rusage of the client and of the server as each is reaped (nothing else
is reaped while they run), divided by the work the run reported (rate ×
TIME), so setting up a thousand connections is paid by every tool alike.

Like for like: `tcp_crr` closes with SO_LINGER 0 unless --time-wait, so
linerate's crr runs with --linger0; `tcp_stream` and `linerate tcp` run
their defaults (16 KiB and 1 MiB writes). Server memory at many idle
flows has no idle neper counterpart (its rr flows cannot be paced): its
row holds the same number of flows busy, a bound on what it keeps per flow.

FLOWS (default 1000) and IDLE_FLOWS (default 10000) scale the cells down
for a smoke run; the goals hold at the defaults.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Callable

from . import parse
from .cells import Cell, Ctx, Variant, anchor, engine_args, engine_label
from .cells_host import peak_rss
from .core import Server
from .tools import Linerate, Tool

THREADS = 2
CRR_FLOWS = 64   # the 2 threads × 32 connection loops
# neper logs to a file of its own in the working directory unless told:
# its log goes with its other output into the run's raw files instead.
NEPER_LOG = ["--logtostderr"]


def _count(name: str, default: int) -> int:
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    if not v.isdigit() or int(v) < THREADS:
        raise SystemExit(f"bench/run: {name} must be a whole number ≥ {THREADS} (got {v!r})")
    return int(v)


def _children_cpu() -> float:
    """User + system CPU seconds of every child reaped so far (RUSAGE_CHILDREN)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _one_test(ctx: Ctx, key: str, make: Callable[[str, int], list[str]],
              client: Callable[[Server], list[str]], base: str) -> tuple[str, float]:
    """A fresh server, one client against it, the server stopped: (client output, CPU s of both).

    Each process's CPU is what the kernel charged it, read as it is reaped:
    the client's when its run returns, the server's when it is stopped (or
    found exited). The server's start (its port probes with `ss`) is
    outside both windows.
    """
    srv = ctx.servers.start(key, make, ctx.srv_pin, ctx.rawdir / f"{base}.server")
    cpu = 0.0
    try:
        before = _children_cpu()
        out = ctx.client(client(srv), base)
        cpu = _children_cpu() - before
    finally:
        before = _children_cpu()
        ctx.servers.stop(srv)
        cpu += _children_cpu() - before
    return out, cpu


def _per_work(m: dict, cpu: float, secs: int) -> dict:
    """Adds the CPU per unit of work the run's rate did over `secs`."""
    if "gbps" in m:
        m["cpu_s_gib"] = cpu / (m["gbps"] * 1e9 / 8 * secs / 2**30)
    elif "cps" in m:
        m["cpu_ms_kconn"] = cpu * 1e3 / (m["cps"] * secs / 1e3)
    else:
        m["cpu_ms_ktrans"] = cpu * 1e3 / (m["tps"] * secs / 1e3)
    return m


# ---- linerate -------------------------------------------------------------------------------


def _lr(kind: str, args: list[str], engines: list[str] | None = None, e: str | None = None):
    """`linerate KIND` (tcp, rr, crr) with `args` against a fresh linerate server."""
    eng = engine_args(engines or [], e)

    def run(ctx: Ctx, base: str) -> dict:
        out, cpu = _one_test(
            ctx, "linerate" + (f"-{e}" if eng else ""),
            lambda addr, port: [ctx.lr.path, "server", "-B", addr, "-p", str(port), *eng],
            lambda srv: [ctx.lr.path, kind, ctx.addr(), "-p", str(srv.port), "-t", str(ctx.time), "--json",
                         *eng, *args], base)
        if kind == "tcp":
            return _per_work(parse.linerate_tcp(out), cpu, ctx.time)
        m = parse.linerate_rr(out)
        if kind == "crr":
            m["cps"] = m.pop("tps")
        return _per_work(m, cpu, ctx.time)
    return run


# ---- neper ----------------------------------------------------------------------------------


def _neper_server(ctx: Ctx, test: str, flows: int, data_port: int):
    """A neper server's argv maker: control port from the suite, data port `data_port`.

    neper serves one test and exits; it needs -T and -F like its client.
    """
    binary = ctx.tools["neper"].extra[test]
    return lambda addr, port: [binary, "-H", addr, "-C", str(port), "-P", str(data_port),
                               "-T", str(THREADS), "-F", str(flows), "-l", str(ctx.time), *NEPER_LOG]


def _neper(test: str, flows: int):
    """neper `test` (tcp_stream, tcp_rr, tcp_crr) -T 2 -F `flows`; rr tests ask for p50 and p99."""
    def run(ctx: Ctx, base: str) -> dict:
        data_port = ctx.servers.ports.take()   # a second port of its own: neper's data listener
        binary = ctx.tools["neper"].extra[test]
        pct = [] if test == "tcp_stream" else ["-p", "50,99"]
        out, cpu = _one_test(
            ctx, f"neper-{test}", _neper_server(ctx, test, flows, data_port),
            lambda srv: [binary, "-c", "-H", ctx.addr(), "-C", str(srv.port), "-P", str(data_port),
                         "-T", str(THREADS), "-F", str(flows), "-l", str(ctx.time), *pct, *NEPER_LOG], base)
        if test == "tcp_stream":
            return _per_work(parse.neper_stream(out), cpu, ctx.time)
        m = parse.neper_rr(out)
        if test == "tcp_crr":
            m["cps"] = m.pop("tps")
        return _per_work(m, cpu, ctx.time)
    return run


# ---- server memory at many idle flows -------------------------------------------------------------


def _rss(ctx: Ctx, key: str, make: Callable[[str, int], list[str]], client: Callable[[Server], list[str]],
         base: str, flows: int, ends_with_test: bool) -> dict:
    """A fresh server's VmRSS idle, then at its highest while `client` holds `flows` flows open."""
    srv = ctx.servers.start(key, make, ctx.srv_pin, ctx.rawdir / f"{base}.server")
    try:
        time.sleep(0.5)
        idle = parse.vm_rss_mib(srv.pid)
        peak = peak_rss(ctx, srv, client(srv), base, ends_with_test)
    finally:
        ctx.servers.stop(srv)
    return {"idle_mib": idle, "flows_mib": peak, "per_flow_kib": (peak - idle) * 1024 / flows}


def _lr_rss(flows: int):
    # One transaction per flow per second: the connections stay open and
    # all but idle, which is what the server holds them for.
    def run(ctx: Ctx, base: str) -> dict:
        return _rss(ctx, "linerate-rss",
                    lambda addr, port: [ctx.lr.path, "server", "-B", addr, "-p", str(port)],
                    lambda srv: [ctx.lr.path, "rr", ctx.addr(), "-p", str(srv.port), "-t", str(ctx.time),
                                 "--flows", str(flows), "--threads", str(THREADS), "-s", "1", "--rate", "1",
                                 "--json"], base, flows, False)
    return run


def _neper_rss(flows: int):
    def run(ctx: Ctx, base: str) -> dict:
        data_port = ctx.servers.ports.take()
        binary = ctx.tools["neper"].extra["tcp_rr"]
        return _rss(ctx, "neper-rss", _neper_server(ctx, "tcp_rr", flows, data_port),
                    lambda srv: [binary, "-c", "-H", ctx.addr(), "-C", str(srv.port), "-P", str(data_port),
                                 "-T", str(THREADS), "-F", str(flows), "-l", str(ctx.time), *NEPER_LOG], base,
                    flows, True)
    return run


# ---- the cells -------------------------------------------------------------------------------------


def flows_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    n, idle = _count("FLOWS", 1000), _count("IDLE_FLOWS", 10000)
    why = None if lr.has("tcp", "--flows") and lr.has("rr", "--flows") else "this build has no --flows (issue 26)"
    fl = ["--flows", str(n), "--threads", str(THREADS)]
    # The engines with an event loop of their own for --flows: epoll (the
    # default) and io_uring's completion loops.
    engines = lr.engines("tcp")
    ring = ["uring"] if "uring" in engines else []
    paths = ("lo", "veth1500")

    tcp = [Variant(f"linerate tcp --flows {n} --threads {THREADS}{engine_label(engines, e)}", False,
                   _lr("tcp", fl, engines, e)) for e in [None, *ring]]
    tcp.append(Variant("linerate tcp -P 2", False, _lr("tcp", ["-P", "2"]), reference=True))
    tcp.append(anchor(tools, "neper", f"tcp_stream -T {THREADS} -F {n}", _neper("tcp_stream", n), "tcp_stream"))

    rr = [Variant(f"linerate rr --flows {n} --threads {THREADS} -s 1{engine_label(engines, e)}", False,
                  _lr("rr", [*fl, "-s", "1"], engines, e)) for e in [None, *ring]]
    rr.append(anchor(tools, "neper", f"tcp_rr -T {THREADS} -F {n} (1-byte request and response)",
                     _neper("tcp_rr", n), "tcp_rr"))

    cf = ["--flows", str(CRR_FLOWS), "--threads", str(THREADS), "--linger0", "-s", "1"]
    crr = [Variant(f"linerate crr --flows {CRR_FLOWS} --threads {THREADS} --linger0 -s 1", False, _lr("crr", cf)),
           anchor(tools, "neper", f"tcp_crr -T {THREADS} -F {CRR_FLOWS} (SO_LINGER 0, its default)",
                  _neper("tcp_crr", CRR_FLOWS), "tcp_crr")]

    rss = [Variant(f"linerate server, rr --flows {idle} --threads {THREADS} --rate 1", False, _lr_rss(idle)),
           anchor(tools, "neper", f"tcp_rr server -T {THREADS} -F {idle} (flows busy: no per-flow rate)",
                  _neper_rss(idle), "tcp_rr")]

    return [
        Cell("flows-tcp", f"TCP, {n} flows on {THREADS} threads per side, client sends: aggregate", "tcp",
             ["gbps", "cpu_s_gib"], tcp, goal="≥ 1.1× neper tcp_stream; ≥ 0.9× linerate -P 2 (the reference)",
             paths=paths, skip=why),
        Cell("flows-rr", f"TCP round trips, {n} flows on {THREADS} threads per side, 1-byte messages", "rr",
             ["tps", "p99_us", "p50_us", "cpu_ms_ktrans"], rr, goal="transactions/s ≥ 1.1× neper tcp_rr; p99 reported",
             paths=paths, skip=why),
        Cell("flows-crr", f"TCP connect, 1-byte request and response, close: {CRR_FLOWS} connections in flight "
             f"on {THREADS} threads", "crr", ["cps", "p99_us", "p50_us", "cpu_ms_kconn"], crr,
             goal="connections/s ≥ 1.2× neper tcp_crr", paths=paths, skip=why),
        Cell("flows-rss", f"server memory (VmRSS): idle, and at its highest with {idle} flows open", "rss",
             ["flows_mib", "per_flow_kib", "idle_mib"], rss,
             goal=f"≤ 64 MiB at {idle} idle flows (the per-flow cost named)", skip=why),
    ]
