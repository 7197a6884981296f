#!/bin/sh
# check.sh - prove the image: the sandbox's isolation checks pass inside a
# container run with the least privilege it needs, and each of the three
# relaxations is really needed (without it the kernel fails closed, with the
# cause named).  Run by `make deploy-check`; needs root and podman.
#
#   sh deploy/container/check.sh          (builds the images if missing)
#
# The least privilege (docs/DEPLOY.md, "Containers"):
#   --user 1000:1000 --cap-drop=ALL --security-opt no-new-privileges
#   --security-opt seccomp=deploy/container/seccomp.json   (runtime default + namespaces/mount)
#   --security-opt unmask=/proc/*                          (the sandbox mounts its own procfs)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CB_CONTAINER_DIR=$HERE
. "$HERE/env.sh"
IMAGE=${IMAGE:-localhost/cellblock:latest}
CHECK_IMAGE=${CHECK_IMAGE:-localhost/cellblock-check:latest}
SECCOMP=$HERE/seccomp.json
LEAST="--user 1000:1000 --cap-drop=ALL --security-opt no-new-privileges
       --security-opt seccomp=$SECCOMP --security-opt unmask=/proc/*"
# the pod's limits: what bounds the user's kernels together (per kernel: rlimits, DEGRADED)
POD_LIMITS="--memory 4g --memory-swap 4g --pids-limit 1024 --cpus 2"
fail=0
say() { printf '%s\n' "check.sh: $*"; }
ok() { say "PASS $*"; }
bad() { say "FAIL $*"; fail=1; }

# the shipped profile is the generator's output for this runtime's default
if [ -f /usr/share/containers/seccomp.json ]; then
    if python3 "$HERE/seccomp-gen.py" | cmp -s - "$SECCOMP"; then
        ok "seccomp.json = seccomp-gen.py(podman's default profile)"
    else
        bad "seccomp.json differs from seccomp-gen.py's output for /usr/share/containers/seccomp.json (regenerate it)"
    fi
fi

podman image exists "$IMAGE" || sh "$HERE/build.sh" "$IMAGE"
CTX=$(mktemp -d /var/tmp/cellblock-check.XXXXXX)
trap 'rm -rf "$CTX"' EXIT INT TERM
mkdir -p "$CTX/tests" && cp -r "$REPO/tests/conftest.py" "$REPO/tests/security" "$CTX/tests/"
find "$CTX" -name __pycache__ -prune -exec rm -rf {} +
podman build -q --pull=never --build-arg IMAGE="$IMAGE" -f "$HERE/Containerfile.check" \
    -t "$CHECK_IMAGE" "$CTX" >/dev/null

run_cell() {   # $1: podman options; stdin: the code; prints what the first cell showed
    # (through the kernel, as a frontend would: a sandbox that cannot start gives the
    # cell an error naming the cause).  --timeout bounds the container whatever happens.
    # shellcheck disable=SC2086
    podman run --rm -i --timeout "$CELL_TIMEOUT_S" $1 "$CHECK_IMAGE" python3 -c "$KERNEL_CELL" 2>&1 || true
}
CELL_TIMEOUT_S=120
KERNEL_CELL='import sys
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="cellblock")
try:
    msgs = []
    kc.execute_interactive(sys.stdin.read(), output_hook=msgs.append, timeout=60)
    for m in msgs:
        c = m["content"]
        if m["msg_type"] == "stream": print(c["text"], end="")
        elif m["msg_type"] == "error": print(c["ename"], c["evalue"])
finally:
    kc.stop_channels(); km.shutdown_kernel()'
PROBE='import os
st = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
print("uid", os.getuid(), "caps", st["CapEff"].strip(), "seccomp", st["Seccomp"].strip(),
      "nnp", st["NoNewPrivs"].strip())
print("pid1", open("/proc/1/cmdline").read().split("\0")[0])
print("ifaces", sorted(os.listdir("/sys/class/net")) if os.path.exists("/sys/class/net") else "nosys")'

# 1. the least privilege works, and the sandbox inside is the real one
out=$(printf '%s\n' "$PROBE" | run_cell "$LEAST $POD_LIMITS")
case "$out" in
*"uid 65534 caps 0000000000000000 seccomp 2 nnp 1"*"nosys"*) ok "sandbox in a container with no capability: $(echo "$out" | grep '^uid')";;
*) bad "sandbox in a least-privilege container: $out";;
esac
# the banner tells the truth: the container's cgroup is read-only here, so DEGRADED
banner=$(podman run --rm $LEAST $POD_LIMITS "$CHECK_IMAGE" python3 -c '
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="cellblock")
try:
    kc.kernel_info(); print(kc.get_shell_msg(timeout=30)["content"]["banner"])
finally:
    kc.stop_channels(); km.shutdown_kernel()' 2>&1 || true)
cgroup_rw=$(podman run --rm $LEAST "$CHECK_IMAGE" sh -c 'test -w /sys/fs/cgroup/memory -o -w /sys/fs/cgroup/cgroup.procs && echo rw || echo ro')
case "$cgroup_rw:$banner" in
ro:*"namespaces user,pid,mount"*"DEGRADED limits: no cgroup ("*"), rlimits only"*) ok "banner says DEGRADED (container cgroup read-only): $(echo "$banner" | grep -o 'DEGRADED limits[^;]*' | head -n 1)";;
rw:*"cgroup v"*) ok "banner reports per-kernel cgroup limits (container cgroup writable)";;
*) bad "banner does not match the container's cgroup ($cgroup_rw): $banner";;
esac

# the image as documented: its own CMD (Jupyter Server as jovyan, cellblock its only
# kernel), least privilege; reached on the container's own loopback (--network none +
# nsenter), so nothing leaves loopback
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
CID=$(podman run -d --rm --network none -e JUPYTER_TOKEN="$TOKEN" $LEAST $POD_LIMITS "$IMAGE")
PID=$(podman inspect --format '{{.State.Pid}}' "$CID")
specs=""
for _ in $(seq 1 60); do
    specs=$(nsenter --net=/proc/"$PID"/ns/net curl -sf -H "Authorization: token $TOKEN" \
        http://127.0.0.1:8888/api/kernelspecs 2>/dev/null) && break
    sleep 0.5
done
podman stop -t 5 "$CID" >/dev/null 2>&1 || true
if printf '%s' "$specs" | python3 -c 'import json, sys
sys.exit(0 if sorted(json.load(sys.stdin)["kernelspecs"]) == ["cellblock"] else 1)' 2>/dev/null; then
    ok "the image's own CMD serves Jupyter Server with cellblock as its only kernel"
else
    bad "the image's CMD: no server, or other kernels: $specs"
fi

# 2. each relaxation is needed: without it the kernel fails closed, naming the cause
out=$(printf 'print("CELL" + "_RAN")\n' | run_cell "--user 1000:1000 --cap-drop=ALL --security-opt no-new-privileges --security-opt unmask=/proc/*")
case "$out" in
*CELL_RAN*) bad "ran with the runtime's default seccomp profile: is seccomp.json still needed? $out";;
*"refuses namespace operations"*) ok "without seccomp.json: fails closed (runtime default refuses sethostname)";;
*) bad "without seccomp.json: unexpected: $out";;
esac
out=$(printf 'print("CELL" + "_RAN")\n' | run_cell "--user 1000:1000 --cap-drop=ALL --security-opt no-new-privileges --security-opt seccomp=$SECCOMP")
case "$out" in
*CELL_RAN*) bad "ran with /proc masked: is unmask still needed? $out";;
*"/proc"*) ok "with /proc masked: fails closed (a new procfs cannot be mounted)";;
*) bad "with /proc masked: unexpected: $out";;
esac
# root in the container (no user namespace then) without CAP_SYS_ADMIN: refused too
out=$(printf 'print("CELL" + "_RAN")\n' | run_cell "--user 0:0 --security-opt seccomp=$SECCOMP --security-opt unmask=/proc/*")
case "$out" in
*CELL_RAN*) bad "ran as container root with the default capabilities (expected EPERM): $out";;
*"not permitted"*|*EPERM*) ok "as root with the default capabilities: fails closed (a root kernel maps each sandbox to a host id of its own, which needs CAP_SYS_ADMIN)";;
*) bad "as root: unexpected: $out";;
esac

# 3. the isolation suite inside the container (tests/security/test_escape.py, run from
#    the user's home so the kernels' working directory is writable, as in a real server):
#    a) every attack on cellblock is contained.  test_cpu_limit is left out: with DEGRADED
#       limits there is no per-kernel CPU limit (the banner says so); the container's
#       --cpus bounds the user's kernels together.
#    b) the control (the stock ipykernel, unconfined in the same container) must escape
#       wherever the container itself does not already stop an ordinary process, which
#       shows the suite can see an escape in there.  CONTAINER_HELD are the probes the
#       container stops by itself (no capabilities, no_new_privs, a non-root user, its
#       own seccomp profile): those are held twice for cellblock, and the control is not
#       expected to escape them.
SUITE="python3 -m pytest -q -p no:cacheprovider /opt/cellblock-tests/tests/security/test_escape.py"
CONTAINER_HELD="read_shadow or python3-uid0 or python3-capabilities or python3-mount or python3-setuid_su or python3-bpf or python3-io_uring"
if podman run --rm $LEAST $POD_LIMITS -w /home/jovyan -e CB_SECURITY_KERNELS=cellblock "$CHECK_IMAGE" \
        $SUITE -k 'not test_cpu_limit' >"$CTX/security.log" 2>&1; then
    ok "cellblock contained in the container (test_escape.py): $(tail -n 1 "$CTX/security.log")"
else
    tail -n 40 "$CTX/security.log"
    bad "cellblock in the container (test_escape.py)"
fi
if podman run --rm $LEAST $POD_LIMITS -w /home/jovyan -e CB_SECURITY_KERNELS=python3 "$CHECK_IMAGE" \
        $SUITE -k "not test_cpu_limit and not ($CONTAINER_HELD)" >"$CTX/control.log" 2>&1; then
    ok "the control escapes in the container wherever the container allows it: $(tail -n 1 "$CTX/control.log")"
else
    tail -n 40 "$CTX/control.log"
    bad "control kernel in the container"
fi
[ "$fail" = 0 ] && say "all container checks passed" || say "some container checks FAILED"
exit "$fail"
