"""--pausable (docs/SNAPSHOTS.md "Pausing the namespaces tier"): a sandbox
CRIU can dump.  Its uid 0 maps to a second host id of the sandbox's own
(CRIU refuses a user namespace where uid 0 is not mapped) and the runner's
channels are sockets of the sandbox's network namespace (CRIU looks for a
dumped task's sockets there only).

What must hold, seen from the host: every layer of the banner as in any
sandbox (the probes escape the stock python3 kernel, the control), also
after a rollback; no process of the sandbox runs as the second id, and
both ids go back when the kernel ends; the channels are the sandbox's and
the debugger's works; a dying runner is reported as in any sandbox.  In the
test guest (Debian's own 6.1 kernel, where Debian's criu works; `make
test-guest`) criu dumps the runner of a pausable sandbox with the channels
declared external, and cannot dump an ordinary sandbox's."""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import time

import shlex

import pytest

from .conftest import BUILD, KERNELS, MUST_WORK, Kernel, _check_available, tier, verdict
from .test_escape import PROBES
from .test_snapshots import CHECK, OUTSIDE, _descendants, ctl, host_view

ID_DIR = "/run/cellblock/uids"  # isolate/sandbox_limits.h CB_SANDBOX_ID_DIR
KDAT = "/run/criu.kdat"  # criu check writes it: criu's feature cache
SBIN = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# the suites re-run with other kernel flags (make test-tiers, make test-warm):
# --pausable refuses another tier and --warm wait with a usage error
pytestmark = pytest.mark.skipif(
    tier() != "namespaces" or "wait" in shlex.split(os.environ.get("CB_TEST_KERNEL_ARGS", "")),
    reason="--pausable is a namespaces-tier sandbox that starts cold")


def _needs_root():
    if os.geteuid() != 0:
        pytest.skip("--pausable needs a root launcher (test_unprivileged checks the refusal)")


@pytest.fixture(params=KERNELS)
def any_pausable(request):
    _check_available(request.param)
    if request.param == "cellblock":
        _needs_root()
    k = Kernel(request.param, ["--pausable"] if request.param == "cellblock" else None)
    yield k
    k.shutdown()


def _pid(k):
    out, err = k.run("import os; print(os.getpid())")
    assert err is None, out
    return int(out)


def _probe_all(k, what):
    for name in CHECK:  # in a child interpreter, as test_escape runs them
        probe, _ = k.run("import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', "
                         "%r], capture_output=True, text=True).stdout)" % PROBES[name])
        verdict(k, "ESCAPED" in probe, "%s %s: %s" % (name, what, probe.strip()))
    probe, _ = k.run(OUTSIDE)
    verdict(k, "ESCAPED" in probe, "a write outside the writable places %s: %s" % (what, probe))
    uid, _ = host_view(k, _pid(k))
    verdict(k, uid == 0, "the runner is root on the host %s" % what)


def test_every_layer_holds_in_a_pausable_sandbox(any_pausable):
    k = any_pausable
    _probe_all(k, "in a pausable sandbox")
    if k.control:
        return
    k.run("x = 'saved'")
    assert ctl(k, "cellblock_checkpoint_request", name="c")["status"] == "ok"
    k.run("x = 'changed'")
    assert ctl(k, "cellblock_rollback_request", name="c")["status"] == "ok"
    assert k.run("print(x)")[0] == "saved\n"
    _probe_all(k, "after a rollback in a pausable sandbox")


RUN_PROBE = """
import os
print(len(os.listdir('/run')))
name = '/run/cb-pausable-probe-%d' % os.getpid()
try:
    os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    os.unlink(name)   # the control, root on the host, made it: taken away at once
    print('ESCAPED: made a file in /run')
except OSError as e:
    print('closed', e.errno)
"""


def _landlock_abi():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    v = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    return max(v, 0)


def test_no_abstract_socket_of_the_hosts_is_in_reach_of_a_pausable_sandbox(any_pausable):
    """A --pausable sandbox leaves abstract unix sockets out of its Landlock
    scope (criu's parasite in the runner talks to criu over one): that is
    safe only because its network namespace is its own.  A host process's
    abstract socket is out of the code's reach; the stock kernel connects."""
    import socket
    name = "\0cb-pausable-%d" % os.getpid()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(name)
    srv.listen(1)
    try:
        out, _ = any_pausable.run(
            "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "try:\n    s.connect(%r); print('ESCAPED')\n"
            "except OSError as e: print('refused', e)" % name)
        verdict(any_pausable, "ESCAPED" in out, "the host's abstract socket: " + out)
    finally:
        srv.close()


def test_pausable_with_the_hosts_network_is_refused_where_landlock_scopes_sockets():
    """Where Landlock can scope abstract sockets (ABI 6, kernels from 6.12),
    --pausable with --network host would leave the host's reachable: the
    sandbox is refused with the cause and the fix, and nothing is left."""
    _check_available("cellblock")
    _needs_root()
    if _landlock_abi() < 6:
        pytest.skip("Landlock here has no scopes (ABI %d): nothing to leave out" % _landlock_abi())
    k = Kernel("cellblock", ["--pausable", "--network", "host"])
    try:
        out, err = k.run("print(1)")
        assert err is not None and "--pausable cannot be used with --network host" in out and \
            "--network none" in out, (out, err)
    finally:
        k.shutdown()


def test_the_dumps_feature_cache_place_is_empty_and_read_only_to_the_code(any_pausable):
    """A pausable sandbox's /run is where the launcher mounts CRIU's feature
    cache for a dump: an empty directory of the sandbox's read-only root, in
    which the code can make nothing (a cache it forged would steer a root
    criu; the launcher's tmpfs over it is 0700 guest root's).  The stock
    kernel is the control: its /run is the host's, and it is root there."""
    k = any_pausable
    out, err = k.run(RUN_PROBE)
    assert err is None, err
    verdict(k, "ESCAPED" in out, "/run in a pausable sandbox: %s" % out)
    if not k.control:
        assert out.split() == ["0", "closed", "30"], out  # empty; EROFS


def _maps(pid, which):
    with open("/proc/%d/%s" % (pid, which)) as f:
        return sorted(tuple(int(v) for v in line.split()) for line in f if line.strip())


def _host_uids(k):
    root = k.km.provisioner.process.pid
    uids = {}
    for p in _descendants(root):
        try:
            with open("/proc/%d/status" % p) as f:
                st = f.read()
        except OSError:
            continue
        uids[p] = set(int(v) for v in re.search(r"^Uid:\s+(.*)$", st, re.M).group(1).split())
    return uids


def test_uid0_inside_is_a_second_id_of_the_sandbox_that_nothing_runs_as():
    _check_available("cellblock")
    _needs_root()
    k = Kernel("cellblock", ["--pausable"])
    try:
        runner = _runner_host_pid(k)
        um, gm = _maps(runner, "uid_map"), _maps(runner, "gid_map")
        assert um == gm and len(um) == 2, (um, gm)
        (z, root_id, n0), (inner, own_id, n1) = um
        assert (z, n0, inner, n1) == (0, 1, 65534, 1), um
        assert root_id != own_id, um
        assert os.path.exists(os.path.join(ID_DIR, str(root_id))), "uid 0's id is not leased"
        assert os.path.exists(os.path.join(ID_DIR, str(own_id)))
        # the sandbox's processes (launcher's children) run as its own id, none as uid 0's
        seen = _host_uids(k)
        sandbox = {p: u for p, u in seen.items() if u != {0}}
        assert sandbox and all(u == {own_id} for u in sandbox.values()), seen
        assert not any(root_id in u for u in seen.values()), seen
        # inside: uid 0 is there but out of reach
        out, err = k.run("import os\nfor f in (os.setuid, os.setgid, os.seteuid):\n"
                         "    try:\n        f(0); print('became 0')\n"
                         "    except OSError as e:\n        print(e.errno)\n"
                         "print(os.getuid(), os.getgid(), open('/proc/self/status').read()"
                         ".split('CapEff:')[1].split()[0])")
        assert err is None and out.split() == ["1", "1", "1", "65534", "65534",
                                               "0000000000000000"], out
        # the banner says so
        info = k.kc.kernel_info(reply=True, timeout=30)["content"]
        assert "pausable: uid 0 inside is host id %d" % root_id in str(info), info
    finally:
        k.shutdown()
    for i in (root_id, own_id):
        assert not os.path.exists(os.path.join(ID_DIR, str(i))), "id %d not given back" % i


def _sockets(pid, fds=("3", "4")):
    """{fd: inode} of the runner's socket fds, and the inodes of unix sockets
    in the runner's network namespace (its /proc/PID/net/unix)."""
    socks = {}
    for fd in fds:
        link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        m = re.fullmatch(r"socket:\[(\d+)\]", link)
        assert m, (fd, link)
        socks[fd] = int(m.group(1))
    with open("/proc/%d/net/unix" % pid) as f:
        inodes = {int(line.split()[6]) for line in list(f)[1:] if len(line.split()) > 6}
    return socks, inodes


def _runner_host_pid(k):
    r = _pid(k)
    for p in _descendants(k.km.provisioner.process.pid):
        try:
            st = open("/proc/%d/status" % p).read()
        except OSError:
            continue
        if re.search(r"^NSpid:.*\s%d$" % r, st, re.M) and "\nName:\tpython" in "\n" + st:
            return p
    raise AssertionError("no runner below the kernel")


@pytest.mark.parametrize("pausable", [False, True], ids=["ordinary", "pausable"])
def test_the_runners_channels_are_the_sandboxs_own(pausable):
    _check_available("cellblock")
    if pausable:
        _needs_root()
    k = Kernel("cellblock", ["--pausable"] if pausable else None)
    try:
        socks, inodes = _sockets(_runner_host_pid(k))
        inside = {fd for fd, ino in socks.items() if ino in inodes}
        # the control: an ordinary sandbox's channels are the kernel's sockets
        assert inside == ({"3", "4"} if pausable else set()), (socks, len(inodes))
        # both work: a cell (fd 3) and the debugger (fd 4)
        assert k.run("print(6 * 7)") == ("42\n", None)
        r = ctl(k, "debug_request", type="request", seq=1, command="initialize",
                arguments={"adapterID": "cellblock-test", "clientID": "test"})
        assert r.get("success") is True and r.get("command") == "initialize", r
    finally:
        k.shutdown()


def test_a_dying_pausable_runner_is_reported_as_in_any_sandbox():
    _check_available("cellblock")
    _needs_root()
    k = Kernel("cellblock", ["--pausable"])
    try:
        out, err = k.run("import os; os._exit(3)")
        assert err == "SandboxError" and "exited with code 3" in out, out
        out, err = k.run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        assert err == "SandboxError" and "killed by signal 9 (SIGKILL)." in out, out
        assert k.run("print('fresh')") == ("fresh\n", None)
    finally:
        k.shutdown()


# ---- CRIU: only where Debian's criu works (the test guest, Debian's 6.1) ----

# criu as the launcher takes it (launcher/criu_dump.c): Debian's where it
# dumps on this kernel, else the newer one scripts/criu.sh put beside it
DEBIAN_CRIU = "/usr/sbin/criu"
NEWER_CRIU = "/usr/local/sbin/criu"


def _criu_checks(criu):
    """None when `criu check` passes, else its last line."""
    if not os.access(criu, os.X_OK):
        return "not installed"
    p = subprocess.run([criu, "check"], capture_output=True, text=True, timeout=120)
    return None if p.returncode == 0 else \
        ((p.stdout + p.stderr).strip().splitlines()[-1:] or ["?"])[0]


def _criu():
    if not os.access(DEBIAN_CRIU, os.X_OK) and not os.access(NEWER_CRIU, os.X_OK):
        if MUST_WORK and os.environ.get("CB_CRIU_MUST_WORK") == "1":
            pytest.fail("criu is not installed (apt-get install criu; scripts/deps.sh guest)")
        pytest.skip("criu is not installed")
    why = _criu_checks(DEBIAN_CRIU)
    if why is None:
        return DEBIAN_CRIU
    newer = _criu_checks(NEWER_CRIU)
    if newer is None:
        return NEWER_CRIU
    if os.environ.get("CB_CRIU_MUST_WORK") == "1":
        pytest.fail("criu check failed where it must work: %s" % why)
    # Debian 12's criu 3.17 on kernels from 6.13 on: criu#2532
    pytest.skip("criu cannot run on this kernel (%s); sh scripts/criu.sh installs one that "
                "can, make test-guest runs this on Debian's kernel" % why)


def _as_peer(pid):
    """What criu's command line starts with: where this root lacks
    CAP_SYS_RESOURCE (a container's root), criu reads a process's rlimits
    only with that process's real ids (prlimit's check), as the launcher
    runs it (cb_criu_real_ids); else nothing."""
    caps = int(re.search(r"^CapEff:\s+([0-9a-f]+)", open("/proc/self/status").read(),
                         re.M).group(1), 16)
    if caps & (1 << 24):  # CAP_SYS_RESOURCE
        return ""
    st = open("/proc/%d/status" % pid).read()
    ruid = re.search(r"^Uid:\s+(\d+)", st, re.M).group(1)
    rgid = re.search(r"^Gid:\s+(\d+)", st, re.M).group(1)
    return "setpriv --ruid %s --rgid %s --keep-groups " % (ruid, rgid)


def _kdat(criu):
    """criu's feature cache, open.  criu keeps it in /run only where /run is a
    tmpfs; where the host's is not (this workplace), it is made as the
    launcher makes it: by criu check over a tmpfs of a private mount namespace."""
    if os.path.exists(KDAT):
        return os.open(KDAT, os.O_RDONLY)
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        "mount -t tmpfs -o mode=0700,size=1m criu /run && \"$0\" check >&2 && "
                        "cat %s" % KDAT, criu], capture_output=True, timeout=120,
                       env={"PATH": SBIN})
    assert p.returncode == 0 and p.stdout, p.stderr
    fd = os.memfd_create("criu.kdat")
    os.write(fd, p.stdout)
    return fd


def _dump(criu, k, where, pausable):
    """criu dump --leave-running of the runner, run as root in the sandbox's
    mount, pid and network namespaces (so none of them is in the image: a
    restore makes them as the launcher does), its sockets' peers declared
    external.  (criu's exit code, its log, the runner's pid inside)."""
    launcher = [p for p in _descendants(k.km.provisioner.process.pid)
                if open("/proc/%d/comm" % p).read().startswith("cellblock-launc")]
    runner = _runner_host_pid(k)
    init = int(re.search(r"^PPid:\s+(\d+)", open("/proc/%d/status" % runner).read(),
                         re.M).group(1))
    assert init in launcher, (init, launcher)
    vpid = re.search(r"^NSpid:.*\s(\d+)$", open("/proc/%d/status" % runner).read(),
                     re.M).group(1)
    ext = []
    for fd in os.listdir("/proc/%d/fd" % runner):
        m = re.fullmatch(r"socket:\[(\d+)\]", os.readlink("/proc/%d/fd/%s" % (runner, fd)))
        if m:
            ext += ["--external", "unix[%s]" % m.group(1)]
    dfd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    kdat = _kdat(criu)
    try:
        dump = (_as_peer(runner) + "%s dump -t %s -D /proc/self/fd/%d -o dump.log --leave-running %s"
                % (criu, vpid, dfd, " ".join("'%s'" % a for a in ext)))
        if pausable:
            # criu reads its feature cache from /run (else it probes by writing
            # in /tmp, the code's): a pausable sandbox has an empty /run of its
            # root's, where a tmpfs of guest root's holds it for the dump
            cmd = ("mount -t tmpfs -o mode=0700,size=1m criu /run && "
                   "cat /proc/self/fd/%d > /run/criu.kdat && { %s; rc=$?; umount /run; exit $rc; }"
                   % (kdat, dump))
        else:
            # an ordinary sandbox has no /run: criu probes in a tmpfs of its own
            # over the sandbox's /tmp, taken away afterwards (the runner is idle)
            cmd = "mount -t tmpfs criu /tmp && { %s; rc=$?; umount /tmp; exit $rc; }" % dump
        p = subprocess.run(["nsenter", "-t", str(init), "--mount", "--pid", "--net", "--", "sh", "-c",
                            cmd], pass_fds=(dfd, kdat), capture_output=True, text=True,
                           timeout=600)
    finally:
        os.close(dfd)
        os.close(kdat)
    log = open(os.path.join(where, "dump.log"), errors="replace").read() \
        if os.path.exists(os.path.join(where, "dump.log")) else p.stdout + p.stderr
    return p.returncode, log, vpid


@pytest.mark.timeout(900)
def test_criu_dumps_the_runner_of_a_pausable_sandbox_only():
    _check_available("cellblock")
    _needs_root()
    criu = _criu()
    for pausable in (True, False):
        k = Kernel("cellblock", ["--pausable"] if pausable else None)
        where = tempfile.mkdtemp(prefix="cb-criu-", dir="/var/tmp")
        try:
            k.run("x = 41\nimport math")
            rc, log, vpid = _dump(criu, k, where, pausable)
            if pausable:
                assert rc == 0, "criu dump failed:\n" + log[-4000:]
                assert os.path.exists(os.path.join(where, "core-%s.img" % vpid)), \
                    os.listdir(where)
                assert glob.glob(os.path.join(where, "pages-*.img")), os.listdir(where)
            else:
                # uid 0 unmapped (criu's first refusal), the kernel's sockets;
                # criu 4 stops sooner where it has no feature cache, which an
                # ordinary sandbox has no /run for: its nftables probe fails
                assert rc != 0 and re.search(r"Unable to convert uid or gid|"
                                             r"[Uu]nix socket.*not found|"
                                             r"Could not initialize kernel features", log), \
                    "an ordinary sandbox was dumped: rc %d\n%s" % (rc, log[-3000:])
            # dumped or not, the session goes on (--leave-running), confined
            assert k.run("print(x + 1, math.pi > 3)") == ("42 True\n", None)
            _probe_all(k, "after criu dumped the runner")
        finally:
            k.shutdown()
            shutil.rmtree(where, ignore_errors=True)


def _parked_copy(k, timeout=60):
    """(init, copy): host pids of the sandbox's init and of the process that
    holds a park fifo open (a parked checkpoint), once there is one."""
    runner = _runner_host_pid(k)
    init = int(re.search(r"^PPid:\s+(\d+)", open("/proc/%d/status" % runner).read(),
                         re.M).group(1))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in _descendants(init):
            try:
                links = [os.readlink("/proc/%d/fd/%s" % (p, fd))
                         for fd in os.listdir("/proc/%d/fd" % p)]
            except OSError:
                continue
            if p != runner and any(l.startswith("/opt/cellblock/park/") for l in links):
                return init, p
        time.sleep(0.2)
    raise AssertionError("no parked copy appeared")


@pytest.mark.timeout(900)
def test_the_launchers_dump_of_a_parked_copy_leaves_the_session_as_it_was():
    """The launcher's dump (launcher/criu_dump.c, run by its unit test's live
    mode) of a checkpoint's parked copy: criu in every namespace of the
    sandbox but the user one, its feature cache on a tmpfs of its own over
    the sandbox's empty /run, never over the code's /tmp.  The image holds
    the copy; the session goes on with its /tmp and an empty /run, the
    checkpoint still rolls back, and every layer holds."""
    _check_available("cellblock")
    _needs_root()
    _criu()
    driver = os.path.join(BUILD, "tests", "test_criu_dump")
    assert os.access(driver, os.X_OK), "%s is not built (make unit)" % driver
    k = Kernel("cellblock", ["--pausable"])
    where = tempfile.mkdtemp(prefix="cb-criu-", dir="/var/tmp")
    try:
        k.run("x = 41\nopen('/tmp/mine', 'w').write('kept')")
        assert ctl(k, "cellblock_checkpoint_request", name="c")["status"] == "ok"
        init, copy = _parked_copy(k)
        vpid = re.search(r"^NSpid:.*\s(\d+)$", open("/proc/%d/status" % copy).read(),
                         re.M).group(1)
        p = subprocess.run([driver], env={"CB_CRIU_DUMP_LIVE": "%d %d %s" % (init, copy, where)},
                           capture_output=True, text=True, timeout=700)
        log = open(os.path.join(where, "dump.log"), errors="replace").read() \
            if os.path.exists(os.path.join(where, "dump.log")) else ""
        assert p.returncode == 0 and "not ok" not in p.stdout, \
            "the launcher's dump failed:\n%s%s\n%s" % (p.stdout, p.stderr, log[-3000:])
        assert os.path.exists(os.path.join(where, "core-%s.img" % vpid)), os.listdir(where)
        assert glob.glob(os.path.join(where, "pages-*.img")), os.listdir(where)
        # what a restore hands criu in their places: the channels at 3 and 4
        fds = dict(line.split() for line in open(os.path.join(where, "fds.txt")))
        assert all(re.fullmatch(r"(socket|pipe):\[\d+\]", v) for v in fds.values()), fds
        assert fds["3"].startswith("socket:") and fds["4"].startswith("socket:"), fds
        out, err = k.run("import os\nprint(open('/tmp/mine').read(), os.listdir('/run'), x)")
        assert (out, err) == ("kept [] 41\n", None), (out, err)
        k.run("x = 0")
        assert ctl(k, "cellblock_rollback_request", name="c")["status"] == "ok"
        assert k.run("print(x)")[0] == "41\n"
        _probe_all(k, "after the launcher dumped a parked copy")
    finally:
        k.shutdown()
        shutil.rmtree(where, ignore_errors=True)


# ---- pause, resume and fork by CRIU (launcher/sandbox_criu.c) ----

STATE = ("import random, numpy\nx = 42\nopen('note.txt', 'w').write('home')\n"
         "open('/tmp/t', 'w').write('tmp')\nr0, n0 = random.random(), numpy.random.random()")
CHECK_STATE = ("import os\nprint(x, open('note.txt').read(), open('/tmp/t').read(), "
               "random.random() != r0, numpy.random.random() != n0, os.listdir('/run'))")


@pytest.fixture
def store():
    """An image store of the test's own (0700), removed afterwards."""
    d = tempfile.mkdtemp(prefix="cb-images-", dir="/var/tmp")
    os.chmod(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _criu_kernel(store):
    """A --pausable kernel with its images in store, where criu works."""
    _check_available("cellblock")
    _needs_root()
    _criu()
    return Kernel("cellblock", ["--pausable", "--image-dir", store])


def _runner_uid_and_cgroup(k):
    pid = _pid(k)
    uid, cg = host_view(k, pid)
    return uid, cg


@pytest.mark.timeout(1200)
def test_a_pausable_session_pauses_resumes_and_forks_with_every_layer_in_force(store):
    """The namespaces tier's pause (docs/SNAPSHOTS.md): a checkpoint in place,
    its parked copy dumped by criu into a sealed image of the store, the
    sandbox ended; the same kernel's next cell and three new kernels
    (--resume ID) restore it into new sandboxes of their own: four kernels
    from one image.  Each has the state (variables, home, /tmp), reseeded
    generators, a host uid and a cgroup of its own, and every layer of the
    banner in force again."""
    a = _criu_kernel(store)
    forks = []
    try:
        assert a.run(STATE) == ("", None)
        uid_a, cg_a = _runner_uid_and_cgroup(a)
        p = ctl(a, "cellblock_pause_request")
        assert p["status"] == "ok", p
        image = p["image"]
        d = os.path.join(store, image)
        assert os.stat(d).st_mode & 0o777 == 0o700
        names = os.listdir(d)
        for f in ("files.json", "files.mac", "kernel.json", "kernel.mac", "criu.id", "fds.txt",
                  "inventory.img"):
            assert f in names, names
        assert "home" in names and "tmp" in names and ".stage" not in names, names
        for n in names:  # the session's memory is the user's secret
            st = os.lstat(os.path.join(d, n))
            if not os.path.isdir(os.path.join(d, n)):
                assert st.st_mode & 0o777 == 0o600 and st.st_uid == 0, (n, oct(st.st_mode))
        assert not any(n.startswith(".stage") for n in os.listdir(store)), os.listdir(store)
        # the memory is compressed in the image (criu writes it raw)
        assert glob.glob(os.path.join(d, "pages-*.img.zst")), names
        assert not glob.glob(os.path.join(d, "pages-*.img")), names
        # its sandbox is gone: no process of it, its uid free for another
        root = a.km.provisioner.process.pid
        deadline = time.monotonic() + 30
        while _descendants(root) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _descendants(root), "processes left after the pause"
        # the same kernel's next cell resumes from the image
        out, err = a.run(CHECK_STATE)
        assert (out, err) == ("42 home tmp True True []\n", None), (out, err)
        # four kernels from one image: the paused one and three new ones
        forks = [Kernel("cellblock", ["--resume", image, "--image-dir", store]) for _ in range(3)]
        seen = {}
        for i, k in enumerate(forks):
            out, err = k.run(CHECK_STATE)
            assert (out, err) == ("42 home tmp True True []\n", None), (i, out, err)
            seen[i] = _runner_uid_and_cgroup(k)
        uids = [uid_a] + [u for u, _ in seen.values()]
        assert len(set(uids)) == 4 and 0 not in uids, uids
        assert len(set(tuple(c) for _, c in seen.values())) == 3, "resumed kernels share a cgroup"
        # independent: a change in one is not in the other
        forks[0].run("x = 1")
        assert forks[1].run("print(x)")[0] == "42\n"
        for k in [a] + forks:
            _probe_all(k, "after a resume from a CRIU image")
        # a resumed session checkpoints and rolls back as any other
        k = forks[1]
        assert ctl(k, "cellblock_checkpoint_request", name="c")["status"] == "ok"
        k.run("x = 0")
        assert ctl(k, "cellblock_rollback_request", name="c")["status"] == "ok"
        assert k.run("print(x)")[0] == "42\n"
        # ... and pauses again: its next cell resumes the new image, confined
        k.run("x = 43")
        p2 = ctl(k, "cellblock_pause_request")
        assert p2["status"] == "ok" and p2["image"] != image, p2
        assert k.run("print(x)") == ("43\n", None)
        _probe_all(k, "after a second pause and resume")
        # a kernel that asks for a stronger tier does not get this one instead
        g = Kernel("cellblock", ["--isolation", "gvisor", "--resume", image, "--image-dir", store])
        forks.append(g)
        out, err = g.run("print(x)")
        assert err is not None and "of the namespaces tier" in out, (out, err)
    finally:
        for k in [a] + forks:
            k.shutdown()


@pytest.mark.timeout(600)
def test_a_tampered_criu_image_is_refused_before_criu_reads_it(store):
    a = _criu_kernel(store)
    try:
        a.run("x = 42")
        p = ctl(a, "cellblock_pause_request")
        assert p["status"] == "ok", p
        # the seal is checked before criu, or the launcher's decompressor,
        # reads a byte: a changed record, then changed memory pages
        d = os.path.join(store, p["image"])
        for pattern in ("core-*.img", "pages-*.img.zst"):
            victim = glob.glob(os.path.join(d, pattern))[0]
            with open(victim, "r+b") as f:
                f.seek(8)
                b = f.read(1)
                f.seek(8)
                f.write(bytes([b[0] ^ 1]))
            out, err = a.run("print(x)")
            assert err is not None and "not the ones sealed" in out, (pattern, out, err)
            with open(victim, "r+b") as f:
                f.seek(8)
                f.write(b)
    finally:
        a.shutdown()


def _criu_too_old_here():
    """True where Debian 12's criu cannot dump: criu before 4.1 on a kernel
    from 6.13 on (criu#2532), as on this project's hosts (6.18)."""
    if not os.access(DEBIAN_CRIU, os.X_OK):
        return False
    v = re.search(r"Version: (\d+)\.(\d+)",
                  subprocess.run([DEBIAN_CRIU, "--version"], capture_output=True,
                                 text=True).stdout)
    kernel = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    return bool(v) and (int(v.group(1)), int(v.group(2))) < (4, 1) and kernel >= (6, 13)


# the kernel in a mount namespace of its own where /usr/local/sbin is empty:
# a host with Debian's criu only, as before scripts/criu.sh
WITHOUT_NEWER_CRIU = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                      "mount -t tmpfs -o ro,size=4k cb-no-newer-criu /usr/local/sbin && "
                      "exec \"$@\"", "sh"]


def test_a_pause_this_host_cannot_serve_says_why_and_loses_nothing(store):
    """On a kernel Debian's criu cannot dump on, a --pausable kernel says so
    in kernel_info and refuses the pause with the cause and the fix before
    it does anything: no image, no checkpoint, the session as it was."""
    _check_available("cellblock")
    _needs_root()
    if not _criu_too_old_here():
        pytest.skip("Debian's criu can dump on this kernel: the pause works here")
    k = Kernel("cellblock", ["--pausable", "--image-dir", store], prefix_argv=WITHOUT_NEWER_CRIU)
    try:
        k.run("x = 42")
        info = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = k.kc.session.msg("kernel_info_request", {})
            k.kc.shell_channel.send(msg)
            while True:
                r = k.kc.get_shell_msg(timeout=30)
                if r["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                    break
            info = r["content"]["cellblock_snapshots"]
            if "starting" not in info["pause_why"]:
                break
            time.sleep(0.2)
        assert info["pause"] is False and "criu#2532" in info["pause_why"], info
        r = ctl(k, "cellblock_pause_request")
        assert r["status"] == "error" and "criu#2532" in r["evalue"] and \
            "--isolation gvisor" in r["evalue"], r
        assert k.run("print(x)") == ("42\n", None)
        assert ctl(k, "cellblock_checkpoints_request")["checkpoints"] == []
        assert [n for n in os.listdir(store) if not n.startswith(".")] == [], os.listdir(store)
    finally:
        k.shutdown()
