#!/bin/sh
# build.sh - build the cellblock image with podman, from this source tree.
#
#   sh deploy/container/build.sh [IMAGE]          (default localhost/cellblock:latest)
#
# Installs podman, runc and debootstrap when run as root on Debian and they
# are missing, builds the base image (base.sh) if it is not there, then
# builds deploy/container/Containerfile with a context made of the files git
# knows (tracked and untracked, minus .gitignore'd build trees and
# node_modules), so what goes in is this source and nothing built on the host.
set -eu
IMAGE=${1:-localhost/cellblock:latest}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CB_CONTAINER_DIR=$HERE
. "$HERE/env.sh"

need=""
for t in podman:podman runc:runc debootstrap:debootstrap; do
    command -v "${t%%:*}" >/dev/null 2>&1 || need="$need ${t#*:}"
done
if [ -n "$need" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "build.sh: installing:$need"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
    else
        echo "build.sh: missing:$need (apt-get install$need)" >&2
        exit 1
    fi
fi
sh "$HERE/base.sh"
CTX=$(mktemp -d /var/tmp/cellblock-ctx.XXXXXX)
trap 'rm -rf "$CTX"' EXIT INT TERM
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$CTX" 2>/dev/null) \
    || (cd "$REPO" && tar --exclude=./build --exclude='./build-*' --exclude=node_modules --exclude=.git -c . | tar -C "$CTX" -x)
echo "build.sh: podman build -> $IMAGE"
podman build --pull=never --layers -f "$CTX/deploy/container/Containerfile" -t "$IMAGE" "$CTX"
