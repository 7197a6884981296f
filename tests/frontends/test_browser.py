"""The classic Jupyter Notebook in headless Chromium on the cellblock kernel.

A Notebook server (Debian's python3-notebook 6.x; nbclassic on jupyter-server
when `notebook` is 7.x) is started on 127.0.0.1 with a random token and a
private notebook dir; a notebook on the cellblock kernelspec is created with
the REST API; browser_drive.mjs (playwright-core driving /usr/bin/chromium)
opens it and runs print, an expression, a matplotlib plot, a DataFrame, an
error, input(), an infinite loop stopped with the interrupt button and a cell
after it.  Screenshot: build/test-artifacts/notebook.png.  Afterwards the
kernel, the server, node and every chromium process must be gone.
"""

import json
import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from .conftest import ARTIFACT_DIR, HERE, SYS_PYTHON, need_tool, skip_or_fail
from .procs import stop_process

CHROMIUM = os.environ.get("CB_CHROMIUM", "/usr/bin/chromium")
NOTEBOOK = "cellblock-browser-test.ipynb"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def notebook_flavour():
    """('notebook', 'NotebookApp') for classic 6.x, ('nbclassic', 'ServerApp')
    when notebook is 7.x and nbclassic exists, else None."""
    probe = ("import importlib.util, json\n"
             "v = None\n"
             "try:\n import notebook; v = notebook.__version__\nexcept Exception: pass\n"
             "print(json.dumps([v, importlib.util.find_spec('nbclassic') is not None]))")
    r = subprocess.run([SYS_PYTHON, "-c", probe], capture_output=True, text=True, timeout=30)
    if r.returncode:
        return None
    version, has_nbclassic = json.loads(r.stdout)
    if version and int(version.split(".")[0]) < 7:
        return "notebook", "NotebookApp"
    if has_nbclassic:
        return "nbclassic", "ServerApp"
    return None


class Server:
    def __init__(self, url, token, proc, log):
        self.url, self.token, self.proc, self.log = url, token, proc, log

    def api(self, method, path, body=None, timeout=10):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
            return json.loads(text) if text else None

    def log_tail(self, n=4000):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""


@pytest.fixture
def notebook_server(tracker, frontend_env, tmp_path):
    flavour = notebook_flavour()
    if flavour is None:
        skip_or_fail("no classic Notebook (<7) nor nbclassic for /usr/bin/python3 "
                     "(apt-get install python3-notebook)")
    module, app = flavour
    root = tmp_path / "notebooks"
    root.mkdir()
    token = secrets.token_hex(16)
    port = free_port()
    log = tmp_path / "server.log"
    cmd = [SYS_PYTHON, "-m", module, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--{app}.port_retries=0", f"--{app}.token={token}", f"--{app}.password=",
           f"--notebook-dir={root}"]
    if os.geteuid() == 0:  # CI and these machines run as root
        cmd.append("--allow-root")
    with open(log, "wb") as logf:
        proc = subprocess.Popen(cmd, env=frontend_env, cwd=str(root), stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    srv = Server(f"http://127.0.0.1:{port}", token, proc, str(log))
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"notebook server exited {proc.returncode}:\n{srv.log_tail()}")
            try:
                srv.api("GET", "/api/status", timeout=2)
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    pytest.fail(f"notebook server not up in 30 s:\n{srv.log_tail()}")
                time.sleep(0.2)
        yield srv
    finally:
        # shut the kernels down the way the UI does, then stop the server
        try:
            for s in srv.api("GET", "/api/sessions") or []:
                srv.api("DELETE", f"/api/sessions/{s['id']}", timeout=15)
        except Exception:
            pass
        stop_process(proc, timeout=15)  # SIGTERM: the server also stops remaining kernels


@pytest.fixture
def playwright(tracker):
    node = need_tool("node", "apt-get install nodejs npm")
    if not os.path.exists(CHROMIUM):
        skip_or_fail(f"{CHROMIUM} not found (apt-get install chromium)")
    if not os.path.exists(os.path.join(HERE, "node_modules", "playwright-core", "package.json")):
        r = subprocess.run(["sh", os.path.join(HERE, "setup.sh")], capture_output=True,
                           text=True, timeout=240)
        if not os.path.exists(os.path.join(HERE, "node_modules", "playwright-core")):
            skip_or_fail("playwright-core not installed (tests/frontends/setup.sh: "
                         f"{(r.stdout + r.stderr).strip()[-500:]})")
    return node


def notebook_json():
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "cellblock", "display_name": "Python 3 (cellblock)",
                                    "language": "python"},
                     "language_info": {"name": "python"}},
        "cells": [{"cell_type": "code", "id": "first", "metadata": {}, "source": "",
                   "outputs": [], "execution_count": None}],
    }


def drive(playwright, script, cfg, env, timeout, steps_name):
    """Runs a page driver (an .mjs script here, under playwright-core's Node)
    with `cfg`; returns the result it prints as its last line, also kept as
    ARTIFACT_DIR/steps_name.  Fails the test when it prints none."""
    driver = subprocess.Popen([playwright, os.path.join(HERE, script), json.dumps(cfg)],
                              cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        out, err = driver.communicate(timeout=timeout)
    finally:
        stop_process(driver, timeout=5)
    line = out.strip().splitlines()[-1] if out.strip() else ""
    try:
        result = json.loads(line)
    except ValueError:
        pytest.fail(f"{script} printed no result (rc={driver.returncode}):\n"
                    f"{out[-2000:]}\n{err[-3000:]}")
    with open(os.path.join(ARTIFACT_DIR, steps_name), "w") as f:
        json.dump(result, f, indent=1)
    return result



@pytest.mark.timeout(150)
def test_classic_notebook_in_chromium(playwright, notebook_server, tracker, frontend_env,
                                      tmp_path):
    srv = notebook_server
    model = srv.api("PUT", f"/api/contents/{NOTEBOOK}",
                    {"type": "notebook", "format": "json", "content": notebook_json()})
    assert model["name"] == NOTEBOOK

    os.makedirs(ARTIFACT_DIR, exist_ok=True)
    shot = os.path.join(ARTIFACT_DIR, "notebook.png")
    if os.path.exists(shot):
        os.unlink(shot)
    cfg = {"url": srv.url, "token": srv.token, "notebook": NOTEBOOK, "screenshot": shot,
           "profile": str(tmp_path / "chromium-profile"), "chromium": CHROMIUM,
           "step_ms": 20000}
    result = drive(playwright, "browser_drive.mjs", cfg, frontend_env, 130, "notebook-steps.json")
    # while the server still runs: the kernel the page started is cellblock
    kernels = srv.api("GET", "/api/kernels")

    failed = [s for s in result["steps"] if not s["ok"]]
    assert not failed, (
        "browser steps failed:\n" + json.dumps(failed, indent=1)
        + "\nbrowser log:\n" + "\n".join(result.get("log", []))
        + "\nkernel messages seen by the page: " + json.dumps(result.get("messages"))
        + "\nserver log:\n" + srv.log_tail())
    names = [s["name"] for s in result["steps"]]
    assert names[-1] == "screenshot" and len(names) == 11, names
    assert result["kernel"]["name"] == "cellblock"
    assert [k["name"] for k in kernels] == ["cellblock"], kernels
    steps = {s["name"]: s for s in result["steps"]}
    cells = steps["execution counts"]["detail"]
    assert [c["n"] for c in cells] == [1, 2, 3, 4, 5, 6, 7, 8, None], cells
    assert cells[5]["code"].startswith("name = input(")
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    # the processes of this test were really seen (the leak check means something)
    tracker.sample()
    comms = {v[1] for v in tracker.seen.values()}
    assert "cellblock-kerne" in comms and "cellblock-launc" in comms, comms
    assert any(c.startswith("chrom") for c in comms), comms
