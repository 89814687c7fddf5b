"""Statistics over runs and the tables `bench/run` prints and writes.

Per variant and metric: median, min, max over the runs that produced numbers
(failed runs are counted, not averaged in), the spread (max − min) / median,
and the ratio of the median to the best anchor's median in the same cell
(best = highest for rates, lowest for latencies and memory). A ratio above
1.00 is better for a rate, below 1.00 better for a latency or a size. A cell
may also name one linerate variant its reference (issue 26: `--flows` against
linerate's own `-P 2`): each other linerate variant's ratio to it on the first
metric gets a column of its own.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    higher_is_better: bool
    ratio: bool = True
    fmt: str = "{:.2f}"


METRICS = {m.key: m for m in (
    Metric("gbps", "Gbit/s", True),
    Metric("rx_mpps", "received M dgram/s", True, fmt="{:.3f}"),
    Metric("tx_mpps", "sent M dgram/s", True, ratio=False, fmt="{:.3f}"),
    Metric("loss_pct", "loss %", False, ratio=False, fmt="{:.2f}"),
    Metric("p50_us", "p50 µs", False),
    Metric("p99_us", "p99 µs", False),
    Metric("tps", "trans/s", True, fmt="{:.0f}"),
    Metric("cps", "conn/s", True, fmt="{:.0f}"),
    Metric("idle_mib", "idle RSS MiB", False, fmt="{:.1f}"),
    Metric("p1_mib", "RSS -P 1 MiB", False, fmt="{:.1f}"),
    Metric("p4_mib", "RSS -P 4 MiB", False, fmt="{:.1f}"),
    Metric("per_stream_mib", "MiB per stream", False, fmt="{:.2f}"),
    Metric("msg_gbps", "Gbit/s", True),
    # CPU both processes spent (the kernel's accounting of each) per unit of work.
    Metric("cpu_s_gib", "CPU-s per GiB", False, fmt="{:.3f}"),
    Metric("cpu_ms_ktrans", "CPU-ms per k trans", False, fmt="{:.2f}"),
    Metric("cpu_ms_kconn", "CPU-ms per k conn", False, fmt="{:.2f}"),
    Metric("flows_mib", "RSS with the flows MiB", False, fmt="{:.1f}"),
    Metric("per_flow_kib", "KiB per flow", False, fmt="{:.2f}"),
)}


@dataclass
class Outcome:
    """The runs of one variant in one cell on one path."""

    label: str
    anchor: bool
    runs: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: str | None = None
    reference: bool = False       # the linerate variant the others are also compared with

    def values(self, key: str) -> list[float]:
        return [r[key] for r in self.runs if r.get(key) is not None]

    def median(self, key: str) -> float | None:
        v = self.values(key)
        return statistics.median(v) if v else None


def best_anchor(outcomes: list[Outcome], m: Metric) -> Outcome | None:
    cands = [o for o in outcomes if o.anchor and o.median(m.key) is not None]
    if not cands:
        return None
    pick = max if m.higher_is_better else min
    return pick(cands, key=lambda o: o.median(m.key))


def _cell(o: Outcome, m: Metric) -> str:
    v = o.values(m.key)
    if not v:
        return "–"
    f = m.fmt
    return f"{f.format(statistics.median(v))} [{f.format(min(v))}–{f.format(max(v))}]"


def _spread(o: Outcome, m: Metric) -> str:
    v = o.values(m.key)
    med = statistics.median(v) if v else 0
    if not v or med == 0:
        return "–"
    return f"{100 * (max(v) - min(v)) / abs(med):.0f}%"


def ratio(o: Outcome, best: Outcome | None, m: Metric) -> float | None:
    a = o.median(m.key)
    b = best.median(m.key) if best else None
    if a is None or not b:
        return None
    return a / b


def reference(outcomes: list[Outcome]) -> Outcome | None:
    return next((o for o in outcomes if o.reference and not o.skipped), None)


def table(outcomes: list[Outcome], metrics: list[str]) -> list[str]:
    """A markdown table: one row per variant, medians [min–max], spread, ratios."""
    ms = [METRICS[k] for k in metrics]
    rms = [m for m in ms if m.ratio]
    bests = {m.key: best_anchor(outcomes, m) for m in rms}
    ref = reference(outcomes)
    head = ["variant", "runs"] + [f"{m.title} median [min–max]" for m in ms] + [f"spread ({ms[0].title})"]
    head += [f"× best anchor ({m.title})" for m in rms]
    head += [f"× reference ({ms[0].title})"] if ref else []
    head += ["note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in outcomes:
        label = o.label + (" ⚓" if o.anchor else "") + (" (reference)" if o.reference else "")
        if o.skipped:
            row = [label, "skipped"] + ["–"] * (len(head) - 3) + [o.skipped]
        else:
            n = len(o.runs) + len(o.failures)
            row = [label, f"{len(o.runs)}/{n}"] + [_cell(o, m) for m in ms] + [_spread(o, ms[0])]
            for m in rms:
                r = ratio(o, bests[m.key], m)
                row.append("–" if r is None else f"{r:.2f}")
            if ref:
                r = None if o.anchor or o is ref else ratio(o, ref, ms[0])
                row.append("–" if r is None else f"{r:.2f}")
            row.append(f"failed: {o.failures[0]}" if o.failures else "")
        lines.append("| " + " | ".join(row) + " |")
    named = [f"{m.title}: {bests[m.key].label}" for m in rms if bests[m.key]]
    if named:
        lines.append("")
        lines.append("best anchor — " + "; ".join(named) + " (⚓ marks anchors)")
    return lines


def headline(outcomes: list[Outcome], metric: str, against_reference: bool = False) -> tuple[str, float] | None:
    """The best linerate variant on `metric` and its ratio to the best anchor (or to the reference)."""
    m = METRICS[metric]
    best = reference(outcomes) if against_reference else best_anchor(outcomes, m)
    lr = [o for o in outcomes if not o.anchor and not o.reference and o.median(m.key) is not None]
    if not lr or not best:
        return None
    pick = max if m.higher_is_better else min
    top = pick(lr, key=lambda o: o.median(m.key))
    r = ratio(top, best, m)
    return (top.label, r) if r is not None else None
