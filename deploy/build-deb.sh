#!/usr/bin/env bash
# Builds the .deb (target/debian/linerate_*.deb) with cargo-deb: the binary
# (/usr/bin/linerate), the man page and bash/zsh/fish completions generated
# from that binary's own clap definitions (so they match its flags), and the
# systemd unit deploy/linerate-server.service, installed disabled. The
# package list is [package.metadata.deb] in Cargo.toml.
#
# Needs cargo-deb: `cargo install cargo-deb --locked --version 3.8.0`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo deb --version >/dev/null 2>&1; then
    echo "build-deb: cargo-deb is not installed;" \
        "run \`cargo install cargo-deb --locked --version 3.8.0\`" >&2
    exit 1
fi

# The `dist` profile: release optimisation without LTO (Cargo.toml). CI
# sets LINERATE_DEB_PROFILE=dev to package the binary its tests already
# built: it checks the packaging, not the optimiser, in no extra build time.
profile="${LINERATE_DEB_PROFILE:-dist}"
cargo build --locked --profile "$profile" --bin linerate
case "$profile" in
    dev) dir=debug ;;
    *) dir="$profile" ;;
esac
out="${CARGO_TARGET_DIR:-target}/$dir"

# What cargo-deb's assets name target/release/generated/ (its alias for the
# build profile's products).
gen="$out/generated"
mkdir -p "$gen"
"$out/linerate" man | gzip -9n >"$gen/linerate.1.gz"
"$out/linerate" completions bash >"$gen/linerate.bash"
"$out/linerate" completions zsh >"$gen/_linerate"
"$out/linerate" completions fish >"$gen/linerate.fish"

cargo deb --locked --profile "$profile" --no-build "$@"
