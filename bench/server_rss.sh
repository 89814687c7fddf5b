#!/usr/bin/env bash
# What a long-running linerate server keeps after tests end (issue 28): start
# `linerate server` on loopback, run 100 short mixed tests against it (20 each
# of tcp, udp -b 0, rr, crr and tcp -P 4), and print its resident memory
# (VmRSS) idle before and after, and its thread count after (a leaked thread
# shows there). Target: <= 8 MiB after the 100 tests.
#
# Usage: bench/server_rss.sh [LINERATE]   (default: target/release/linerate,
#        else target/debug/linerate; say which build the figures come from)
#   ROUNDS=20   tests per kind     PORT=21900   the server's port
# Loopback only; every test is 0.2 s and the whole run is bounded by ROUNDS.
set -euo pipefail

cd "$(dirname "$0")/.."
lr=${1:-}
if [ -z "$lr" ]; then
    for c in target/release/linerate target/debug/linerate; do
        [ -x "$c" ] && { lr=$c; break; }
    done
fi
[ -x "${lr:-}" ] || { echo "no linerate binary (cargo build --release)" >&2; exit 2; }
rounds=${ROUNDS:-20}
port=${PORT:-21900}
host=127.0.0.1

"$lr" server -B "$host" -p "$port" >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
# Anonymous memory (heap, stacks): what tests can leave behind; the rest of
# VmRSS is the binary's own pages, read in as its code runs.
anon_kib() { awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status"; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$pid/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# Wait (bounded) until the server listens, then let it settle.
for _ in $(seq 50); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
    sleep 0.1
done
sleep 0.5
before=$(rss_kib)
anon_before=$(anon_kib)
threads_before=$(threads)

failed=0
for _ in $(seq "$rounds"); do
    for args in "tcp -t 0.2" "udp -b 0 -t 0.2" "rr --sizes 64 -t 0.2" "crr -t 0.2" "tcp -P 4 -t 0.2"; do
        # shellcheck disable=SC2086
        timeout 20 "$lr" $args "$host" -p "$port" >/dev/null 2>&1 || failed=$((failed + 1))
    done
done
# A finished test's threads end within the server's own deadlines.
sleep 1
after=$(rss_kib)
anon_after=$(anon_kib)
threads_after=$(threads)

echo "binary:          $lr"
echo "tests:           $((rounds * 5)) ($failed failed)"
echo "rss_idle_before: $(mib "$before") MiB"
echo "rss_idle_after:  $(mib "$after") MiB"
echo "anon_before:     $(mib "$anon_before") MiB"
echo "anon_after:      $(mib "$anon_after") MiB"
echo "threads_before:  $threads_before"
echo "threads_after:   $threads_after"
