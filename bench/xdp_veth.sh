#!/usr/bin/env bash
# UDP datagrams/s on a veth pair between two network namespaces it creates
# (198.18.0.0/15, deleted at exit): `--engine xdp` against `--engine batch`
# on the client (sender), the server on its default engine, 64 B and
# 1472 B datagrams unpaced, RUNS interleaved runs each; prints each run and
# the median with the spread (min..max) of sent and received datagrams/s
# and the loss (issue 25). Needs root. The reference AF_XDP loop of the
# issue (bpf-examples) is not run here: the crate's raw-frames probe
# (`cargo build --release -p linerate-xdp --example veth_pps`) is, with
# REF=, interleaved with the rest.
#
# Usage: sudo bench/xdp_veth.sh [LINERATE]   (default: target/release/linerate,
#        else target/debug/linerate; say which build the figures come from)
#   RUNS=5   runs per variant     SECS=2   seconds per run
#   LENS="64 1472"   datagram sizes     STREAMS=1   streams per test (-P);
#   STREAMS="1 2" compares one stream with two
#   QUEUES=1   receive and transmit queues on each veth end: with 2 or
#              more, xdp's streams each get an AF_XDP socket on a queue of
#              their own (one queue: they share its socket; docs/engines.md)
#   ENGINES="batch xdp"   client engines compared; also xdp-sleep (an
#              xdp client against a server started --engine xdp
#              --xdp-sleep: the receiver sleeps in poll(2), not spinning)
#   SERVER_ENGINE=   the server's engine for the test (--server-engine;
#              unset: the server's default). SERVER_ENGINE=xdp with
#              ENGINES=xdp is the reference loop's mode: AF_XDP both ends
#   REF=PATH   also run the reference loop, target/release/examples/veth_pps
#              (native XDP, copy mode, LENS' payload sizes: its frames
#              carry LEN-byte UDP payloads, as linerate's -l LEN), as `ref`
#   OLD=PATH   also run another linerate build (a server of its own; every
#              engine of ENGINES but batch), as `ENGINE-old`
set -euo pipefail

cd "$(dirname "$0")/.."
. bench/netns.sh
netns_linerate "${1:-}"
runs=${RUNS:-5}
secs=${SECS:-2}
lens=${LENS:-64 1472}
streams=${STREAMS:-1}
queues=${QUEUES:-1}
engines=${ENGINES:-batch xdp}
server_engine=()
[ -n "${SERVER_ENGINE:-}" ] && server_engine=(--server-engine "$SERVER_ENGINE")
ref=${REF:-}
old=${OLD:-}
netns_pair lrxb "$queues"
ip netns exec "$b" "$lr" server -B 198.18.0.2 -p 21950 >/dev/null 2>&1 &
pids+=($!)
case " $engines " in *" xdp-sleep "*)
    ip netns exec "$b" "$lr" server -B 198.18.0.2 -p 21953 --engine xdp --xdp-sleep \
        >/dev/null 2>&1 &
    pids+=($!) ;;
esac
if [ -n "$old" ]; then
    ip netns exec "$b" "$old" server -B 198.18.0.2 -p 21954 >/dev/null 2>&1 &
    pids+=($!)
fi
sleep 1

# One run (engine, length, streams): prints "sent_pps received_pps lost",
# summed over the streams.
run() {
    local bin=$lr port=21950 engine=$1 se=("${server_engine[@]}")
    case $engine in
    xdp-sleep) engine=xdp port=21953 se=() ;;
    *-old) engine=${engine%-old} bin=$old port=21954 ;;
    esac
    ip netns exec "$a" timeout $((secs + 30)) "$bin" udp 198.18.0.2 -p "$port" \
        -t "$secs" -b 0 -l "$2" -P "$3" --engine "$engine" "${se[@]}" --json |
        python3 -c '
import json, sys
s = json.load(sys.stdin)["sums"][0]
u = s["udp"]
print(u["sent_pps"], u["received_pps"], u["lost"])'
}

# One run of the reference loop (native, copy; LEN-byte payloads): prints
# "sent_pps received_pps lost" as run does. Its frames are linerate's -l
# LEN datagrams' size: linerate's LEN counts its own header in the payload.
ref_run() {
    timeout $((secs + 30)) "$ref" "$secs" native "$1" |
        sed -n 's/.*sent *\([0-9]*\) pps, received *\([0-9]*\) pps, lost \([0-9]*\).*/\1 \2 \3/p'
}

variants=()
[ -n "$ref" ] && variants+=(ref)
variants+=($engines)
if [ -n "$old" ]; then
    for engine in $engines; do
        case $engine in batch | xdp-sleep) ;; *) variants+=("$engine-old") ;; esac
    done
fi

declare -A results
for len in $lens; do
    for ((i = 1; i <= runs; i++)); do
        for p in $streams; do
            for engine in "${variants[@]}"; do
                if [ "$engine" = ref ]; then
                    [ "$p" = 1 ] || continue
                    r=$(ref_run "$len") || r=""
                else
                    r=$(run "$engine" "$len" "$p") || r=""
                fi
                [ -n "$r" ] || r="0 0 failed"
                echo "$engine ${len}B -P $p run $i: sent/s received/s lost: $r"
                results[$engine.$len.$p]+="$r"$'\n'
            done
        done
    done
done
echo "veth queues per end: $queues; server engine: ${SERVER_ENGINE:-default}; $lr${old:+; old: $old}${ref:+; ref: $ref}"
for len in $lens; do
    for p in $streams; do
        for engine in "${variants[@]}"; do
            [ "$engine" = ref ] && [ "$p" != 1 ] && continue
            printf '%s' "${results[$engine.$len.$p]}" | python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip() and l.split()[2] != "failed"]
if not rows:
    print(f"{sys.argv[1]:>9} {sys.argv[2]:>4} B -P {sys.argv[3]}: no successful run"); sys.exit()
sent = [float(r[0]) for r in rows]; recv = [float(r[1]) for r in rows]
print(f"{sys.argv[1]:>9} {sys.argv[2]:>4} B -P {sys.argv[3]}: sent {statistics.median(sent):9.0f}/s "
      f"({min(sent):.0f}..{max(sent):.0f}), received {statistics.median(recv):9.0f}/s "
      f"({min(recv):.0f}..{max(recv):.0f}), {len(rows)} runs")' "$engine" "$len" "$p"
        done
    done
done
