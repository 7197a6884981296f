"""Recon from inside: /proc/self/mountinfo (issue 18, finding 5).

A sandbox that reads its mountinfo must learn neither the host uid it runs
as (tmpfs prints uid=/gid= of the mounter, in the host's terms) nor the
host's disks: their device names and numbers, and the superblock options
of the filesystems its read-only binds come from.  Run against cellblock's
namespaces tier, its gVisor tier when runsc is there, and the stock
ipykernel as the control (which sees the host's mountinfo, so the test can
tell).
"""

import re
import shutil

import pytest

from .conftest import KERNELS, Kernel, _check_available, verdict

PROBE = "print(open('/proc/self/mountinfo').read())"


def _parse(text):
    """[(dev, mount point, fstype, source, super options)] of mountinfo lines."""
    out = []
    for line in text.splitlines():
        if " - " not in line:
            continue
        a, b = line.split(" - ", 1)
        a, b = a.split(), b.split()
        if len(a) >= 5 and len(b) >= 3:
            out.append((a[2], a[4], b[0], b[1], b[2]))
    return out


def _host_disks():
    """The host's block-device filesystems: {dev: (source, super options)}."""
    with open("/proc/self/mountinfo") as f:
        mine = _parse(f.read())
    return {dev: (src, opts) for dev, _, _, src, opts in mine if src.startswith("/dev/")}


def _facts(text):
    disks = _host_disks()
    facts = []
    for dev, point, fstype, src, opts in _parse(text):
        for o in opts.split(","):
            m = re.fullmatch(r"(uid|gid)=(\d+)", o)
            if m and m.group(2) != "0":
                facts.append("%s %s: %s (a host id)" % (point, fstype, o))
        if src.startswith("/dev/"):
            facts.append("%s: host device %s" % (point, src))
        if dev in disks:
            facts.append("%s: host disk %s (%s)" % (point, dev, disks[dev][0]))
        for hsrc, hopts in disks.values():
            if opts == hopts and len(hopts) > 2:
                facts.append("%s: the options of host disk %s (%s)" % (point, hsrc, opts))
    return facts


TIERS = [("namespaces", [])] + ([("gvisor", ["--isolation", "gvisor"])]
                                if shutil.which("runsc") else [])


@pytest.fixture(scope="module", params=[(k, t) for k in KERNELS
                                        for t in (TIERS if k == "cellblock" else [("", [])])],
                ids=lambda p: p[0] + ("-" + p[1][0] if p[1][0] else ""))
def tier_kernel(request):
    name, (_, extra) = request.param
    _check_available(name)
    k = Kernel(name, extra or None)
    yield k
    k.shutdown()


def test_mountinfo_shows_no_host_uid_disk_or_options(tier_kernel):
    assert _host_disks(), "the host has no block-device mount to look for"
    out, err = tier_kernel.run(PROBE)
    assert err is None and " / " in out, out
    facts = _facts(out)
    verdict(tier_kernel, bool(facts), "host facts in /proc/self/mountinfo: %s" % facts[:8])


def test_mountinfo_as_ordinary_user(throwaway_user, staged_install):
    """The same without root: the launcher's uid is the user's own and its
    user namespace an unprivileged one; the user's plain python3 (the
    control) reads the host's mountinfo."""
    import json
    import subprocess
    from .conftest import RUNUSER
    env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
    p = subprocess.run([RUNUSER, "-u", throwaway_user.pw_name, "--", staged_install.cellblock,
                        "run", "--json", "-"], input=PROBE.encode(), capture_output=True,
                       timeout=60, cwd="/", env=env)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    out = "".join(json.loads(p.stdout)["logs"]["stdout"])
    assert " / " in out, out
    assert _facts(out) == [], "host facts in /proc/self/mountinfo: %s" % _facts(out)[:8]
    plain = subprocess.run([RUNUSER, "-u", throwaway_user.pw_name, "--", "/usr/bin/python3", "-c",
                            PROBE], capture_output=True, timeout=60, cwd="/", env=env)
    assert _facts(plain.stdout.decode()), "the control saw no host disk: the test is blind"
