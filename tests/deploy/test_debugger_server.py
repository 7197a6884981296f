"""The debugger through Jupyter Server's WebSocket API, as JupyterLab's
debugger panel uses it: tests/deploy/debugger/session.mjs (Node,
@jupyterlab/services, token auth) runs debugInfo, initialize, attach,
dumpCell, setBreakpoints, a cell that stops, stackTrace, scopes and variables
(concurrently), richInspectVariables, copyToGlobals, next, continue, a later
cell that uses the copy, disconnect against a
cellblock kernel on a real server on loopback.  Each request waits for
future.done, i.e. for its debug_reply and its idle status: a kernel that
skips either hangs the script (and fails here on the time limit)."""

import json
import os
import subprocess
import time

import pytest

from .conftest import REPO, api, descendants, node_with_packages

SESSION_DIR = os.path.join(REPO, "tests", "deploy", "debugger")
SESSION_S = 240
GONE_S = 10


@pytest.fixture(scope="module")
def node():
    return node_with_packages(SESSION_DIR)


@pytest.mark.timeout(SESSION_S + 60)
def test_jupyterlab_debugger_session_through_jupyter_server(jupyter_server, node):
    srv = jupyter_server
    r = subprocess.run([node, "session.mjs"], cwd=SESSION_DIR,
                       env=dict(os.environ, JUPYTER_URL=srv.url, JUPYTER_TOKEN=srv.token),
                       capture_output=True, text=True, timeout=SESSION_S)
    assert r.returncode == 0, "session failed:\n%s\n%s\nserver log:\n%s" % (
        r.stdout, r.stderr, srv.log_text())
    steps = {}
    for line in r.stdout.splitlines():
        if line.startswith("== "):
            name, _, detail = line[3:].partition(": ")
            steps[name] = json.loads(detail)
    assert steps["spec"] == {"debugger": True}
    assert steps["kernel_info"] == {"debugger": True}
    assert steps["debugInfo"] == {"success": True, "isStarted": False}
    assert steps["initialize"] == {"success": True} and steps["attach"] == {"success": True}
    assert steps["started"]["isStarted"] is True
    assert steps["setBreakpoints"] == {"verified": [True], "inPrefix": True}
    assert steps["stopped"] == {"reason": "breakpoint"}
    assert steps["stoppedThreads"] == {"has": True}
    assert steps["stackTrace"] == {"names": ["f", "<module>"], "line": 2}
    assert steps["variables"] == {"locals": {"a": "2", "b": "3"}, "internal": []}
    assert steps["richInspectVariables"] == {"text/plain": "3"}
    assert steps["copyToGlobals"] == {"offered": True, "success": True, "global": "3"}
    assert steps["next"] == {"reason": "step", "line": 3}
    assert steps["continue"] == {"status": "ok", "result": "5"}
    assert steps["later"] == {"status": "ok", "result": "6"}
    assert steps["disconnect"] == {"success": True, "isStarted": False}
    assert "shutdown" in steps

    assert api(srv.url, srv.token, "/api/kernels") == []
    deadline = time.monotonic() + GONE_S
    while descendants(srv.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert descendants(srv.proc.pid) == []
