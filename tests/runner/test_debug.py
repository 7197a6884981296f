"""The runner's side of the debugger (runner/cb_debug.py), driven directly:
DAP frames on fd 4 while cells run on fd 3, in both shells.  The kernel's
side (debugInfo, the attach handshake, busy/idle) is in
tests/integration/test_debugger*.py."""

import os
import threading

import pytest

from .rclient import Runner

CELL = "def f(a, b):\n    c = a + b\n    return c\n\nf(2, 3)"


class Dap:
    def __init__(self, r):
        self.r, self.seq, self.events = r, 0, []

    def send(self, command, arguments=None):
        self.seq += 1
        self.r.dap_send({"type": "request", "seq": self.seq, "command": command,
                         "arguments": arguments or {}})
        return self.seq

    def wait(self, seq, timeout=60):
        for i, m in enumerate(self.events):
            if m.get("type") == "response" and m.get("request_seq") == seq:
                return self.events.pop(i)
        while True:
            m = self.r.dap_recv(timeout)
            if m.get("type") == "response" and m.get("request_seq") == seq:
                return m
            self.events.append(m)

    def request(self, command, arguments=None, timeout=60):
        return self.wait(self.send(command, arguments), timeout)

    def event(self, name, timeout=60):
        for i, m in enumerate(self.events):
            if m.get("event") == name:
                return self.events.pop(i)
        while True:
            m = self.r.dap_recv(timeout)
            if m.get("event") == name:
                return m
            self.events.append(m)

    def start(self):
        assert self.request("initialize", {"clientID": "t", "pathFormat": "path"},
                            timeout=120)["success"]
        s = self.send("attach")
        self.event("initialized")
        self.request("configurationDone")
        assert self.wait(s)["success"]


@pytest.fixture(params=["ipython", "minimal"])
def dbg(request, tmp_path):
    env = {"CELLBLOCK_SHELL": "minimal"} if request.param == "minimal" else None
    r = Runner(cwd=str(tmp_path), env=env, debug=True)
    if r.hello["shell"] != request.param:
        r.close()
        pytest.skip("the sandbox's Python has no IPython")
    if not r.hello["debugger"]:
        r.close()
        pytest.skip("debugpy is not installed")
    yield r, Dap(r)
    r.close()


def _in_thread(r, code, count):
    out = {}
    t = threading.Thread(target=lambda: out.update(res=r.execute(code, execution_count=count)))
    t.start()
    return t, out


def test_hello_names_the_cells_prefix_and_the_debugger(dbg):
    r, _ = dbg
    assert r.hello["cell_prefix"].startswith("/tmp/cellblock_") and r.hello["debugger"] is True


def test_cells_are_named_by_the_hash_of_their_source(dbg):
    """The name JupyterLab computes: prefix + murmur2(code, 0xC70F6907) + .py,
    in both shells and on the fast path alike."""
    from ipykernel.compiler import murmur2_x86
    r, dap = dbg
    code = "import warnings\nwarnings.warn('here')"
    _, _, _, err = r.execute(code, execution_count=1)
    name = "%s%d.py" % (r.hello["cell_prefix"], murmur2_x86(code, 0xC70F6907))
    assert name in err, err
    assert dap.request("dumpCell", {"code": code})["body"]["sourcePath"] == name
    with open(name) as f:
        assert f.read() == code


def test_a_cell_stops_and_is_inspected(dbg):
    r, dap = dbg
    dap.start()
    path = dap.request("dumpCell", {"code": CELL})["body"]["sourcePath"]
    bp = dap.request("setBreakpoints", {"breakpoints": [{"line": 2}], "source": {"path": path}})
    assert bp["body"]["breakpoints"][0]["verified"]
    t, out = _in_thread(r, CELL, 1)
    tid = dap.event("stopped")["body"]["threadId"]
    frames = dap.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]
    # only the user's frames: the runner's are trimmed, IPython's are library code
    assert [(f["name"], f["source"]["path"]) for f in frames] == [("f", path), ("<module>", path)]
    scopes = dap.request("scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
    glob = dap.request("variables", {"variablesReference": scopes[1]["variablesReference"]})
    names = {v["name"] for v in glob["body"]["variables"]}
    assert not names & {"In", "Out", "_ih", "get_ipython", "__builtins__", "_i", "_i1"}, names
    r2 = dap.request("richInspectVariables", {"variableName": "a", "frameId": frames[0]["id"]})
    assert r2["body"]["data"] == {"text/plain": "2"}
    dap.request("continue", {"threadId": tid})
    t.join(30)
    frames_out, done, _, _ = out["res"]
    assert done["status"] == "ok"
    assert [f["data"]["text/plain"] for f in frames_out if f["type"] == "execute_result"] == ["5"]


def test_requests_without_the_debugger_are_answered(dbg):
    r, dap = dbg
    r.execute("answer = 42", execution_count=1)
    v = dap.request("inspectVariables")
    assert v["success"], v
    assert "answer" in {x["name"] for x in v["body"]["variables"]}
    assert dap.request("richInspectVariables",
                       {"variableName": "answer"})["body"]["data"] == {"text/plain": "42"}
    r2 = dap.request("stackTrace", {"threadId": 1})
    assert r2["success"] is False and "not started" in r2["message"]
    mods = dap.request("modules")["body"]["modules"]
    assert mods and not [m for m in mods if "/runner/" in m["path"] and "cb_" in m["path"]]
    # breakpoint() stays pdb until a frontend's debugger runs
    _, done, out, _ = r.execute("import sys; print(sys.breakpointhook.__module__)",
                                execution_count=2)
    assert out.strip() == "sys", out


def test_disconnect_keeps_the_process(dbg):
    """terminateDebuggee is the kernel's business, never the debugger's."""
    r, dap = dbg
    dap.start()
    assert dap.request("disconnect", {"restart": False, "terminateDebuggee": True})["success"]
    _, done, _, _ = r.execute("1 + 1", execution_count=1)
    assert done["status"] == "ok" and r.proc.poll() is None


def test_ipykernel_version_without_ipykernel(tmp_path, monkeypatch):
    """An interpreter without ipykernel still says an ipykernel >= 6 (VS Code
    then debugs cells through the kernel's debug protocol)."""
    import shutil
    import subprocess
    from . import rclient
    other = [p for p in (shutil.which("python3"), "/usr/local/bin/python3")
             if p and os.path.exists(p) and
             subprocess.run([p, "-I", "-c", "import ipykernel"], capture_output=True).returncode]
    if not other:
        pytest.skip("no Python without ipykernel here")
    monkeypatch.setattr(rclient, "PYTHON", other[0])
    r = Runner(cwd=str(tmp_path))
    try:
        _, done, out, err = r.execute("import ipykernel\nprint(ipykernel.__version__)",
                                      execution_count=1)
        assert done["status"] == "ok", (done, err)
        assert int(out.strip().split(".")[0]) >= 6, out
    finally:
        r.close()
