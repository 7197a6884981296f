"""The debugger as JupyterLab drives it, through jupyter_client: debugInfo
first, initialize, attach (no configurationDone), per cell dumpCell,
debugInfo and setBreakpoints, a cell that stops, stackTrace, scopes and the
scopes' variables concurrently, richInspectVariables, next, continue,
disconnect -- and what must hold around it: every request gets its reply
and busy/idle; debugInfo is answered while the sandbox is busy, stopped,
restarting or gone; interrupt, restart and shutdown work while stopped; the
timeout's rule; internal names and the runner's frames stay out of sight;
IPython's %pdb/%debug without stdin.

The protocol parts also run against the stock ipykernel (CB_TEST_KERNEL=
python3); what only cellblock has (its sandbox, its runner) is marked.
"""

import json
import os
import re
import shutil
import tempfile
import time

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from .dapclient import JUPYTERLAB_INITIALIZE, DapClient
from .helpers import execute, is_cellblock, kernel_name

CELL = "def f(a, b):\n    c = a + b\n    return c\n\nf(2, 3)"


@pytest.fixture
def dap(kernel):
    return DapClient(kernel.kc)


def _stop_at(dap, code=CELL, line=2):
    """Sets a breakpoint at `line` of the cell, runs it and waits for its stop."""
    dap.breakpoint_cell(code, [line])
    mark = dap.mark()
    msg_id = dap.execute(code)
    ev = dap.wait_event("stopped", since=mark)
    assert ev["body"]["reason"] == "breakpoint", ev
    return msg_id, ev["body"]["threadId"]


def _spec_with(tmp_path, *args, python=None):
    """A KernelSpecManager whose only kernel is the one under test with args
    added (and its --python replaced)."""
    spec = KernelSpecManager().get_kernel_spec(kernel_name())
    argv = spec.argv + list(args)
    if python is not None:
        argv[argv.index("--python") + 1] = python
    kdir = tmp_path / "kernels" / "under-test"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(json.dumps(dict(spec.to_dict(), argv=argv)))
    return KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])


@pytest.fixture
def slow_python():
    """The sandbox's Python behind a wrapper that first sleeps 3 s: a sandbox
    that takes that long to say hello.  (In /var/tmp: the sandbox has a /tmp
    of its own.)"""
    d = tempfile.mkdtemp(prefix="cb-dbg-slow-", dir="/var/tmp")
    os.chmod(d, 0o755)
    path = os.path.join(d, "python3")
    with open(path, "w") as f:
        f.write('#!/bin/sh\nsleep 3\nexec /usr/bin/python3 "$@"\n')
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- the session


def test_jupyterlab_session(dap):
    info = dap.request("debugInfo")
    assert info["success"] and info["body"]["isStarted"] is False
    b = info["body"]
    assert b["hashMethod"] == "Murmur2" and b["tmpFileSuffix"] == ".py"
    dap.start()
    info = dap.request("debugInfo")["body"]
    assert info["isStarted"] is True
    path = dap.breakpoint_cell(CELL, [2])
    # the cell is named as the frontend computes it: prefix + murmur2(code, seed) + suffix
    assert path.startswith(info["tmpFilePrefix"]) and path.endswith(info["tmpFileSuffix"])
    info = dap.request("debugInfo")["body"]
    assert {"source": path, "breakpoints": [{"line": 2}]} in info["breakpoints"]

    mark = dap.mark()
    exec_id = dap.execute(CELL)
    stopped = dap.wait_event("stopped", since=mark)
    assert stopped["body"]["reason"] == "breakpoint"
    tid = stopped["body"]["threadId"]
    if is_cellblock():
        assert tid in dap.request("debugInfo")["body"]["stoppedThreads"]

    frames = dap.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]
    assert frames[0]["name"] == "f" and frames[0]["line"] == 2
    assert frames[0]["source"]["path"] == path
    scopes = dap.request("scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
    # JupyterLab asks for every scope's variables at once: replies in any order
    ids = {dap.send("variables", {"variablesReference": s["variablesReference"]}): s["name"]
           for s in scopes}
    got = {ids[i]: dap.reply(i)["body"]["variables"] for i in ids}
    local = {v["name"]: v["value"] for v in got["Locals"]}
    assert local == {"a": "2", "b": "3"}
    names = {v["name"] for v in got["Globals"]}
    assert "function variables" in names        # f, as pydevd groups it
    assert not names & {"In", "Out", "get_ipython", "exit", "quit", "_i", "_ih", "_oh", "_dh"}

    r = dap.request("richInspectVariables", {"variableName": "a", "frameId": frames[0]["id"]})
    assert r["success"] and r["body"]["data"] == {"text/plain": "2"}

    mark = dap.mark()
    assert dap.request("next", {"threadId": tid})["success"]
    ev = dap.wait_event("stopped", since=mark)
    assert ev["body"]["reason"] == "step"
    frames = dap.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]
    assert frames[0]["line"] == 3
    local = dap.request("variables", {"variablesReference": dap.request(
        "scopes", {"frameId": frames[0]["id"]})["body"]["scopes"][0]["variablesReference"]})
    assert {"name": "c", "value": "5"}.items() <= {
        k: v for v in local["body"]["variables"] if v["name"] == "c" for k, v in v.items()
    }.items()

    mark = dap.mark()
    assert dap.request("continue", {"threadId": tid})["success"]
    dap.wait_event("continued", since=mark)
    reply = dap.execute_reply(exec_id)
    assert reply["status"] == "ok"
    assert [m["content"]["data"]["text/plain"] for m in dap.outputs(exec_id)
            if m["msg_type"] == "execute_result"] == ["5"]
    if is_cellblock():
        assert dap.request("debugInfo")["body"]["stoppedThreads"] == []

    r = dap.request("disconnect", {"restart": False, "terminateDebuggee": False})
    assert r["success"]
    assert dap.request("debugInfo")["body"]["isStarted"] is False
    # the kernel goes on, without the debugger
    assert dap.execute_reply(dap.execute("f(1, 1)"))["status"] == "ok"


def test_stack_traces_show_only_the_users_frames(dap):
    """A function of an earlier cell, called from a later one: both cells'
    frames, nothing of IPython's or the runner's."""
    dap.start()
    lib = "def g(x):\n    y = x * 2\n    return y\n"
    path_lib = dap.breakpoint_cell(lib, [2])
    assert dap.execute_reply(dap.execute(lib))["status"] == "ok"
    mark = dap.mark()
    exec_id = dap.execute("z = g(21)\nz")
    tid = dap.wait_event("stopped", since=mark)["body"]["threadId"]
    frames = dap.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]
    assert [f["name"] for f in frames] == ["g", "<module>"], frames
    assert frames[0]["source"]["path"] == path_lib
    prefix = dap.request("debugInfo")["body"]["tmpFilePrefix"]
    assert all(f["source"]["path"].startswith(prefix) for f in frames)
    dap.request("continue", {"threadId": tid})
    assert dap.execute_reply(exec_id)["status"] == "ok"


def test_every_request_is_answered_also_unknown_and_malformed(dap):
    r = dap.request("noSuchCommand")        # (ipykernel answers {} before the debugger starts)
    if is_cellblock():
        assert r["success"] is False and r["command"] == "noSuchCommand"
        # content that is not a DAP request: a failure that says so, with busy/idle
        r = dap.reply(dap.send(None, content={"type": "event", "seq": "x"}))
        assert r["success"] is False and "DAP request" in r["message"]


def test_rich_inspect_and_inspect_variables_when_not_stopped(dap):
    code = ("class Rich:\n    def _repr_html_(self):\n        return '<b>rich</b>'\n"
            "    def __repr__(self):\n        return 'Rich()'\nr = Rich()\nnumber = 42\n")
    assert dap.execute_reply(dap.execute(code))["status"] == "ok"
    dap.start()
    names = {v["name"] for v in dap.request("inspectVariables")["body"]["variables"]}
    assert {"r", "number", "class variables"} <= names      # Rich, as pydevd groups it
    assert not names & {"In", "Out", "get_ipython", "_i1", "_ih"}
    r = dap.request("richInspectVariables", {"variableName": "r"})
    assert r["body"]["data"] == {"text/html": "<b>rich</b>", "text/plain": "Rich()"}


def _top(dap, tid):
    return dap.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]


def _finish(dap, exec_id, tid):
    """continue until the cell ends (a stop on the way, e.g. an exception
    seen again as it leaves a frame, is continued too); its execute_reply."""
    while True:
        mark = dap.mark()
        assert dap.request("continue", {"threadId": tid})["success"]
        dap.until(lambda: "idle" in dap.statuses(exec_id) or dap.events("stopped", mark),
                  "the cell's end or a stop")
        stops = dap.events("stopped", mark)
        if not stops:
            return dap.execute_reply(exec_id)
        tid = stops[0]["body"]["threadId"]


def test_copy_to_globals(dap):
    """JupyterLab's "Copy to Globals" (variables panel, while stopped): the
    request it sends, after checking debugInfo's copyToGlobals; the copy is
    in the frame's Globals scope, and a later cell sees it."""
    info = dap.request("debugInfo")["body"]
    if not is_cellblock() and not info.get("copyToGlobals"):
        pytest.skip("this kernel offers no copyToGlobals (ipykernel before 6.28)")
    assert info["copyToGlobals"] is True
    dap.start()
    code = "def f(a, b):\n    c = [a, b]\n    return c\n\nf(2, 3)"
    exec_id, tid = _stop_at(dap, code, line=3)
    frame = _top(dap, tid)[0]
    assert frame["name"] == "f"
    r = dap.request("copyToGlobals", {"srcVariableName": "c", "dstVariableName": "c_copy",
                                      "srcFrameId": frame["id"]})
    assert r["success"], r
    assert r["body"]["value"] == "[2, 3]", r
    # JupyterLab then reads the frame's scopes again: the copy is a global
    scopes = dap.request("scopes", {"frameId": frame["id"]})["body"]["scopes"]
    ref = next(s["variablesReference"] for s in scopes if s["name"] == "Globals")
    glob = {v["name"]: v["value"] for v in dap.request(
        "variables", {"variablesReference": ref})["body"]["variables"]}
    assert glob.get("c_copy") == "[2, 3]", glob
    if is_cellblock():
        # what the shell owns, and a source that is not a name, are refused
        for dst, src in (("In", "c"), ("get_ipython", "c"), ("x", "c + 1")):
            r = dap.request("copyToGlobals", {"srcVariableName": src, "dstVariableName": dst,
                                              "srcFrameId": frame["id"]})
            assert r["success"] is False and r["message"], r
    assert _finish(dap, exec_id, tid)["status"] == "ok"
    later = dap.execute("c_copy.append(4)\nc_copy")
    assert dap.execute_reply(later)["status"] == "ok"
    assert [m["content"]["data"]["text/plain"] for m in dap.outputs(later)
            if m["msg_type"] == "execute_result"] == ["[2, 3, 4]"]
    if is_cellblock():
        # and with no thread stopped, it says why
        r = dap.request("copyToGlobals", {"srcVariableName": "c", "dstVariableName": "d",
                                          "srcFrameId": frame["id"]})
        assert r["success"] is False and "stopped" in r["message"], r


def test_exception_breakpoints(dap):
    """The exceptions JupyterLab's panel offers (initialize's filters): with
    "raised" set, a raise stops with reason "exception" where it is raised;
    cleared, the same cell runs through to its error."""
    r = dap.request("initialize", JUPYTERLAB_INITIALIZE, timeout=200)
    filters = {f["filter"] for f in r["body"]["exceptionBreakpointFilters"]}
    assert "raised" in filters, r["body"]
    assert dap.request("attach", {})["success"]
    assert dap.request("setExceptionBreakpoints", {"filters": ["raised"]})["success"]
    code = "def boom(n):\n    raise ValueError(n)\n\nboom(7)"
    path = dap.request("dumpCell", {"code": code})["body"]["sourcePath"]
    mark = dap.mark()
    exec_id = dap.execute(code)
    ev = dap.wait_event("stopped", since=mark)
    assert ev["body"]["reason"] == "exception", ev
    tid = ev["body"]["threadId"]
    info = dap.request("exceptionInfo", {"threadId": tid})
    assert info["success"] and "ValueError" in info["body"]["exceptionId"], info
    frames = _top(dap, tid)
    assert (frames[0]["name"], frames[0]["line"], frames[0]["source"]["path"]) == \
        ("boom", 2, path), frames
    reply = _finish(dap, exec_id, tid)
    assert reply["status"] == "error" and reply["ename"] == "ValueError", reply

    assert dap.request("setExceptionBreakpoints", {"filters": []})["success"]
    mark = dap.mark()
    reply = dap.execute_reply(dap.execute(code))
    assert reply["status"] == "error" and reply["ename"] == "ValueError", reply
    assert dap.events("stopped", mark) == []


def test_step_in_and_out(dap):
    """stepIn from a cell into a function another cell defined, stepOut back."""
    dap.start()
    lib = "def g(x):\n    y = x * 2\n    return y\n"
    path_lib = dap.request("dumpCell", {"code": lib})["body"]["sourcePath"]
    assert dap.execute_reply(dap.execute(lib))["status"] == "ok"
    caller = "w = 1\nz = g(21)\nz + w"
    exec_id, tid = _stop_at(dap, caller, line=2)
    path = _top(dap, tid)[0]["source"]["path"]

    mark = dap.mark()
    assert dap.request("stepIn", {"threadId": tid})["success"]
    ev = dap.wait_event("stopped", since=mark)
    assert ev["body"]["reason"] == "step", ev
    frames = _top(dap, tid)
    assert [f["name"] for f in frames] == ["g", "<module>"], frames
    assert (frames[0]["source"]["path"], frames[0]["line"]) == (path_lib, 2), frames[0]

    mark = dap.mark()
    assert dap.request("stepOut", {"threadId": tid})["success"]
    ev = dap.wait_event("stopped", since=mark)
    assert ev["body"]["reason"] == "step", ev
    frames = _top(dap, tid)
    assert [f["name"] for f in frames] == ["<module>"], frames
    assert (frames[0]["source"]["path"], frames[0]["line"]) == (path, 2), frames[0]

    assert _finish(dap, exec_id, tid)["status"] == "ok"
    assert [m["content"]["data"]["text/plain"] for m in dap.outputs(exec_id)
            if m["msg_type"] == "execute_result"] == ["43"]


LOOP = "import time\nn = 0\nfor i in range(%d):\n    time.sleep(0.1)\n    n += 1\nn"


def _pause_running(dap, code):
    """Runs code (no breakpoints in it), pauses its thread as JupyterLab's
    pause button does; -> (exec_id, thread id, the cell's path)."""
    path = dap.request("dumpCell", {"code": code})["body"]["sourcePath"]
    exec_id = dap.execute(code)
    dap.until(lambda: "busy" in dap.statuses(exec_id), "the cell's busy")
    time.sleep(1)
    threads = dap.request("threads")["body"]["threads"]
    main = [t["id"] for t in threads if t["name"] == "MainThread"]
    assert len(main) == 1, threads
    mark = dap.mark()
    assert dap.request("pause", {"threadId": main[0]})["success"]
    ev = dap.wait_event("stopped", since=mark)
    assert ev["body"]["reason"] == "pause", ev
    frames = _top(dap, ev["body"]["threadId"])
    assert frames[0]["name"] == "<module>" and frames[0]["source"]["path"] == path, frames
    return exec_id, ev["body"]["threadId"]


def test_pause_then_continue(dap):
    dap.start()
    exec_id, tid = _pause_running(dap, LOOP % 60)
    if is_cellblock():
        assert tid in dap.request("debugInfo")["body"]["stoppedThreads"]
    assert _finish(dap, exec_id, tid)["status"] == "ok"
    assert [m["content"]["data"]["text/plain"] for m in dap.outputs(exec_id)
            if m["msg_type"] == "execute_result"] == ["60"]


@pytest.mark.cellblock_only
def test_pause_then_interrupt(kernel, dap):
    """(ipykernel 6.17: see test_interrupt_while_stopped.)"""
    dap.start()
    exec_id, tid = _pause_running(dap, "import time\nwhile True:\n    time.sleep(0.1)")
    kernel.km.interrupt_kernel()
    reply = dap.execute_reply(exec_id, timeout=30)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert dap.request("debugInfo")["body"]["stoppedThreads"] == []
    assert execute(kernel.kc, "1 + 2").status == "ok"


# ---------------------------------------------------------------- while busy / stopped


def test_debug_info_answers_while_the_sandbox_is_busy_and_stopped(dap):
    dap.start()
    busy = dap.execute("import time\ntime.sleep(4)")
    time.sleep(0.5)
    t0 = time.monotonic()
    assert dap.request("debugInfo")["success"]
    assert time.monotonic() - t0 < 2
    assert dap.execute_reply(busy)["status"] == "ok"
    exec_id, tid = _stop_at(dap)
    t0 = time.monotonic()
    assert dap.request("debugInfo")["success"]
    # and the runner's debugger too, while the cell is stopped
    assert dap.request("threads")["success"]
    assert time.monotonic() - t0 < 5
    dap.request("continue", {"threadId": tid})
    assert dap.execute_reply(exec_id)["status"] == "ok"


@pytest.mark.cellblock_only
def test_interrupt_while_stopped(kernel, dap):
    """(ipykernel 6.17 fails this: after the interrupt its debugger never stops again.)"""
    dap.start()
    exec_id, tid = _stop_at(dap)
    kernel.km.interrupt_kernel()
    reply = dap.execute_reply(exec_id, timeout=30)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    if is_cellblock():
        # the traceback ends in the user's frame, not in the debugger's
        tb = "\n".join(reply["traceback"])
        assert "pydevd" not in tb and "cb_debug" not in tb, tb
    # the kernel, and the debugger, go on
    assert execute(kernel.kc, "1 + 2").status == "ok"
    exec_id, tid = _stop_at(dap, CELL.replace("f(2, 3)", "f(4, 5)"))
    dap.request("continue", {"threadId": tid})
    assert dap.execute_reply(exec_id)["status"] == "ok"


@pytest.mark.cellblock_only
def test_the_sandbox_ending_resets_the_debugger(dap):
    """A sandbox that dies while stopped at a breakpoint (here: a process it
    started kills it; its threads are stopped with the cell): the cell and
    the debugger's requests are answered, the mirror is reset, and the next
    sandbox names its cells anew."""
    dap.start()
    prefix = dap.request("debugInfo")["body"]["tmpFilePrefix"]
    code = ("import os, subprocess\n"
            "subprocess.Popen(['sh', '-c', 'sleep 3; kill -9 %d' % os.getpid()])\n" + CELL)
    exec_id, tid = _stop_at(dap, code, line=4)
    reply = dap.execute_reply(exec_id, timeout=30)
    assert reply["status"] == "error" and reply["ename"] == "SandboxError", reply
    info = dap.request("debugInfo")["body"]
    assert info["isStarted"] is False and info["stoppedThreads"] == []
    assert info["breakpoints"] == []
    assert dap.execute_reply(dap.execute("1"))["status"] == "ok"
    info = dap.request("debugInfo")["body"]
    assert info["tmpFilePrefix"] != prefix
    dap.start()
    exec_id, tid = _stop_at(dap)
    dap.request("continue", {"threadId": tid})
    assert dap.execute_reply(exec_id)["status"] == "ok"


def test_restart_while_stopped(kernel, dap):
    dap.start()
    exec_id, tid = _stop_at(dap)
    kernel.km.restart_kernel(now=False)
    kernel.kc.wait_for_ready(timeout=60)
    fresh = DapClient(kernel.kc)
    assert fresh.request("debugInfo")["body"]["isStarted"] is False
    assert execute(kernel.kc, "1 + 1").status == "ok"


@pytest.mark.cellblock_only
@pytest.mark.timeout(180)
def test_debug_info_while_restarting(kernel_factory, tmp_path, slow_python):
    """JupyterLab asks debugInfo as soon as a restart begins (its handler's
    'restarting'), and hashes cells under the tmpFilePrefix it gets.  Sent
    right after restart_kernel, while the new sandbox is still starting (3 s
    here), it is answered, with the prefix of that sandbox -- the one its
    cells are compiled under -- not an empty or the old sandbox's one."""
    k = kernel_factory(kernel_name="under-test", kernel_spec_manager=_spec_with(
        tmp_path, "--warm", "off", python=slow_python))
    dap = DapClient(k.kc)
    old = dap.request("debugInfo")["body"]["tmpFilePrefix"]
    assert old
    for _ in range(2):
        k.km.restart_kernel(now=False)
        fresh = DapClient(k.kc)
        msg_id = fresh.send("debugInfo")
        # (only the reply: iopub may not be subscribed to the new process yet)
        fresh.until(lambda: msg_id in fresh.control, "the debug_reply")
        info = fresh.control[msg_id]["content"]
        assert info["success"] and info["body"]["isStarted"] is False, info
        prefix = info["body"]["tmpFilePrefix"]
        assert prefix.startswith("/") and prefix != old, info
        k.kc.wait_for_ready(timeout=60)
        code = "x = 1"
        path = fresh.request("dumpCell", {"code": code})["body"]["sourcePath"]
        assert path.startswith(prefix), (path, prefix)
        reply = fresh.execute_reply(fresh.execute("import warnings; warnings.warn('w')"))
        assert reply["status"] == "ok"
        assert any(prefix in m["content"]["text"] for m in fresh.iopub
                   if m["msg_type"] == "stream"), fresh.iopub
        old = prefix


def test_shutdown_while_stopped(kernel, dap):
    """Kernel.stop (the fixture's) checks that nothing is left behind."""
    dap.start()
    _stop_at(dap)
    t0 = time.monotonic()
    problems = kernel.stop(check=False)
    assert not problems, problems
    assert time.monotonic() - t0 < 15


@pytest.mark.cellblock_only
@pytest.mark.timeout(180)
def test_the_timeout_waits_while_stopped_and_applies_otherwise(kernel_factory, tmp_path):
    """--timeout 3: stopped 6 s at a breakpoint, the cell still ends well;
    running, it is interrupted as always."""
    k = kernel_factory(kernel_name="under-test",
                       kernel_spec_manager=_spec_with(tmp_path, "--timeout", "3"))
    dap = DapClient(k.kc)
    dap.start()
    exec_id, tid = _stop_at(dap)
    time.sleep(6)
    dap.request("continue", {"threadId": tid})
    assert dap.execute_reply(exec_id)["status"] == "ok"
    r = dap.execute_reply(dap.execute("while True:\n    pass"), timeout=30)
    assert r["status"] == "error"
    assert r["ename"] in ("KeyboardInterrupt", "TimeoutError"), r


# ---------------------------------------------------------------- IPython's pdb


def _texts(dap, msg_id):
    return [(m["msg_type"], m["content"].get("text") or m["content"].get("ename", ""))
            for m in dap.outputs(msg_id)]


@pytest.mark.cellblock_only
def test_pdb_on_without_stdin(dap):
    """nbclient allows no stdin: %pdb's debugger cannot read a command.  The
    error says so once and the cell ends with its own error.  (ipykernel
    6.17 fails this: its message handler raises, and the debugger stops in
    its own raw_input.)"""
    assert dap.execute_reply(dap.execute("%pdb on"))["status"] == "ok"
    exec_id = dap.execute("1/0")
    reply = dap.execute_reply(exec_id)
    out = _texts(dap, exec_id)
    errors = [t for k, t in out if k == "error"]
    assert errors[0] == "ZeroDivisionError"
    assert "StdinNotImplementedError" in errors
    text = "".join(t for _, t in out)
    assert "internal error" not in text and "_input_bridge" not in text and "cb_stdin" not in text
    if is_cellblock():
        assert reply["status"] == "error" and reply["ename"] == "ZeroDivisionError"
        assert errors.count("StdinNotImplementedError") == 1
    assert dap.execute_reply(dap.execute("%pdb off"))["status"] == "ok"
    assert dap.execute_reply(dap.execute("2 + 2"))["status"] == "ok"


@pytest.mark.cellblock_only
def test_debug_magic_stops_in_the_users_frame(kernel, dap):
    """input() without stdin fails in the runner's bridge; %debug afterwards
    (with stdin) is a post-mortem of the user's code, not of the bridge.
    (ipykernel 6.17 fails this: it stops in its kernelbase.raw_input.)"""
    r = dap.execute_reply(dap.execute("def ask():\n    return input('x')\nask()"))
    assert r["ename"] == "StdinNotImplementedError"
    kc = kernel.kc
    msg_id = kc.execute("%debug", allow_stdin=True)
    req = kc.get_stdin_msg(timeout=30)
    assert req["msg_type"] == "input_request"
    kc.input("q")
    dap.execute_reply(msg_id)
    where = re.sub(r"\x1b\[[0-9;]*m", "", "".join(t for _, t in _texts(dap, msg_id)))
    assert "ask()" in where, where
    assert "_input_bridge" not in where and "cb_stdin" not in where and "kernelbase" not in where


# ---------------------------------------------------------------- what frontends ask


def test_ipykernel_version_for_vscode(kernel):
    """VS Code debugs cells through the kernel when ipykernel >= 6."""
    r = execute(kernel.kc, "import ipykernel; print(ipykernel.__version__)")
    major = int(r.stream().strip().split(".")[0])
    assert major >= 6


def test_kernel_info_and_spec_say_debugger(kernel):
    info = kernel.kc.kernel_info(reply=True)["content"]
    if is_cellblock():
        assert info["debugger"] is True
        spec = KernelSpecManager().get_kernel_spec(kernel_name())
        assert spec.metadata.get("debugger") is True


# ---- the isolation tiers: the channel through runsc and QEMU -------------------------------


@pytest.mark.cellblock_only
@pytest.mark.timeout(420)
@pytest.mark.parametrize("tier", ["gvisor", "microvm"])
def test_the_debugger_in_the_isolation_tiers(tier, kernel_factory, tmp_path_factory):
    from .test_tiers import needs_gvisor, tier_spec_manager
    from .test_tiers_microvm import START_TIMEOUT, needs_microvm
    (needs_gvisor if tier == "gvisor" else needs_microvm)()
    ksm = tier_spec_manager(tmp_path_factory, "cb-" + tier, ["--isolation", tier])
    k = kernel_factory(kernel_name="cb-" + tier, kernel_spec_manager=ksm)
    k.kc.wait_for_ready(timeout=START_TIMEOUT)
    dap = DapClient(k.kc)
    dap.start()
    exec_id, tid = _stop_at(dap)
    frames = dap.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]
    assert [f["name"] for f in frames] == ["f", "<module>"]
    dap.request("continue", {"threadId": tid})
    assert dap.execute_reply(exec_id, timeout=120)["status"] == "ok"
    assert dap.request("disconnect", {"restart": False, "terminateDebuggee": False})["success"]
