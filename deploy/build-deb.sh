#!/usr/bin/env bash
# Builds the .deb (target/debian/linerate_VERSION-1_ARCH.deb) with dpkg-deb
# alone: the binary (/usr/bin/linerate, stripped), the man page and
# bash/zsh/fish completions generated from that binary's own clap
# definitions (so they match its flags), the README and copyright, and the
# systemd unit deploy/linerate-server.service, installed disabled (the
# maintainer scripts in deploy/debian/ never enable or start it).
#
# This script is the package's one description: its fields and file list
# are below; the version and the one-line summary are Cargo.toml's. Needs
# cargo, dpkg-deb and binutils (`strip`, `objdump`: what links Rust).
#   LINERATE_DEB_PROFILE   cargo profile to package (default dist)
#   DEB_MAINTAINER         the Maintainer field (default below)
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022

maintainer="${DEB_MAINTAINER:-linerate developers <maintainers@users.noreply.a-seed-9ff2102b.example>}"
revision=1
extended="linerate measures whether a network path and its hosts reach line rate:
TCP and UDP throughput with exact loss, request/response latency
distributions, and the CPU each side pays. It includes a server for a fleet
(systemd unit linerate-server.service, installed disabled) and speaks the
iperf3 protocol both ways."

# The `dist` profile: release optimisation without LTO (Cargo.toml). CI
# sets LINERATE_DEB_PROFILE=dev to package the binary its tests already
# built: it checks the packaging, not the optimiser, in no extra build time.
profile="${LINERATE_DEB_PROFILE:-dist}"
cargo build --locked --profile "$profile" --bin linerate
case "$profile" in
    dev) dir=debug ;;
    *) dir="$profile" ;;
esac
target="${CARGO_TARGET_DIR:-target}"
bin="$target/$dir/linerate"

version="$("$bin" --version | awk '{ print $2 }')"
summary="$(sed -n 's/^description = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
[ -n "$version" ] && [ -n "$summary" ] || {
    echo "build-deb: no version from $bin or no description in Cargo.toml" >&2
    exit 1
}
arch="$(dpkg --print-architecture)"

# The tree the package unpacks to, built afresh.
root="$target/debian/root"
rm -rf "$root"
mkdir -p "$root/DEBIAN"
strip --strip-unneeded -o "$root/tmp-linerate" "$bin"
install -D -m 755 "$root/tmp-linerate" "$root/usr/bin/linerate"
rm "$root/tmp-linerate"
install -d "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" \
    "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d" \
    "$root/usr/share/doc/linerate"
"$bin" man | gzip -9n >"$root/usr/share/man/man1/linerate.1.gz"
"$bin" completions bash >"$root/usr/share/bash-completion/completions/linerate"
"$bin" completions zsh >"$root/usr/share/zsh/vendor-completions/_linerate"
"$bin" completions fish >"$root/usr/share/fish/vendor_completions.d/linerate.fish"
install -D -m 644 deploy/linerate-server.service \
    "$root/usr/lib/systemd/system/linerate-server.service"
install -m 644 README.md "$root/usr/share/doc/linerate/README.md"
cat >"$root/usr/share/doc/linerate/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: linerate
Copyright: linerate developers
License: MIT OR Apache-2.0
EOF
install -m 755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$root/DEBIAN/"

# Depends, from the libraries the binary links: glibc at the newest symbol
# version it uses, and libgcc_s (unwinding). Any other library is a change
# this list must follow, so it stops the build.
depends=""
for lib in $(objdump -p "$bin" | awk '$1 == "NEEDED" { print $2 }'); do
    case "$lib" in
        libc.so.* | libm.so.* | ld-linux*) ;;
        libgcc_s.so.1) depends="$depends, libgcc-s1" ;;
        *)
            echo "build-deb: $bin links $lib: add its package to Depends here" >&2
            exit 1
            ;;
    esac
done
glibc="$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)"
depends="libc6 (>= $glibc)$depends"

{
    echo "Package: linerate"
    echo "Version: $version-$revision"
    echo "Architecture: $arch"
    echo "Section: net"
    echo "Priority: optional"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
    echo "Depends: $depends"
    echo "Description: $summary"
    # Continuation lines start with a space; an empty line is " .".
    sed 's/^$/./; s/^/ /' <<<"$extended"
} >"$root/DEBIAN/control"

deb="$target/debian/linerate_${version}-${revision}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
rm -rf "$root"
echo "$deb"
