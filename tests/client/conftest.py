"""Fixtures for tests/client: the cellblock client package (client/) against
the built kernelspec ($CELLBLOCK_BUILD, default <repo>/build)."""

import os
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")
KSPEC_DIR = os.path.join(BUILD, "share", "jupyter", "kernels", "cellblock")
sys.path.insert(0, os.path.join(REPO, "client"))

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    if not os.path.isfile(os.path.join(KSPEC_DIR, "kernel.json")):
        for item in items:
            if str(item.fspath).startswith(HERE):
                item.add_marker(pytest.mark.skip(reason="cellblock kernelspec not built; run make"))




def descendants(pid):
    """pid and every process below it, as {pid: starttime} (from /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append((int(d), fields[19]))
    out, todo = {}, [pid]
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        out[pid] = st[st.rindex(")") + 2:].split()[19]
    except OSError:
        return out
    while todo:
        p = todo.pop()
        for c, start in children.get(p, []):
            out[c] = start
            todo.append(c)
    return out


def still_running(procs):
    """Those of {pid: starttime} that still exist (same start time, not a zombie)."""
    alive = []
    for pid, start in procs.items():
        try:
            with open("/proc/%d/stat" % pid) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if fields[19] == start and fields[0] != "Z":
            alive.append(pid)
    return alive


@pytest.fixture
def sandbox_factory():
    from cellblock import Sandbox
    made = []

    def make(**kw):
        kw.setdefault("kernelspec_path", KSPEC_DIR)
        sb = Sandbox(**kw)
        made.append(sb)
        return sb

    yield make
    for sb in made:
        sb.kill()


@pytest.fixture(scope="module")
def sb():
    """One sandbox shared by the tests of a module (each leaves it usable)."""
    from cellblock import Sandbox
    s = Sandbox(kernelspec_path=KSPEC_DIR)
    yield s
    s.kill()


class _Procs:
    descendants = staticmethod(descendants)
    still_running = staticmethod(still_running)


@pytest.fixture
def procs():
    """Helpers to see the kernel's process tree (descendants, still_running)."""
    return _Procs
