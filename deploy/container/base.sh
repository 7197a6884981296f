#!/bin/sh
# base.sh - build the Debian 12 (bookworm) base image locally, with no image
# registry: debootstrap a minimal root, then `podman import` it.
#
#   sh deploy/container/base.sh [IMAGE]        (default localhost/cellblock-base:bookworm)
#
# The Debian mirror is the host's own (first URI of its apt sources) unless
# MIRROR is set; the image's apt sources are written for that mirror, with
# bookworm-updates and, when the host has one, the security suite.  Needs
# root, debootstrap and podman (deploy/container/build.sh installs them).
# The root is built in a temporary directory that is removed afterwards.
set -eu
IMAGE=${1:-localhost/cellblock-base:bookworm}
SUITE=bookworm
HERE=$(cd "$(dirname "$0")" && pwd)
CB_CONTAINER_DIR=$HERE
. "$HERE/env.sh"

first_uri() {   # $1: a word the URI must contain (debian / debian-security)
    cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
        awk -v w="$1" '$1 == "URIs:" { for (i = 2; i <= NF; i++) { n = split($i, p, "/"); if (p[n] == w) { print $i; exit } } }'
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
        awk -v w="$1" '{ n = split($2, p, "/"); if (p[n] == w) { print $2; exit } }'
}
MIRROR=${MIRROR:-$(first_uri debian | head -n1)}
SECURITY=${SECURITY_MIRROR:-$(first_uri debian-security | head -n1)}
[ -n "$MIRROR" ] || { echo "base.sh: no Debian mirror in the host's apt sources; set MIRROR=" >&2; exit 1; }

if podman image exists "$IMAGE" && [ "${REBUILD:-0}" != 1 ]; then
    echo "base.sh: $IMAGE exists (REBUILD=1 to build it again)"
    exit 0
fi
ROOT=$(mktemp -d /var/tmp/cellblock-base.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT INT TERM
echo "base.sh: debootstrap $SUITE (minbase) into $ROOT"
debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 ||
    { tail -n 30 "$ROOT.log" >&2; rm -f "$ROOT.log"; exit 1; }
rm -f "$ROOT.log"
{
    echo "Types: deb"; echo "URIs: $MIRROR"; echo "Suites: $SUITE $SUITE-updates"
    echo "Components: main"; echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    if [ -n "$SECURITY" ]; then
        echo; echo "Types: deb"; echo "URIs: $SECURITY"; echo "Suites: $SUITE-security"
        echo "Components: main"; echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    fi
} >"$ROOT/etc/apt/sources.list.d/debian.sources"
rm -f "$ROOT/etc/apt/sources.list"
# what an image needs to be small: no apt caches, no docs
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
echo "base.sh: podman import -> $IMAGE"
tar -C "$ROOT" --numeric-owner -c . |
    podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$IMAGE" >/dev/null
podman image inspect --format '{{.Id}} {{.Size}}' "$IMAGE"
