#!/usr/bin/env bash
# bench/rr.sh — linerate rr vs sockperf ping-pong and qperf, TCP and UDP
# request/response latency on loopback, side by side.
#
# What it measures
#   Round-trip time of one request/response transaction (a message of SIZE
#   bytes each way) on 127.0.0.1, one flow, over TCP and over UDP, for:
#     lr       linerate rr --proto P            (blocking sockets, the default)
#     lr-bp    linerate rr --proto P --busy-poll (non-blocking spin + SO_BUSY_POLL)
#     sp       sockperf ping-pong [--tcp]        (blocking)
#     sp-nb    sockperf ping-pong [--tcp] --nonblocked
#     qp       qperf tcp_lat / udp_lat
#   at each size in SIZES (default 1 64 1024). Per run: p50 and p99 of the
#   round trip in µs and transactions/s. Runs are interleaved (lr, lr-bp, sp,
#   sp-nb, qp, lr, …) RUNS times per size, so drift of the machine hits every
#   tool alike.
#
#   How each tool's figures are read, so that all are round trips:
#     linerate: .rr.phases[0].latency.p50_ns / p99_ns, transactions_per_second
#     sockperf: --full-rtt percentiles 50.000 / 99.000 (it prints half the round
#               trip without it); transactions/s = ReceivedMessages / RunTime
#               of its "[Valid Duration]" line (after its 400 ms warm-up).
#               sockperf's smallest message is 14 bytes (its header): at SIZE
#               below 14 it runs with 14 and the table says so.
#     qperf:    "latency" is half the mean round trip: round trip = 2 × latency;
#               it gives no percentiles, so its p50 column holds the mean round
#               trip (marked "mean") and its p99 is "-"; transactions/s =
#               1 / round trip.
#
# How to read the output
#   One block per size: median [min..max] over the runs of each tool, then the
#   ratios the project tracks:
#     lr/sp     p50 of linerate blocking ÷ p50 of sockperf blocking (goal ≤ 1.00)
#     lr-bp/sp-nb  p50 of linerate --busy-poll ÷ sockperf --nonblocked (goal ≤ 0.90)
#   and the same ratios for p99 and for transactions/s (higher is better there).
#   Loopback latency depends on the CPUs, their idle states and whatever else
#   runs: on a 2-core machine a busy-polling pair owns both cores, and any other
#   load shows up directly. Compare ratios within one run of this script, never
#   absolute microseconds across machines or days.
#   This is a benchmark, not a test: it never fails because a number is low.
#
# Raw data
#   bench/results/rr-<timestamp>.csv   one row per run (every tool)
#   bench/results/rr-<timestamp>/      each run's output
#
# Usage
#   bash bench/rr.sh                        # RUNS=5 TIME=3 SIZES="1 64 1024", tcp and udp: ~10 minutes
#   RUNS=3 TIME=2 SIZES=64 bash bench/rr.sh
#   TOOLS="lr sp" bash bench/rr.sh
#
# Environment
#   RUNS      runs per tool per size (default 5)
#   TIME      seconds per run, whole number (default 3)
#   SIZES     message sizes in bytes (default "1 64 1024")
#   PROTOS    subset of: tcp udp (default both)
#   TOOLS     subset of: lr lr-bp sp sp-nb qp (default all)
#   PAUSE     seconds between runs (default 0.5)
#   LINERATE  linerate binary (default target/release/linerate; built if missing)
#   PORT_BASE first port tried for the servers (default 16201)
#
# Needs: sockperf and qperf (Debian packages; installed with apt-get when
# missing and running as root), python3, ss (iproute2), timeout (coreutils).

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

RUNS=${RUNS:-5}
TIME=${TIME:-3}
SIZES=${SIZES:-"1 64 1024"}
PROTOS=${PROTOS:-"tcp udp"}
TOOLS=${TOOLS:-"lr lr-bp sp sp-nb qp"}
PAUSE=${PAUSE:-0.5}
LINERATE=${LINERATE:-target/release/linerate}
PORT_BASE=${PORT_BASE:-16201}
HOST=127.0.0.1

die() { echo "bench/rr.sh: $*" >&2; exit 1; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive whole number (got '$RUNS')"
[[ $TIME =~ ^[1-9][0-9]*$ ]] || die "TIME must be a positive whole number of seconds (got '$TIME')"
[[ $PAUSE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "PAUSE must be a number of seconds (got '$PAUSE')"
[[ $PORT_BASE =~ ^[0-9]+$ ]] && (( PORT_BASE >= 1024 && PORT_BASE <= 65000 )) \
    || die "PORT_BASE must be 1024..65000 (got '$PORT_BASE')"
for s in $SIZES; do
    [[ $s =~ ^[1-9][0-9]*$ ]] && (( s <= 65536 )) || die "sizes must be 1..65536 bytes (got '$s')"
done
for t in $TOOLS; do
    case $t in lr|lr-bp|sp|sp-nb|qp) ;; *) die "unknown tool '$t'";; esac
done
for pr in $PROTOS; do
    case $pr in tcp|udp) ;; *) die "unknown protocol '$pr'";; esac
done

# ---- prerequisites ---------------------------------------------------------

need_pkg() {  # need_pkg COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "$1 not found; installing $2 with apt-get" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y "$2" >&2 \
            || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y "$2" >&2; } \
            || die "could not install $2"
    else
        die "$1 not found (install it: apt-get install $2)"
    fi
}
need_pkg sockperf sockperf
need_pkg qperf qperf
command -v python3 >/dev/null 2>&1 || die "python3 not found"
command -v ss >/dev/null 2>&1 || die "ss (iproute2) not found"
command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) not found"

if [[ ! -x $LINERATE ]]; then
    echo "$LINERATE not found; running cargo build --release" >&2
    cargo build --release >&2 || die "cargo build --release failed"
fi

TMPDIR_BENCH= LR_PID= SP_PID= SPU_PID= QP_PID=
cleanup() {
    local pid
    for pid in $LR_PID $SP_PID $SPU_PID $QP_PID; do kill "$pid" 2>/dev/null || true; done
    for pid in $LR_PID $SP_PID $SPU_PID $QP_PID; do wait "$pid" 2>/dev/null || true; done
    if [[ -n ${TMPDIR_BENCH:-} ]]; then rm -rf "$TMPDIR_BENCH"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A private copy, so a `cargo build` during the run cannot swap the binary.
TMPDIR_BENCH=$(mktemp -d "${TMPDIR:-/tmp}/linerate-bench.XXXXXX")
cp "$LINERATE" "$TMPDIR_BENCH/linerate"
LINERATE_SRC=$LINERATE
LINERATE=$TMPDIR_BENCH/linerate

port_free() { [[ -z $(ss -Htln "sport = :$1" 2>/dev/null) ]]; }
pick_port() {  # first free TCP port at or above $1 not in "$2"
    local p=$1 i
    for (( i = 0; i < 200; i++, p++ )); do
        [[ " ${2:-} " == *" $p "* ]] && continue
        if port_free "$p"; then echo "$p"; return 0; fi
    done
    die "no free port in $1..$((p - 1))"
}
wait_listen() {  # wait_listen PID PORT (at most ~5 s)
    local i
    for (( i = 0; i < 50; i++ )); do
        kill -0 "$1" 2>/dev/null || return 1
        [[ -n $(ss -Htln "sport = :$2" 2>/dev/null) ]] && return 0
        sleep 0.1
    done
    return 1
}

STAMP=$(date +%Y%m%d-%H%M%S)
mkdir -p bench/results
OUTDIR=bench/results/rr-$STAMP
CSV=bench/results/rr-$STAMP.csv
mkdir -p "$OUTDIR"

P_LR=$(pick_port "$PORT_BASE")
P_SP=$(pick_port "$((P_LR + 1))" "$P_LR")
P_QP=$(pick_port "$((P_SP + 1))" "$P_LR $P_SP")
# sockperf's UDP server: a UDP port (checked free as TCP too; both are ours).
P_SPU=$(pick_port "$((P_QP + 1))" "$P_LR $P_SP $P_QP")

"$LINERATE" server -B "$HOST" --port "$P_LR" >"$OUTDIR/linerate-server.log" 2>&1 &
LR_PID=$!
wait_listen "$LR_PID" "$P_LR" || die "linerate server did not come up (see $OUTDIR/linerate-server.log)"
# One sockperf server answers both blocking and --nonblocked clients (the
# client's mode is what differs); it runs with its defaults.
sockperf server --tcp -i "$HOST" -p "$P_SP" >"$OUTDIR/sockperf-server.log" 2>&1 &
SP_PID=$!
wait_listen "$SP_PID" "$P_SP" || die "sockperf server did not come up (see $OUTDIR/sockperf-server.log)"
sockperf server -i "$HOST" -p "$P_SPU" >"$OUTDIR/sockperf-udp-server.log" 2>&1 &
SPU_PID=$!
sleep 0.5
kill -0 "$SPU_PID" 2>/dev/null || die "sockperf UDP server did not come up (see $OUTDIR/sockperf-udp-server.log)"
qperf --listen_port "$P_QP" >"$OUTDIR/qperf-server.log" 2>&1 &
QP_PID=$!
wait_listen "$QP_PID" "$P_QP" || die "qperf server did not come up (see $OUTDIR/qperf-server.log)"

echo "# bench/rr.sh  $(date -Iseconds)"
echo "# $("$LINERATE" --version 2>/dev/null) ($LINERATE_SRC, git $(git describe --always --dirty 2>/dev/null || echo '?'))"
echo "#   vs $(sockperf --version 2>&1 | head -n1), qperf $(qperf --version 2>&1 | head -n1)"
echo "# kernel $(uname -r), $(nproc) CPUs; $HOST, PROTOS='$PROTOS' RUNS=$RUNS TIME=${TIME}s SIZES='$SIZES', interleaved"
echo "# raw: $CSV"
echo

echo "proto,size,tool,run,tool_size,p50_us,p99_us,tps,exit_status" >"$CSV"
LIMIT=$(( TIME + 30 ))

# parse TOOL FILE -> "p50_us p99_us tps" (p99 "-" when the tool has none)
parse() {
    python3 - "$1" "$2" <<'PY'
import json, re, sys
tool, path = sys.argv[1], sys.argv[2]
text = open(path, errors="replace").read()
if tool.startswith("lr"):
    p = json.loads(text)["rr"]["phases"][0]
    print(p["latency"]["p50_ns"] / 1e3, p["latency"]["p99_ns"] / 1e3, p["transactions_per_second"])
elif tool.startswith("sp"):
    pct = dict(re.findall(r"percentile\s+([\d.]+)\s*=\s*([\d.]+)", text))
    m = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=\d+; ReceivedMessages=(\d+)", text)
    print(float(pct["50.000"]), float(pct["99.000"]), int(m.group(2)) / float(m.group(1)))
else:
    m = re.search(r"latency\s*=\s*([\d.]+)\s*(ns|us|ms|sec)", text)
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6}[m.group(2)]
    rtt = 2 * float(m.group(1)) * scale
    print(rtt, "-", 1e6 / rtt)
PY
}

run_one() {  # run_one PROTO TOOL SIZE RUN
    local proto=$1 tool=$2 size=$3 run=$4 rc=0 vals base tsize=$3
    base=$OUTDIR/$proto-$size-$tool-$run
    case $tool in
        lr|lr-bp)
            local bp=()
            [[ $tool == lr-bp ]] && bp=(--busy-poll)
            timeout "$LIMIT" "$LINERATE" rr "$HOST" -p "$P_LR" --proto "$proto" -s "$size" -t "$TIME" \
                "${bp[@]}" --json >"$base.out" 2>"$base.err" || rc=$?
            ;;
        sp|sp-nb)
            local args=()
            [[ $tool == sp-nb ]] && args+=(--nonblocked)
            if [[ $proto == tcp ]]; then args+=(--tcp -p "$P_SP"); else args+=(-p "$P_SPU"); fi
            (( tsize < 14 )) && tsize=14
            timeout "$LIMIT" sockperf ping-pong -i "$HOST" -m "$tsize" -t "$TIME" --full-rtt \
                "${args[@]}" >"$base.out" 2>"$base.err" || rc=$?
            ;;
        qp)
            timeout "$LIMIT" qperf "$HOST" --listen_port "$P_QP" -m "$size" -t "$TIME" "${proto}_lat" \
                >"$base.out" 2>"$base.err" || rc=$?
            ;;
    esac
    vals=
    (( rc == 0 )) && { vals=$(parse "$tool" "$base.out" 2>>"$base.err") || vals=; }
    if [[ -z $vals ]]; then
        echo "  $proto $size B $tool run $run: FAILED (exit $rc; see $base.err)" >&2
        echo "$proto,$size,$tool,$run,$tsize,,,,$rc" >>"$CSV"
        return 0
    fi
    local p50 p99 tps
    read -r p50 p99 tps <<<"$vals"
    echo "$proto,$size,$tool,$run,$tsize,$p50,$p99,$tps,$rc" >>"$CSV"
    printf "  %s %5s B %-6s run %d: p50 %8.2f µs  p99 %8s µs  %9.0f trans/s\n" \
        "$proto" "$size" "$tool" "$run" "$p50" "$p99" "$tps" >&2
}

for proto in $PROTOS; do
    for size in $SIZES; do
        for (( run = 1; run <= RUNS; run++ )); do
            for tool in $TOOLS; do
                run_one "$proto" "$tool" "$size" "$run"
                sleep "$PAUSE"
            done
        done
    done
done

python3 - "$CSV" "$SIZES" "$TOOLS" "$PROTOS" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
sizes, tools, protos = sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
def pick(proto, size, tool):
    return [r for r in rows if r["proto"] == proto and r["size"] == size and r["tool"] == tool]
def runs(proto, size, tool, col):
    return [float(r[col]) for r in pick(proto, size, tool) if r[col] not in ("", "-")]
def med(v):
    return statistics.median(v) if v else None
def cell(v, fmt="{:.2f}"):
    return "-" if not v else f"{fmt.format(med(v))} [{fmt.format(min(v))}..{fmt.format(max(v))}]"
def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"
names = {"lr": "linerate", "lr-bp": "linerate --busy-poll", "sp": "sockperf",
         "sp-nb": "sockperf --nonblocked", "qp": "qperf"}
print()
print("Round trips on loopback: median [min..max] over the runs")
for proto in protos:
    for size in sizes:
        print()
        print(f"{proto.upper()} {size} bytes")
        print(f"  {'tool':<22} {'p50 µs':<24} {'p99 µs':<24} {'trans/s':<28} {'fail'}")
        for t in tools:
            fails = sum(1 for r in pick(proto, size, t) if r["p50_us"] == "")
            label = names[t] + (f" {proto}_lat" if t == "qp" else "")
            tsz = {r["tool_size"] for r in pick(proto, size, t)}
            if tsz and tsz != {size}:
                label += f" (at {'/'.join(sorted(tsz))} B)"
            p50 = cell(runs(proto, size, t, "p50_us")) + (" mean" if t == "qp" else "")
            print(f"  {label:<22} {p50:<24} {cell(runs(proto, size, t, 'p99_us')):<24} "
                  f"{cell(runs(proto, size, t, 'tps'), '{:.0f}'):<28} {fails}")
        m = {t: {c: med(runs(proto, size, t, c)) for c in ("p50_us", "p99_us", "tps")} for t in tools}
        def r(a, b, c):
            return ratio(m.get(a, {}).get(c), m.get(b, {}).get(c))
        print(f"  ratios  lr/sp: p50 {r('lr', 'sp', 'p50_us')} (goal ≤ 1.00), p99 {r('lr', 'sp', 'p99_us')}, "
              f"trans/s {r('lr', 'sp', 'tps')}")
        print(f"          lr-bp/sp-nb: p50 {r('lr-bp', 'sp-nb', 'p50_us')} (goal ≤ 0.90), "
              f"p99 {r('lr-bp', 'sp-nb', 'p99_us')}, trans/s {r('lr-bp', 'sp-nb', 'tps')}")
        print(f"          lr/qp: round trip {r('lr', 'qp', 'p50_us')} (linerate p50 ÷ qperf mean)")
PY
echo
echo "raw per-run numbers: $CSV (each run's output in $OUTDIR/)"
