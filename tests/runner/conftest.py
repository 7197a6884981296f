"""Fixtures: the runner (runner/runner.py) driven directly over a
socketpair, in each of its two shells.

Every test runs twice: with the IPython shell ("ipython": cells through a
real InteractiveShell, the default when the interpreter has IPython) and
with the minimal runner ("minimal": CELLBLOCK_SHELL=minimal).  A test that
is about one of them says so with @pytest.mark.shell("ipython") or
@pytest.mark.shell("minimal"); `runner.shell` tells a test which it got.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from .rclient import Runner  # noqa: E402

SHELLS = ("ipython", "minimal")


def pytest_configure(config):
    config.addinivalue_line("markers", "shell(name): run only with that runner shell")


def pytest_generate_tests(metafunc):
    """Each test gets the shells its marker names (both by default)."""
    if "runner" not in metafunc.fixturenames:
        return
    m = metafunc.definition.get_closest_marker("shell")
    shells = [s for s in SHELLS if m is None or s in m.args]
    metafunc.parametrize("runner", shells, indirect=True)


def _start(request, cwd):
    shell = request.param
    env = {"CELLBLOCK_SHELL": "minimal"} if shell == "minimal" else None
    r = Runner(cwd=cwd, env=env)
    if r.hello.get("shell") != shell:
        r.close()
        pytest.skip("the sandbox's Python has no IPython")
    return r


@pytest.fixture
def runner(request, tmp_path):
    r = _start(request, str(tmp_path))
    yield r
    r.close()
