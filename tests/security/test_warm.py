"""Warm-started sandboxes (issue 21): every layer a cold start applies holds
in a sandbox whose runner is a template's fork, sandboxes forked from one
template cannot reach it or each other, each one has fresh random state, the
template itself is bounded, and a template that is gone, stale or refused
gives a cold start, never an error.

Every check is made from the host (/proc of the runner and of the template)
as well as from inside.  The kernels start with `--warm wait`, so they are
warm whatever ran before, and each test says so first (the banner names the
template).  The pairwise isolation test has the stock ipykernel as its
control: two ipykernels share everything, and the test must see that.

Templates these tests make for themselves (a configuration of their own
through --env) are ended by the tests, by pid; the shared one ends when
idle (and when the session ends: tests/conftest.py).
"""

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from .conftest import BUILD, KERNELS, Kernel, _check_available, skip_or_fail, tier, verdict

WARM_DIR = "/run/cellblock/warm"
WARM = ["--warm", "wait", "--timeout", "60"]
TEMPLATE_MARK = "runner forked from a template"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="warm starts need a root kernel")
# a template's fork enters the namespaces tier only (launcher/warm.c refuses
# the others: gvisor and microvm always start cold, test_tiers_start_cold)
namespaces_only = pytest.mark.skipif(
    tier() != "namespaces",
    reason="warm starts exist in the namespaces tier only (this run: --isolation %s starts "
           "cold, see test_tiers_start_cold)" % tier())


# ---------------------------------------------------------------- helpers

def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def runner_pid(k):
    """Host pid of the process that runs the cells: the runner at the end of
    kernel -> launcher -> init -> runner, or the control kernel itself."""
    pid = k.km.provisioner.process.pid
    if k.control:
        return pid
    for _ in range(3):
        kids = _children(pid)
        assert kids, "process tree of the kernel ends early at %d" % pid
        pid = kids[0]
    return pid


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            name, _, value = line.partition(":")
            out[name] = value.strip()
    return out


def ns(pid, name):
    return os.readlink("/proc/%d/ns/%s" % (pid, name))


def banner(k):
    """The banner once the sandbox is up (it names the layers in force).  A
    warm runner can answer its first cell before the kernel has read the
    launcher's isolation line, so a banner still saying "being set up" is
    asked again (bounded), as a frontend would see it settle."""
    k.run("1+1")
    for _ in range(50):
        msg_id = k.kc.kernel_info()
        while True:
            m = k.kc.get_shell_msg(timeout=30)
            if m["parent_header"].get("msg_id") == msg_id:
                b = m["content"]["banner"]
                break
        if "Sandbox: being set up" not in b:
            return b
        time.sleep(0.1)
    return b


def memfd_inode(pid):
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            if "/memfd:cellblock-warm" in line:
                return line.split()[4]
    return None


def templates():
    """{template pid: (supervisor pid, key)} of every template serving now."""
    out = {}
    for name in os.listdir(WARM_DIR) if os.path.isdir(WARM_DIR) else ():
        if name.endswith(".pid"):
            try:
                with open(os.path.join(WARM_DIR, name)) as f:
                    sup, _start, tpl = f.read().split()
                out[int(tpl)] = (int(sup), name[:-4])
            except (OSError, ValueError):
                pass
    return out


def template_of(runner):
    """The template a runner was forked from: the one that maps the same
    copy of libcellblock-warm.so (one memfd per template)."""
    ino = memfd_inode(runner)
    assert ino is not None, "runner %d maps no template library: not a warm start" % runner
    for tpl, (sup, key) in templates().items():
        try:
            if memfd_inode(tpl) == ino:
                return tpl, sup, key
        except OSError:
            pass
    raise AssertionError("no serving template maps the runner's library")


def wait_gone(pid, timeout=15):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not os.path.exists("/proc/%d" % pid):
            return True
        time.sleep(0.05)
    return False


def cgroup_dir(pid, controller):
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            _, ctrls, path = line.strip().split(":", 2)
            if controller in ctrls.split(",") or (ctrls == "" and controller == "unified"):
                return path
    return None


CGROUP_ROOT = "/sys/fs/cgroup"


def cgroup_group(pid, controller):
    """pid's group in `controller`'s hierarchy: (its path below the
    hierarchy's root, the directory of its files), from cgroup v1's
    per-controller hierarchy or, on a v2-only host, the unified one.
    (None, None) when the controller is in neither."""
    path = cgroup_dir(pid, controller)
    if path is not None:
        return path, os.path.join(CGROUP_ROOT, controller, path.lstrip("/"))
    path = cgroup_dir(pid, "unified")
    if path is not None and os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        d = os.path.join(CGROUP_ROOT, path.lstrip("/"))
        with open(os.path.join(d, "cgroup.controllers")) as f:
            if controller in f.read().split():
                return path, d
    return None, None


def read_cgroup(d, *names):
    """The first of `names` in directory d (v1 and v2 name a figure apart)."""
    for name in names:
        try:
            with open(os.path.join(d, name)) as f:
                return f.read().strip()
        except FileNotFoundError:
            continue
    raise AssertionError("none of %s in %s" % (names, d))


def cold_start_reason(extra):
    """`cellblock run` of a cell with the launcher's log at info: the cell's
    output and the log's "cold start: ..." line (None: it started warm)."""
    p = subprocess.run([os.path.join(BUILD, "bin", "cellblock"), "run", "--log-level", "info"]
                       + list(extra) + ["-"], input="print(6*7)\n", capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    reasons = [l.split("cold start: ", 1)[1] for l in p.stderr.splitlines() if "cold start: " in l]
    return p.stdout, reasons[0] if reasons else None


def warm_kernel(extra=()):
    _check_available("cellblock")
    k = Kernel("cellblock", WARM + list(extra))
    b = banner(k)
    assert TEMPLATE_MARK in b, "not a warm start: %s" % b[-300:]
    return k


@pytest.fixture(scope="module")
def warm_pair():
    a = warm_kernel()
    b = warm_kernel()
    yield a, b
    a.shutdown()
    b.shutdown()


# ---------------------------------------------------------------- isolation

@pytest.fixture(scope="module", params=KERNELS)
def pair(request):
    """Two warm cellblock kernels, or two stock ipykernels (the control)."""
    _check_available(request.param)
    if request.param == "cellblock":
        ks = [warm_kernel(), warm_kernel()]
    else:
        ks = [Kernel(request.param), Kernel(request.param)]
    yield ks
    for k in ks:
        k.shutdown()


@namespaces_only
def test_sandboxes_do_not_share_namespaces_or_uids(pair):
    a, b = pair
    ra, rb = runner_pid(a), runner_pid(b)
    shared = [n for n in ("pid", "ipc", "net", "mnt", "uts", "user")
              if ns(ra, n) == ns(rb, n)]
    same_uid = status(ra)["Uid"] == status(rb)["Uid"]
    verdict(a, bool(shared) or same_uid,
            "two sandboxes share namespaces %s / the same host uid (%s)"
            % (shared, status(ra)["Uid"]))


@namespaces_only
def test_sandboxes_see_only_themselves(pair):
    a, b = pair
    code = ("import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), "
            "os.getpid())")
    pids = []
    for k in (a, b):
        out, err = k.run(code)
        assert err is None, out
        pids.append(out)
    # the other kernel's runner, by its host pid and by its pid inside
    rb = runner_pid(b)
    out, _ = a.run("import os; print(os.path.exists('/proc/%d'))" % rb)
    sees_host_pid = out.strip() == "True"
    visible = eval(pids[0].split("] ")[0] + "]")
    verdict(a, sees_host_pid or len(visible) > 8,
            "a sandbox sees the other's runner (host pid %d) or host processes: %s"
            % (rb, pids[0].strip()))


@namespaces_only
def test_random_state_differs(pair):
    a, b = pair
    code = ("import random; print(random.random())\n"
            "try:\n import numpy; print(numpy.random.random())\nexcept ImportError: print(0)")
    outs = [k.run(code)[0].split() for k in (a, b)]
    assert outs[0][0] != outs[1][0], "random.random() is the same in both: %s" % outs
    if outs[0][1] != "0":
        assert outs[0][1] != outs[1][1], "numpy's generator is the same in both: %s" % outs


@namespaces_only
def test_template_is_not_reachable_from_inside(warm_pair):
    a, _ = warm_pair
    r = runner_pid(a)
    tpl, _sup, key = template_of(r)
    # nothing of the template's in the runner's namespaces; its socket path
    # and the runtime directory do not exist in the sandbox
    for n in ("pid", "ipc", "net", "mnt", "uts", "user", "cgroup"):
        assert ns(r, n) != ns(tpl, n), "the runner shares the template's %s namespace" % n
    out, err = a.run(
        "import os, socket\n"
        "print(os.path.exists(%r), os.path.exists('/run/cellblock'))\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        "try:\n s.connect(%r)\n print('connected')\nexcept OSError as e:\n print(type(e).__name__)\n"
        "print(open('/proc/net/unix').read().count('cellblock'))\n"
        "print(os.path.exists('/proc/%d'))"
        % (WARM_DIR, os.path.join(WARM_DIR, key + ".sock"), tpl))
    assert err is None, out
    assert out.split() == ["False", "False", "FileNotFoundError", "0", "False"], out


# ---------------------------------------------------------------- every layer

@namespaces_only
def test_every_layer_holds_in_a_warm_sandbox():
    k = warm_kernel(["--open-files", "777", "--memory", "300"])
    try:
        r = runner_pid(k)
        st = status(r)
        init = int(st["PPid"])
        assert int(st["Uid"].split()[0]) >= 1879048192, st["Uid"]   # the sandbox's own host id
        assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(st[cap], 16) == 0, (cap, st[cap])
        assert st["NSpid"].split()[-1] != st["NSpid"].split()[0], st["NSpid"]
        for n in ("pid", "ipc", "net", "mnt", "uts", "user", "cgroup"):
            assert ns(r, n) == ns(init, n), "the runner is not in its init's %s namespace" % n
        launcher = int(status(init)["PPid"])
        for ctrl in ("memory", "pids"):
            path, _ = cgroup_group(r, ctrl)
            assert path and re.search(r"/cellblock-%d-\d+$" % launcher, path), (ctrl, path)
            # the template's fork moved init there too, before the runner existed
            # (or clone3 started it there: cgroup v2)
            assert cgroup_group(init, ctrl)[0] == path, (ctrl, cgroup_group(init, ctrl), path)
        with open("/proc/%d/limits" % r) as f:
            assert re.search(r"Max open files\s+777\s+777", f.read())
        out, err = k.run(
            "import os, ctypes\n"
            "print(os.getuid(), os.getcwd(), os.getppid())\n"
            "for p in ('/usr/x', '/opt/cellblock/runner/x', '/etc/x'):\n"
            "    try:\n        open(p, 'w'); print('wrote', p)\n"
            "    except OSError as e:\n        print(e.errno)\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n"
            "print(libc.unshare(0x10000000), ctypes.get_errno())\n")
        assert err is None, out
        lines = out.split("\n")
        assert lines[0] == "65534 /home/user 1", lines[0]
        assert "wrote" not in out, out
        assert lines[4] == "-1 1" and lines[5] == "-1 1", out     # EPERM from seccomp
        # Landlock: the home is writable, a tmpfs the rules leave out is not
        out, err = k.run("import os; open(os.path.expanduser('~/ok'), 'w').write('x'); print('ok')")
        assert out.strip() == "ok", out
        # memory: the cgroup's limit holds for the fork's own allocations
        out, err = k.run("b = bytearray(600 << 20)", timeout=60)
        assert err is not None, "600 MiB fit in a 300 MiB sandbox"
    finally:
        k.shutdown()


@namespaces_only
def test_landlock_refuses_a_write_the_mounts_allow(pair):
    """A process may write its own /proc/self/comm (no capability needed);
    only Landlock's write rules refuse it, so this shows Landlock in force."""
    a, _ = pair
    out, err = a.run("try:\n open('/proc/self/comm', 'w').write('x'); print('wrote')\n"
                     "except OSError as e:\n print(e.errno)")
    assert err is None, out
    verdict(a, out.strip() == "wrote", "wrote /proc/self/comm (Landlock not in force)")


# ---------------------------------------------------------------- the template

@namespaces_only
def test_template_is_bounded_and_accounted(warm_pair):
    """The template sits in a group of its own with a memory and a pids limit,
    and its memory is charged there (cgroup v1 or v2)."""
    a, _ = warm_pair
    tpl, sup, _key = template_of(runner_pid(a))
    assert int(status(tpl)["PPid"]) == sup
    (mem, mem_dir), (pids, pids_dir) = cgroup_group(tpl, "memory"), cgroup_group(tpl, "pids")
    if mem is None or pids is None:
        skip_or_fail("no cgroup with the memory and pids controllers")
    for path in (mem, pids):
        assert re.search(r"/cellblock-w%d-\d+$" % sup, path), path
    limit = read_cgroup(mem_dir, "memory.limit_in_bytes", "memory.max")
    usage = int(read_cgroup(mem_dir, "memory.usage_in_bytes", "memory.current"))
    pmax = read_cgroup(pids_dir, "pids.max")
    members = [int(x) for x in read_cgroup(pids_dir, "cgroup.procs").split()]
    assert limit != "max" and int(limit) < 8 << 30 and pmax != "max", (limit, pmax)
    assert usage > 4 << 20, "the template's memory is not charged to its group (%d)" % usage
    assert tpl in members


def _own_template_kernel(tag, extra=()):
    """A warm kernel whose configuration (an --env of its own) no other test
    shares, so that its template is this test's to end."""
    return warm_kernel(["--env", "CB_WARM_TEST=%s" % tag] + list(extra))


@namespaces_only
def test_template_gone_gives_a_cold_start_then_a_new_template():
    tag = secrets.token_hex(6)
    k = _own_template_kernel(tag)
    try:
        tpl, sup, key = template_of(runner_pid(k))
    finally:
        k.shutdown()
    os.kill(tpl, signal.SIGKILL)
    assert wait_gone(sup), "the supervisor did not end with its template"
    assert not os.path.exists(os.path.join(WARM_DIR, key + ".sock"))
    # the next kernel of that configuration starts cold (--warm auto), its
    # log saying why (a warning: the template did not end by itself) ...
    with tempfile.TemporaryFile("w+") as log:
        k2 = Kernel("cellblock", ["--warm", "auto", "--env", "CB_WARM_TEST=%s" % tag], stderr=log)
        try:
            b = banner(k2)
            assert TEMPLATE_MARK not in b, b
            out, err = k2.run("print(6*7)")
            assert out.strip() == "42"
        finally:
            k2.shutdown()
        log.seek(0)
        text = log.read()
    why = "cold start: no template for this configuration (the last one died: killed by signal 9"
    assert any(why in l and "WARNING" in l for l in text.splitlines()), text[-3000:]
    # ... and has started a new template, which the one after uses
    k3 = _own_template_kernel(tag)
    try:
        tpl3, sup3, key3 = template_of(runner_pid(k3))
        assert key3 == key and tpl3 != tpl
    finally:
        k3.shutdown()
    os.kill(sup3, signal.SIGTERM)
    assert wait_gone(tpl3) and wait_gone(sup3)


@namespaces_only
def test_old_runtime_files_are_swept():
    """Every configuration leaves a lock, a log and how its last template
    ended in the runtime dir; a new template's supervisor removes those of
    keys untouched for a day (launcher/warm_tpl.c), and keeps the rest."""
    stale = secrets.token_hex(16)
    fresh = secrets.token_hex(16)
    day_ago = time.time() - 2 * 86400
    made = []
    for key, when in ((stale, day_ago), (fresh, None)):
        for suffix in (".lock", ".log", ".ended"):
            p = os.path.join(WARM_DIR, key + suffix)
            with open(p, "w") as f:
                f.write("x")
            if when:
                os.utime(p, (when, when))
            made.append(p)
    tag = secrets.token_hex(6)
    try:
        k = _own_template_kernel(tag)  # a configuration of its own: a new supervisor
        try:
            tpl, sup, key = template_of(runner_pid(k))
        finally:
            k.shutdown()
        os.kill(sup, signal.SIGTERM)
        assert wait_gone(tpl) and wait_gone(sup)
        left = sorted(os.path.basename(p) for p in made if os.path.exists(p))
        assert left == sorted(fresh + s for s in (".ended", ".lock", ".log")), left
    finally:
        for p in made:
            if os.path.exists(p):
                os.unlink(p)


@namespaces_only
def test_restart_reuses_the_template():
    k = warm_kernel()
    try:
        before = template_of(runner_pid(k))[0]
        k.km.restart_kernel(now=False)
        k.kc.wait_for_ready(timeout=60)
        b = banner(k)
        assert TEMPLATE_MARK in b, b
        assert template_of(runner_pid(k))[0] == before
    finally:
        k.shutdown()


def _fake_venv():
    """A venv by hand (pyvenv.cfg next to a symlink to the interpreter), under
    /var/tmp: the sandbox binds an interpreter's prefix outside /usr, and the
    template imports from its site-packages."""
    root = tempfile.mkdtemp(prefix="cb-warm-venv-", dir="/var/tmp")
    os.chmod(root, 0o755)
    os.makedirs(os.path.join(root, "bin"))
    site = os.path.join(root, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    os.makedirs(site)
    for d in (os.path.join(root, "lib"), os.path.dirname(site), site):
        os.chmod(d, 0o755)
    os.symlink(os.path.realpath(sys.executable), os.path.join(root, "bin", "python3"))
    with open(os.path.join(root, "pyvenv.cfg"), "w") as f:
        f.write("home = %s\ninclude-system-site-packages = true\n"
                % os.path.dirname(os.path.realpath(sys.executable)))
    return root, site


@namespaces_only
def test_installing_a_package_makes_the_template_stale():
    root, site = _fake_venv()
    tag = secrets.token_hex(6)
    extra = ["--python", os.path.join(root, "bin", "python3")]
    sup2 = None
    try:
        k = _own_template_kernel(tag, extra)
        try:
            out, _ = k.run("import sys; print(sys.prefix)")
            assert out.strip() == root, out
            tpl, sup, key = template_of(runner_pid(k))
        finally:
            k.shutdown()
        with open(os.path.join(site, "cbwarmnew.py"), "w") as f:
            f.write("VALUE = 41 + 1\n")
        assert wait_gone(tpl), "the template did not notice the new package"
        assert wait_gone(sup)
        # the next start is cold and says why
        out, why = cold_start_reason(["--warm", "auto", "--env", "CB_WARM_TEST=%s" % tag] + extra)
        assert out.strip() == "42"
        assert why is not None and "the last one ended: stale" in why, why
        k2 = _own_template_kernel(tag, extra)
        try:
            tpl2, sup2, key2 = template_of(runner_pid(k2))
            assert key2 == key and tpl2 != tpl
            out, err = k2.run("import cbwarmnew; print(cbwarmnew.VALUE)")
            assert out.strip() == "42", out
        finally:
            k2.shutdown()
    finally:
        if sup2 is not None:
            os.kill(sup2, signal.SIGTERM)
            wait_gone(sup2)
        shutil.rmtree(root, ignore_errors=True)


@namespaces_only
@pytest.mark.parametrize("how", ["another owner", "world-writable", "a .pth of another owner"])
def test_a_tree_someone_else_can_change_starts_cold(how):
    """A template runs the interpreter's start-up (site, .pth files) and the
    --preload modules as root on the host: a venv another user owns, or can
    write, would be a way to root.  Such a tree starts cold and says why;
    the cell still runs (in the sandbox, where that code is confined)."""
    root, site = _fake_venv()
    tag = "CB_WARM_TEST=%s" % secrets.token_hex(6)
    extra = ["--warm", "auto", "--env", tag, "--python", os.path.join(root, "bin", "python3")]
    try:
        if how == "another owner":
            os.chown(site, 65534, 65534)
            bad = site
        elif how == "world-writable":
            os.chmod(site, 0o777)
            bad = site
        else:
            bad = os.path.join(site, "cbevil.pth")
            with open(bad, "w") as f:
                f.write("\n")
            os.chown(bad, 65534, 65534)
        for _ in range(2):   # the second start too: no template was built for it
            out, why = cold_start_reason(extra)
            assert out.strip() == "42"
            assert why is not None and "someone else can change it: %s" % bad in why, why
        assert not _launchers_with(tag), "a template was started for it"
    finally:
        for pid in _launchers_with(tag):
            os.kill(pid, signal.SIGTERM)
            wait_gone(pid)
        shutil.rmtree(root, ignore_errors=True)


# a template build this much past the kernel's 30 s for the runner's hello
# (kernel/bounds.h CB_RUNNER_HELLO_TIMEOUT_MS)
SLOW_BUILD_S = 40


@namespaces_only
def test_warm_wait_outlasts_the_hello_deadline():
    """--warm wait waits for a template's first build (up to 180 s), also when
    that takes longer than the 30 s the kernel gives a runner to say hello: a
    --preload that takes its time (as an import of a big library does on a
    slow host, or anything under the emulated test guest).  Before the
    launcher's "waiting" report moved that deadline, the kernel killed the
    waiting launcher at 30 s and the first cell got "The sandbox could not be
    started: ... no hello from the runner in time"."""
    root, site = _fake_venv()
    with open(os.path.join(site, "cbwarmslow.py"), "w") as f:
        f.write("import time\ntime.sleep(%d)\n" % SLOW_BUILD_S)
    tag = "CB_WARM_TEST=%s" % secrets.token_hex(6)
    extra = ["--python", os.path.join(root, "bin", "python3"), "--preload", "cbwarmslow",
             "--env", tag]
    sup = None
    try:
        k = Kernel("cellblock", WARM + extra)
        try:
            out, err = k.run("print(6*7)", timeout=SLOW_BUILD_S + 120)
            assert err is None and out.strip() == "42", out
            b = banner(k)
            assert TEMPLATE_MARK in b, b
            tpl, sup, _key = template_of(runner_pid(k))
        finally:
            k.shutdown()
    finally:
        # the supervisor, also one still building when the test failed
        # (not in the runtime dir yet, which the session's end looks at)
        for pid in [sup] if sup is not None else _launchers_with(tag):
            os.kill(pid, signal.SIGTERM)
            wait_gone(pid)
        shutil.rmtree(root, ignore_errors=True)


# how soon a launcher stopped while it waits for a template must be gone
# (far below CB_WARM_WAIT_MS, and than the slow build below: it did not wait)
STOP_S = 5


@namespaces_only
@pytest.mark.parametrize("how", ["shutdown", "kernel killed"])
def test_warm_wait_ends_when_the_kernel_does(how):
    """A launcher waiting (--warm wait) for a template's first build has its
    SIGTERM blocked, to read it from a signalfd once the sandbox runs: the
    wait must look for it, or a kernel shut down meanwhile leaves a launcher
    that ends only when the build does (up to 180 s).  Shut down, the kernel
    gives its launcher 2 s for a SIGTERM before a SIGKILL (which leaves the
    launcher's cgroup behind): the launcher must end of the SIGTERM itself.
    Killed, the kernel's death is the launcher's SIGTERM (PDEATHSIG), with
    nobody left to kill it.  The template's build goes on (by design)."""
    root, site = _fake_venv()
    with open(os.path.join(site, "cbwarmslow.py"), "w") as f:
        f.write("import time\ntime.sleep(%d)\n" % SLOW_BUILD_S)
    tag = "CB_WARM_TEST=%s" % secrets.token_hex(6)
    extra = ["--python", os.path.join(root, "bin", "python3"), "--preload", "cbwarmslow",
             "--env", tag]
    exe = os.path.join(BUILD, "libexec", "cellblock", "cellblock-launcher")
    try:
        with tempfile.TemporaryFile("w+") as log:
            k = Kernel("cellblock", WARM + extra, stderr=log)
            try:
                kernel = k.km.provisioner.process.pid
                launcher = None
                end = time.monotonic() + 30
                while launcher is None and time.monotonic() < end:
                    launcher = next((p for p in _children(kernel)
                                     if os.path.realpath("/proc/%d/exe" % p) == exe), None)
                    time.sleep(0.1)
                assert launcher is not None, "the kernel started no launcher"
                time.sleep(3)  # a few seconds into the wait
                assert os.path.exists("/proc/%d" % launcher)
                assert not _children(launcher), "the launcher did not wait for the template"
                t0 = time.monotonic()
                if how == "shutdown":
                    k.shutdown()
                else:
                    os.kill(kernel, signal.SIGKILL)
                gone = wait_gone(launcher, STOP_S)
                took = time.monotonic() - t0
            finally:
                k.shutdown()
            log.seek(0)
            text = log.read()
        assert gone, "the launcher still waits %.0f s after its SIGTERM" % took
        assert "did not exit: SIGKILL" not in text, text[-3000:]
    finally:
        # the template's supervisor (still building) and, on a failure, the launcher
        for pid in _launchers_with(tag):
            os.kill(pid, signal.SIGTERM)
            wait_gone(pid)
        shutil.rmtree(root, ignore_errors=True)

def _launchers_with(arg):
    """Pids of this build's launchers whose command line has `arg`."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if arg in argv and argv[0] == os.path.join(BUILD, "libexec", "cellblock",
                                                    "cellblock-launcher"):
            out.append(int(p))
    return out


@namespaces_only
def test_a_killed_warm_runner_is_reported_and_replaced():
    k = warm_kernel()
    try:
        r = runner_pid(k)
        msg_id = k.kc.execute("import time; time.sleep(30)")
        time.sleep(0.5)
        os.kill(r, signal.SIGKILL)
        reply = k.kc.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error"
        out, err = k.run("print('back')")
        assert out.strip() == "back"
        assert runner_pid(k) != r
    finally:
        k.shutdown()


def test_tiers_start_cold():
    if shutil.which("runsc") is None:
        skip_or_fail("runsc is not installed: no gvisor tier to start")
    _check_available("cellblock")
    k = Kernel("cellblock", ["--warm", "wait", "--isolation", "gvisor"])
    try:
        b = banner(k)
        assert TEMPLATE_MARK not in b and "gVisor" in b, b
        out, _ = k.run("print(1+1)")
        assert out.strip() == "2"
    finally:
        k.shutdown()
    out, why = cold_start_reason(["--warm", "wait", "--isolation", "gvisor"])
    assert out.strip() == "42"
    assert why is not None and "a template's fork cannot enter that tier" in why, why
