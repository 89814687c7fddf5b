#!/usr/bin/env bash
# bench/tcp.sh — linerate vs iperf3, TCP throughput on loopback, side by side.
#
# What it measures
#   Receiver-side TCP goodput (bits/s) of linerate and of iperf3 (Debian's
#   iperf3 package), both client and server on 127.0.0.1, with each tool's own
#   defaults (no -l / -w; both write 128 KiB per call), in
#   four cases:
#     fwd-P1   single stream, client sends
#     rev-P1   single stream, server sends (-R / --reverse)
#     fwd-P2   two streams (-P 2), client sends
#     rev-P2   two streams (-P 2), server sends
#   Runs are interleaved — linerate, iperf3, linerate, iperf3, … — RUNS times
#   each per case, so slow drift of the machine (thermal, noisy neighbours,
#   page cache) hits both tools alike.
#
#   linerate: receiver bit/s = sum over .sums[] of receiver_bits_per_second
#   iperf3:   receiver bit/s = .end.sum_received.bits_per_second
#
# How to read the output
#   One row per case: median / min / max in Gbit/s (10^9 bit/s) for each tool,
#   and "ratio" = linerate median / iperf3 median. A ratio near 1.00 means
#   parity; above 1 linerate moved more data. min..max is the spread over the
#   RUNS runs: if the two tools' ranges overlap widely, a ratio of a few percent
#   either way is noise, not a difference. Loopback throughput is bound by CPU
#   and memory bandwidth, not by a wire, so figures are only comparable within
#   one run of this script on one machine — never across machines or days.
#   "fail" counts runs where a client exited non-zero or its JSON could not be
#   read; those runs are left out of the statistics (and the raw JSON/stderr
#   is kept for a look).
#   -P 2: Debian 12's iperf3 (3.12) runs all streams of a test in one thread;
#   iperf3 became multi-threaded only in 3.16. linerate runs one thread per
#   stream, so with -P 2 the ratio mostly shows that difference (two CPUs vs
#   one), not a faster data path. Compare the -P 1 rows for the data path.
#   This is a benchmark, not a test: it never fails because a number is low.
#
# Raw data
#   bench/results/tcp-<timestamp>.csv   one row per run (both tools)
#   bench/results/tcp-<timestamp>/      each run's JSON and stderr
#
# Usage
#   bash bench/tcp.sh                       # RUNS=5 TIME=5: about 4 minutes
#   RUNS=3 TIME=3 bash bench/tcp.sh
#   LEN=128K bash bench/tcp.sh              # -l 128K on both tools
#   CASES="fwd-P1 rev-P1" bash bench/tcp.sh # a subset of the cases
#
# Environment
#   RUNS      runs per tool per case (default 5)
#   TIME      seconds per run, whole number (default 5)
#   LEN       if set, passed as -l to both tools (e.g. 128K, 1M)
#   CASES     space-separated subset of: fwd-P1 rev-P1 fwd-P2 rev-P2
#   PAUSE     seconds to sleep between runs (default 1)
#   LINERATE  linerate binary (default target/release/linerate; built with
#             `cargo build --release` if missing)
#   BUILD     1: run `cargo build --release` first (the header warns when the
#             binary is older than src/ or crates/)
#   PORT_BASE first port tried for the servers (default 15201)
#
# Needs: iperf3 (installed with apt-get if absent and running as root),
# python3 or jq, ss (iproute2), timeout (coreutils).

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

RUNS=${RUNS:-5}
TIME=${TIME:-5}
LEN=${LEN:-}
PAUSE=${PAUSE:-1}
CASES=${CASES:-"fwd-P1 rev-P1 fwd-P2 rev-P2"}
LINERATE=${LINERATE:-target/release/linerate}
PORT_BASE=${PORT_BASE:-15201}
HOST=127.0.0.1

die() { echo "bench/tcp.sh: $*" >&2; exit 1; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive whole number (got '$RUNS')"
[[ $TIME =~ ^[1-9][0-9]*$ ]] || die "TIME must be a positive whole number of seconds (got '$TIME')"
[[ $PAUSE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "PAUSE must be a number of seconds (got '$PAUSE')"
[[ $PORT_BASE =~ ^[0-9]+$ ]] && (( PORT_BASE >= 1024 && PORT_BASE <= 65000 )) \
    || die "PORT_BASE must be 1024..65000 (got '$PORT_BASE')"
if [[ -n $LEN ]]; then
    [[ $LEN =~ ^[0-9]+[KkMmGg]?$ ]] || die "LEN must look like 131072, 128K or 1M (got '$LEN')"
fi
for c in $CASES; do
    case $c in fwd-P1|rev-P1|fwd-P2|rev-P2) ;; *) die "unknown case '$c'";; esac
done

# ---- prerequisites ---------------------------------------------------------

if ! command -v iperf3 >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "iperf3 not found; installing it with apt-get" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y iperf3 >&2 \
            || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y iperf3 >&2; } \
            || die "could not install iperf3"
    else
        die "iperf3 not found (install it: apt-get install iperf3)"
    fi
fi
command -v ss >/dev/null 2>&1 || die "ss (iproute2) not found"
command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) not found"

if command -v python3 >/dev/null 2>&1; then
    JSON=python3
elif command -v jq >/dev/null 2>&1; then
    JSON=jq
else
    die "need python3 or jq to read JSON"
fi

if [[ ${BUILD:-0} == 1 || ! -x $LINERATE ]]; then
    echo "running cargo build --release" >&2
    cargo build --release >&2 || die "cargo build --release failed"
fi
[[ -x $LINERATE ]] || die "$LINERATE is not executable"

# The header names the git revision; say so when the binary predates the
# sources, since then the revision is not what is being measured.
STALE=
if [[ -n $(find src crates Cargo.toml Cargo.lock -newer "$LINERATE" -print -quit 2>/dev/null) ]]; then
    STALE=" — BINARY IS OLDER THAN THE SOURCES (BUILD=1 rebuilds)"
    echo "warning: $LINERATE is older than files in src/ or crates/; BUILD=1 runs cargo build --release first" >&2
fi

TMPDIR_BENCH= LR_PID= IP_PID=
cleanup() {
    local pid
    for pid in $LR_PID $IP_PID; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in $LR_PID $IP_PID; do
        wait "$pid" 2>/dev/null || true
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

# ---- JSON extraction: prints "receiver_bps sender_bps retransmits" ---------------

extract_linerate() {
    if [[ $JSON == python3 ]]; then
        python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["sums"]
if not s:
    raise SystemExit("no sums")
rx = sum(x["receiver_bits_per_second"] for x in s)
tx = sum(x["sender_bits_per_second"] for x in s)
rt = [x.get("retransmits") for x in s]
rt = "" if any(r is None for r in rt) else sum(rt)
print(f"{rx:.0f} {tx:.0f} {rt}")
PY
    else
        jq -er '[ ([.sums[].receiver_bits_per_second] | add | floor),
                  ([.sums[].sender_bits_per_second] | add | floor),
                  (if any(.sums[]; .retransmits == null) then ""
                   else ([.sums[].retransmits] | add) end) ] | map(tostring) | join(" ")' "$1"
    fi
}

extract_iperf3() {
    if [[ $JSON == python3 ]]; then
        python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if "error" in d:
    raise SystemExit(d["error"])
e = d["end"]
rx = e["sum_received"]["bits_per_second"]
tx = e["sum_sent"]["bits_per_second"]
rt = e["sum_sent"].get("retransmits", "")
print(f"{rx:.0f} {tx:.0f} {rt}")
PY
    else
        jq -er 'if has("error") then error(.error) else . end
                | [ (.end.sum_received.bits_per_second | floor),
                    (.end.sum_sent.bits_per_second | floor),
                    (.end.sum_sent.retransmits // "") ] | map(tostring) | join(" ")' "$1"
    fi
}

# ---- servers -----------------------------------------------------------------

port_free() { [[ -z $(ss -Htln "sport = :$1" 2>/dev/null) ]]; }

# First free TCP port at or above $1, skipping $2 (already handed out); bounded.
pick_port() {
    local p=$1 skip=${2:-0} i
    for (( i = 0; i < 200; i++, p++ )); do
        (( p == skip )) && continue
        if port_free "$p"; then echo "$p"; return 0; fi
    done
    die "no free port in $1..$((p - 1))"
}

# Wait (at most ~5 s) until pid $1 listens on port $2.
wait_listen() {
    local pid=$1 port=$2 i
    for (( i = 0; i < 50; i++ )); do
        kill -0 "$pid" 2>/dev/null || return 1
        [[ -n $(ss -Htln "sport = :$port" 2>/dev/null) ]] && return 0
        sleep 0.1
    done
    return 1
}


STAMP=$(date +%Y%m%d-%H%M%S)
mkdir -p bench/results
OUTDIR=bench/results/tcp-$STAMP
CSV=bench/results/tcp-$STAMP.csv
mkdir -p "$OUTDIR"

P1=$(pick_port "$PORT_BASE")
P2=$(pick_port "$((P1 + 1))" "$P1")

"$LINERATE" server -B "$HOST" --port "$P1" >"$OUTDIR/linerate-server.log" 2>&1 &
LR_PID=$!
wait_listen "$LR_PID" "$P1" || die "linerate server did not come up on $HOST:$P1 (see $OUTDIR/linerate-server.log)"

iperf3 -s -B "$HOST" -p "$P2" >"$OUTDIR/iperf3-server.log" 2>&1 &
IP_PID=$!
wait_listen "$IP_PID" "$P2" || die "iperf3 server did not come up on $HOST:$P2 (see $OUTDIR/iperf3-server.log)"

# ---- environment header ------------------------------------------------------

lr_version=$("$LINERATE" --version 2>/dev/null || echo "?")
ip_version=$(iperf3 --version 2>/dev/null | head -n1 || echo "?")
git_rev=$(git describe --always --dirty 2>/dev/null || echo "?")
cc=$(sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || echo "?")

echo "# bench/tcp.sh  $(date -Iseconds)"
echo "# $lr_version ($LINERATE_SRC built $(date -r "$LINERATE_SRC" +%FT%T 2>/dev/null || echo "?"), git $git_rev$STALE) vs $ip_version"
echo "# kernel $(uname -r), $(nproc) CPUs, congestion control $cc, load average $(cut -d" " -f1-3 /proc/loadavg 2>/dev/null || echo "?")"
echo "# $HOST, RUNS=$RUNS TIME=${TIME}s LEN=${LEN:-default (128K both)}, interleaved"
echo "# linerate port $P1, iperf3 port $P2; raw: $CSV"
echo

# ---- runs --------------------------------------------------------------------

echo "case,tool,run,len,receiver_bps,sender_bps,retransmits,exit_status,load1_before" >"$CSV"

CLIENT_LIMIT=$(( TIME + 30 ))   # a client that takes longer than this is hung

# run_one TOOL CASE RUN  -> appends a CSV row, prints progress to stderr
run_one() {
    local tool=$1 cs=$2 run=$3 args=() rc=0 vals base load
    [[ $cs == rev-* ]] && args+=(-R)
    [[ $cs == *-P2 ]] && args+=(-P 2)
    [[ -n $LEN ]] && args+=(-l "$LEN")
    base=$OUTDIR/$cs-$tool-$run
    load=$(cut -d" " -f1 /proc/loadavg 2>/dev/null || echo "")

    if [[ $tool == linerate ]]; then
        kill -0 "$LR_PID" 2>/dev/null || die "linerate server (pid $LR_PID) is gone; see $OUTDIR/linerate-server.log"
        timeout "$CLIENT_LIMIT" "$LINERATE" tcp "$HOST" -p "$P1" -t "$TIME" "${args[@]}" --json \
            >"$base.json" 2>"$base.err" || rc=$?
    else
        kill -0 "$IP_PID" 2>/dev/null || die "iperf3 server (pid $IP_PID) is gone; see $OUTDIR/iperf3-server.log"
        timeout "$CLIENT_LIMIT" iperf3 -c "$HOST" -p "$P2" -t "$TIME" "${args[@]}" -J \
            >"$base.json" 2>"$base.err" || rc=$?
    fi

    vals=
    if (( rc == 0 )); then
        vals=$("extract_$tool" "$base.json" 2>>"$base.err") || vals=
    fi
    if [[ -z $vals ]]; then
        (( rc == 124 )) && echo "  $cs $tool run $run: timed out after ${CLIENT_LIMIT}s" >&2
        echo "  $cs $tool run $run: FAILED (exit $rc; see $base.err)" >&2
        echo "$cs,$tool,$run,${LEN:-default},,,,$rc,$load" >>"$CSV"
        return 0
    fi
    local rx tx rt
    read -r rx tx rt <<<"$vals"
    echo "$cs,$tool,$run,${LEN:-default},$rx,$tx,$rt,$rc,$load" >>"$CSV"
    awk -v c="$cs" -v t="$tool" -v r="$run" -v rx="$rx" -v rt="$rt" \
        'BEGIN { printf "  %-7s %-8s run %d: %7.2f Gbit/s  (retransmits %s)\n", c, t, r, rx / 1e9, (rt == "" ? "?" : rt) }' >&2
}

for cs in $CASES; do
    for (( run = 1; run <= RUNS; run++ )); do
        for tool in linerate iperf3; do
            run_one "$tool" "$cs" "$run"
            sleep "$PAUSE"
        done
    done
done

# ---- summary table -----------------------------------------------------------

# stats TOOL CASE -> "median min max n_ok n_fail" (Gbit/s), or "- - - 0 n" if no run succeeded
stats() {
    awk -F, -v t="$1" -v c="$2" '
        NR > 1 && $1 == c && $2 == t {
            if ($5 == "") { fail++ } else { v[n++] = $5 / 1e9 }
        }
        END {
            if (n == 0) { printf "- - - 0 %d\n", fail + 0; exit }
            # insertion sort: n is small
            for (i = 1; i < n; i++) { x = v[i]; for (j = i - 1; j >= 0 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
            med = (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
            printf "%.4f %.4f %.4f %d %d\n", med, v[0], v[n - 1], n, fail + 0
        }' "$CSV"
}

g() { if [[ $1 == - ]]; then echo -; else printf "%.2f" "$1"; fi; }

echo
printf "%-7s | %-24s | %-24s | %-5s | %s\n" "" "linerate Gbit/s" "iperf3 Gbit/s" "ratio" "fail"
printf "%-7s | %7s %7s %7s  | %7s %7s %7s  | %5s | %s\n" \
    "case" "median" "min" "max" "median" "min" "max" "lr/ip" "lr/ip"
printf -- "--------+--------------------------+--------------------------+-------+------\n"
for cs in $CASES; do
    read -r lm lmin lmax _ lf <<<"$(stats linerate "$cs")"
    read -r im imin imax _ if_ <<<"$(stats iperf3 "$cs")"
    ratio=$(awk -v a="$lm" -v b="$im" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
    printf "%-7s | %7s %7s %7s  | %7s %7s %7s  | %5s | %s/%s\n" "$cs" \
        "$(g "$lm")" "$(g "$lmin")" "$(g "$lmax")" "$(g "$im")" "$(g "$imin")" "$(g "$imax")" \
        "$ratio" "$lf" "$if_"
done
echo
echo "load average at the end: $(cut -d" " -f1-3 /proc/loadavg 2>/dev/null || echo "?") (the benchmark itself keeps about $(nproc) CPUs busy; much more means something else ran)"
echo "raw per-run numbers: $CSV (JSON and stderr of each run in $OUTDIR/)"
