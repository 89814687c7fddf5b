# The prologue bench/xdp_rr.sh and bench/xdp_veth.sh share (issue 25),
# sourced after `set -euo pipefail` from the repository root: the linerate
# binary to run, root, and a veth pair between two network namespaces
# (198.18.0.0/15) deleted at exit with the processes the script started.
#
#   netns_linerate [PATH]   sets `lr`: PATH, else target/release/linerate,
#                           else target/debug/linerate; exits 2 without one
#                           or without root
#   netns_pair TAG [QUEUES] creates namespaces `$a` (va, 198.18.0.1/30) and
#                           `$b` (vb, 198.18.0.2/30), named after TAG and
#                           this shell's pid, with QUEUES (default 1)
#                           receive and transmit queues on each veth end,
#                           IPv6 off on both; at exit every pid in `pids`
#                           is killed and both namespaces deleted

pids=()

netns_linerate() {
    lr=${1:-}
    if [ -z "$lr" ]; then
        for c in target/release/linerate target/debug/linerate; do
            [ -x "$c" ] && { lr=$c; break; }
        done
    fi
    [ -x "${lr:-}" ] || { echo "no linerate binary (cargo build --release)" >&2; exit 2; }
    [ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, AF_XDP)" >&2; exit 2; }
}

netns_cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
}

netns_pair() {
    local q=${2:-1}
    a=$1$$a
    b=$1$$b
    trap netns_cleanup EXIT
    ip netns add "$a"
    ip netns add "$b"
    ip -n "$a" link add va numtxqueues "$q" numrxqueues "$q" type veth \
        peer name vb netns "$b" numtxqueues "$q" numrxqueues "$q"
    local x
    for x in "$a va 198.18.0.1" "$b vb 198.18.0.2"; do
        set -- $x
        ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
        ip -n "$1" link set lo up
        ip -n "$1" addr add "$3/30" dev "$2"
        ip -n "$1" link set "$2" up
    done
}
