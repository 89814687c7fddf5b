"""Each tool's output turned into the suite's metrics.

Every parser returns a dict of metric -> number, in the units the tables use
(Gbit/s, millions of datagrams/s, µs, transactions/s, MiB), or raises
RunFailed saying what was missing. Round trips are always full round trips:
sockperf runs with --full-rtt, qperf's one-way "latency" is doubled.
"""

from __future__ import annotations

import json
import re

from .core import RunFailed


def _json(text: str) -> dict:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFailed(f"unreadable JSON ({exc.msg})") from None
    if isinstance(d, dict) and d.get("error"):
        raise RunFailed(str(d["error"]))
    return d


# ---- linerate ----------------------------------------------------------------------


def _nonzero(m: dict) -> dict:
    """A run that moved nothing failed, whatever its exit status said."""
    if not m.get("gbps"):
        raise RunFailed("reported 0 bytes")
    return m


def linerate_tcp(text: str) -> dict:
    sums = _json(text).get("sums") or []
    if not sums:
        raise RunFailed("no sums in linerate's JSON")
    return _nonzero({"gbps": sum(s["receiver_bits_per_second"] for s in sums) / 1e9})


def linerate_udp(text: str) -> dict:
    sums = _json(text).get("sums") or []
    u = [s["udp"] for s in sums if s.get("udp")]
    if not u:
        raise RunFailed("no udp sums in linerate's JSON")
    issued = sum(x["issued"] for x in u)
    lost = sum(x["lost"] for x in u)
    return {
        "rx_mpps": sum(x["received_pps"] for x in u) / 1e6,
        "tx_mpps": sum(x["sent_pps"] for x in u) / 1e6,
        "loss_pct": 100.0 * lost / issued if issued else 0.0,
    }


def linerate_rr(text: str) -> dict:
    rr = _json(text).get("rr") or {}
    phases = [p for p in rr.get("phases", []) if not p.get("loaded")]
    if not phases:
        raise RunFailed("no rr phase in linerate's JSON")
    p = phases[0]
    lat = p["latency"]
    return {"p50_us": lat["p50_ns"] / 1e3, "p99_us": lat["p99_ns"] / 1e3,
            "tps": p["transactions_per_second"]}


# ---- iperf3 / iperf2 / nuttcp --------------------------------------------------------


def iperf3_tcp(text: str) -> dict:
    end = _json(text).get("end") or {}
    try:
        return _nonzero({"gbps": end["sum_received"]["bits_per_second"] / 1e9})
    except KeyError:
        raise RunFailed("no end.sum_received in iperf3's JSON") from None


def iperf3_udp(text: str) -> dict:
    end = _json(text).get("end") or {}
    s, r = end.get("sum_sent"), end.get("sum_received")
    if not s or not r or not r.get("seconds"):
        raise RunFailed("no end.sum_sent/sum_received in iperf3's JSON")
    # iperf3's receiver "packets" counts up to the highest sequence number
    # seen; those that arrived are packets − lost_packets.
    return {
        "rx_mpps": (r["packets"] - r["lost_packets"]) / r["seconds"] / 1e6,
        "tx_mpps": s["packets"] / s["seconds"] / 1e6,
        "loss_pct": float(r["lost_percent"]),
    }


def _iperf2_rows(text: str) -> list[list[str]]:
    return [f for f in (line.strip().split(",") for line in text.splitlines()) if len(f) >= 9]


def iperf2_tcp(client_out: str) -> dict:
    rows = _iperf2_rows(client_out)
    if not rows:
        raise RunFailed("no iperf2 CSV report")
    # With -P n the last row is the sum (stream id -1); with one stream the only row.
    return _nonzero({"gbps": int(rows[-1][8]) / 1e9})


def iperf2_udp(client_out: str, server_out: str, size: int) -> dict:
    c = _iperf2_rows(client_out)
    s = [r for r in _iperf2_rows(server_out) if len(r) >= 12 and int(r[11]) > 0]
    if not c or not s:
        raise RunFailed("no iperf2 client or server report")

    def secs(interval: str) -> float:
        a, b = interval.split("-")
        return float(b) - float(a)

    cl, sv = c[-1], s[-1]
    lost, total = int(sv[10]), int(sv[11])
    return {
        "rx_mpps": (total - lost) / secs(sv[6]) / 1e6,
        "tx_mpps": int(cl[7]) / size / secs(cl[6]) / 1e6,
        "loss_pct": 100.0 * lost / total,
    }


def nuttcp_tcp(text: str) -> dict:
    m = re.search(r"rate_Mbps=([\d.]+)", text)
    if not m:
        raise RunFailed("no rate_Mbps in nuttcp's -fparse output")
    return _nonzero({"gbps": float(m.group(1)) / 1e3})


# ---- sockperf / qperf / netperf ----------------------------------------------------------


def sockperf_pingpong(text: str) -> dict:
    pct = dict(re.findall(r"percentile\s+([\d.]+)\s*=\s*([\d.]+)", text))
    m = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=\d+; ReceivedMessages=(\d+)", text)
    if "50.000" not in pct or "99.000" not in pct or not m:
        raise RunFailed("no percentiles or [Valid Duration] line in sockperf's output")
    return {"p50_us": float(pct["50.000"]), "p99_us": float(pct["99.000"]),
            "tps": int(m.group(2)) / float(m.group(1))}


def sockperf_throughput(client_out: str, server_out: str) -> dict:
    m = re.search(r"Total of (\d+) messages sent in ([\d.]+) sec", client_out)
    n = re.search(r"Total (\d+) messages received", server_out)
    if not m or not n:
        raise RunFailed("no sockperf totals (client 'Total of N messages sent', server 'Total N messages received')")
    sent, secs, recv = int(m.group(1)), float(m.group(2)), int(n.group(1))
    # The server counts the client's warm-up messages too, so its loss can
    # come out slightly negative: reported as it is.
    return {"rx_mpps": recv / secs / 1e6, "tx_mpps": sent / secs / 1e6,
            "loss_pct": 100.0 * (sent - recv) / sent if sent else 0.0}


def qperf_lat(text: str) -> dict:
    m = re.search(r"latency\s*=\s*([\d.]+)\s*(ns|us|ms|sec)", text)
    if not m:
        raise RunFailed("no latency in qperf's output")
    rtt = 2 * float(m.group(1)) * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6}[m.group(2)]
    # qperf gives the mean only: it stands in the p50 column, marked in the label.
    return {"p50_us": rtt, "tps": 1e6 / rtt}


def netperf_omni(text: str) -> dict:
    """`-P 0 -- -o P50_LATENCY,P99_LATENCY,TRANSACTION_RATE`: one CSV line."""
    for line in reversed(text.strip().splitlines()):
        f = line.strip().split(",")
        if len(f) == 3:
            try:
                p50, p99, rate = (float(x) for x in f)
            except ValueError:
                continue
            return {"p50_us": p50, "p99_us": p99, "tps": rate}
    raise RunFailed("no P50_LATENCY,P99_LATENCY,TRANSACTION_RATE line in netperf's output")


# ---- neper ---------------------------------------------------------------------------------


def neper_keys(text: str) -> dict[str, str]:
    """neper's `key=value` lines (its options first, then its results); a later key wins.

    Other lines (warnings, a usage text) are skipped; the keys are case
    sensitive and their order means nothing (neper's README, "Output format").
    """
    keys = {}
    for line in text.splitlines():
        k, sep, v = line.strip().partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][\w]*", k):
            keys[k] = v.strip()
    return keys


def _neper_num(keys: dict[str, str], key: str, what: str) -> float:
    try:
        return float(keys[key])
    except (KeyError, ValueError):
        raise RunFailed(f"no {key}= in neper's output ({what})") from None


def neper_stream(text: str) -> dict:
    """tcp_stream's client (the writer): the receiver's rate, remote_throughput= in bit/s.

    neper's writer measures nothing of its own (local_throughput=0); the
    reader sends its rate back over the control connection, so the client
    prints the receiver-side figure, as the other tools' are.
    """
    keys = neper_keys(text)
    bps = _neper_num(keys, "remote_throughput", "the reader's bit/s")
    return _nonzero({"gbps": bps / 1e9})


def neper_rr(text: str) -> dict:
    """tcp_rr or tcp_crr's client: throughput= (transactions/s) and, with
    `-p 50,99`, latency_p50=/latency_p99= (seconds; neper's percentiles are
    over its flows' round trips, as linerate's)."""
    keys = neper_keys(text)
    tps = _neper_num(keys, "throughput", "transactions/s")
    if not tps > 0:   # also NaN
        raise RunFailed("neper reported 0 transactions/s")
    m = {"tps": tps}
    for pct in ("p50", "p99"):
        if f"latency_{pct}" in keys:
            m[f"{pct}_us"] = _neper_num(keys, f"latency_{pct}", "round trip, s") * 1e6
    return m


def vm_rss_mib(pid: int) -> float:
    """VmRSS of a live process, MiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"VmRSS:\s*(\d+)\s*kB", f.read())
    except OSError:
        raise RunFailed(f"pid {pid} is gone") from None
    if not m:
        raise RunFailed(f"no VmRSS for pid {pid}")
    return int(m.group(1)) / 1024
