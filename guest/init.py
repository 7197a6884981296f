"""PID 1 of the test guest (guest/README.md), started by guest/initrd-init on
the host's system (9p, read-only, below a tmpfs overlay).

It makes the platform cellblock's users have: cgroup v2 alone at
/sys/fs/cgroup with memory, pids, cpu and cpuset handed down from the root,
no swap, a writable /etc (in the overlay) with an ordinary user `cbuser`.
Then it runs the job the host wrote to the results share (cbout, 9p,
read-write) as /job.json:

    {"steps": [{"argv": [...], "user": "root" | NAME, "cgroup": "delegated" |
                "undelegated" | "service" | "root", "env": {...}, "cwd": DIR,
                "timeout": SECONDS}, ...]}

each step in its own cgroup as a session manager would put it there:
  root         the hierarchy's root (as a process without a session manager)
  service      /system.slice/cb-test.service, root's, holding the step's
               processes (a systemd service without Delegate=)
  service-delegated  /system.slice/cb-deleg.service, the same with
               trusted.delegate=1, as systemd marks a Delegate=yes unit
  delegated    /user.slice/user-UID.slice/cb-test.service chowned to the user,
               its parent handing memory, pids and cpu down (Delegate=yes)
  undelegated  /user.slice/user-UID.slice/session-1.scope, root's (a login
               session: the user may not write it)
and writes step-N.out (stdout and stderr), step-N.json ({"rc", "seconds",
"timed_out"}) and, after the last step, after.json (cgroup directories and
processes left).  Then it powers the guest off.  Standard library only: it
runs with -I -S before anything else is set up.
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

OUT = "/mnt/cbout"
CG = "/sys/fs/cgroup"
CONTROLLERS = ("cpuset", "cpu", "memory", "pids")
USER = {"name": "cbuser", "uid": 2000, "gid": 2000, "home": "/home/cbuser"}
STEP_TIMEOUT = 1800          # seconds, when a step gives none
KILL_WAIT = 10               # seconds for a step's cgroup to empty after cgroup.kill
RB_POWER_OFF = 0x4321FEDC
MS_RDONLY = 1

libc = ctypes.CDLL(None, use_errno=True)


def say(msg):
    try:
        with open("/dev/console", "w") as c:
            c.write("cb-guest: %s\n" % msg)
    except OSError:
        pass


def mount(src, dst, fstype, opts="", flags=0):
    os.makedirs(dst, exist_ok=True)
    if libc.mount(src.encode(), dst.encode(), fstype.encode(), flags, opts.encode() or None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "mount %s on %s (%s): %s" % (src, dst, fstype, os.strerror(e)))


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def setup():
    mount("proc", "/proc", "proc")
    mount("sys", "/sys", "sysfs")
    mount("cgroup2", CG, "cgroup2", "nsdelegate,memory_recursiveprot")
    mount("devpts", "/dev/pts", "devpts", "newinstance,ptmxmode=0666")
    for d, opts in (("/dev/shm", "mode=1777"), ("/run", "mode=0755"), ("/tmp", "mode=1777"),
                    ("/var/tmp", "mode=1777")):
        mount("tmpfs", d, "tmpfs", opts)
    mount("cbout", OUT, "9p", "trans=virtio,version=9p2000.L,msize=524288")
    for c in CONTROLLERS:
        write(CG + "/cgroup.subtree_control", "+" + c)
    with open("/proc/swaps") as f:
        swaps = f.read().splitlines()[1:]
    if swaps:
        subprocess.run(["swapoff", "-a"], check=True)
    libc.sethostname(b"cb-guest", 8)
    write("/proc/sys/kernel/printk", "4 4 1 7")  # OOM reports on the console, not the noise
    subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True)
    u = USER
    with open("/etc/passwd", "a") as f:
        f.write("%s:x:%d:%d::%s:/bin/sh\n" % (u["name"], u["uid"], u["gid"], u["home"]))
    with open("/etc/group", "a") as f:
        f.write("%s:x:%d:\n" % (u["name"], u["gid"]))
    os.makedirs(u["home"], exist_ok=True)
    os.chown(u["home"], u["uid"], u["gid"])
    os.chmod(u["home"], 0o755)


def user_ids(name):
    if name in (None, "root"):
        return 0, 0, "/root"
    for line in open("/etc/passwd"):
        f = line.rstrip("\n").split(":")
        if f[0] == name:
            return int(f[2]), int(f[3]), f[5]
    raise KeyError("no user %r in the guest" % name)


def mkcg(rel, owner=None):
    """CG/rel, each level handing the controllers down to the next; the last
    one chowned to owner (uid, gid) as systemd's Delegate=yes does."""
    path = CG
    for part in rel.strip("/").split("/"):
        for c in CONTROLLERS[1:]:
            write(path + "/cgroup.subtree_control", "+" + c)
        path = os.path.join(path, part)
        os.makedirs(path, exist_ok=True)
    if owner is not None:
        for f in ("", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"):
            os.chown(os.path.join(path, f), *owner)
    return path


def step_cgroup(kind, uid, gid):
    if kind in (None, "root"):
        return CG
    if kind == "service":
        return mkcg("system.slice/cb-test.service")
    if kind == "service-delegated":      # Delegate=yes on a system service: systemd marks it
        path = mkcg("system.slice/cb-deleg.service")
        os.setxattr(path, "trusted.delegate", b"1")
        return path
    if kind == "delegated":
        return mkcg("user.slice/user-%d.slice/cb-test.service" % uid, (uid, gid))
    if kind == "undelegated":
        return mkcg("user.slice/user-%d.slice/session-1.scope" % uid)
    raise ValueError("unknown cgroup kind %r" % kind)


def empty_cgroup(path):
    """Kills what a step left in its own cgroup (never the root's)."""
    if path == CG:
        return
    try:
        write(path + "/cgroup.kill", "1")
    except OSError:
        return
    end = time.monotonic() + KILL_WAIT
    while time.monotonic() < end:
        if not open(path + "/cgroup.procs").read().strip():
            break
        time.sleep(0.05)
    # and, as systemd does when it stops a unit, removes the groups made
    # below it (a Delegate=yes unit's subtree goes with the unit; a process
    # killed here, such as a warm template's supervisor, cannot remove its
    # own).  The unit's group itself stays for the next step.
    while time.monotonic() < end:
        busy = False
        for d, subdirs, _ in os.walk(path, topdown=False):
            if d == path:
                continue
            try:
                os.rmdir(d)
            except OSError:
                busy = True
        if not busy:
            return
        time.sleep(0.05)


def run_step(n, step):
    uid, gid, home = user_ids(step.get("user"))
    cg = step_cgroup(step.get("cgroup"), uid, gid)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": home,
           "USER": step.get("user") or "root", "LANG": "C.UTF-8", "CB_GUEST": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp", "CB_GUEST_OUT": OUT}
    env.update(step.get("env") or {})
    out = open(os.path.join(OUT, "step-%d.out" % n), "wb")
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            write(cg + "/cgroup.procs", "0")
            os.setsid()
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.chdir(step.get("cwd") or home)
            os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            os.execvpe(step["argv"][0], step["argv"], env)
        except BaseException as e:  # noqa: BLE001 - the child reports and exits
            os.write(out.fileno(), ("cb-guest: cannot start %r: %s\n" % (step["argv"], e)).encode())
        os._exit(127)
    out.close()
    timeout = step.get("timeout") or STEP_TIMEOUT
    status, timed_out = None, False
    while status is None:
        got, st = os.waitpid(-1, os.WNOHANG)
        if got == pid:
            status = st
        elif got == 0:
            if time.monotonic() - t0 > timeout:
                timed_out = True
                os.killpg(pid, signal.SIGKILL)
            time.sleep(0.05)
    rc = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - t0
    empty_cgroup(cg)
    write(os.path.join(OUT, "step-%d.json" % n),
          json.dumps({"rc": rc, "seconds": round(seconds, 2), "timed_out": timed_out,
                      "cgroup": cg}))


def leftovers():
    groups = []
    for d, subdirs, _ in os.walk(CG):
        for s in subdirs:
            groups.append(os.path.join(d, s)[len(CG):])
    procs = []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != 1:
            try:
                cmd = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if cmd:  # kernel threads have none
                procs.append("%s %s" % (p, cmd.strip()))
    return {"cgroups": sorted(groups), "processes": procs}


def main():
    try:
        setup()
        with open(os.path.join(OUT, "job.json")) as f:
            job = json.load(f)
        if job.get("repo"):  # the repository at its host path (see guestvm.py)
            os.makedirs(job["repo"], exist_ok=True)
            mount("cbrepo", job["repo"], "9p", "trans=virtio,version=9p2000.L,msize=524288,ro",
                  MS_RDONLY)
        write(os.path.join(OUT, "ready"), "1")
        for n, step in enumerate(job["steps"]):
            run_step(n, step)
            while True:  # reap orphans of the step before the next one starts
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
        write(os.path.join(OUT, "after.json"), json.dumps(leftovers()))
    except BaseException as e:  # noqa: BLE001 - PID 1 must not die; the host reads the reason
        say("error: %r" % (e,))
        try:
            write(os.path.join(OUT, "error"), repr(e))
        except OSError:
            pass
    finally:
        os.sync()
        libc.reboot(RB_POWER_OFF)
        sys.exit(1)  # only if reboot failed: the kernel panics, and QEMU (-no-reboot) ends


if __name__ == "__main__":
    main()
