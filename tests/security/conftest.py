"""Fixtures for the escape tests: every test runs against the built cellblock
kernel AND, as a control, against the stock `python3` ipykernel kernelspec.

A test computes whether its attack "escaped" and calls `verdict`, which
asserts containment for cellblock and asserts the escape for the control:
a test that cannot tell a confined kernel from an unconfined one fails.
The control is skipped when no python3 kernelspec is installed (a failure
with CB_MUST_WORK=1).  `CB_SECURITY_KERNELS=cellblock` runs only cellblock.

Network tests target loopback only.  Resource tests are bounded so that an
unconfined kernel (the control) cannot hurt the machine.

For tests that run cellblock as another user: `throwaway_user` (a temporary
account, removed afterwards) and `staged_install` (`make install` of the
build into a temporary PREFIX that any user can read: the build tree itself
may not be, e.g. in a clone under root's 0700 home).
"""

import os
import queue
import shutil

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from .hostile_kit import start_kernel

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")
KSPEC_ROOT = os.path.join(BUILD, "share", "jupyter")
_jp = os.environ.get("JUPYTER_PATH", "")
if KSPEC_ROOT not in _jp.split(os.pathsep):
    os.environ["JUPYTER_PATH"] = KSPEC_ROOT + (os.pathsep + _jp if _jp else "")

MUST_WORK = os.environ.get("CB_MUST_WORK") == "1"
# a kernel's start, longer in an emulated guest (tests/guest sets the scale)
READY_S = 60 * int(os.environ.get("CB_TEST_TIME_SCALE", "1"))
KERNELS = os.environ.get("CB_SECURITY_KERNELS", "cellblock,python3").split(",")
# limits of the "small" cellblock kernel used by the resource tests
SMALL = {"memory_mb": 200, "pids": 48, "disk_mb": 32, "cpus": 0.5, "open_files": 256}


def tier():
    """The isolation tier the "cellblock" kernelspec runs under in this test
    run: "--isolation T" in CB_TEST_KERNEL_ARGS (tests/conftest.py adds those
    flags to its argv), else the kernel's default, "namespaces"."""
    import shlex
    args = shlex.split(os.environ.get("CB_TEST_KERNEL_ARGS", ""))
    found = "namespaces"
    for i, a in enumerate(args):
        if a == "--isolation" and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith("--isolation="):
            found = a.split("=", 1)[1]
    return found


def only_namespaces_tier(why):
    """Skips the calling test unless the namespaces tier is in force; why
    says what of that tier alone the test checks."""
    if tier() != "namespaces":
        pytest.skip("namespaces tier only (this run: --isolation %s): %s" % (tier(), why))


def skip_or_fail(reason):
    if MUST_WORK:
        pytest.fail("skip not allowed (CB_MUST_WORK=1): " + reason)
    pytest.skip(reason)


class Kernel:
    """A started kernel and its blocking client."""

    def __init__(self, name, extra_argv=None, prefix_argv=None, **popen):
        self.name = name
        self.control = name != "cellblock"
        self.km, self._tmp = start_kernel(name, extra_argv, "cb-sec-kspec-", prefix_argv, **popen)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=READY_S)

    def run(self, code, timeout=60):
        """Executes code; returns (stdout+stderr text, error name or None)."""
        msg_id = self.kc.execute(code)
        out, err = [], None
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=timeout)
            except queue.Empty:
                raise AssertionError("no reply within %ss" % timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            t, c = msg["msg_type"], msg["content"]
            if t == "stream":
                out.append(c["text"])
            elif t == "error":
                err = c["ename"]
                out.append("%s: %s" % (c["ename"], c["evalue"]))
            elif t == "status" and c["execution_state"] == "idle":
                break
        return "".join(out), err

    def connection_key(self):
        return self.km.session.key.decode()

    def shutdown(self):
        if self.km is None:
            return
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=False)
        finally:
            self.km = None
            if self._tmp:
                shutil.rmtree(self._tmp, ignore_errors=True)


def _check_available(name):
    if name == "cellblock":
        if not os.path.exists(os.path.join(KSPEC_ROOT, "kernels", "cellblock", "kernel.json")):
            skip_or_fail("cellblock is not built (run make)")
    elif name not in KernelSpecManager().find_kernel_specs():
        skip_or_fail("control kernelspec %r is not installed (python3-ipykernel)" % name)


@pytest.fixture(scope="module", params=KERNELS)
def kernel(request):
    _check_available(request.param)
    k = Kernel(request.param)
    yield k
    k.shutdown()


@pytest.fixture(params=KERNELS)
def fresh_kernel(request):
    """A kernel of its own (for tests that shut it down)."""
    _check_available(request.param)
    k = Kernel(request.param)
    yield k
    k.shutdown()


@pytest.fixture(scope="module", params=KERNELS)
def small_kernel(request):
    """cellblock with small limits; the control is the stock kernel."""
    _check_available(request.param)
    extra = None
    if request.param == "cellblock":
        extra = ["--memory", str(SMALL["memory_mb"]), "--pids", str(SMALL["pids"]),
                 "--disk", str(SMALL["disk_mb"]), "--cpus", str(SMALL["cpus"]),
                 "--open-files", str(SMALL["open_files"]), "--timeout", "120"]
    k = Kernel(request.param, extra)
    yield k
    k.shutdown()


def verdict(kernel, escaped, what):
    """Containment for cellblock; the control must escape (else the test is blind)."""
    if kernel.control:
        assert escaped, "control kernel did not escape, so this test cannot detect: " + what
    else:
        assert not escaped, "SANDBOX ESCAPE: " + what


# ---- running cellblock as another user ----------------------------------------------

# throwaway_user and staged_install: tests/conftest.py (shared with integration/)
RUNUSER = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin") or "runuser"
