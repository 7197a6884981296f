"""Shared by every test folder: a per-test time limit by SIGALRM (pytest-timeout
is not installed), so no test can hang `make test`.  A test may set its own
with @pytest.mark.timeout(seconds); otherwise its folder's default applies."""
import fcntl
import os
import re
import signal
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER_LIMITS = {"integration": 120, "frontends": 90, "client": 60}  # seconds
DEFAULT_LIMIT = 300   # runner, security and anything else


class TestTimeLimit(Exception):
    """A test ran past its limit."""


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): per-test time limit (SIGALRM)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    m = item.get_closest_marker("timeout")
    folder = os.path.relpath(str(item.fspath), HERE).split(os.sep)[0]
    limit = int(m.args[0]) if m else FOLDER_LIMITS.get(folder, DEFAULT_LIMIT)
    limit *= int(os.environ.get("CB_TEST_TIME_SCALE", "1"))  # emulated guests (tests/guest)

    def on_alarm(signum, frame):
        raise TestTimeLimit(f"{item.nodeid}: exceeded {limit} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# --------------------------------------------------------------------------
# CB_TEST_KERNEL_ARGS="--isolation gvisor": every suite that starts the
# "cellblock" kernelspec gets one whose argv carries these extra kernel flags
# (a copy of the built kernelspec in a temp dir, first in JUPYTER_PATH), so the
# same tests run against another isolation tier or other limits.
# --------------------------------------------------------------------------
def _overlay_kernelspec():
    import atexit
    import json
    import shlex
    import shutil
    import tempfile
    extra = shlex.split(os.environ.get("CB_TEST_KERNEL_ARGS", ""))
    if not extra:
        return
    build = os.environ.get("CELLBLOCK_BUILD") or os.path.join(os.path.dirname(HERE), "build")
    root = os.path.join(build, "share", "jupyter")
    src = os.path.join(root, "kernels", "cellblock", "kernel.json")
    if not os.path.exists(src):
        return  # the suites skip (or fail under CB_MUST_WORK) on their own
    with open(src) as f:
        spec = json.load(f)
    spec["argv"] = spec["argv"] + extra
    spec["display_name"] = "%s [%s]" % (spec.get("display_name", "cellblock"), " ".join(extra))
    tmp = tempfile.mkdtemp(prefix="cb-test-kspec-")
    atexit.register(shutil.rmtree, tmp, True)
    kdir = os.path.join(tmp, "kernels", "cellblock")
    os.makedirs(kdir)
    with open(os.path.join(kdir, "kernel.json"), "w") as f:
        json.dump(spec, f)
    jp = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p and p != root]
    os.environ["JUPYTER_PATH"] = os.pathsep.join([tmp, root] + jp)


_overlay_kernelspec()


# --------------------------------------------------------------------------
# Running cellblock as another user: `throwaway_user` (a temporary account,
# removed afterwards) and `staged_install` (`make install` of the build into a
# temporary PREFIX that any user can read: the build tree itself may not be,
# e.g. in a clone under root's 0700 home).  Any folder's tests may use them.
# --------------------------------------------------------------------------
import pwd  # noqa: E402
import secrets  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from types import SimpleNamespace  # noqa: E402

REPO = os.path.dirname(HERE)
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")


def skip_or_fail(reason):
    if os.environ.get("CB_MUST_WORK") == "1":
        pytest.fail("skip not allowed (CB_MUST_WORK=1): " + reason)
    pytest.skip(reason)


RUNUSER = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin") or "runuser"
USERADD = shutil.which("useradd") or shutil.which("useradd", path="/usr/sbin:/sbin")


def _others_can_reach(path):
    """True when every directory up to path is searchable by other users."""
    path = os.path.abspath(path)
    while True:
        try:
            if not os.stat(path).st_mode & 0o001:
                return False
        except OSError:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


@pytest.fixture(scope="module")
def throwaway_user():
    """A temporary unprivileged user (no home, /bin/sh); its processes are
    killed and the account removed afterwards."""
    if os.geteuid() != 0:
        skip_or_fail("creating a test user needs root")
    if not os.path.exists(RUNUSER) or not USERADD:
        skip_or_fail("useradd/runuser missing")
    name = "cbt" + secrets.token_hex(4)
    subprocess.run([USERADD, "--no-create-home", "--shell", "/bin/sh", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["userdel", name], check=False)


@pytest.fixture(scope="session")
def staged_install():
    """The build, installed with `make install PREFIX=<tmp>` into a directory
    every user can read, for tests that run it as another user.  Removed at
    the end of the session.

    Attributes: prefix, bin (cellblock-kernel), cellblock (the `cellblock`
    command), launcher, runner_dir, kernelspec_root (a JUPYTER_PATH entry
    whose kernels/cellblock points at the staged kernel)."""
    if not os.path.exists(os.path.join(BUILD, "bin", "cellblock-kernel")):
        skip_or_fail("cellblock is not built (run make)")
    prefix = tempfile.mkdtemp(prefix="cellblock-staged-", dir="/tmp")
    try:
        os.chmod(prefix, 0o755)
        if not _others_can_reach(prefix):
            pytest.fail("%s is not reachable by other users; cannot stage the build" % prefix)
        # BUILD as the suite's: the sanitizer build stages its own binaries.
        # Every destination is named, so no variable a parent make passes
        # down in MAKEFLAGS can send files outside the prefix.
        r = subprocess.run(["make", "-C", REPO, "--no-print-directory", "-s", "install",
                            "PREFIX=" + prefix, "DESTDIR=", "BUILD=" + BUILD,
                            "PYTHON_SITE=" + os.path.join(prefix, "lib", "python3",
                                                          "dist-packages")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300, umask=0o022)
        if r.returncode != 0:
            pytest.fail("make install PREFIX=%s failed:\n%s" % (prefix, r.stdout[-3000:]))
        staged = SimpleNamespace(
            prefix=prefix,
            bin=os.path.join(prefix, "bin", "cellblock-kernel"),
            cellblock=os.path.join(prefix, "bin", "cellblock"),
            launcher=os.path.join(prefix, "libexec", "cellblock", "cellblock-launcher"),
            runner_dir=os.path.join(prefix, "share", "cellblock", "runner"),
            kernelspec_root=os.path.join(prefix, "share", "jupyter"))
        for path in (staged.bin, staged.cellblock, staged.launcher,
                     os.path.join(staged.runner_dir, "runner.py")):
            assert os.path.exists(path), "make install did not produce " + path
        yield staged
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


# --------------------------------------------------------------------------
# Warm-start templates (issue 21) that kernels of this session started are
# ended with it: each one's supervisor gets SIGTERM, by the pid (and start
# time) its pid file names, so nothing the suite made outlives it.  Templates
# that were there before the session are left alone, and so are those of
# other builds (a supervisor is a fork of the launcher that started it: its
# executable names the build).
# --------------------------------------------------------------------------
_WARM_DIR = "/run/cellblock/warm"
_WARM_END_WAIT_S = 15  # a supervisor ending its template and removing its cgroup


def _warm_supervisors():
    out = set()
    try:
        names = os.listdir(_WARM_DIR)
    except OSError:
        return out
    for name in names:
        if name.endswith(".pid"):
            try:
                with open(os.path.join(_WARM_DIR, name)) as f:
                    sup, start, _tpl = f.read().split()
                out.add((int(sup), int(start)))
            except (OSError, ValueError):
                pass
    return out


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


_WARM_KEY_FILE = re.compile(r"^([0-9a-f]{32})\.(lock|log|ended|failed)$")


def _warm_key_files():
    try:
        return {n for n in os.listdir(_WARM_DIR) if _WARM_KEY_FILE.match(n)}
    except OSError:
        return set()


def _sweep_warm_key_files(before):
    """The lock, log and end note of each template key this session made
    (keys of tests' temporary folders, never used again), once no supervisor
    holds the key's lock: the launcher keeps them for the next kernel of the
    same key and sweeps them only after a day."""
    new = _warm_key_files() - before
    for key in sorted({_WARM_KEY_FILE.match(n).group(1) for n in new}):
        lock = os.path.join(_WARM_DIR, key + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = None
        except OSError:
            continue
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # else a supervisor's
            for n in new:
                if n.startswith(key + "."):
                    try:
                        os.unlink(os.path.join(_WARM_DIR, n))
                    except OSError:
                        pass
        except OSError:
            pass
        finally:
            if fd is not None:
                os.close(fd)


def pytest_sessionstart(session):
    session.config._cb_warm_before = _warm_supervisors()
    session.config._cb_warm_files_before = _warm_key_files()


def _of_this_build(pid):
    launcher = os.path.join(BUILD, "libexec", "cellblock", "cellblock-launcher")
    try:
        exe = os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return False
    # (a launcher rebuilt since is "... (deleted)": still this build's)
    return exe.removesuffix(" (deleted)") == os.path.realpath(launcher)


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_cb_warm_before", set())
    ended = []
    for sup, start in _warm_supervisors() - before:
        if _start_time(sup) == start and _of_this_build(sup):
            try:
                os.kill(sup, signal.SIGTERM)
                ended.append((sup, start))
            except OSError:
                pass
    # a supervisor ends its template (SIGTERM, then SIGKILL after
    # CB_WARM_TERM_GRACE_MS) and then removes its cgroup: wait for that, so
    # that the session leaves nothing behind when it returns
    deadline = time.monotonic() + _WARM_END_WAIT_S
    while ended and time.monotonic() < deadline:
        ended = [(p, t) for p, t in ended if _start_time(p) == t]
        if ended:
            time.sleep(0.05)
    _sweep_warm_key_files(getattr(session.config, "_cb_warm_files_before", set()))
    # groups of kernels and launchers a test hard-killed last (every launcher
    # sweeps its siblings when it starts; after the last one, nobody would)
    kernel = os.path.join(BUILD, "bin", "cellblock-kernel")
    if os.path.exists(kernel):
        subprocess.run([kernel, "sweep"], capture_output=True, timeout=60)
