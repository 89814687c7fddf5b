#!/usr/bin/env bash
# UDP round trips over AF_XDP on a veth pair between two network namespaces
# it creates (198.18.0.0/15, deleted at exit): `rr --engine xdp
# --server-engine xdp` (both sides spin on their rings, xdp's default for
# rr) against `rr --busy-poll --engine syscall` and sockperf ping-pong
# --nonblocked (client and server spinning), SIZE-byte messages, RUNS
# interleaved runs each; prints each run and the median with the spread
# (min..max) of p50, p99 and transactions/s (issue 25's goal: xdp p50 ≤
# 0.8× of the best of the other two). Needs root; sockperf from PATH
# (Debian: apt-get install sockperf), skipped with the reason where it is
# missing.
#
# Usage: sudo bench/xdp_rr.sh [LINERATE]   (default: target/release/linerate,
#        else target/debug/linerate; say which build the figures come from)
#   RUNS=5   runs per variant     SECS=3   seconds per run     SIZE=64
#   VARIANTS="xdp syscall-bp sockperf-nb"  which to run; also xdp-bp (xdp
#            with --busy-poll: how a build from before xdp rr spun by
#            default, 2026-11-28, spun) and xdp-sleep (the client sleeps
#            in poll(2), --xdp-sleep; the server spins)
set -euo pipefail

cd "$(dirname "$0")/.."
. bench/netns.sh
netns_linerate "${1:-}"
runs=${RUNS:-5}
secs=${SECS:-3}
size=${SIZE:-64}
sp=$(command -v sockperf || true)
netns_pair lrxr
ip netns exec "$b" "$lr" server -B 198.18.0.2 -p 21951 >/dev/null 2>&1 &
pids+=($!)
sleep 1

# One linerate run: prints "p50_us p99_us tps".
lr_run() {
    ip netns exec "$a" timeout $((secs + 30)) "$lr" rr 198.18.0.2 -p 21951 \
        --proto udp -s "$size" -t "$secs" --json "$@" |
        python3 -c 'import sys; sys.path.insert(0, "bench")
from benchlib import parse
m = parse.linerate_rr(sys.stdin.read()); print(m["p50_us"], m["p99_us"], m["tps"])'
}

# One sockperf run, its server spinning for that run only (a --nonblocked
# server takes a CPU even while idle).
sp_run() {
    ip netns exec "$b" "$sp" server -i 198.18.0.2 -p 21952 --nonblocked >/dev/null 2>&1 &
    local s=$!
    sleep 0.5
    ip netns exec "$a" timeout $((secs + 30)) "$sp" ping-pong -i 198.18.0.2 -p 21952 \
        -m "$(( size < 14 ? 14 : size ))" -t "$secs" --full-rtt --nonblocked 2>&1 |
        python3 -c 'import sys; sys.path.insert(0, "bench")
from benchlib import parse
m = parse.sockperf_pingpong(sys.stdin.read()); print(m["p50_us"], m["p99_us"], m["tps"])' || true
    kill "$s" 2>/dev/null; wait "$s" 2>/dev/null || true
}

variants=()
for v in ${VARIANTS:-xdp syscall-bp sockperf-nb}; do
    if [ "$v" = sockperf-nb ] && [ -z "$sp" ]; then
        echo "sockperf: skipped (not on PATH; apt-get install sockperf)"
        continue
    fi
    variants+=("$v")
done
declare -A results
for ((i = 1; i <= runs; i++)); do
    for v in "${variants[@]}"; do
        case $v in
        xdp) r=$(lr_run --engine xdp --server-engine xdp) || r="" ;;
        xdp-bp) r=$(lr_run --engine xdp --server-engine xdp --busy-poll) || r="" ;;
        xdp-sleep) r=$(lr_run --engine xdp --xdp-sleep --server-engine xdp) || r="" ;;
        syscall-bp) r=$(lr_run --engine syscall --busy-poll) || r="" ;;
        sockperf-nb) r=$(sp_run) || r="" ;;
        *) echo "unknown variant $v (VARIANTS)" >&2; exit 2 ;;
        esac
        [ -n "$r" ] || r="failed"
        echo "$v ${size}B run $i: p50_us p99_us tps: $r"
        results[$v]+="$r"$'\n'
    done
done
echo
for v in "${variants[@]}"; do
    printf '%s' "${results[$v]}" | python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip() and l.strip() != "failed"]
if not rows:
    print(f"{sys.argv[1]:>12}: no successful run"); sys.exit()
col = lambda i: [float(r[i]) for r in rows]
f = lambda xs: f"{statistics.median(xs):.2f} µs ({min(xs):.2f}..{max(xs):.2f})"
print(f"{sys.argv[1]:>12} {sys.argv[2]} B: p50 {f(col(0))}, p99 {f(col(1))}, "
      f"{statistics.median(col(2)):.0f} transactions/s, {len(rows)} runs")' "$v" "$size"
done
