#!/bin/sh
# check.sh - `make deploy-check`: every deployment path of docs/DEPLOY.md, run
# here as its users would run it.  Needs root (podman, throwaway users) and
# takes minutes, so it is kept out of `make test`.
#
#   1. the container image (deploy/container): built from this source, the
#      least privilege checked, the isolation suite run inside it
#   2. the Kubernetes manifests (deploy/kube) with `podman kube play`
#   3. JupyterHub with two local users (deploy/hub)
#   4. the Node.js agent against a local Jupyter Server (examples/node-agent), on
#      the machine's Node and on Debian 12's own Node 18 (in a bookworm container)
#
# It installs what it needs from Debian (and npm, for the proxy and the agent),
# adds a "containers" range to /etc/subuid and /etc/subgid when there is none
# (podman's --userns=auto, which hostUsers: false maps to), and leaves no
# container, pod, user or process behind.  CB_MUST_WORK=1 is set: a missing
# prerequisite is a failure here, not a skip.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
PYTHON=${TEST_PYTHON:-/usr/bin/python3}
PKGS="podman runc catatonit uidmap debootstrap jupyterhub python3-jupyter-server
python3-websocket python3-cryptography python3-jinja2 python3-yaml python3-pytest curl"
[ "$(id -u)" = 0 ] || { echo "deploy/check.sh: run as root (podman, throwaway users)" >&2; exit 1; }
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "deploy/check.sh: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
for f in /etc/subuid /etc/subgid; do
    grep -q '^containers:' "$f" 2>/dev/null || echo "containers:2147483647:2147483648" >>"$f"
done
(cd "$REPO/examples/node-agent" && [ -d node_modules/@jupyterlab/services ] ||
    npm ci --no-audit --no-fund --loglevel=error)

export CB_MUST_WORK=1 CELLBLOCK_BUILD="${CELLBLOCK_BUILD:-$REPO/build}"
CB_CONTAINER_DIR=$HERE/container
. "$HERE/container/env.sh"
echo "== 1. container image"
sh "$HERE/container/build.sh" >/tmp/cellblock-deploy-build.log 2>&1 ||
    { tail -n 40 /tmp/cellblock-deploy-build.log; exit 1; }
sh "$HERE/container/check.sh"
echo "== 2-4. Kubernetes (podman kube play), JupyterHub, Node.js agent"
"$PYTHON" -m pytest -q -p no:cacheprovider "$REPO/tests/deploy/check_kube.py" \
    "$REPO/tests/deploy/check_jupyterhub.py" "$REPO/tests/deploy/test_node_agent.py" \
    "$REPO/tests/deploy/check_node18.py"
