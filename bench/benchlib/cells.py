"""What a cell is, how its variants run, and the list of every cell.

A cell is one comparison on one path: a few variants (linerate in one or
more configurations, and the anchors: established tools in theirs), run
interleaved RUNS times, with the metrics to tabulate and the goal from the
issue that asked for it. The cells themselves are in cells_*.py, their list
in suite.py (this module imports neither). Variants and cells that cannot run here (an anchor
missing, a linerate feature not in this build, a path needing root) carry
the reason instead of a runner, and the tables print it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Callable

from .core import NetPath, Procs, RunFailed, Server, Servers
from .tools import Linerate, Tool


@dataclass
class Ctx:
    """What a variant's runner needs for one run."""

    path: NetPath
    servers: Servers
    procs: Procs
    lr: Linerate
    tools: dict[str, Tool]
    time: int
    rawdir: FsPath
    srv_pin: list[str]
    cli_pin: list[str]
    probes: dict[str, str | None]   # per-path probe results, by cell probe name

    def addr(self) -> str:
        return self.path.server_addr

    def server(self, key: str, make: Callable[[str, int], list[str]]) -> Server:
        return self.servers.get(key, make, self.srv_pin)

    def client(self, argv: list[str], base: str, limit: float | None = None) -> str:
        """Runs a client in the client's namespace; its stdout, or RunFailed with its error."""
        out, err = self.rawdir / f"{base}.out", self.rawdir / f"{base}.err"
        rc = self.procs.run(self.path.client_argv(argv, self.cli_pin), out, err,
                            limit if limit is not None else self.time + 30)
        text = out.read_text(errors="replace")
        if rc != 0:
            raise RunFailed(f"exit status {rc}: {_tail(text if text.lstrip().startswith('{') else err.read_text(errors='replace') or text)}")
        return text


def _tail(text: str) -> str:
    """The gist of a failed client's output: iperf3's JSON "error", else its last lines."""
    if text.lstrip().startswith("{"):
        try:
            err = json.loads(text).get("error")
        except (json.JSONDecodeError, AttributeError):
            err = None
        if err:
            return str(err)[:200]
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " / ".join(lines[-2:])[:200] or "no output"


Runner = Callable[[Ctx, str], dict]


@dataclass
class Variant:
    label: str
    anchor: bool                  # an established tool's figure (what linerate is compared with)
    run: Runner | None = None
    skip: str | None = None       # why it cannot run here
    uses: tuple[str, ...] = ()    # anchor binaries it needs (to install only those)
    reference: bool = False       # a linerate variant the cell's other linerate variants are compared with


@dataclass
class Cell:
    name: str
    title: str
    kind: str                         # sets the default TIME
    metrics: list[str]                # the first is the primary one
    variants: list[Variant]
    goal: str = ""
    goal_metrics: list[str] = field(default_factory=list)   # ratios the goal reads
    pin: str = "none"                 # "split": servers on CPU 0, clients on CPU 1
    paths: tuple[str, ...] = ("lo",)  # where it runs by default
    skip: str | None = None
    probe: Callable[[Ctx], str | None] | None = None        # a skip reason per path, or None

    def finish(self) -> "Cell":
        """A cell none of whose anchors (or linerate variants) can run is skipped whole."""
        if self.skip is None:
            for side, is_anchor in (("anchor", True), ("linerate variant", False)):
                vs = [v for v in self.variants if v.anchor == is_anchor]
                if vs and all(v.skip for v in vs):
                    self.skip = f"no {side} can run: " + "; ".join(sorted({v.skip for v in vs}))
                    break
        if not self.goal_metrics:
            self.goal_metrics = [self.metrics[0]]
        return self


DEFAULT_TIME = {"tcp": 5, "udp": 3, "rr": 3, "crr": 3, "rss": 3, "iperf3": 5, "local": 3}

ALL_PATHS = ("lo", "veth1500", "veth9000")


def engine_label(engines: list[str], e: str | None) -> str:
    return f" --engine {e}" if e and len(engines) > 1 else ""


def engine_args(engines: list[str], e: str | None) -> list[str]:
    return ["--engine", e] if e and len(engines) > 1 else []


def linerate_server(ctx: Ctx, engines: list[str], e: str | None) -> Server:
    """linerate's server, one per engine so both sides of a test use the same one."""
    extra = engine_args(engines, e)
    return ctx.server("linerate" + (f"-{e}" if extra else ""),
                      lambda addr, port: [ctx.lr.path, "server", "-B", addr, "-p", str(port), *extra])


def per_run_server(ctx: Ctx, key: str, make: Callable[[str, int], list[str]],
                   body: Callable[[Server], str], base: str, settle: float = 0.0) -> tuple[str, str]:
    """Starts a server for one run (tools that report totals at exit), runs `body`, stops it.

    Returns (client output, server output); the server's is kept as BASE.server.
    """
    srv = ctx.servers.start(key, make, ctx.srv_pin, ctx.rawdir / f"{base}.server")
    try:
        out = body(srv)
        if settle:
            time.sleep(settle)
    finally:
        ctx.servers.stop(srv)
    return out, srv.out.read_text(errors="replace")


def need(tools: dict[str, Tool], name: str, feature: str | None = None) -> str | None:
    """Why anchor `name` (with `feature`) cannot run, or None."""
    t = tools[name]
    if not t.ok:
        return t.missing
    if feature and feature not in t.features:
        return f"{name} {t.version} has no {feature}"
    return None


def anchor(tools: dict[str, Tool], name: str, label: str, run: Runner, feature: str | None = None) -> Variant:
    """A variant of anchor `name`, labelled with its version, or skipped with the reason."""
    why = need(tools, name, feature)
    t = tools[name]
    return Variant(f"{name} {t.version if t.ok else ''} {label}".replace("  ", " ").rstrip(), True,
                   None if why else run, why, (name,))


def anchors_of(cell: Cell) -> set[str]:
    """The anchor binaries a cell's variants need."""
    return {u for v in cell.variants for u in v.uses}
