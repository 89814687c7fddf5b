#!/usr/bin/env bash
# Installs the .deb that deploy/build-deb.sh built into this system (CI's
# fresh machine is the clean root), checks what it installed, runs a 1 s
# loopback test from /usr/bin/linerate, then removes the package. Refuses to
# touch a linerate package that was installed before. Needs root and dpkg.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null; then
    echo "skipped: .deb install check: needs root and dpkg"
    exit 0
fi
deb="$(ls -t "${CARGO_TARGET_DIR:-target}"/debian/linerate_*.deb | head -n 1)"
if dpkg -s linerate >/dev/null 2>&1; then
    echo "check-deb: a linerate package is already installed; not replacing it" >&2
    exit 1
fi

files=(
    /usr/bin/linerate
    /usr/share/man/man1/linerate.1.gz
    /usr/share/bash-completion/completions/linerate
    /usr/share/zsh/vendor-completions/_linerate
    /usr/share/fish/vendor_completions.d/linerate.fish
    /usr/lib/systemd/system/linerate-server.service
)
# What the package holds (dpkg's path-exclude, as in slim container images,
# may keep the man page off the disk, so the archive is checked too).
listing="$(dpkg-deb -c "$deb")"
for f in "${files[@]}"; do
    grep -q " \.$f\$" <<<"$listing" || {
        echo "check-deb: $deb lacks $f" >&2
        exit 1
    }
done
# Who answers for the package: a name and an address.
maintainer="$(dpkg-deb -f "$deb" Maintainer)"
grep -Eq '^[^<]+ <[^@> ]+@[^@> ]+>$' <<<"$maintainer" || {
    echo "check-deb: Maintainer has no address: $maintainer" >&2
    exit 1
}
echo "$deb: $(du -h "$deb" | cut -f1), $(wc -l <<<"$listing") entries, depends:" \
    "$(dpkg-deb -f "$deb" Depends)"

trap 'dpkg --purge linerate >/dev/null 2>&1 || true' EXIT
dpkg -i "$deb"
dpkg -L linerate | grep -E 'bin/|man1|completion|systemd/system/'
/usr/bin/linerate --version
if command -v man >/dev/null && [ -e /usr/share/man/man1/linerate.1.gz ]; then
    man -w linerate
fi
# Installed, not enabled: no wants/ link, and systemd (where it runs) agrees.
if ls /etc/systemd/system/*.wants/linerate-server.service 2>/dev/null; then
    echo "check-deb: the package enabled linerate-server.service" >&2
    exit 1
fi
if [ -d /run/systemd/system ]; then
    echo "linerate-server.service: $(systemctl is-enabled linerate-server.service || true)"
fi
/usr/bin/linerate tcp -t 1 | grep -F "[ SUM] receiver"
dpkg --purge linerate
if [ -e /usr/bin/linerate ]; then
    echo "check-deb: /usr/bin/linerate is still there after dpkg --purge" >&2
    exit 1
fi
trap - EXIT
echo ".deb install check: installed, ran and removed"
