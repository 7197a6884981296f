"""cellblock inside a chroot whose root is not a mount point (issue 9).

Build chroots (sbuild, pbuilder, mock) and some CI enter a directory with plain
`chroot`.  There pivot_root refuses (EINVAL: the root is no mount point) and
the kernel gives no user namespace to a chrooted process (EPERM).  The
launcher, as root, must still start a full sandbox: own host id, fresh /proc
with host facts masked, nothing of the chroot's other files, nothing mounted
on the host afterwards.

The chroot is built in a private mount namespace (`unshare -m`), with bind
mounts of /usr, /etc, /proc, /sys, /dev and the build tree, as such tools do.
"""
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import textwrap

import pytest

from .conftest import BUILD, skip_or_fail

CELLBLOCK = os.path.join(BUILD, "bin", "cellblock")

SETUP = r"""
set -e
R=$1; B=$2
for d in usr etc proc sys dev tmp run/cellblock; do mkdir -p "$R/$d"; done
for l in bin lib lib32 lib64 sbin; do
    if [ -L "/$l" ]; then ln -s "$(readlink "/$l")" "$R/$l"; elif [ -d "/$l" ]; then mkdir -p "$R/$l"; mount --rbind "/$l" "$R/$l"; fi
done
mount --rbind /usr "$R/usr"; mount --bind /etc "$R/etc"; mount --rbind /proc "$R/proc"
mount --rbind /sys "$R/sys"; mount --rbind /dev "$R/dev"
mkdir -p "$R$B" /run/cellblock; mount --bind "$B" "$R$B"; mount --bind /run/cellblock "$R/run/cellblock"
echo chroot-secret > "$R/secret.txt"
exec chroot "$R" "$B/bin/cellblock" run --json /tmp/probe.py
"""

PROBE = textwrap.dedent("""
    import os
    print("UID", os.getuid())
    print("CMDLINE", len(open("/proc/cmdline").read()))
    print("SECRET", os.path.exists("/secret.txt"))
    print("ROOTS", sorted(os.listdir("/")))
    print("MOUNTINFO", " ".join(l.split()[3] + ":" + l.split()[4]
                                for l in open("/proc/self/mountinfo").read().splitlines()))
""")


def _mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [l for l in f if (" " + path) in l]


@pytest.fixture
def chroot_dir():
    if os.geteuid() != 0:
        skip_or_fail("a chroot needs root")
    for tool in ("unshare", "chroot", "mount"):
        if not (shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")):
            skip_or_fail(tool + " missing")
    if not os.path.exists(CELLBLOCK):
        skip_or_fail("cellblock is not built (run make)")
    d = tempfile.mkdtemp(prefix="cb-chroot-")
    yield d
    # every mount lived in the unshared namespace, gone with it; never delete through one
    assert _mounts_under(d) == [], "mounts left on the host under " + d
    subprocess.run(["rm", "-rf", "--one-file-system", d], check=False)


def test_sandbox_in_a_chroot(chroot_dir):
    with open(os.path.join(chroot_dir, "probe.py.tmp"), "w") as f:
        f.write(PROBE)
    os.makedirs(os.path.join(chroot_dir, "tmp"), exist_ok=True)
    os.rename(os.path.join(chroot_dir, "probe.py.tmp"), os.path.join(chroot_dir, "tmp", "probe.py"))
    build = os.path.realpath(BUILD)
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", SETUP, "sh",
                        chroot_dir, build], capture_output=True, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, "cellblock run in a chroot failed (%d): %s" % (p.returncode, err[-3000:])
    ex = json.loads(p.stdout.decode())
    out = "".join(ex["logs"]["stdout"])
    uid = int(out.split("UID")[1].split()[0])
    assert uid not in (0, 65534), "the runner's id in a chroot: %d" % uid
    assert "CMDLINE 0" in out, out
    assert "SECRET False" in out, "the chroot's files reach the sandbox: " + out
    assert "tmp" in out and "usr" in out
    assert build not in out.split("MOUNTINFO", 1)[1], "host path of the build in mountinfo: " + out
    assert _mounts_under(chroot_dir) == [], "the sandbox left mounts on the host"
    assert "chroot" in err, "the launcher should say it runs without a user namespace: " + err
