#!/usr/bin/env bash
# bench/udp.sh — linerate vs iperf3, iperf2 and sockperf: UDP packet rate and
# loss on loopback, side by side.
#
# What it measures
#   Each tool sends UDP datagrams as fast as it can (no pacing) from a client
#   to its own server on 127.0.0.1, for TIME seconds, at each UDP payload size
#   in SIZES (default 64, 1472 and 8972 bytes — the same payload size on the
#   wire for every tool; linerate's 28-byte header and iperf's are inside it):
#     linerate  linerate udp HOST -b 0 -l N              (client sends)
#     iperf3    iperf3 -c HOST -u -b 0 -l N
#     iperf2    iperf -c HOST -u -b 100G -l N            (iperf2 has no -b 0)
#     sockperf  sockperf throughput -i HOST -m N         (max rate by default)
#   and records datagrams sent per second, datagrams received per second and
#   the loss, each as the tool itself reports them:
#     linerate  .sums[].udp.sent_pps / received_pps / loss_percent
#               (received = distinct sequence numbers before the drain deadline)
#     iperf3    .end.sum_sent.packets / seconds; (sum_received.packets −
#               lost_packets) / seconds; sum_received.lost_percent
#     iperf2    the server's CSV report: total − lost datagrams over its interval
#     sockperf  client "Total of N messages sent in T sec"; server "Total N
#               messages received" at exit (it counts its warm-up messages too,
#               so its loss can come out slightly negative)
#   Runs are interleaved — linerate, iperf3, iperf2, sockperf, linerate, … —
#   RUNS times per size, so slow drift of the machine hits all tools alike.
#
# How to read the output
#   One block per size, one row per tool: median, min and max received
#   datagrams/s (thousands), median sent datagrams/s, median loss, and
#   "vs iperf3" = the tool's median received rate / iperf3's. On loopback
#   client and server share the CPUs; one syscall per datagram is the limit
#   of every tool here (a few hundred thousand datagrams/s on a small
#   machine), so ratios near 1.00 are the expected result and differences of
#   a few percent inside overlapping min..max ranges are noise. Unpaced
#   senders outrun their receivers on loopback, so every tool loses
#   datagrams at the receiving socket; what matters is that the loss is
#   reported, and how much arrives. Failed runs are counted in "fail" and
#   left out of the statistics. This is a benchmark, not a test: it never
#   fails because a number is low.
#
# Raw data
#   bench/results/udp-<timestamp>.csv   one row per run (all tools)
#   bench/results/udp-<timestamp>/      each run's output and stderr
#
# Usage
#   bash bench/udp.sh                        # RUNS=5 TIME=3: about 5 minutes
#   RUNS=3 TIME=2 bash bench/udp.sh
#   SIZES="1472" TOOLS="linerate iperf3" bash bench/udp.sh
#
# Environment
#   RUNS      runs per tool per size (default 5)
#   TIME      seconds per run, whole number (default 3)
#   SIZES     UDP payload sizes in bytes (default "64 1472 8972")
#   TOOLS     subset of: linerate iperf3 iperf2 sockperf (default all)
#   PAUSE     seconds to sleep between runs (default 1)
#   PIN       1 (default, with 2+ CPUs): every tool's server runs on CPU 0 and
#             its client on CPU 1 (taskset), so all tools get the same CPU
#             placement instead of whatever the scheduler picks per run (on a
#             2-CPU host, sender and receiver sharing one CPU halves what
#             arrives, and that lottery swamps the differences between
#             tools); 0: no pinning
#   LINERATE  linerate binary (default target/release/linerate; built with
#             `cargo build --release` if missing)
#   PORT_BASE first port tried for the servers (default 15301)
#
# Needs: iperf3, iperf (2.x), sockperf (Debian packages; installed with
# apt-get when missing and running as root), python3, ss (iproute2),
# timeout (coreutils).

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

RUNS=${RUNS:-5}
TIME=${TIME:-3}
SIZES=${SIZES:-"64 1472 8972"}
TOOLS=${TOOLS:-"linerate iperf3 iperf2 sockperf"}
PAUSE=${PAUSE:-1}
PIN=${PIN:-1}
LINERATE=${LINERATE:-target/release/linerate}
PORT_BASE=${PORT_BASE:-15301}
HOST=127.0.0.1

die() { echo "bench/udp.sh: $*" >&2; exit 1; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive whole number (got '$RUNS')"
[[ $TIME =~ ^[1-9][0-9]*$ ]] || die "TIME must be a positive whole number of seconds (got '$TIME')"
[[ $PAUSE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "PAUSE must be a number of seconds (got '$PAUSE')"
[[ $PORT_BASE =~ ^[0-9]+$ ]] && (( PORT_BASE >= 1024 && PORT_BASE <= 65000 )) \
    || die "PORT_BASE must be 1024..65000 (got '$PORT_BASE')"
for s in $SIZES; do
    [[ $s =~ ^[0-9]+$ ]] && (( s >= 64 && s <= 65507 )) || die "sizes must be 64..65507 bytes (got '$s')"
done
for t in $TOOLS; do
    case $t in linerate|iperf3|iperf2|sockperf) ;; *) die "unknown tool '$t'";; esac
done

# ---- prerequisites ---------------------------------------------------------

need_pkg() { # COMMAND PACKAGE
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
for t in $TOOLS; do
    case $t in
        iperf3) need_pkg iperf3 iperf3 ;;
        iperf2) need_pkg iperf iperf ;;
        sockperf) need_pkg sockperf sockperf ;;
    esac
done
command -v python3 >/dev/null 2>&1 || die "python3 not found"
command -v ss >/dev/null 2>&1 || die "ss (iproute2) not found"
command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) not found"
SRV=() CLI=()
if [[ $PIN == 1 ]] && (( $(nproc) >= 2 )) && command -v taskset >/dev/null 2>&1; then
    SRV=(taskset -c 0)
    CLI=(taskset -c 1)
fi

if [[ ! -x $LINERATE ]]; then
    echo "$LINERATE not found; running cargo build --release" >&2
    cargo build --release >&2 || die "cargo build --release failed"
fi
[[ -x $LINERATE ]] || die "$LINERATE is not executable"

# Stops pid $1: SIGINT first (sockperf prints its totals on it, iperf2 may
# ignore SIGTERM while a test runs), SIGKILL after 3 s; then reaps it.
stop_pid() {
    local pid=$1 i
    kill -INT "$pid" 2>/dev/null || true
    for (( i = 0; i < 30; i++ )); do
        # Gone, or exited and waiting to be reaped (state Z).
        [[ ! -r /proc/$pid/stat ]] && break
        [[ $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

TMPDIR_BENCH= LR_PID= I3_PID= RUN_PID=
cleanup() {
    local pid
    for pid in $LR_PID $I3_PID $RUN_PID; do
        stop_pid "$pid"
    done
    if [[ -n ${TMPDIR_BENCH:-} ]]; then rm -rf "$TMPDIR_BENCH"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Run a private copy, so that a `cargo build` during the benchmark cannot swap
# the client binary under a server that is still the old one.
TMPDIR_BENCH=$(mktemp -d "${TMPDIR:-/tmp}/linerate-bench.XXXXXX")
cp "$LINERATE" "$TMPDIR_BENCH/linerate"
LINERATE_SRC=$LINERATE
LINERATE=$TMPDIR_BENCH/linerate

# ---- ports and servers -------------------------------------------------------


port_free() { [[ -z $(ss -Htuln "sport = :$1" 2>/dev/null) ]]; }

# First free TCP+UDP port at or above $1, skipping those in $2; bounded.
pick_port() {
    local p=$1 skip=" ${2:-} " i
    for (( i = 0; i < 200; i++, p++ )); do
        [[ $skip == *" $p "* ]] && continue
        if port_free "$p"; then echo "$p"; return 0; fi
    done
    die "no free port in $1..$((p - 1))"
}

# Wait (at most ~5 s) until pid $1 has port $2 open (TCP listen or UDP bound).
wait_port() {
    local pid=$1 port=$2 i
    for (( i = 0; i < 50; i++ )); do
        kill -0 "$pid" 2>/dev/null || return 1
        [[ -n $(ss -Htuln "sport = :$port" 2>/dev/null) ]] && return 0
        sleep 0.1
    done
    return 1
}

STAMP=$(date +%Y%m%d-%H%M%S)
mkdir -p bench/results
OUTDIR=bench/results/udp-$STAMP
CSV=bench/results/udp-$STAMP.csv
mkdir -p "$OUTDIR"

P_LR=$(pick_port "$PORT_BASE")
P_I3=$(pick_port "$((P_LR + 1))" "$P_LR")
P_I2=$(pick_port "$((P_I3 + 1))" "$P_LR $P_I3")
P_SP=$(pick_port "$((P_I2 + 1))" "$P_LR $P_I3 $P_I2")

if [[ " $TOOLS " == *" linerate "* ]]; then
    "${SRV[@]}" "$LINERATE" server -B "$HOST" --port "$P_LR" >"$OUTDIR/linerate-server.log" 2>&1 &
    LR_PID=$!
    wait_port "$LR_PID" "$P_LR" || die "linerate server did not come up on $HOST:$P_LR"
fi
if [[ " $TOOLS " == *" iperf3 "* ]]; then
    "${SRV[@]}" iperf3 -s -B "$HOST" -p "$P_I3" >"$OUTDIR/iperf3-server.log" 2>&1 &
    I3_PID=$!
    wait_port "$I3_PID" "$P_I3" || die "iperf3 server did not come up on $HOST:$P_I3"
fi

# ---- environment header ------------------------------------------------------

ver() { { "$@" 2>&1 || true; } | head -n1; }
git_rev=$(git describe --always --dirty 2>/dev/null || echo "?")
echo "# bench/udp.sh  $(date -Iseconds)"
echo "# $("$LINERATE" --version 2>/dev/null || echo linerate ?) ($LINERATE_SRC, git $git_rev)"
echo "# vs $(ver iperf3 --version); $(ver iperf -v); $(ver sockperf --version)"
echo "# kernel $(uname -r), $(nproc) CPUs, rmem_default $(sysctl -n net.core.rmem_default 2>/dev/null || echo ?)"
echo "# $HOST, RUNS=$RUNS TIME=${TIME}s SIZES='$SIZES' TOOLS='$TOOLS', unpaced, interleaved, $( ((${#SRV[@]})) && echo "servers on CPU 0, clients on CPU 1" || echo "not pinned"); raw: $CSV"
echo

# ---- runs --------------------------------------------------------------------

echo "size,tool,run,sent_pps,received_pps,loss_percent,exit_status" >"$CSV"
CLIENT_LIMIT=$(( TIME + 30 ))   # a client that takes longer than this is hung

# Each extractor prints "sent_pps received_pps loss_percent".
extract_linerate() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
u = [s["udp"] for s in d["sums"]]
sent = sum(x["sent_pps"] for x in u)
recv = sum(x["received_pps"] for x in u)
issued = sum(x["issued"] for x in u)
lost = sum(x["lost"] for x in u)
print(f"{sent:.1f} {recv:.1f} {100.0 * lost / issued if issued else 0.0:.4f}")
PY
}

extract_iperf3() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if "error" in d:
    raise SystemExit(d["error"])
s, r = d["end"]["sum_sent"], d["end"]["sum_received"]
sent = s["packets"] / s["seconds"]
recv = (r["packets"] - r["lost_packets"]) / r["seconds"]
print(f"{sent:.1f} {recv:.1f} {r['lost_percent']:.4f}")
PY
}

# iperf2: the client's CSV line (bytes sent) and the server's (lost/total).
extract_iperf2() { # CLIENT_OUT SERVER_OUT SIZE
    python3 - "$1" "$2" "$3" <<'PY'
import sys
def rows(path):
    out = []
    for line in open(path):
        f = line.strip().split(",")
        if len(f) >= 14:
            out.append(f)
    return out
c, s, size = rows(sys.argv[1]), rows(sys.argv[2]), int(sys.argv[3])
if not c or not s:
    raise SystemExit("no iperf2 report")
cl, sv = c[-1], [r for r in s if int(r[11]) > 0][-1]
def secs(iv):
    a, b = iv.split("-")
    return float(b) - float(a)
sent = int(cl[7]) / size / secs(cl[6])
lost, total = int(sv[10]), int(sv[11])
recv = (total - lost) / secs(sv[6])
print(f"{sent:.1f} {recv:.1f} {100.0 * lost / total:.4f}")
PY
}

extract_sockperf() { # CLIENT_OUT SERVER_OUT
    python3 - "$1" "$2" <<'PY'
import re, sys
c = open(sys.argv[1]).read()
s = open(sys.argv[2]).read()
m = re.search(r"Total of (\d+) messages sent in ([\d.]+) sec", c)
n = re.search(r"Total (\d+) messages received", s)
if not m or not n:
    raise SystemExit("no sockperf totals")
sent, secs, recv = int(m.group(1)), float(m.group(2)), int(n.group(1))
print(f"{sent / secs:.1f} {recv / secs:.1f} {100.0 * (sent - recv) / sent:.4f}")
PY
}

# run_one TOOL SIZE RUN  -> appends a CSV row, prints progress to stderr
run_one() {
    local tool=$1 size=$2 run=$3 rc=0 vals= base
    base=$OUTDIR/$size-$tool-$run
    case $tool in
        linerate)
            kill -0 "$LR_PID" 2>/dev/null || die "linerate server (pid $LR_PID) is gone"
            timeout "$CLIENT_LIMIT" "${CLI[@]}" "$LINERATE" udp "$HOST" -p "$P_LR" -t "$TIME" -b 0 -l "$size" --json \
                >"$base.json" 2>"$base.err" || rc=$?
            (( rc == 0 )) && vals=$(extract_linerate "$base.json" 2>>"$base.err") || true
            ;;
        iperf3)
            kill -0 "$I3_PID" 2>/dev/null || die "iperf3 server (pid $I3_PID) is gone"
            timeout "$CLIENT_LIMIT" "${CLI[@]}" iperf3 -c "$HOST" -p "$P_I3" -u -b 0 -l "$size" -t "$TIME" -J \
                >"$base.json" 2>"$base.err" || rc=$?
            (( rc == 0 )) && vals=$(extract_iperf3 "$base.json" 2>>"$base.err") || true
            ;;
        iperf2)
            # A server per run: its report of this run is the last line.
            "${SRV[@]}" iperf -s -u -B "$HOST" -p "$P_I2" -y C >"$base.server" 2>&1 &
            RUN_PID=$!
            wait_port "$RUN_PID" "$P_I2" || { echo "  iperf2 server did not start" >>"$base.err"; rc=1; }
            if (( rc == 0 )); then
                timeout "$CLIENT_LIMIT" "${CLI[@]}" iperf -c "$HOST" -u -p "$P_I2" -b 100G -l "$size" -t "$TIME" -y C \
                    >"$base.client" 2>"$base.err" || rc=$?
                sleep 1   # the server reports once the last datagrams are in
            fi
            stop_pid "$RUN_PID"
            RUN_PID=
            (( rc == 0 )) && vals=$(extract_iperf2 "$base.client" "$base.server" "$size" 2>>"$base.err") || true
            ;;
        sockperf)
            "${SRV[@]}" sockperf server -i "$HOST" -p "$P_SP" >"$base.server" 2>&1 &
            RUN_PID=$!
            wait_port "$RUN_PID" "$P_SP" || { echo "  sockperf server did not start" >>"$base.err"; rc=1; }
            if (( rc == 0 )); then
                timeout "$CLIENT_LIMIT" "${CLI[@]}" sockperf throughput -i "$HOST" -p "$P_SP" -m "$size" -t "$TIME" \
                    >"$base.client" 2>"$base.err" || rc=$?
                sleep 0.5
            fi
            # SIGINT makes the sockperf server print its received total.
            stop_pid "$RUN_PID"
            RUN_PID=
            (( rc == 0 )) && vals=$(extract_sockperf "$base.client" "$base.server" 2>>"$base.err") || true
            ;;
    esac
    if [[ -z $vals ]]; then
        (( rc == 124 )) && echo "  $size $tool run $run: timed out after ${CLIENT_LIMIT}s" >&2
        echo "  $size $tool run $run: FAILED (exit $rc; see $base.err)" >&2
        echo "$size,$tool,$run,,,,$rc" >>"$CSV"
        return 0
    fi
    local sent recv loss
    read -r sent recv loss <<<"$vals"
    echo "$size,$tool,$run,$sent,$recv,$loss,$rc" >>"$CSV"
    awk -v s="$size" -v t="$tool" -v r="$run" -v a="$sent" -v b="$recv" -v l="$loss" \
        'BEGIN { printf "  %5s B %-8s run %d: sent %8.1f k/s  received %8.1f k/s  loss %7.3f%%\n", s, t, r, a / 1e3, b / 1e3, l }' >&2
}

for size in $SIZES; do
    for (( run = 1; run <= RUNS; run++ )); do
        for tool in $TOOLS; do
            run_one "$tool" "$size" "$run"
            sleep "$PAUSE"
        done
    done
done

# ---- summary table -----------------------------------------------------------

# stats TOOL SIZE COLUMN -> "median min max n_ok n_fail"
stats() {
    awk -F, -v t="$1" -v s="$2" -v c="$3" '
        NR > 1 && $1 == s && $2 == t {
            if ($4 == "") { fail++ } else { v[n++] = $c + 0 }
        }
        END {
            if (n == 0) { printf "- - - 0 %d\n", fail + 0; exit }
            for (i = 1; i < n; i++) { x = v[i]; for (j = i - 1; j >= 0 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
            med = (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
            printf "%.4f %.4f %.4f %d %d\n", med, v[0], v[n - 1], n, fail + 0
        }' "$CSV"
}

k() { if [[ $1 == - ]]; then echo -; else awk -v x="$1" 'BEGIN { printf "%.1f", x / 1e3 }'; fi; }
p() { if [[ $1 == - ]]; then echo -; else printf "%.3f" "$1"; fi; }

echo
printf "%-6s %-9s | %-27s | %9s | %9s | %8s | %s\n" "" "" "received k datagrams/s" "sent k/s" "loss %" "vs" "fail"
printf "%-6s %-9s | %8s %8s %8s  | %9s | %9s | %8s |\n" "size" "tool" "median" "min" "max" "median" "median" "iperf3"
printf -- "-------------------+-----------------------------+-----------+-----------+----------+-----\n"
for size in $SIZES; do
    read -r i3m _ <<<"$(stats iperf3 "$size" 5)"
    for tool in $TOOLS; do
        read -r rm rmin rmax _ rf <<<"$(stats "$tool" "$size" 5)"
        read -r sm _ <<<"$(stats "$tool" "$size" 4)"
        read -r lm _ <<<"$(stats "$tool" "$size" 6)"
        ratio=$(awk -v a="$rm" -v b="${i3m:--}" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
        printf "%-6s %-9s | %8s %8s %8s  | %9s | %9s | %8s | %s\n" "$size" "$tool" \
            "$(k "$rm")" "$(k "$rmin")" "$(k "$rmax")" "$(k "$sm")" "$(p "$lm")" "$ratio" "$rf"
    done
done
echo
echo "raw per-run numbers: $CSV (output and stderr of each run in $OUTDIR/)"
