"""Pause, resume and fork against a hostile sandbox (docs/SNAPSHOTS.md "What
holds"): a sandbox restored from an image -- the same kernel's next cell,
and two clones started with --resume -- has every layer in force again,
tested from the host: the refused syscalls and capabilities (the probes of
test_escape, which escape the stock python3 kernel: test_snapshots.py runs
them against it), the denied writes, a host uid of its own (not the paused
sandbox's lease) and a cgroup of its own with the session's memory limit.
gVisor's processes are not host processes: what the host sees of a gVisor
sandbox is runsc's, so uid and cgroup are read from those."""

import os
import re
import shutil
import tempfile
import time

import pytest

from .conftest import Kernel, _check_available, skip_or_fail, verdict
from .test_escape import PROBES
from .test_snapshots import CHECK, OUTSIDE, _descendants, ctl

MEMORY_MB = 512  # --memory for every kernel here
NOBODY = 65534   # runsc runs its Sentry as nobody (in the sandbox's cgroup all the same)


def _needs_gvisor():  # as tests/integration/test_tiers.py's
    if shutil.which("runsc", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") \
            is None:
        skip_or_fail("runsc is not installed (apt-get install runsc; scripts/deps.sh)")
    if os.geteuid() != 0:
        skip_or_fail("the gvisor tier needs cgroups, which here means running as root")


def _host_side(k):
    """(the host uids, the memory cgroups) of the sandbox's processes below
    the kernel process: runsc's, under the sandbox's lease."""
    root = k.km.provisioner.process.pid
    uids, cgroups = set(), set()
    for p in _descendants(root):
        try:
            with open("/proc/%d/status" % p) as f:
                uid = int(re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1))
            with open("/proc/%d/cgroup" % p) as f:
                cg = f.read()
        except (OSError, AttributeError):
            continue
        if uid == 0:
            continue  # the launcher's own slot
        if uid != NOBODY:
            uids.add(uid)
        for line in cg.split():
            _, ctrls, path = line.split(":", 2)
            if "memory" in ctrls.split(",") or ctrls == "":
                cgroups.add((ctrls, path))
    return uids, cgroups


def _memory_limit(cgroups):
    for ctrls, path in sorted(cgroups, reverse=True):  # v1's "memory" first
        files = (["/sys/fs/cgroup/memory%s/memory.limit_in_bytes" % path] if ctrls else
                 ["/sys/fs/cgroup%s/memory.max" % path, "/sys/fs/cgroup/unified%s/memory.max" % path])
        for f in files:
            if path != "/" and os.path.exists(f):
                return int(open(f).read())
    raise AssertionError("no memory cgroup among %s" % cgroups)


def _layers(k, what):
    """Every layer, from inside (probes) and from the host (uid, cgroup)."""
    for name in CHECK:  # in a child interpreter, as test_escape runs them
        probe, _ = k.run("import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', "
                         "%r], capture_output=True, text=True).stdout)" % PROBES[name], timeout=120)
        verdict(k, "ESCAPED" in probe, "%s %s: %s" % (name, what, probe.strip()))
    probe, _ = k.run(OUTSIDE, timeout=120)
    verdict(k, "ESCAPED" in probe, "a write outside the writable places %s: %s" % (what, probe))
    uids, cgroups = _host_side(k)
    assert len(uids) == 1, "%s: the sandbox's processes run as %s" % (what, uids)
    limit = _memory_limit(cgroups)
    # the session's memory plus the tier's allowance for runsc (CB_GVISOR_MEM_MB)
    assert MEMORY_MB << 20 <= limit <= (MEMORY_MB + 256) << 20, (what, limit)
    return uids.pop(), frozenset(cgroups)


PAUSE_END_S = 10  # the paused sandbox's processes are gone within this


@pytest.mark.timeout(600)
def test_every_layer_holds_after_a_resume_and_in_each_clone():
    _check_available("cellblock")
    _needs_gvisor()
    d = tempfile.mkdtemp(prefix="cb-sec-images-")
    os.chmod(d, 0o700)
    store = os.path.join(d, "store")
    argv = ["--isolation", "gvisor", "--memory", str(MEMORY_MB), "--image-dir", store]
    kernels = []
    try:
        a = Kernel("cellblock", argv)
        kernels.append(a)
        a.run("x = 'saved'")
        uid_a, _ = _host_side(a)
        p = ctl(a, "cellblock_pause_request", timeout=120)
        assert p["status"] == "ok", p
        # the reply follows the image's seal; runsc's last processes exit a
        # moment later (the launcher reaps them): none may outlive that
        deadline = time.monotonic() + PAUSE_END_S
        while _host_side(a) != (set(), set()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _host_side(a) == (set(), set()), "the paused sandbox left processes behind"
        assert a.run("print(x)", timeout=120)[0] == "saved\n"  # resumed by this cell
        seen = {_layers(a, "after a resume")}
        for _ in range(2):
            c = Kernel("cellblock", argv + ["--resume", p["image"]])
            kernels.append(c)
            assert c.run("print(x)", timeout=120)[0] == "saved\n"
            seen.add(_layers(c, "in a clone"))
        uids = {u for u, _ in seen}
        cgroups = [cg for _, cg in seen]
        assert len(uids) == 3 and not (uids & uid_a), "resumed sandboxes share a lease: %s" % uids
        assert len(set(cgroups)) == 3, "resumed sandboxes share a cgroup: %s" % cgroups
    finally:
        for k in kernels:
            k.shutdown()
        shutil.rmtree(d, ignore_errors=True)
