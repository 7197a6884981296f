"""A hostile sandbox against what the host shares with it (issue 10, findings 8-10).

8. Per-user kernel counters: code in one sandbox takes every inotify instance
   its uid may have; another sandbox, a host process of the old shared uid
   (nobody) and root must still get one.  The control: two stock ipykernels
   of one (throwaway) user, where the second one gets EMFILE.
9. Host facts through /proc: the boot line, kernel symbols, keys, timers and
   the host path of the runner (the build dir) in /proc/self/mountinfo.  The
   control is the stock ipykernel, which reads them.
10. cgroup directories left after hard kills: SIGKILL of the launcher, of the
   kernel, jupyter_client's shutdown_kernel(now=True) and
   restart_kernel(now=True).  Checked by the pids this test created, never
   machine-wide (other kernels may run at the same time).  The control does
   not apply: the stock kernel makes no cgroups.

Everything is bounded: at most INOTIFY_CAP instances are held, by a throwaway
user's processes for the control, and only while one test runs.
"""
import glob
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from .conftest import (BUILD, KERNELS, READY_S, REPO, Kernel, _check_available, skip_or_fail,
                       tier, verdict)

CELLBLOCK = os.path.join(BUILD, "bin", "cellblock")
RUNUSER = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin") or "runuser"
INOTIFY_CAP = 4096       # instances one probe takes at most, whatever the host's limit
NOBODY = 65534           # the id every sandbox had before (when the kernel runs as root)

HOLD = textwrap.dedent("""
    import ctypes, os
    _libc = ctypes.CDLL(None, use_errno=True)
    _held = []
    while len(_held) < %d:
        _fd = _libc.inotify_init1(os.O_CLOEXEC)
        if _fd < 0:
            break
        _held.append(_fd)
    print("HELD", len(_held), os.strerror(ctypes.get_errno()))
""" % INOTIFY_CAP)
RELEASE = "for _fd in _held: os.close(_fd)\n_held = []\nprint('RELEASED')"
PROBE = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    print("PROBE", "ok" if fd >= 0 else os.strerror(ctypes.get_errno()))
    if fd >= 0:
        os.close(fd)
""")


def _probe_ok(out):
    return "PROBE ok" in out


def _run_cli(code, *args, timeout=60):
    return subprocess.run([CELLBLOCK, "run", "--json", *args, "-"], input=code.encode(),
                          capture_output=True, timeout=timeout)


def _cli_stdout(proc):
    try:
        ex = json.loads(proc.stdout.decode())
    except ValueError:
        raise AssertionError("cellblock run: %r %r" % (proc.stdout[-500:], proc.stderr[-2000:]))
    return "".join(ex["logs"]["stdout"])


def _host_probe(uid):
    """The probe as a plain host process of uid."""
    name = pwd.getpwuid(uid).pw_name
    p = subprocess.run([RUNUSER, "-u", name, "--", "/usr/bin/python3", "-c", PROBE],
                       capture_output=True, text=True, timeout=30, cwd="/")
    return p.stdout + p.stderr


def _children(pid):
    out = []
    for t in glob.glob("/proc/%d/task/*/children" % pid):
        try:
            out += [int(x) for x in open(t).read().split()]
        except OSError:
            pass
    return out


def _comm(pid):
    try:
        return open("/proc/%d/comm" % pid).read().strip()
    except OSError:
        return ""


def _start_time(pid):
    try:
        return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _launcher_of(kernel_pid, timeout=30):
    """The kernel's current launcher (the child named cellblock-launcher)."""
    end = time.time() + timeout
    while time.time() < end:
        for c in _children(kernel_pid):
            if _comm(c).startswith("cellblock-launc"):
                return c
        time.sleep(0.1)
    raise AssertionError("no launcher under kernel %d" % kernel_pid)


def _inner_pid(pid):
    """The pid in the innermost pid namespace (NSpid's last), or None."""
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def _runner_of(launcher_pid):
    """launcher -> init -> runner; the runner is init's only child.  init is
    the launcher's child that is pid 1 of a namespace of its own (a launcher
    that starts a warm template has that supervisor as a child for a moment,
    with children of its own)."""
    for init in _children(launcher_pid):
        if _inner_pid(init) != 1:
            continue
        kids = _children(init)
        if kids:
            return kids[0]
    raise AssertionError("no runner under launcher %d" % launcher_pid)


def _host_uid(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError("no Uid line")


def _kernel_pid(k):
    return k.km.provisioner.pid


# ---- finding 8: per-user counters -------------------------------------------------------


@pytest.fixture(scope="module")
def throwaway_user():
    """An unprivileged user for the control kernels (their inotify instances are its own)."""
    if os.geteuid() != 0:
        skip_or_fail("the control needs root (to create a throwaway user)")
    if not (shutil.which("useradd") or os.path.exists("/usr/sbin/useradd")):
        skip_or_fail("useradd missing")
    name = "cbh" + secrets.token_hex(4)
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["userdel", name], check=False)


class UserKernel(Kernel):
    """The stock ipykernel run as another user (through runuser), started by jupyter_client."""

    def __init__(self, user):
        self.name, self.control = "python3-as-" + user.pw_name, True
        self._tmp = tempfile.mkdtemp(prefix="cb-hostile-uk-")
        os.chmod(self._tmp, 0o755)
        home = os.path.join(self._tmp, "home")
        os.mkdir(home)
        os.chown(home, user.pw_uid, user.pw_gid)
        conn = os.path.join(home, "conn.json")
        kdir = os.path.join(self._tmp, "kernels", "uk")
        os.makedirs(kdir)
        # the connection file jupyter_client writes is root's and 0600: hand the user a copy
        script = ('cp "$1" "$2" && chown "$3" "$2" && exec %s -u "$3" -- env HOME="$4" '
                  'IPYTHONDIR="$4/ipython" /usr/bin/python3 -m ipykernel_launcher -f "$2"' % RUNUSER)
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump({"argv": ["/bin/sh", "-c", script, "sh", "{connection_file}", conn,
                                user.pw_name, home],
                       "display_name": "stock ipykernel as a user", "language": "python"}, f)
        ksm = KernelSpecManager(kernel_dirs=[os.path.join(self._tmp, "kernels")])
        self.km = KernelManager(kernel_name="uk", kernel_spec_manager=ksm)
        self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)


@pytest.fixture(params=KERNELS)
def kernel_pair(request, throwaway_user):
    """Two kernels of one kind: cellblock (as root), or the control (stock, one user)."""
    _check_available(request.param)
    if request.param == "cellblock":
        ks = [Kernel("cellblock"), Kernel("cellblock")]
    else:
        ks = [UserKernel(throwaway_user), UserKernel(throwaway_user)]
    yield ks
    for k in ks:
        k.shutdown()


def test_inotify_instances_are_per_sandbox(kernel_pair):
    a, b = kernel_pair
    out, err = a.run(HOLD)
    assert err is None and "HELD" in out, out
    held = int(out.split("HELD")[1].split()[0])
    assert 0 < held < INOTIFY_CAP, "bounded probe: %d instances (limit not reached?)" % held
    try:
        other, _ = b.run(PROBE)
        if not a.control:
            # and nobody else lost theirs: the old shared uid, root, a `cellblock run`
            assert _probe_ok(_host_probe(NOBODY)), "a host process of uid 65534 got no instance"
            assert _probe_ok(_host_probe(0)), "root got no inotify instance"
            assert _probe_ok(_cli_stdout(_run_cli(PROBE))), "`cellblock run` got no instance"
            # each runner's own host uid is what keeps the host's per-uid count
            # apart; under gVisor inotify is the Sentry's own (no host
            # instance, no host uid charged) and the runner is no host process
            if tier() == "namespaces":
                la, lb = _launcher_of(_kernel_pid(a)), _launcher_of(_kernel_pid(b))
                ua, ub = _host_uid(_runner_of(la)), _host_uid(_runner_of(lb))
                assert ua != ub and NOBODY not in (ua, ub) and 0 not in (ua, ub), (ua, ub)
        verdict(a, not _probe_ok(other),
                "one sandbox exhausted the inotify instances of another (%d held): %s"
                % (held, other.strip()))
    finally:
        a.run(RELEASE)


def test_inotify_works_inside_the_sandbox():
    """inotify stays usable (watchdog, watchfiles, tail -f need it): a watch sees a write."""
    _check_available("cellblock")
    code = textwrap.dedent("""
        import ctypes, os, struct
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(0)
        wd = libc.inotify_add_watch(fd, b".", 0x100)   # IN_CREATE
        open("created.txt", "w").close()
        data = os.read(fd, 4096)
        print("EVENT", struct.unpack_from("iIII", data)[1] & 0x100, data[16:].rstrip(b"\\0"))
    """)
    out = _cli_stdout(_run_cli(code))
    assert "EVENT 256 b'created.txt'" in out, out


# ---- finding 9: host facts through /proc ------------------------------------------------

PROC_PROBE = textwrap.dedent("""
    import os
    def size(p):
        try:
            with open(p, 'rb') as f:
                return len(f.read(65536))
        except OSError:
            return 0
    for n in ('cmdline', 'kallsyms', 'keys', 'timer_list', 'sched_debug', 'modules', 'interrupts',
              'latency_stats', 'key-users', 'vmallocinfo'):
        print('PROC', n, size('/proc/' + n))
    print('CMDLINE', repr(open('/proc/cmdline').read().strip()))
    mi = open('/proc/self/mountinfo').read()
    print('MOUNTINFO', ' '.join(l.split()[3] + ':' + l.split()[4] for l in mi.splitlines()))
    try:
        ro = os.statvfs('/proc/sys').f_flag & os.ST_RDONLY
    except OSError:     # gVisor has no statfs there: then nothing in it may open for writing
        ro = 1
        for p in ('/proc/sys/kernel/hostname', '/proc/sys/vm/overcommit_memory',
                  '/proc/sys/net/ipv4/ip_forward'):
            try:
                open(p, 'w').close()
                ro = 0
            except OSError:
                pass
    print('SYSRO', ro)
    print('RUNNER', os.path.exists('/opt/cellblock/runner/runner.py'))
""")


def _host_facts(out, paths):
    """What of the host the probe saw: non-empty masked files, host paths in mountinfo."""
    facts = []
    for line in out.splitlines():
        if line.startswith("PROC "):
            _, name, n = line.split()
            if int(n) > 0:
                facts.append("/proc/%s (%s bytes)" % (name, n))
        if line.startswith("MOUNTINFO "):
            for p in paths:
                if p in line:
                    facts.append("host path %s in mountinfo" % p)
    return facts


def _build_paths():
    return sorted({os.path.realpath(BUILD), os.path.realpath(REPO), BUILD, REPO})


def test_proc_hides_host_facts(kernel):
    host_cmdline = open("/proc/cmdline").read().strip()
    out, err = kernel.run(PROC_PROBE)
    assert err is None and "MOUNTINFO" in out, out
    facts = _host_facts(out, _build_paths())
    if not kernel.control and tier() == "gvisor":
        # gVisor's /proc is its own: its cmdline is gVisor's made-up line, no
        # fact of the host's; what must hold is that it is not the host's
        assert host_cmdline not in out, "the host's boot line in the sandbox: " + out
        facts = [f for f in facts if not f.startswith("/proc/cmdline ")]
    if not kernel.control:
        assert "SYSRO 1" in out, "/proc/sys is writable in the sandbox: " + out
        assert "RUNNER True" in out, "the runner is not where it should be: " + out
        if tier() == "namespaces":  # bound there on its own (gVisor: in its root)
            assert "/opt/cellblock/runner" in out.split("MOUNTINFO", 1)[1], out
    verdict(kernel, bool(facts),
            "host facts through /proc: %s (host boot line %r)" % (facts, host_cmdline[:80]))


def test_proc_hides_host_facts_cellblock_run():
    _check_available("cellblock")
    out = _cli_stdout(_run_cli(PROC_PROBE))
    assert "MOUNTINFO" in out, out
    assert _host_facts(out, _build_paths()) == [], out
    assert "SYSRO 1" in out, out


# ---- finding 10: cgroups left behind ----------------------------------------------------


def _own_cgroup_bases():
    """Where this process's (and so its kernels') cgroups sit, per hierarchy."""
    bases = []
    for line in open("/proc/self/cgroup"):
        _, ctrls, path = line.rstrip("\n").split(":", 2)
        if path.endswith("/cellblock-leaf"):   # v2, delegated: the launcher moved us there
            path = path[:-len("/cellblock-leaf")]
        path = "" if path == "/" else path
        if ctrls == "":
            for m in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                if os.path.exists(m + path + "/cgroup.procs"):
                    bases.append(m + path)
        else:
            for c in ctrls.split(","):
                if c in ("memory", "pids", "cpu", "freezer"):
                    bases.append("/sys/fs/cgroup/%s%s" % (c, path))
    return [b for b in bases if os.path.isdir(b)]


def _groups_of(kernel_pids=(), launcher_pids=()):
    """Every cgroup directory named after one of these pids, in any hierarchy."""
    found = []
    for base in _own_cgroup_bases():
        for k in kernel_pids:
            found += glob.glob("%s/cellblock-k%d-*" % (base, k))
        for l in launcher_pids:
            found += glob.glob("%s/cellblock-%d-*" % (base, l))
            found += glob.glob("%s/*/cellblock-%d-*" % (base, l))
            found += glob.glob("%s/cellblock-%d" % (base, l))
    return sorted(set(found))


def _wait_gone(kernel_pids, launcher_pids, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        left = _groups_of(kernel_pids, launcher_pids)
        if not left:
            return []
        time.sleep(0.2)
    return _groups_of(kernel_pids, launcher_pids)


@pytest.fixture
def cgroup_host():
    _check_available("cellblock")
    bases = _own_cgroup_bases()
    if not bases or not (os.geteuid() == 0 or os.access(bases[0], os.W_OK)):
        skip_or_fail("no writable cgroup hierarchy here (needs root or delegation)")


def _start():
    k = Kernel("cellblock")
    out, err = k.run("print('up')")
    assert "up" in out, out
    kp = _kernel_pid(k)
    lp = _launcher_of(kp)
    assert _groups_of([kp], [lp]), "this test cannot see the sandbox's cgroups (%d, %d)" % (kp, lp)
    return k, kp, lp


def _dead(pid, start):
    return _start_time(pid) != start


def _kill_kernel_now(k, how):
    """Hard-kills the kernel as `how` says; returns a kernel that is up afterwards."""
    if how == "shutdown_now":
        k.kc.stop_channels()
        k.km.shutdown_kernel(now=True)
        k.km = None
        return Kernel("cellblock")
    if how == "restart_now":
        k.km.restart_kernel(now=True)
        k.kc.wait_for_ready(timeout=READY_S)
        return k
    os.kill(_kernel_pid(k), signal.SIGKILL)             # SIGKILL of the kernel
    try:
        k.kc.stop_channels()
        k.km.shutdown_kernel(now=True)                  # reaps it; nothing left to kill
    finally:
        k.km = None
    return Kernel("cellblock")


def test_no_cgroup_left_after_launcher_sigkill(cgroup_host):
    k, kp, lp = _start()
    try:
        st = _start_time(lp)
        os.kill(lp, signal.SIGKILL)
        # the kernel notices, starts a fresh sandbox; the next cell runs in it
        deadline = time.time() + 30
        while _start_time(lp) == st and time.time() < deadline:
            time.sleep(0.05)
        out, _ = k.run("print('again')")
        if "again" not in out:
            out, _ = k.run("print('again')")
        assert "again" in out, out
        lp2 = _launcher_of(kp)
        assert lp2 != lp
        left = _wait_gone([], [lp])
        assert left == [], "cgroup of the SIGKILLed launcher %d left: %s" % (lp, left)
    finally:
        k.shutdown()
    left = _wait_gone([kp], [lp])
    assert left == [], "cgroups left after an ordinary shutdown: %s" % left


# how long a runner may take to die with its sandbox's init (it takes tens of
# milliseconds; alive after this, it escaped the pid namespace's end)
RUNNER_GONE_S = 10


@pytest.mark.parametrize("which", ["init", "runner"])
def test_no_cgroup_left_after_sandbox_sigkill(cgroup_host, which):
    """SIGKILL from the host of the sandbox's init (pid 1 inside) or of its
    runner: the kernel starts a fresh sandbox, and the old one's group goes."""
    k, kp, lp = _start()
    try:
        runner = _runner_of(lp)
        init = next(i for i in _children(lp) if runner in _children(i) and _inner_pid(i) == 1)
        victim = runner if which == "runner" else init
        rst = _start_time(runner)
        os.kill(victim, signal.SIGKILL)
        # the runner ends with its pid namespace, whose init tears down its
        # own memory and files before it kills the rest: not at once (a warm
        # runner was seen to answer one more cell in between), but for sure
        deadline = time.monotonic() + RUNNER_GONE_S
        while not _dead(runner, rst) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _dead(runner, rst), "the runner %d outlived its sandbox" % runner
        out, _ = k.run("print('again')")
        if "again" not in out:
            out, _ = k.run("print('again')")
        assert "again" in out, out
        left = _wait_gone([], [lp])
        assert left == [], "%s SIGKILLed: cgroup of launcher %d left: %s" % (which, lp, left)
    finally:
        k.shutdown()
    left = _wait_gone([kp], [lp])
    assert left == [], "cgroups left after an ordinary shutdown: %s" % left


@pytest.mark.parametrize("how", ["sigkill_kernel", "shutdown_now", "restart_now"])
def test_no_cgroup_left_after_hard_kill(cgroup_host, how):
    k, kp, lp = _start()
    lst = _start_time(lp)
    k2 = None
    try:
        k2 = _kill_kernel_now(k, how)
        out, _ = k2.run("print('next')")
        assert "next" in out, out
        deadline = time.time() + 20
        while not _dead(lp, lst) and time.time() < deadline:
            time.sleep(0.1)
        assert _dead(lp, lst), "the launcher %d outlived its kernel" % lp
        left = _wait_gone([kp], [lp])
        assert left == [], "%s: cgroups of kernel %d / launcher %d left: %s" % (how, kp, lp, left)
    finally:
        if k2 is not None:
            kp2 = _kernel_pid(k2)
            lp2 = _launcher_of(kp2)
            k2.shutdown()
            left = _wait_gone([kp2], [lp2])
            assert left == [], "cgroups left after an ordinary shutdown: %s" % left
        elif k.km is not None:
            k.shutdown()


def test_a_launcher_killed_mid_freeze_leaves_nothing_frozen(cgroup_host):
    """cgroup v1 teardown freezes the sandbox, kills every member, thaws.  A
    launcher SIGKILLed between FROZEN and THAWED leaves frozen processes that
    SIGKILL cannot end; the kernel's clean-up (and any later sweep) thaws them
    first, so nothing stays behind."""
    k, kp, lp = _start()
    try:
        freezers = [g for g in _groups_of([], [lp]) if "/freezer/" in g]
        if not freezers and not any("/freezer/" in b for b in _own_cgroup_bases()):
            pytest.skip("cgroup v1 only: v2 tears down with cgroup.kill, no freezing")
        if not freezers:
            skip_or_fail("no cgroup v1 freezer hierarchy here")
        runner = _runner_of(lp)
        assert runner, "no runner found under launcher %d" % lp
        rst = _start_time(runner)
        with open(os.path.join(freezers[0], "freezer.state"), "w") as f:
            f.write("FROZEN")                      # as the launcher's teardown does
        time.sleep(0.2)
        os.kill(lp, signal.SIGKILL)                # ... and then it dies
        out, _ = k.run("print('after')")
        if "after" not in out:
            out, _ = k.run("print('after')")
        assert "after" in out, out
        deadline = time.time() + 20
        while not _dead(runner, rst) and time.time() < deadline:
            time.sleep(0.1)
        assert _dead(runner, rst), "the frozen runner %d survived" % runner
        left = _wait_gone([], [lp])
        assert left == [], "cgroups of the killed launcher left: %s" % left
    finally:
        k.shutdown()
