# env.sh - sourced by the deploy scripts: podman configured for this kind of
# host with the project's containers.conf (runc, ulimits within the host's
# hard limits).  An existing CONTAINERS_CONF wins.
: "${CONTAINERS_CONF:=$(cd "$(dirname "$0")" && cd ../container && pwd)/containers.conf}"
export CONTAINERS_CONF
