"""The tools `bench/run` compares: the anchors and this linerate build.

Anchors come from Debian packages (installed with apt-get when missing and
running as root, unless INSTALL=0), except a newer iperf3 (IPERF3=path),
netperf (NETPERF=path, NETSERVER=path) and neper (NEPER=its build folder),
which Debian does not package: the user builds them from source outside the
repository. What each binary can do is
probed from its own help text, so the suite runs unchanged before and after
features land: a cell or variant needing what is missing is skipped with the
reason, never run with something else in its place.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path as FsPath

from .core import log


def _out(argv: list[str], timeout: float = 15) -> str:
    """stdout+stderr of a short command, '' when it cannot run."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (r.stdout or "") + (r.stderr or "")


@dataclass
class Tool:
    """One anchor binary: where it is, its version, what it supports, or why it is missing."""

    name: str
    path: str | None = None
    version: str = "?"
    missing: str | None = None
    features: set[str] = field(default_factory=set)
    extra: dict[str, str] = field(default_factory=dict)   # e.g. netserver's path

    @property
    def ok(self) -> bool:
        return self.missing is None


# name -> (command, Debian package, version argv tail, version regex)
ANCHORS = {
    "iperf3": ("iperf3", "iperf3", ["--version"], r"iperf ([\w.+-]+)"),
    "iperf2": ("iperf", "iperf", ["-v"], r"iperf version ([\w.+-]+)"),
    "sockperf": ("sockperf", "sockperf", ["--version"], r"version ([\w.+-]+)"),
    "qperf": ("qperf", "qperf", ["--version"], r"qperf ([\w.+-]+)"),
    "nuttcp": ("nuttcp", "nuttcp", ["-V"], r"nuttcp-([\w.+-]+)"),
    "netperf": ("netperf", None, ["-V"], r"version ([\w.+-]+)"),
    # google/neper: one binary per test; `tcp_stream` stands for the build.
    # --logtostderr: neper otherwise writes a log file into the working directory.
    "neper": ("tcp_stream", None, ["--logtostderr", "-v"], r"^([\w.+-]+)"),
}

# The neper binaries the flows cells run; each found one is a feature.
NEPER_TESTS = ("tcp_stream", "tcp_rr", "tcp_crr")
ENV_VARS = {"iperf3": "IPERF3", "netperf": "NETPERF", "neper": "NEPER"}


def install_missing(names: set[str], allowed: bool) -> None:
    """apt-get installs the Debian packages of the anchors in `names` that are missing."""
    pkgs = sorted({ANCHORS[n][1] for n in names
                   if ANCHORS[n][1] and not shutil.which(ANCHORS[n][0])
                   and not (n == "iperf3" and os.environ.get("IPERF3"))})
    if not pkgs:
        return
    if not allowed:
        log(f"not installing {', '.join(pkgs)}: INSTALL=0")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log(f"not installing {', '.join(pkgs)}: needs root and apt-get")
        return
    log(f"installing {', '.join(pkgs)} with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, timeout=600)
    have = []
    for p in pkgs:
        policy = _out(["apt-cache", "policy", p], timeout=60)
        m = re.search(r"Candidate:\s*(\S+)", policy)
        if m and m.group(1) != "(none)":
            have.append(p)
        else:
            log(f"  {p}: no installation candidate in this system's apt sources")
    if have:
        r = subprocess.run(["apt-get", "install", "-y", "-qq", *have], env=env, timeout=900)
        if r.returncode != 0:
            log(f"  apt-get install {' '.join(have)} failed (status {r.returncode})")


def find_anchor(name: str) -> Tool:
    """Locates and probes one anchor; a missing one says how to get it."""
    cmd, pkg, vargs, vre = ANCHORS[name]
    env_var = ENV_VARS.get(name)
    t = Tool(name)
    given = os.environ.get(env_var) if env_var else None
    if given and name == "neper" and os.path.isdir(given):
        given = os.path.join(given, cmd)   # NEPER= names the build folder
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            t.missing = f"{env_var}={given} is not an executable file"
            return t
        t.path = os.path.abspath(given)
    else:
        t.path = shutil.which(cmd)
    if t.path is None:
        where = "its build folder" if name == "neper" else "path"
        how = f"apt-get install {pkg}" if pkg else f"build it and set {env_var}={where} (not in Debian)"
        t.missing = f"{cmd} not found ({how})"
        return t
    m = re.search(vre, _out([t.path, *vargs]))
    t.version = m.group(1) if m else "?"
    # neper's features are its binaries (_probe_neper), not its help text.
    helptext = "" if name == "neper" else _out([t.path, "-h" if name == "nuttcp" else "--help"])
    if name == "iperf3":
        for feat, pat in (("gsro", "--gsro"), ("zerocopy", "--zerocopy"), ("skip-rx-copy", "--skip-rx-copy")):
            if pat in helptext:
                t.features.add(feat)
    if name == "sockperf" and re.search(r"\bunix\b|UDS", helptext, re.I):
        t.features.add("unix")
    if name == "netperf":
        ns = os.environ.get("NETSERVER") or os.path.join(os.path.dirname(t.path), "netserver")
        if not (os.path.isfile(ns) and os.access(ns, os.X_OK)):
            ns = shutil.which("netserver") or ""
        if not ns:
            t.missing = "netserver not found next to netperf (set NETSERVER=path)"
        t.extra["netserver"] = ns
    if name == "neper":
        _probe_neper(t)
    return t


def _probe_neper(t: Tool) -> None:
    """neper's test binaries next to tcp_stream (each a feature), and its git commit when built in a clone."""
    folder = os.path.dirname(t.path or "")
    for test in NEPER_TESTS:
        path = os.path.join(folder, test)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            t.features.add(test)
            t.extra[test] = path
    # Only neper's own clone: not a repository the build folder happens to sit in.
    top = _out(["git", "-C", folder, "rev-parse", "--show-toplevel"]).strip()
    commit = _out(["git", "-C", folder, "rev-parse", "--short", "HEAD"]).strip()
    if top and os.path.realpath(top) == os.path.realpath(folder) and re.fullmatch(r"[0-9a-f]{7,40}", commit):
        t.version += f" (git {commit})"


KNOWN_ENGINES = ("syscall", "batch", "uring", "uring:sqpoll", "zerocopy", "auto")


# ---- linerate -------------------------------------------------------------------


class Linerate:
    """This linerate build (a private copy) and what it offers."""

    def __init__(self, repo: FsPath, build: bool) -> None:
        src = FsPath(os.environ.get("LINERATE", repo / "target/release/linerate"))
        if build or not src.exists():
            log("running cargo build --release")
            if subprocess.run(["cargo", "build", "--release"], cwd=repo).returncode != 0:
                raise SystemExit("bench/run: cargo build --release failed")
        if not os.access(src, os.X_OK):
            raise SystemExit(f"bench/run: {src} is not executable")
        self.src = src
        # A private copy, so a `cargo build` during the run cannot swap the
        # client binary under a server that is still the old one.
        self.tmp = tempfile.mkdtemp(prefix="linerate-bench.")
        self.path = os.path.join(self.tmp, "linerate")
        shutil.copy2(src, self.path)
        self.version = _out([self.path, "--version"]).strip() or "?"
        self.git = _out(["git", "-C", str(repo), "describe", "--always", "--dirty"]).strip() or "?"
        newer = _out(["find", str(repo / "src"), str(repo / "crates"), str(repo / "Cargo.lock"),
                      "-newer", str(src), "-name", "*.rs", "-print", "-quit"])
        self.stale = bool(newer.strip())

    def remove_copy(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    @cache
    def help(self, sub: str) -> str:
        """`linerate SUB --help`, '' when SUB does not exist in this build."""
        r = subprocess.run([self.path, sub, "--help"], capture_output=True, text=True, timeout=15)
        return r.stdout if r.returncode == 0 else ""

    def has(self, sub: str, flag: str | None = None) -> bool:
        h = self.help(sub)
        return bool(h) and (flag is None or re.search(re.escape(flag) + r"\b", h) is not None)

    @cache
    def engines(self, sub: str) -> list[str]:
        """The engines `linerate SUB --engine` accepts, read from its refusal of a bogus one.

        Works with "this build has: a, b" and clap's "[possible values: a, b]";
        a build without --engine has only its one data path ("syscall").
        """
        if not self.has(sub, "--engine"):
            return []
        text = _out([self.path, sub, "--engine", "lrbench-no-such-engine", "-t", "1"])
        m = re.search(r"(?:this build has|possible values|one of|available|supported|engines?\s*:)\s*:?\s*([^\]\n]*)",
                      text, re.I)
        found = []
        if m:
            words = re.findall(r"[a-z][a-z0-9_:-]*", m.group(1))
            # Engine names the issue defines; other words (descriptions) only
            # when none of those is there.
            found = [w for w in words if w in KNOWN_ENGINES] or [
                w for w in words if w not in ("and", "or", "the", "see", "engines", "engine")]
        if not found:
            d = re.search(r"--engine[^\[]*\[default:\s*([\w-]+)\]", self.help(sub))
            found = [d.group(1)] if d else []
        return found

    def default_engine(self, sub: str) -> str | None:
        d = re.search(r"--engine[\s\S]*?\[default:\s*([\w-]+)\]", self.help(sub))
        return d.group(1) if d else None


# ---- the machine -----------------------------------------------------------------


def machine() -> dict[str, str]:
    """What the header says about the host: CPU, memory, kernel, virtualisation, settings."""
    info: dict[str, str] = {}
    cpuinfo = _read("/proc/cpuinfo")
    m = re.search(r"model name\s*:\s*(.+)", cpuinfo)
    info["cpu"] = f"{m.group(1).strip() if m else platform.processor() or '?'}, {os.cpu_count()} CPUs"
    mem = re.search(r"MemTotal:\s*(\d+)", _read("/proc/meminfo"))
    info["memory"] = f"{int(mem.group(1)) / 1048576:.1f} GiB" if mem else "?"
    virt = _out(["systemd-detect-virt"]).strip()
    if not virt:
        virt = "hypervisor flag set" if re.search(r"\bhypervisor\b", cpuinfo) else "none detected"
    info["virtualisation"] = virt
    info["kernel"] = f"{platform.release()} {platform.version()}"
    info["host"] = platform.node()
    sysctls = []
    for name in ("net.ipv4.tcp_congestion_control", "net.core.rmem_default", "net.core.rmem_max",
                 "net.core.wmem_max", "net.core.busy_poll", "net.core.busy_read"):
        v = _read("/proc/sys/" + name.replace(".", "/")).strip()
        sysctls.append(f"{name.split('.')[-1]}={v or '?'}")
    info["sysctl"] = " ".join(sysctls)
    return info


def loadavg() -> str:
    return " ".join(_read("/proc/loadavg").split()[:3]) or "?"


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
