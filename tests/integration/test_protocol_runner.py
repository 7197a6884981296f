"""cellblock-specific: the sandboxed Python (the runner) dying mid-cell
(PROTOCOL.md section 6 item 17; RUNNER_PROTOCOL.md 3.4).  The cell gets an
error reply naming the cause, idle follows, and the next cell runs in a fresh
runner.  ipykernel has no runner (os._exit kills the kernel itself), so these
tests are skipped on the reference kernel.
"""

import re

import pytest

from .helpers import execute, kernel_alive_check

pytestmark = pytest.mark.cellblock_only


def _death(kernel, code):
    kc = kernel.kc
    assert execute(kc, "cb_state = 'old runner'").status == "ok"
    pid_before = kernel.pid
    r = execute(kc, code, timeout=30)
    assert r.status == "error", r.content
    assert r.types()[0] == "status" and r.types()[-1] == "status"
    assert r.iopub[-1]["content"]["execution_state"] == "idle"
    errs = r.of_type("error")
    assert len(errs) == 1, r.types()
    assert kernel.km.is_alive() and kernel.pid == pid_before, "the kernel itself must survive"
    # next cell: a fresh runner, state gone, counter goes on
    n = r.content["execution_count"]
    r2 = execute(kc, "print('alive')\ncb_state", timeout=60)
    assert r2.stream() == "alive\n"
    assert r2.status == "error" and r2.content["ename"] == "NameError"
    assert r2.content["execution_count"] == n + 1
    kernel_alive_check(kc)
    return r


def test_runner_exit_code_reported(kernel):
    r = _death(kernel, "import os\nprint('before', flush=True)\nos._exit(3)")
    assert r.stream() == "before\n", "output written before the death must not be lost"
    assert re.search(r"\b3\b", r.content["evalue"]), r.content
    assert re.search(r"exit", r.error_text(), re.I)


def test_runner_killed_by_signal_reported(kernel):
    r = _death(kernel, "import os\nos.kill(os.getpid(), 9)")
    text = r.content["ename"] + " " + r.content["evalue"]
    assert re.search(r"SIGKILL|signal 9|\b9\b|killed", text, re.I), r.content


def test_runner_segfault_reported(kernel):
    r = _death(kernel, "import ctypes\nctypes.string_at(0)")
    text = r.content["ename"] + " " + r.content["evalue"]
    assert re.search(r"SIGSEGV|signal 11|\b11\b|segmentation", text, re.I), r.content


def test_runner_death_during_input(kernel):
    """The runner dies while waiting for input: the request still ends."""
    kc = kernel.kc
    mid = kc.execute("import os, threading\n"
                     "threading.Timer(0.5, lambda: os._exit(5)).start()\n"
                     "input('x')", allow_stdin=True)
    from .helpers import collect_iopub, get_reply
    reply = get_reply(kc, mid, timeout=30)
    assert reply["content"]["status"] == "error"
    collect_iopub(kc, mid)
    kernel_alive_check(kc)


def test_queued_cells_after_runner_death(kernel):
    """stop_on_error applies to a runner death like to any error."""
    kc = kernel.kc
    from .helpers import get_reply
    m1 = kc.execute("import os, time\ntime.sleep(0.5)\nos._exit(1)")
    m2 = kc.execute("1 + 1")
    assert get_reply(kc, m1, timeout=30)["content"]["status"] == "error"
    assert get_reply(kc, m2, timeout=30)["content"]["status"] == "aborted"
    kernel_alive_check(kc)
