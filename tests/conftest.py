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
