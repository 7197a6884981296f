"""Fixtures for the frontend tests: real frontends (nbclient/nbconvert,
jupyter console in tmux, the classic Notebook in headless Chromium) on the
cellblock kernelspec built by `make` ($CELLBLOCK_BUILD, default <repo>/build).

- A missing tool (tmux, chromium, node/npm, playwright-core, notebook) skips
  the test with the reason; with CB_MUST_WORK=1 it fails instead.
- Every test has a time limit (marker `timeout(N)`, default 90 s; SIGALRM).
- The `tracker` fixture records every process the test starts (see procs.py)
  and fails the test if one of them is still running afterwards.
"""

import os
import shutil
import subprocess

import pytest

from .procs import Tracker

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")
KSPEC_ROOT = os.path.join(BUILD, "share", "jupyter")
KSPEC_FILE = os.path.join(KSPEC_ROOT, "kernels", "cellblock", "kernel.json")
EXAMPLES = os.path.join(REPO, "examples")
ARTIFACT_DIR = os.path.join(BUILD, "test-artifacts")
SYS_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
MUST_WORK = os.environ.get("CB_MUST_WORK") == "1"

# For in-process clients (nbclient): every KernelSpecManager must find it.
_jp = os.environ.get("JUPYTER_PATH", "")
if KSPEC_ROOT not in _jp.split(os.pathsep):
    os.environ["JUPYTER_PATH"] = KSPEC_ROOT + (os.pathsep + _jp if _jp else "")


def skip_or_fail(reason):
    if MUST_WORK:
        pytest.fail("missing (CB_MUST_WORK=1 forbids skipping): " + reason, pytrace=False)
    pytest.skip(reason)


def need_tool(path_or_name, why=""):
    found = shutil.which(path_or_name)
    if not found:
        skip_or_fail(f"{path_or_name} not found{': ' + why if why else ''}")
    return found




@pytest.fixture(autouse=True)
def _kernelspec_built():
    if not os.path.exists(KSPEC_FILE):
        skip_or_fail(f"cellblock kernelspec not built ({KSPEC_FILE}); run make")


@pytest.fixture
def tracker():
    """Processes started by this test; none may survive it."""
    t = Tracker().start()
    yield t
    t.stop_sampling()
    left = t.wait_gone(timeout=15)
    if left:
        t.kill_leftovers()
        pytest.fail("processes left running after the test (now killed): "
                    + "; ".join(f"{pid} {comm}: {cmd[:160]}" for pid, comm, cmd in left),
                    pytrace=False)


@pytest.fixture
def frontend_env(tracker, tmp_path):
    """Environment for a frontend subprocess: the kernelspec on JUPYTER_PATH,
    private Jupyter config/data/runtime dirs, the tracker's tag."""
    jdir = tmp_path / "jupyter"
    for d in ("config", "data", "runtime"):
        (jdir / d).mkdir(parents=True, exist_ok=True)
    env = tracker.env(
        JUPYTER_PATH=os.environ["JUPYTER_PATH"],
        JUPYTER_CONFIG_DIR=jdir / "config",
        JUPYTER_DATA_DIR=jdir / "data",
        JUPYTER_RUNTIME_DIR=jdir / "runtime",
        IPYTHONDIR=jdir / "ipython",
        PYTHONDONTWRITEBYTECODE=1,
    )
    env.pop("JUPYTER_PLATFORM_DIRS", None)
    return env


def run(cmd, timeout, **kw):
    """subprocess.run that always reaps (kills the child on timeout)."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("text", True)
    return subprocess.run(cmd, timeout=timeout, **kw)
