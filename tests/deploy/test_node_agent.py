"""examples/node-agent/agent.mjs against a real Jupyter Server on loopback:
a Node.js agent (@jupyterlab/services, REST + WebSocket, token auth) starts a
cellblock kernel, gets a chart and a CSV back as artifacts and saves them,
reads an error, interrupts an endless cell, restarts and shuts down.

The test checks what the agent saved against what the cell must have written
(computed here independently), that the kernel is gone from the server
afterwards, and that no process of it is left.
"""
import csv
import io
import os
import subprocess
import time

import pytest

from .conftest import REPO, api, descendants, node_with_packages

AGENT_DIR = os.path.join(REPO, "examples", "node-agent")
AGENT_S = 180   # the whole agent run: six steps, a restart included
GONE_S = 10    # a shut-down kernel's processes have exited and been reaped
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def node_agent():
    return node_with_packages(AGENT_DIR)


@pytest.mark.timeout(AGENT_S + 60)
def test_node_agent_end_to_end(jupyter_server, node_agent, tmp_path):
    srv = jupyter_server
    out_dir = tmp_path / "out"
    r = subprocess.run([node_agent, "agent.mjs", str(out_dir)], cwd=AGENT_DIR,
                       env=dict(os.environ, JUPYTER_URL=srv.url, JUPYTER_TOKEN=srv.token),
                       capture_output=True, text=True, timeout=AGENT_S)
    steps = [l for l in r.stdout.splitlines() if l.startswith("== ")]
    assert r.returncode == 0, "agent failed:\n%s\n%s\nserver log:\n%s" % (
        r.stdout, r.stderr, srv.log_text())
    names = [l.split(":")[0][3:] for l in steps]
    assert names == ["start", "banner", "run", "artifact", "artifact", "error", "interrupt",
                     "restart", "shutdown"], steps
    banner = steps[1]
    assert "cellblock sandbox" in banner and "seccomp" in banner, banner

    # the files, byte for byte what the cell wrote
    rows = [(m, 100 + 17 * m % 40) for m in range(1, 13)]
    want = io.StringIO()
    w = csv.writer(want)
    w.writerow(["month", "sales"])
    w.writerows(rows)
    assert (out_dir / "sales.csv").read_bytes() == want.getvalue().encode()   # \r\n kept
    png = (out_dir / "chart.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 1000
    assert "total %d" % sum(v for _, v in rows) in steps[2]

    # nothing left on the server: the kernel is gone, and so are its processes
    assert api(srv.url, srv.token, "/api/kernels") == []
    deadline = time.monotonic() + GONE_S
    while descendants(srv.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = descendants(srv.proc.pid)
    assert left == [], "processes below the server after the agent shut its kernel down: %r" % left


def test_wrong_token_is_refused(jupyter_server, node_agent, tmp_path):
    """The token is what stands between an agent and the kernels: a wrong one gets nothing."""
    srv = jupyter_server
    r = subprocess.run([node_agent, "agent.mjs", str(tmp_path / "out")], cwd=AGENT_DIR,
                       env=dict(os.environ, JUPYTER_URL=srv.url, JUPYTER_TOKEN="wrong" + srv.token),
                       capture_output=True, text=True, timeout=AGENT_S)
    assert r.returncode == 1 and "Forbidden" in r.stderr, (r.stdout, r.stderr)
    assert api(srv.url, srv.token, "/api/kernels") == []
