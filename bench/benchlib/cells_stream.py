"""Throughput cells: TCP streams, unpaced UDP, and real iperf3 clients served by linerate.

TCP: one stream each way with each tool's defaults, one stream each way in
each tool's best configuration (1 MiB writes; iperf3 -Z and --skip-rx-copy
where the binary has them; linerate once per engine it offers), and -P 2.
UDP: unpaced at 64, 1472 and 8972-byte payloads (the same payload on the
wire for every tool), received datagrams/s and loss as each tool counts them.
"""

from __future__ import annotations

import time

from . import parse
from .cells import (ALL_PATHS, Cell, Ctx, Variant, anchor, engine_args, engine_label, linerate_server,
                    need, per_run_server)
from .core import RunFailed
from .tools import Linerate, Tool


# ---- TCP ------------------------------------------------------------------------------


def _lr_tcp(engines: list[str], e: str | None, extra: list[str]):
    def run(ctx: Ctx, base: str) -> dict:
        srv = linerate_server(ctx, engines, e)
        return parse.linerate_tcp(ctx.client(
            [ctx.lr.path, "tcp", ctx.addr(), "-p", str(srv.port), "-t", str(ctx.time), "--json",
             *engine_args(engines, e), *extra], base))
    return run


def _iperf3_server(ctx: Ctx):
    i3 = ctx.tools["iperf3"].path
    return ctx.server("iperf3", lambda addr, port: [i3, "-s", "-B", addr, "-p", str(port)])


def _iperf3_tcp(extra: list[str]):
    def run(ctx: Ctx, base: str) -> dict:
        srv = _iperf3_server(ctx)
        return parse.iperf3_tcp(ctx.client(
            [ctx.tools["iperf3"].path, "-c", ctx.addr(), "-p", str(srv.port), "-t", str(ctx.time), "-J",
             *extra], base))
    return run


def _iperf2_tcp(extra: list[str]):
    def run(ctx: Ctx, base: str) -> dict:
        ip2 = ctx.tools["iperf2"].path
        srv = ctx.server("iperf2-tcp", lambda addr, port: [ip2, "-s", "-B", addr, "-p", str(port)])
        return parse.iperf2_tcp(ctx.client(
            [ip2, "-c", ctx.addr(), "-p", str(srv.port), "-t", str(ctx.time), "-y", "C", *extra], base))
    return run


def _nuttcp(extra: list[str]):
    # nuttcp takes its values attached to the flag (-T5); the data ports are
    # the control port + 1 and up (one per stream), handed out as a block.
    def run(ctx: Ctx, base: str) -> dict:
        nt = ctx.tools["nuttcp"].path
        srv = ctx.server("nuttcp", lambda addr, port: [nt, "-S", "--nofork", f"-P{port}", f"-p{port + 1}"])
        return parse.nuttcp_tcp(ctx.client(
            [nt, f"-T{ctx.time}", f"-P{srv.port}", f"-p{srv.port + 1}", "-fparse", *extra, ctx.addr()], base))
    return run


def _iperf2_or_skip(tools: dict[str, Tool], rev: bool, r: list[str], extra: list[str]) -> Variant:
    v = anchor(tools, "iperf2", " ".join([*r, *extra]), _iperf2_tcp([*r, *extra]))
    if rev and not v.skip:
        # Seen with Debian 12's iperf 2.1.8: after one good -R test the next
        # reports 0 bytes and the server aborts (pthread mutex assertion).
        v.run, v.skip = None, f"iperf2 {tools['iperf2'].version}'s -R is unreliable (0-byte reports, server aborts)"
    return v


def tcp_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    engines = lr.engines("tcp") or [None]
    i3 = tools["iperf3"]
    cells = []
    for rev in (False, True):
        d = "rev" if rev else "fwd"
        r_lr, r_i3, r_i2, r_nt = (["-R"], ["-R"], ["-R"], ["-r"]) if rev else ([], [], [], [])
        who = "server sends (-R)" if rev else "client sends"
        cells.append(Cell(
            f"tcp1-{d}-default", f"TCP, one stream, {who}; every tool with its defaults", "tcp", ["gbps"],
            [Variant("linerate" + (" -R" if rev else ""), False, _lr_tcp(engines, None, r_lr)),
             anchor(tools, "iperf3", " ".join(r_i3), _iperf3_tcp(r_i3)),
             _iperf2_or_skip(tools, rev, r_i2, []),
             anchor(tools, "nuttcp", " ".join(r_nt), _nuttcp(r_nt))],
            goal="linerate defaults ≥ 1.3× iperf3 defaults", paths=ALL_PATHS))
        best = [Variant(f"linerate{' -R' if rev else ''} --len 1M{engine_label(engines, e)}", False,
                        _lr_tcp(engines, e, [*r_lr, "--len", "1M"])) for e in engines]
        if lr.has("tcp", "--skip-rx-copy"):
            # The default write size is 1M (docs/design/numbers.md, "Defaults and why");
            # the 128K variant below keeps the old default (and iperf3's) in view.
            e = "batch" if "batch" in engines else engines[0]
            best.append(Variant(f"linerate{' -R' if rev else ''} --len 1M{engine_label(engines, e)} --skip-rx-copy",
                                False, _lr_tcp(engines, e, [*r_lr, "--len", "1M", "--skip-rx-copy"])))
            best.append(Variant(f"linerate{' -R' if rev else ''} --skip-rx-copy", False,
                                _lr_tcp(engines, None, [*r_lr, "--skip-rx-copy"])))
        if not rev and "zerocopy:sendfile" in lr.help("tcp"):
            # TCP streams only, so not in KNOWN_ENGINES (no udp or rr cell
            # tries it): one variant here, both sides on it (issue 8).
            sf = ["zerocopy:sendfile", "zerocopy:sendfile"]
            best.append(Variant("linerate --len 1M --engine zerocopy:sendfile", False,
                                _lr_tcp(sf, "zerocopy:sendfile", ["--len", "1M"])))
        best.append(Variant(f"linerate{' -R' if rev else ''} --len 128K", False,
                            _lr_tcp(engines, None, [*r_lr, "--len", "128K"])))
        i3best = [anchor(tools, "iperf3", " ".join([*r_i3, "-l", "1M"]), _iperf3_tcp([*r_i3, "-l", "1M"]))]
        for flags, feats in ((["-Z"], ("zerocopy",)), (["-Z", "--skip-rx-copy"], ("zerocopy", "skip-rx-copy"))):
            a = [*r_i3, "-l", "1M", *flags]
            if all(f in i3.features for f in feats):
                i3best.append(anchor(tools, "iperf3", " ".join(a), _iperf3_tcp(a)))
        cells.append(Cell(
            f"tcp1-{d}-best", f"TCP, one stream, {who}; every tool in its best configuration", "tcp", ["gbps"],
            best + i3best + [
                _iperf2_or_skip(tools, rev, r_i2, ["-l", "1M"]),
                anchor(tools, "nuttcp", " ".join([*r_nt, "-l1048576"]), _nuttcp([*r_nt, "-l1048576"]))],
            goal="best linerate ≥ 1.05× iperf3 3.21 -Z -l 1M", paths=ALL_PATHS))
    p2 = [Variant("linerate -P 2", False, _lr_tcp(engines, None, ["-P", "2"]))]
    p2 += [Variant(f"linerate -P 2 --len 1M{engine_label(engines, e)}", False,
                   _lr_tcp(engines, e, ["-P", "2", "--len", "1M"])) for e in engines]
    if lr.has("tcp", "--skip-rx-copy"):
        # Each tool's receiver without the copy, as in tcp1-*-best: on a
        # host where the streams share the CPUs, the copy is what they share.
        p2.append(Variant("linerate -P 2 --skip-rx-copy", False,
                          _lr_tcp(engines, None, ["-P", "2", "--skip-rx-copy"])))
        # Fixed 4 MiB socket buffers (no autotuning): with two streams on
        # two CPUs, fewer window updates; each tool gets the same -w.
        p2.append(Variant("linerate -P 2 --skip-rx-copy -w 4M", False,
                          _lr_tcp(engines, None, ["-P", "2", "--skip-rx-copy", "-w", "4M"])))
    p2 += [anchor(tools, "iperf3", "-P 2", _iperf3_tcp(["-P", "2"])),
           anchor(tools, "iperf3", "-P 2 -l 1M", _iperf3_tcp(["-P", "2", "-l", "1M"])),
           anchor(tools, "iperf3", "-P 2 -l 1M -w 4M", _iperf3_tcp(["-P", "2", "-l", "1M", "-w", "4M"]))]
    if "skip-rx-copy" in i3.features:
        a = ["-P", "2", "-l", "1M", "--skip-rx-copy", "-w", "4M"]
        p2.append(anchor(tools, "iperf3", " ".join(a), _iperf3_tcp(a)))
    if "zerocopy" in i3.features:
        p2.append(anchor(tools, "iperf3", "-P 2 -l 1M -Z", _iperf3_tcp(["-P", "2", "-l", "1M", "-Z"])))
    if all(f in i3.features for f in ("zerocopy", "skip-rx-copy")):
        a = ["-P", "2", "-l", "1M", "-Z", "--skip-rx-copy"]
        p2.append(anchor(tools, "iperf3", " ".join(a), _iperf3_tcp(a)))
    p2 += [anchor(tools, "iperf2", "-P 2", _iperf2_tcp(["-P", "2"])),
           anchor(tools, "nuttcp", "-N2", _nuttcp(["-N2"]))]
    cells.append(Cell("tcp2-fwd", "TCP, two streams (-P 2), client sends; defaults and 1 MiB writes", "tcp",
                      ["gbps"], p2, goal="≥ 1.5× iperf3 3.21 -P 2", paths=ALL_PATHS))
    return cells


# ---- UDP -------------------------------------------------------------------------------


def _lr_udp(engines: list[str], e: str | None, size: int):
    def run(ctx: Ctx, base: str) -> dict:
        srv = linerate_server(ctx, engines, e)
        return parse.linerate_udp(ctx.client(
            [ctx.lr.path, "udp", ctx.addr(), "-p", str(srv.port), "-t", str(ctx.time), "-b", "0",
             "-l", str(size), "--json", *engine_args(engines, e)], base))
    return run


def _iperf3_udp(size: int, extra: list[str]):
    def run(ctx: Ctx, base: str) -> dict:
        srv = _iperf3_server(ctx)
        return parse.iperf3_udp(ctx.client(
            [ctx.tools["iperf3"].path, "-c", ctx.addr(), "-p", str(srv.port), "-u", "-b", "0", "-l", str(size),
             "-t", str(ctx.time), "-J", *extra], base))
    return run


def _iperf2_udp(size: int):
    # A server per run: its report of this run is its last CSV line. iperf2
    # has no "-b 0"; 100G is beyond any loopback rate.
    def run(ctx: Ctx, base: str) -> dict:
        ip2 = ctx.tools["iperf2"].path
        out, srv_out = per_run_server(
            ctx, "iperf2-udp", lambda addr, port: [ip2, "-s", "-u", "-B", addr, "-p", str(port), "-y", "C"],
            lambda srv: ctx.client([ip2, "-c", ctx.addr(), "-u", "-p", str(srv.port), "-b", "100G",
                                    "-l", str(size), "-t", str(ctx.time), "-y", "C"], base),
            base, settle=1.0)
        return parse.iperf2_udp(out, srv_out, size)
    return run


def _sockperf_udp(size: int):
    # sockperf's server prints its received total when stopped (SIGINT): one per run.
    def run(ctx: Ctx, base: str) -> dict:
        sp = ctx.tools["sockperf"].path
        out, srv_out = per_run_server(
            ctx, "sockperf-udp-tput", lambda addr, port: [sp, "server", "-i", addr, "-p", str(port)],
            lambda srv: ctx.client([sp, "throughput", "-i", ctx.addr(), "-p", str(srv.port), "-m", str(size),
                                    "-t", str(ctx.time)], base),
            base, settle=0.5)
        return parse.sockperf_throughput(out, srv_out)
    return run


def udp_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    engines = lr.engines("udp") or [None]
    cells = []
    for size in (64, 1472, 8972):
        vs = [Variant(f"linerate -b 0 -l {size}{engine_label(engines, e)}", False, _lr_udp(engines, e, size))
              for e in engines]
        vs.append(anchor(tools, "iperf3", f"-u -b 0 -l {size}", _iperf3_udp(size, [])))
        vs.append(anchor(tools, "iperf3", f"-u -b 0 -l {size} --gsro", _iperf3_udp(size, ["--gsro"]), "gsro"))
        vs.append(anchor(tools, "iperf2", f"-u -b 100G -l {size}", _iperf2_udp(size)))
        vs.append(anchor(tools, "sockperf", f"throughput -m {size}", _sockperf_udp(size)))
        goal = "≥ 1.3× iperf3 3.21 --gsro" if size == 64 else "≥ 1.0× iperf3 3.21 --gsro"
        cells.append(Cell(f"udp-{size}", f"UDP unpaced, {size}-byte payloads, client sends", "udp",
                          ["rx_mpps", "loss_pct", "tx_mpps"], vs, goal=goal + ", loss ≤ 0.1%",
                          pin="split", paths=ALL_PATHS))
    return cells


# ---- iperf3 clients served by linerate (issue 9) ------------------------------------------


def _probe_iperf3_served(ctx: Ctx) -> str | None:
    """Whether linerate's server completes a short test for a real iperf3 client."""
    srv = linerate_server(ctx, [], None)
    try:
        out = ctx.client([ctx.tools["iperf3"].path, "-c", ctx.addr(), "-p", str(srv.port), "-t", "1", "-J"],
                         "probe-iperf3-served", limit=20)
        parse.iperf3_tcp(out)
    except RunFailed as exc:
        return f"linerate's server does not serve iperf3 clients in this build (issue 9): {exc}"
    finally:
        time.sleep(0.5)
    return None


def _i3_client(linerate_serves: bool, extra: list[str], udp: bool):
    def run(ctx: Ctx, base: str) -> dict:
        srv = linerate_server(ctx, [], None) if linerate_serves else _iperf3_server(ctx)
        out = ctx.client([ctx.tools["iperf3"].path, "-c", ctx.addr(), "-p", str(srv.port), "-t", str(ctx.time),
                          "-J", *extra], base)
        return parse.iperf3_udp(out) if udp else parse.iperf3_tcp(out)
    return run


def iperf3_server_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    cells = []
    for name, title, extra, udp, feature in (
            ("iperf3srv-tcp1", "TCP, one stream", [], False, None),
            ("iperf3srv-tcp2", "TCP, -P 2", ["-P", "2"], False, None),
            ("iperf3srv-udp", "UDP -b 0 -l 1448", ["-u", "-b", "0", "-l", "1448"], True, None),
            # The client sends with GSO (3.21+): linerate's server takes the
            # runs as GRO super-buffers, iperf3's server with its own --gsro
            # off (a server cannot be told).
            ("iperf3srv-udp-gsro", "UDP -b 0 -l 1448 --gsro", ["-u", "-b", "0", "-l", "1448", "--gsro"], True,
             "gsro")):
        why = need(tools, "iperf3", feature)
        ver = tools["iperf3"].version
        flags = " ".join(extra)
        vs = [Variant(f"iperf3 {ver} {flags} → linerate server".replace("  ", " "), False,
                      None if why else _i3_client(True, extra, udp), why, ("iperf3",)),
              Variant(f"iperf3 {ver} {flags} → iperf3 server".replace("  ", " "), True,
                      None if why else _i3_client(False, extra, udp), why, ("iperf3",))]
        cells.append(Cell(name, f"a real iperf3 client, {title}: linerate's server vs iperf3's own", "iperf3",
                          ["rx_mpps", "loss_pct", "tx_mpps"] if udp else ["gbps"], vs,
                          goal="≥ 1.0× (the server is never the bottleneck)", pin="split" if udp else "none",
                          probe=_probe_iperf3_served))
    return cells


# ---- `linerate iperf3 -c` (the drop-in) against a real iperf3 server (issue 9) -------------


def _dropin_client(extra: list[str], udp: bool):
    # Its -J is iperf3's schema: the iperf3 parser reads it unchanged.
    def run(ctx: Ctx, base: str) -> dict:
        srv = _iperf3_server(ctx)
        out = ctx.client([ctx.lr.path, "iperf3", "-c", ctx.addr(), "-p", str(srv.port), "-t", str(ctx.time),
                          "-J", *extra], base)
        return parse.iperf3_udp(out) if udp else parse.iperf3_tcp(out)
    return run


def iperf3_dropin_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    cells = []
    for name, title, extra, udp in (
            ("iperf3cli-tcp1", "TCP, one stream", [], False),
            ("iperf3cli-udp", "UDP -b 0 -l 1448", ["-u", "-b", "0", "-l", "1448"], True)):
        why = need(tools, "iperf3")
        ver = tools["iperf3"].version
        flags = " ".join(extra)
        vs = [Variant(f"linerate iperf3 -c {flags} → iperf3 server".replace("  ", " "), False,
                      None if why else _dropin_client(extra, udp), why, ("iperf3",)),
              Variant(f"iperf3 {ver} -c {flags} → iperf3 server".replace("  ", " "), True,
                      None if why else _i3_client(False, extra, udp), why, ("iperf3",))]
        cells.append(Cell(name, f"`linerate iperf3 -c` vs iperf3's own client, {title}, both against iperf3 -s",
                          "iperf3", ["rx_mpps", "loss_pct", "tx_mpps"] if udp else ["gbps"], vs,
                          goal="≥ 1.0× (the drop-in is no slower than iperf3)", pin="split" if udp else "none"))
    return cells
