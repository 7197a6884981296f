# env.sh - sourced by the deploy scripts after they set CB_CONTAINER_DIR (the
# deploy/container directory): podman configured for this kind of host with
# the project's containers.conf (runc, ulimits within the host's hard
# limits).  An existing CONTAINERS_CONF wins.
: "${CONTAINERS_CONF:=${CB_CONTAINER_DIR:?set CB_CONTAINER_DIR before sourcing env.sh}/containers.conf}"
export CONTAINERS_CONF
