#!/usr/bin/env bash
# Builds the container image linerate:VERSION from deploy/Containerfile
# around the static binary (deploy/build-static.sh). Uses podman, buildah or
# docker, whichever works here; where none does (not installed, or docker
# without a running daemon) or the static binary cannot be built, it prints
# a "skipped:" line with the reason and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

tool=""
for t in podman buildah docker; do
    command -v "$t" >/dev/null || continue
    case "$t" in
    docker) docker info >/dev/null 2>&1 || continue ;;
    esac
    tool="$t"
    break
done
if [ -z "$tool" ]; then
    if command -v docker >/dev/null; then
        why="docker is installed but its daemon is not running (\`docker info\` fails)"
    else
        why="no container tool (podman, buildah or docker) is installed"
    fi
    echo "skipped: container image: $why"
    exit 0
fi

static="$(deploy/build-static.sh | tail -n 1)"
case "$static" in
"static binary: "*) bin="${static#static binary: }" && bin="${bin% (*}" ;;
*)
    echo "skipped: container image: ${static#skipped: }"
    exit 0
    ;;
esac

context="${CARGO_TARGET_DIR:-target}/image"
rm -rf "$context"
mkdir -p "$context"
cp "$bin" "$context/linerate"
version="$("$bin" --version | awk '{print $2}')"
case "$tool" in
buildah) buildah bud -f deploy/Containerfile -t "linerate:$version" "$context" ;;
*) "$tool" build -f deploy/Containerfile -t "linerate:$version" "$context" ;;
esac
# The image runs: --version from inside it.
case "$tool" in
buildah) echo "image linerate:$version built (buildah: not run)" ;;
*) "$tool" run --rm "linerate:$version" --version ;;
esac
