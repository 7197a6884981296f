"""Boot the test guest and run commands in it (guest/README.md).

    from guestvm import Guest, Step
    res = Guest().run([Step(["id"]), Step(["sh", "-c", "cat /proc/self/cgroup"],
                                          user="cbuser", cgroup="delegated")])
    res.steps[0].rc, res.steps[0].output, res.after["cgroups"], res.console

or from a shell:

    python3 guest/guestvm.py [--user NAME] [--cgroup KIND] [--timeout S] -- CMD ARGS...

prints the command's output and exits with its status.  The guest is
Debian's own kernel under QEMU (KVM when /dev/kvm works, TCG otherwise) on
the host's system, read-only over 9p below a tmpfs overlay; cgroup v2 alone,
no swap.  Each run boots a fresh guest, and it leaves nothing behind: QEMU is
killed by pid if it overstays, the results directory is removed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")
IMAGE = os.path.join(BUILD, "guest")          # scripts/guestimage.sh writes it (make guest-image)
QEMU = shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64"
MEM_MB = int(os.environ.get("CB_GUEST_MEM_MB", "4096"))   # the guest's RAM: its bound on the host
CPUS = int(os.environ.get("CB_GUEST_CPUS", "2"))
TB_MB = 256                    # TCG's translation cache (QEMU's default is 1 GiB)
BOOT_SLACK = 120               # seconds for boot and power-off beyond the steps' own timeouts
KVM_BOOT_S = 15                # a KVM guest reads its job within this, else TCG (nested
                               # virtualisation can open /dev/kvm and then spin without booting)
KVM_STUCK = os.path.join(IMAGE, ".kvm-stuck")   # this boot's KVM did not run the guest: its boot_id


@dataclass
class Step:
    argv: list
    user: str = "root"          # "root" or a guest user (cbuser: uid 2000)
    cgroup: str = "root"        # root | service | service-delegated | delegated | undelegated
    env: dict = field(default_factory=dict)
    cwd: str = None             # default: the user's home (a tmpfs in the guest)
    timeout: int = 1800         # seconds; the step is killed after it


@dataclass
class StepResult:
    rc: int                     # exit status (negative: killed by that signal); None: never ran
    output: str                 # stdout and stderr
    seconds: float
    timed_out: bool
    cgroup: str                 # where the step ran, in the guest


@dataclass
class Result:
    steps: list                 # StepResult per Step
    after: dict                 # {"cgroups": [...], "processes": [...]} left after the last step
    console: str                # the guest's console (kernel messages)
    error: str                  # guest/init.py's failure, "" if none
    boot_seconds: float         # QEMU start to the guest reading its job
    seconds: float              # the whole run
    files: dict                 # other files the steps wrote to $CB_GUEST_OUT: name -> text
    accel: str                  # the -accel QEMU ran with


def available():
    """(True, "") or (False, why): what this machine lacks to boot the guest."""
    if not os.path.exists(QEMU):
        return False, "no qemu-system-x86_64 (qemu-system-x86)"
    for f in ("vmlinuz", "initrd.img"):
        if not os.path.exists(os.path.join(IMAGE, f)):
            return False, "no guest image in %s (make guest-image; needs linux-image-amd64 " \
                          "and busybox-static)" % IMAGE
    if os.geteuid() != 0:
        return False, "the guest exports the host's / read-only over 9p: needs root"
    return True, ""


TCG = "tcg,thread=multi,tb-size=%d" % TB_MB


def accels():
    """-accel values to try in order: KVM first when /dev/kvm opens (a KVM
    that cannot run a guest makes QEMU fail at once, and TCG is tried next)."""
    want = os.environ.get("CB_GUEST_ACCEL")
    if want:
        return [want]
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC))
    except OSError:
        return [TCG]
    try:
        with open(KVM_STUCK) as f:
            if f.read() == _boot_id():
                return [TCG]        # tried since the host booted: it spun
    except OSError:
        pass
    return ["kvm", TCG]


def _boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def _remember_kvm_stuck():
    try:
        with open(KVM_STUCK, "w") as f:
            f.write(_boot_id())
    except OSError:
        pass


class Guest:
    def __init__(self, mem_mb=MEM_MB, cpus=CPUS):
        self.mem_mb = mem_mb
        self.cpus = cpus

    def argv(self, out, accel):
        append = ("console=ttyS0 quiet loglevel=4 panic=-1 tsc=reliable no_timer_check "
                  "lpj=4000000 cb_init=%s") % \
                 os.path.join(REPO, "guest", "init.py")
        return [QEMU, "-M", "pc", "-accel", accel, "-cpu", "max", "-smp", str(self.cpus),
                "-m", str(self.mem_mb), "-nodefaults", "-no-user-config", "-display", "none",
                "-no-reboot", "-kernel", os.path.join(IMAGE, "vmlinuz"),
                "-initrd", os.path.join(IMAGE, "initrd.img"), "-append", append,
                "-serial", "file:%s" % os.path.join(out, "console.log"),
                "-device", "virtio-rng-pci",
                "-fsdev", "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap",
                "-device", "virtio-9p-pci,fsdev=root,mount_tag=cbroot",
                "-fsdev", "local,id=out,path=%s,security_model=none" % out,
                "-device", "virtio-9p-pci,fsdev=out,mount_tag=cbout",
                # the repository again, mounted at its own path after the
                # guest's tmpfs mounts: a clone under /tmp (CI's, say) would
                # be hidden by the guest's own /tmp otherwise
                "-fsdev", "local,id=repo,path=%s,security_model=none,readonly=on,"
                          "multidevs=remap" % REPO,
                "-device", "virtio-9p-pci,fsdev=repo,mount_tag=cbrepo"]

    def run(self, steps, timeout=None):
        """Boots a guest, runs steps in order, powers off; returns a Result."""
        ok, why = available()
        if not ok:
            raise RuntimeError("cannot boot the test guest: " + why)
        out = tempfile.mkdtemp(prefix="cb-guest-")
        os.chmod(out, 0o777)        # the guest's users write their results here
        qemu = None
        try:
            with open(os.path.join(out, "job.json"), "w") as f:
                json.dump({"steps": [s.__dict__ for s in steps], "repo": REPO}, f)
            limit = timeout or sum(s.timeout for s in steps) + BOOT_SLACK
            for accel in accels():
                t0 = time.monotonic()
                qemu = subprocess.Popen(self.argv(out, accel), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                boot = None
                stuck = False
                while qemu.poll() is None:
                    if boot is None and os.path.exists(os.path.join(out, "ready")):
                        boot = time.monotonic() - t0
                    waited = time.monotonic() - t0
                    if boot is None and accel == "kvm" and waited > KVM_BOOT_S:
                        stuck = True            # KVM opened but the guest never came up
                        _remember_kvm_stuck()
                    if stuck or waited > limit:
                        qemu.kill()
                        break
                    time.sleep(0.1)
                qemu_out = qemu.communicate()[0].decode(errors="replace")
                self.accel = accel
                if boot is not None or (qemu.returncode == 0 and not stuck):
                    break           # it ran (a KVM that fails does before the guest reads its job)
                qemu = None
            total = time.monotonic() - t0
            res = self._collect(out, steps, qemu_out, boot, total)
            res.accel = self.accel
            return res
        finally:
            if qemu is not None and qemu.poll() is None:
                qemu.kill()
                qemu.wait()
            shutil.rmtree(out, ignore_errors=True)

    @staticmethod
    def _collect(out, steps, qemu_out, boot, total):
        def text(name):
            try:
                with open(os.path.join(out, name), errors="replace") as f:
                    return f.read()
            except OSError:
                return ""
        results = []
        for n in range(len(steps)):
            meta = json.loads(text("step-%d.json" % n) or "null") or {}
            results.append(StepResult(meta.get("rc"), text("step-%d.out" % n),
                                      meta.get("seconds", 0.0), meta.get("timed_out", False),
                                      meta.get("cgroup", "")))
        after = json.loads(text("after.json") or "null") or {}
        err = text("error")
        if qemu_out.strip():
            err = (err + "\nqemu: " + qemu_out.strip()).strip()
        known = {"job.json", "ready", "after.json", "error", "console.log"}
        files = {n: text(n) for n in sorted(os.listdir(out))
                 if n not in known and not n.startswith("step-")}
        return Result(results, after, text("console.log"), err, boot or 0.0, total, files, "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--user", default="root")
    ap.add_argument("--cgroup", default="root",
                    choices=["root", "service", "service-delegated", "delegated",
                             "undelegated"])
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--mem", type=int, default=MEM_MB, help="guest RAM in MiB")
    ap.add_argument("--console", action="store_true", help="print the guest's console too")
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    res = Guest(mem_mb=a.mem).run([Step(a.cmd, user=a.user, cgroup=a.cgroup, timeout=a.timeout)])
    s = res.steps[0]
    sys.stdout.write(s.output)
    if a.console:
        sys.stderr.write(res.console)
    if res.error:
        sys.stderr.write("guest: %s\n" % res.error)
    sys.stderr.write("guest: boot %.1f s, step %.1f s, total %.1f s\n"
                     % (res.boot_seconds, s.seconds, res.seconds))
    if s.rc is None:
        return 125
    return s.rc if s.rc >= 0 else 128 - s.rc


if __name__ == "__main__":
    sys.exit(main())
