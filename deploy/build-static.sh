#!/usr/bin/env bash
# Builds a static linerate (musl libc, no shared libraries) for hosts where a
# package is not an option and for the FROM-scratch container image, then
# checks that it is static and runs (--version, a 1 s loopback TCP test).
# Prints the binary's path last. Where the Rust musl target is not installed
# (it is a toolchain download, `rustup target add x86_64-unknown-linux-musl`)
# it prints a "skipped:" line with the reason and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

target="$(uname -m)-unknown-linux-musl"
if [ ! -d "$(rustc --print sysroot)/lib/rustlib/$target" ]; then
    echo "skipped: static binary: the Rust target $target is not installed" \
        "(\`rustup target add $target\` downloads it)"
    exit 0
fi

# The `dist` profile: release optimisation without LTO, stripped (Cargo.toml).
cargo build --locked --profile dist --target "$target" --bin linerate
bin="${CARGO_TARGET_DIR:-target}/$target/dist/linerate"

# `file` says "statically linked" or "static-pie linked"; ldd finds nothing
# to load.
info="$(file -L "$bin")"
echo "$info"
case "$info" in
*"statically linked"* | *"static-pie linked"*) ;;
*)
    echo "build-static: $bin is not static" >&2
    exit 1
    ;;
esac
if ldd "$bin" 2>&1 | grep -q '=>'; then
    echo "build-static: ldd lists shared libraries for $bin" >&2
    exit 1
fi
"$bin" --version
"$bin" tcp -t 1 | grep -F "[ SUM] receiver"
echo "static binary: $bin ($(du -h "$bin" | cut -f1))"
