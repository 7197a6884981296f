"""Checkpoints and the debugger together (docs/SNAPSHOTS.md, "The
debugger"), through jupyter_client: a checkpoint taken before debugging can
be rolled back to once the debugger is disconnected, and the debugger works
again in the runner the rollback woke (a fork keeps only the thread that
forked: the bridge thread is started again); a checkpoint or pause once the
debugger has run, or a rollback under an attached debugger, is refused with
the reason and changes nothing; in the gvisor tier a pause works with the
debugger's channel open (runsc checkpoint cannot save a host socket: init
hangs up first and dials the resumed sandbox's supervisor)."""

import pytest

from .dapclient import DapClient
from .test_debugger_session import CELL, _stop_at
from .test_snapshots_pause import ctl, out, start, store  # noqa: F401 (fixtures)
from .test_tiers import needs_gvisor

pytestmark = pytest.mark.cellblock_only


def _debug_once(dap):
    """Start the debugger, stop at a breakpoint, read a variable, go on."""
    dap.start()
    exec_id, tid = _stop_at(dap)
    frames = dap.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]
    assert frames and frames[0]["name"] == "f", frames
    dap.request("continue", {"threadId": tid})
    assert dap.execute_reply(exec_id)["status"] == "ok"


def _debugger_cycle(k, dap):
    out(k, "x = 1")
    assert ctl(k, "cellblock_checkpoint_request", name="before")["status"] == "ok"
    out(k, "x = 2")
    _debug_once(dap)
    # the debugger ran: no checkpoint holds it
    r = ctl(k, "cellblock_checkpoint_request", name="after")
    assert r["status"] == "error" and "the debugger has run" in r["evalue"], r
    # attached: a rollback would pull the process from under it
    r = ctl(k, "cellblock_rollback_request", name="before")
    assert r["status"] == "error" and "disconnect it first" in r["evalue"], r
    assert out(k, "print(x)") == "2\n"  # nothing half-done
    assert dap.request("disconnect", {"restart": False, "terminateDebuggee": True})["success"]
    rb = ctl(k, "cellblock_rollback_request", name="before")
    assert rb["status"] == "ok", rb
    assert out(k, "print(x)") == "1\n"
    info = dap.request("debugInfo")["body"]
    assert info["isStarted"] is False and info["breakpoints"] == []
    # the woken copy serves the debugger's channel again
    _debug_once(dap)
    names = [c["name"] for c in ctl(k, "cellblock_checkpoints_request")["checkpoints"]]
    assert names == ["before"]


def test_checkpoints_and_the_debugger(kernel):
    _debugger_cycle(kernel, DapClient(kernel.kc))


@pytest.mark.timeout(300)
def test_checkpoints_pause_and_the_debugger_in_gvisor(start, store):  # noqa: F811
    needs_gvisor()
    a = start("--isolation", "gvisor", "--image-dir", store)
    _debugger_cycle(a, DapClient(a.kc))
    r = ctl(a, "cellblock_pause_request")
    assert r["status"] == "error" and "the debugger has run" in r["evalue"], r
    assert out(a, "print(x)") == "1\n"
    # a fresh session: its pause keeps the debugger's channel, and the
    # resumed sandbox's debugger works
    b = start("--isolation", "gvisor", "--image-dir", store)
    out(b, "y = 7")
    p = ctl(b, "cellblock_pause_request")
    assert p["status"] == "ok", p
    c = start("--isolation", "gvisor", "--image-dir", store, "--resume", p["image"])
    assert out(c, "print(y)") == "7\n"
    dap = DapClient(c.kc)
    assert dap.request("debugInfo")["body"]["tmpFilePrefix"].startswith("/tmp/cellblock_")
    _debug_once(dap)
