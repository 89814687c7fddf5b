#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS (default 60) each, starting from
# the committed seeds in fuzz/corpus/TARGET/; new inputs go to a scratch
# corpus, so the committed one stays the seeds. Needs `cargo install
# cargo-fuzz` and a nightly toolchain (libFuzzer's sanitizer flags); CI runs
# the same entry points on stable instead (crates/proto/tests/fuzz.rs,
# crates/iperf3/tests/fuzz.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz)" >&2
    exit 2
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in $(cargo +nightly fuzz list); do
    mkdir -p "$scratch/$target"
    echo "== $target ($secs s)"
    cargo +nightly fuzz run -O "$target" "$scratch/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
        grep -E '^(Done|stat::number_of_executed_units|==[0-9]+==|SUMMARY)' || true
    # A crash leaves its input under fuzz/artifacts/TARGET/.
    if compgen -G "fuzz/artifacts/$target/*" >/dev/null; then
        echo "fuzz/run.sh: $target found a failing input: fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
