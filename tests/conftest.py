"""Shared by every test folder: a per-test time limit by SIGALRM (pytest-timeout
is not installed), so no test can hang `make test`.  A test may set its own
with @pytest.mark.timeout(seconds); otherwise its folder's default applies."""
import os
import signal

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
