"""Child processes, ports and network paths for `bench/run`.

Everything the suite starts goes through `Procs`, which remembers each child
and stops it (SIGINT to its process group, SIGKILL after a grace period) when
the suite exits for any reason; namespaces made by `VethPair` are deleted the
same way. Servers listen on 127.0.0.1 or on addresses inside namespaces the
suite created itself (198.18.0.0/15), on ports from PORT_BASE up that are
checked free, so nothing reaches beyond this host.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Callable


class RunFailed(Exception):
    """One run of one variant did not produce numbers; the message says why."""


def log(msg: str) -> None:
    """Progress goes to stderr so stdout carries only the tables."""
    print(msg, file=sys.stderr, flush=True)


# ---- child processes ----------------------------------------------------------


class Procs:
    """Every child the suite starts, so that exit stops each of them."""

    def __init__(self) -> None:
        self.live: list[subprocess.Popen] = []
        self.on_exit: list[Callable[[], None]] = []

    def spawn(self, argv: list[str], out: FsPath) -> subprocess.Popen:
        # A new session per child: `ip netns exec` and `taskset` exec in place,
        # but some servers fork (netserver per test); signalling the group
        # reaches those children too, and only those.
        with open(out, "wb") as f:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.live.append(p)
        return p

    def stop(self, p: subprocess.Popen, grace: float = 3.0) -> None:
        """SIGINT first (sockperf and iperf2 print their totals on it), then SIGKILL."""
        if p.poll() is None:
            _signal_group(p, signal.SIGINT)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
                p.wait()
        # The leader may be gone while children of its group (a forked
        # netserver) are not: sweep the group once more.
        _signal_group(p, signal.SIGKILL)
        if p in self.live:
            self.live.remove(p)

    def run(self, argv: list[str], out: FsPath, err: FsPath, limit: float) -> int:
        """Runs a client to completion; a client past `limit` seconds is hung: killed."""
        with open(out, "wb") as o, open(err, "wb") as e:
            p = subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
            self.live.append(p)
            try:
                rc = p.wait(limit)
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
                p.wait()
                self.live.remove(p)
                raise RunFailed(f"hung: killed after {limit:.0f} s") from None
            self.live.remove(p)
            _signal_group(p, signal.SIGKILL)  # leftovers of its group, if any
            return rc

    def cleanup(self) -> None:
        for p in list(self.live):
            try:
                self.stop(p, grace=2.0)
            except Exception as exc:  # keep cleaning up the rest
                log(f"clean-up: pid {p.pid}: {exc}")
        for fn in reversed(self.on_exit):
            try:
                fn()
            except Exception as exc:
                log(f"clean-up: {exc}")
        self.on_exit.clear()


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def install_exit_handlers(procs: Procs) -> None:
    """SIGINT/SIGTERM/SIGHUP end the suite through `finally`, which cleans up."""

    def handler(signum, _frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


# ---- network paths ------------------------------------------------------------


@dataclass
class NetPath:
    """Where a test runs: loopback, or two namespaces joined by a veth pair."""

    name: str                      # "lo", "veth1500", "veth9000"
    title: str
    server_addr: str
    server_ns: str | None = None
    client_ns: str | None = None
    mtu: int | None = None

    def server_argv(self, argv: list[str], pin: list[str]) -> list[str]:
        return _in_ns(self.server_ns) + pin + argv

    def client_argv(self, argv: list[str], pin: list[str]) -> list[str]:
        return _in_ns(self.client_ns) + pin + argv

    def listening(self, port: int) -> bool:
        """Whether something in the server's namespace has `port` open (TCP or UDP)."""
        out = subprocess.run(_in_ns(self.server_ns) + ["ss", "-Htuln", f"sport = :{port}"],
                             capture_output=True, text=True, timeout=10).stdout
        return bool(out.strip())


def _in_ns(ns: str | None) -> list[str]:
    return ["ip", "netns", "exec", ns] if ns else []


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


class VethPair:
    """Two namespaces unique to this process, joined by veth, server 198.18.0.1.

    The veth is created inside the namespaces (`ip -n`), so no interface
    appears in the host's namespace even for a moment; deleting the
    namespaces deletes the pair.
    """

    SERVER, CLIENT = "198.18.0.1", "198.18.0.2"

    def __init__(self, procs: Procs) -> None:
        tag = f"lrbench{os.getpid()}"
        self.server_ns, self.client_ns = f"{tag}s", f"{tag}c"
        procs.on_exit.append(self.delete)
        _ip("netns", "add", self.server_ns)
        _ip("netns", "add", self.client_ns)
        _ip("-n", self.server_ns, "link", "add", "vs", "type", "veth",
            "peer", "name", "vc", "netns", self.client_ns)
        for ns, dev, addr in ((self.server_ns, "vs", self.SERVER), (self.client_ns, "vc", self.CLIENT)):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def path(self, mtu: int) -> NetPath:
        for ns, dev in ((self.server_ns, "vs"), (self.client_ns, "vc")):
            _ip("-n", ns, "link", "set", dev, "mtu", str(mtu))
        return NetPath(f"veth{mtu}", f"two namespaces joined by veth, MTU {mtu}",
                       self.SERVER, self.server_ns, self.client_ns, mtu)

    def delete(self) -> None:
        for ns in (self.server_ns, self.client_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


def veth_unavailable() -> str | None:
    """Why the veth paths cannot run here, if they cannot."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if subprocess.run(["sh", "-c", "command -v ip"], capture_output=True).returncode != 0:
        return "`ip` (iproute2) not found"
    return None


LOOPBACK = NetPath("lo", "loopback (127.0.0.1)", "127.0.0.1")


# ---- ports and servers --------------------------------------------------------


class Ports:
    """Hands out ports from `base` up, each free for TCP and UDP on loopback."""

    def __init__(self, base: int) -> None:
        self.next = base

    def take(self) -> int:
        for _ in range(2000):
            p, self.next = self.next, self.next + 1
            if p > 65000:
                break
            if _free(p):
                return p
        raise RuntimeError("no free port found from PORT_BASE up")


def _free(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


@dataclass
class Server:
    """A running server: its port, process and output file."""

    port: int
    proc: subprocess.Popen
    out: FsPath
    argv: list[str]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Servers:
    """The servers of one cell, started on first use and stopped when the cell ends."""

    procs: Procs
    ports: Ports
    path: NetPath
    logdir: FsPath
    running: dict[str, Server] = field(default_factory=dict)

    def get(self, key: str, make: Callable[[str, int], list[str]], pin: list[str]) -> Server:
        """The server `key`, started with `make(addr, port)` under `pin` if not running.

        A server that died since its last use is started again (its log is
        kept under a new name) so one crash costs one run, not the cell.
        """
        key = f"{key}-pinned" if pin else key
        s = self.running.get(key)
        if s is not None and s.alive():
            return s
        if s is not None:
            log(f"  server {key} exited (status {s.proc.returncode}); starting it again")
            s.out.rename(s.out.with_suffix(f".died{int(time.time())}"))
        s = self.start(key, make, pin)
        self.running[key] = s
        return s

    def start(self, key: str, make: Callable[[str, int], list[str]], pin: list[str],
              out: FsPath | None = None) -> Server:
        """A server of our own (the caller stops it with `stop`); its output goes to `out`."""
        port = self.ports.take()
        argv = self.path.server_argv(make(self.path.server_addr, port), pin)
        out = out or self.logdir / f"server-{key}.log"
        proc = self.procs.spawn(argv, out)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if self.path.listening(port):
                return Server(port, proc, out, argv)
            time.sleep(0.1)
        self.procs.stop(proc)
        tail = out.read_text(errors="replace").strip().splitlines()[-3:]
        raise RunFailed(f"server `{' '.join(argv)}` did not come up: {' / '.join(tail) or 'no output'}")

    def stop(self, s: Server) -> None:
        self.procs.stop(s.proc)

    def stop_all(self) -> None:
        for s in self.running.values():
            self.procs.stop(s.proc)
        self.running.clear()


def pinning(mode: str, cpus: int, which: str) -> tuple[list[str], list[str]]:
    """(server prefix, client prefix) for a cell whose pinning is `which`.

    `split` puts every server on CPU 0 and every client on CPU 1, for every
    tool alike: on a small machine the scheduler otherwise decides per run
    whether both ends share a CPU, and that lottery swamps the differences
    between tools. PIN=0 turns it off, PIN=all applies it to every cell.
    """
    if mode == "0" or cpus < 2:
        return [], []
    if which == "split" or mode == "all":
        return ["taskset", "-c", "0"], ["taskset", "-c", "1"]
    return [], []
