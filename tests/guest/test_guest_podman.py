"""A container on a cgroup v2 host (docs/DEPLOY.md, "cgroups in a container"):
podman (rootful, crun, cgroupfs manager) in the test guest, the container in a
private cgroup namespace, running `cellblock run` from the host's build.

The image is deploy/container/base.sh's Debian base (debootstrap, `podman
import`), saved once to build/guest/cellblock-base.tar and loaded in the
guest; /usr and the build come from the host read-only.  Three containers:
  least       deploy/container's least privilege (uid 1000, no capabilities):
              the cgroup is mounted read-only, so the banner says DEGRADED
  systemd     the same with --systemd=always: mounted read-write, but root's,
              so still DEGRADED (not delegated to the kernel's user)
  delegated   a root entrypoint chowns the container's cgroup to uid 1000 (as
              systemd's Delegate=yes does), then drops to it: per-kernel
              cgroup v2 limits, and a cell past --memory ends as out of memory
Only with CB_GUEST_FULL=1 (make test-guest): it takes about 3 minutes here.
"""
import os
import subprocess

import pytest

import guestvm
from .conftest import skip_or_fail

REPO = guestvm.REPO
BUILD = os.path.abspath(guestvm.BUILD)
IMAGE = "localhost/cellblock-base:bookworm"
TAR = os.path.join(BUILD, "guest", "cellblock-base.tar")
OOM = "chunks = []\nfor i in range(32):\n    chunks.append(bytearray(16 << 20))\nprint('ALLOCATED')\n"

pytestmark = pytest.mark.skipif(os.environ.get("CB_GUEST_FULL") != "1",
                                reason="make test-guest only (CB_GUEST_FULL=1)")


def _base_image():
    """build/guest/cellblock-base.tar, made by deploy/container/base.sh once."""
    if os.path.exists(TAR):
        return TAR
    if subprocess.run(["podman", "--version"], capture_output=True).returncode != 0:
        skip_or_fail("no podman on this host (scripts/deps.sh installs it)")
    p = subprocess.run(["sh", os.path.join(REPO, "deploy", "container", "base.sh"), IMAGE],
                       capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        skip_or_fail("deploy/container/base.sh could not build the base image: " +
                     (p.stdout + p.stderr)[-1500:])
    subprocess.run(["podman", "save", "-q", "-o", TAR + ".new", IMAGE], check=True, timeout=300)
    os.rename(TAR + ".new", TAR)
    return TAR


# what each container runs (passed in the environment: no nested quoting)
PROBE = ("cat /proc/self/cgroup; mount | grep ' /sys/fs/cgroup '; stat -c 'owner %u' /sys/fs/cgroup; "
         "echo 'print(1)' | {b}/bin/cellblock run --log-level info --memory 200M - 2>&1 "
         "| grep -o 'isolation: .*'").format(b=BUILD)
RUN_OOM = "printf '%s' \"$CB_OOM\" | {b}/bin/cellblock run --memory 200M - 2>&1; echo EXIT $?".format(
    b=BUILD)
# a root entrypoint that delegates the container's cgroup to uid 1000, then drops to it
DELEGATE = ("chown 1000:1000 /sys/fs/cgroup /sys/fs/cgroup/cgroup.procs "
            "/sys/fs/cgroup/cgroup.subtree_control /sys/fs/cgroup/cgroup.threads && "
            "exec setpriv --reuid 1000 --regid 1000 --clear-groups --no-new-privs sh -c \"$CB_CMD\"")


def _script(tar):
    return r"""set -u
mount -t tmpfs -o size=2g tmpfs /var/lib/containers
P="podman --cgroup-manager=cgroupfs --events-backend=file --runtime crun"
$P load -q -i {tar} >/dev/null || exit 3
SEC="--security-opt seccomp={repo}/deploy/container/seccomp.json --security-opt unmask=/proc/*"
LEAST="--user 1000:1000 --cap-drop=ALL --security-opt no-new-privileges $SEC"
V="-v /usr:/usr:ro -v {build}:{build}:ro --network none --cgroupns=private -e HOME=/tmp -e CB_OOM"
echo "== least"; $P run --rm $V $LEAST {img} sh -c "$CB_PROBE"
echo "== systemd"; $P run --rm $V $LEAST --systemd=always {img} sh -c "$CB_PROBE"
echo "== delegated"; CB_CMD=$CB_PROBE $P run --rm $V -e CB_CMD $SEC --systemd=always --user 0:0 \
    {img} sh -c "$CB_DELEGATE"
echo "== delegated-oom"; CB_CMD=$CB_RUN_OOM $P run --rm $V -e CB_CMD $SEC --systemd=always \
    --user 0:0 {img} sh -c "$CB_DELEGATE"
echo "== left"; $P ps -aq; find /sys/fs/cgroup -name 'cellblock-*'
""".format(tar=tar, repo=REPO, build=BUILD, img=IMAGE)


@pytest.fixture(scope="module")
def podman_guest(guest_ok):
    tar = _base_image()
    env = {"CB_OOM": OOM, "CB_PROBE": PROBE, "CB_RUN_OOM": RUN_OOM, "CB_DELEGATE": DELEGATE}
    step = guestvm.Step(["sh", "-c", _script(tar)], cwd="/", timeout=1200, env=env)
    res = guestvm.Guest().run([step])
    out = res.steps[0].output
    parts = {}
    for block in out.split("== ")[1:]:
        name, _, body = block.partition("\n")
        parts[name.strip()] = body
    return res.steps[0], parts


@pytest.mark.timeout(1800)
def test_least_privilege_container_is_degraded(podman_guest):
    step, p = podman_guest
    assert "least" in p, step.output[-3000:]
    assert "cgroup2 (ro," in p["least"] and "0::/\n" in p["least"], p["least"]
    assert "DEGRADED limits: no cgroup (cgroup v2 /sys/fs/cgroup is not delegated" in p["least"], \
        p["least"]


@pytest.mark.timeout(1800)
def test_writable_but_not_delegated_is_degraded(podman_guest):
    step, p = podman_guest
    assert "cgroup2 (rw," in p.get("systemd", ""), step.output[-3000:]
    assert "owner 0" in p["systemd"] and "DEGRADED limits" in p["systemd"], p["systemd"]


@pytest.mark.timeout(1800)
def test_delegated_container_cgroup_gives_per_kernel_limits(podman_guest):
    step, p = podman_guest
    d = p.get("delegated", "")
    assert "owner 1000" in d, step.output[-3000:]
    assert "cgroup v2 (memory 200 MiB no swap" in d and "DEGRADED" not in d, d
    o = p.get("delegated-oom", "")
    assert "ALLOCATED" not in o and "EXIT 125" in o, o       # 125: the memory limit (run.c)
    assert "ran out of memory" in o, o
    left = p.get("left", "x").strip()
    assert left == "", "containers or cellblock cgroups left: " + left
    assert step.rc == 0, step.output[-3000:]
