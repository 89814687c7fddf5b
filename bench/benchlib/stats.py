"""Statistics over runs and the tables `bench/run` prints and writes.

Per variant and metric: median, min, max over the runs that produced numbers
(failed runs are counted, not averaged in), the spread (max − min) / median,
and the ratio of the median to the best anchor's median in the same cell
(best = highest for rates, lowest for latencies and memory). A ratio above
1.00 is better for a rate, below 1.00 better for a latency or a size.
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
)}


@dataclass
class Outcome:
    """The runs of one variant in one cell on one path."""

    label: str
    anchor: bool
    runs: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: str | None = None

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


def table(outcomes: list[Outcome], metrics: list[str]) -> list[str]:
    """A markdown table: one row per variant, medians [min–max], spread, ratios."""
    ms = [METRICS[k] for k in metrics]
    rms = [m for m in ms if m.ratio]
    bests = {m.key: best_anchor(outcomes, m) for m in rms}
    head = ["variant", "runs"] + [f"{m.title} median [min–max]" for m in ms] + [f"spread ({ms[0].title})"]
    head += [f"× best anchor ({m.title})" for m in rms] + ["note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in outcomes:
        label = o.label + (" ⚓" if o.anchor else "")
        if o.skipped:
            row = [label, "skipped"] + ["–"] * (len(ms) + 1 + len(rms)) + [o.skipped]
        else:
            n = len(o.runs) + len(o.failures)
            row = [label, f"{len(o.runs)}/{n}"] + [_cell(o, m) for m in ms] + [_spread(o, ms[0])]
            for m in rms:
                r = ratio(o, bests[m.key], m)
                row.append("–" if r is None else f"{r:.2f}")
            row.append(f"failed: {o.failures[0]}" if o.failures else "")
        lines.append("| " + " | ".join(row) + " |")
    named = [f"{m.title}: {bests[m.key].label}" for m in rms if bests[m.key]]
    if named:
        lines.append("")
        lines.append("best anchor — " + "; ".join(named) + " (⚓ marks anchors)")
    return lines


def headline(outcomes: list[Outcome], metric: str) -> tuple[str, float] | None:
    """The best linerate variant on `metric` and its ratio to the best anchor."""
    m = METRICS[metric]
    best = best_anchor(outcomes, m)
    lr = [o for o in outcomes if not o.anchor and o.median(m.key) is not None]
    if not lr or not best:
        return None
    pick = max if m.higher_is_better else min
    top = pick(lr, key=lambda o: o.median(m.key))
    r = ratio(top, best, m)
    return (top.label, r) if r is not None else None
