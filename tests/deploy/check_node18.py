"""examples/node-agent on Debian 12's own Node.js 18 (run by `make deploy-check`).

The machine's Node is 20; a fresh Debian 12 has Debian's nodejs 18.  The agent
runs in a bookworm container with Debian's nodejs (deploy/container/
Containerfile.node18), with the host's network namespace so it reaches a
Jupyter Server on the host's 127.0.0.1, and the same node_modules (pure
JavaScript) mounted read-only.  Same checks as test_node_agent.py.
"""
import os
import shutil
import subprocess

import pytest

from .conftest import REPO, api, skip_or_fail

IMAGE = "localhost/cellblock-node18:latest"
AGENT_DIR = os.path.join(REPO, "examples", "node-agent")
CONTAINER = os.path.join(REPO, "deploy", "container")
AGENT_S = 240


def podman(*args, timeout=600):
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(CONTAINER, "containers.conf"))
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.timeout(900)
def test_node_agent_on_debian_node18(jupyter_server, tmp_path):
    if os.geteuid() != 0 or not shutil.which("podman"):
        skip_or_fail("needs root and podman (make deploy-check)")
    if podman("image", "exists", "localhost/cellblock-base:bookworm").returncode:
        skip_or_fail("base image missing: sh deploy/container/base.sh")
    if not os.path.isdir(os.path.join(AGENT_DIR, "node_modules", "@jupyterlab", "services")):
        skip_or_fail("examples/node-agent/node_modules missing (npm ci there)")
    r = podman("build", "-q", "--pull=never", "-t", IMAGE, "-f",
               os.path.join(CONTAINER, "Containerfile.node18"), CONTAINER)
    assert r.returncode == 0, r.stderr
    version = podman("run", "--rm", IMAGE, "node", "--version").stdout.strip()
    assert version.startswith("v18."), version
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    srv = jupyter_server
    r = podman("run", "--rm", "--network", "host", "-v", AGENT_DIR + ":/agent:ro",
               "-v", str(out) + ":/out", "-w", "/agent", "-e", "JUPYTER_URL=" + srv.url,
               "-e", "JUPYTER_TOKEN=" + srv.token, IMAGE, "node", "agent.mjs", "/out",
               timeout=AGENT_S)
    steps = [l for l in r.stdout.splitlines() if l.startswith("== ")]
    assert r.returncode == 0, (r.stdout, r.stderr, srv.log_text())
    assert [s.split(":")[0][3:] for s in steps] == [
        "start", "banner", "run", "artifact", "artifact", "error", "interrupt", "restart",
        "shutdown"], steps
    assert sorted(os.listdir(out)) == ["chart.png", "sales.csv"]
    assert api(srv.url, srv.token, "/api/kernels") == []
