"""The README's `jupyter notebook` and `jupyter nbconvert` lines, run as written.

Debian ships the `jupyter-notebook` and `jupyter-nbconvert` scripts apart from
the Python modules (python3-notebook, python3-nbconvert), so `python3 -m
nbconvert` can work while `jupyter nbconvert` says "not a Jupyter command".
The other frontend tests use the modules; these run the `jupyter` command a
user types, so a set-up that forgets the scripts fails here (a missing script
is a failure, not a skip: scripts/deps.sh installs them).
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import nbformat
import pytest
from jupyter_client.blocking import BlockingKernelClient

from .conftest import EXAMPLES, REPO, SYS_PYTHON, run
from .procs import stop_process
from .test_nbclient import check_demo

JUPYTER = "/usr/bin/jupyter" if os.path.exists("/usr/bin/jupyter") else shutil.which("jupyter")


def jupyter_subcommand(name, package):
    """The `jupyter NAME` command; fails when jupyter cannot find it."""
    if JUPYTER is None:
        pytest.fail("no `jupyter` command (python3-jupyter-core); run scripts/deps.sh")
    r = run([JUPYTER, name, "--version"], timeout=60)
    if r.returncode != 0:
        pytest.fail(f"the README's `jupyter {name}` does not run here (Debian package "
                    f"{package}, installed by scripts/deps.sh):\n{(r.stdout + r.stderr)[-1500:]}",
                    pytrace=False)
    return [JUPYTER, name]


@pytest.mark.timeout(90)
def test_jupyter_nbconvert_execute_as_in_readme(tracker, frontend_env, tmp_path):
    # JUPYTER_PATH=$PWD/build/share/jupyter jupyter nbconvert --to notebook --execute \
    #     --ExecutePreprocessor.kernel_name=cellblock examples/demo.ipynb
    cmd = jupyter_subcommand("nbconvert", "jupyter-nbconvert")
    shutil.copy(os.path.join(EXAMPLES, "demo.ipynb"), tmp_path / "demo.ipynb")
    r = run(cmd + ["--to", "notebook", "--execute", "--ExecutePreprocessor.kernel_name=cellblock",
                   "demo.ipynb"], timeout=80, env=frontend_env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    executed = nbformat.read(str(tmp_path / "demo.nbconvert.ipynb"), as_version=4)
    check_demo(executed)  # includes the cellblock artifact metadata: it ran on cellblock


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(url, token, method, path, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Authorization": f"token {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read().decode()
        return json.loads(text) if text else None


@pytest.mark.timeout(90)
def test_jupyter_notebook_offers_and_starts_cellblock(tracker, frontend_env, tmp_path):
    # JUPYTER_PATH=$PWD/build/share/jupyter jupyter notebook     # pick "Python 3 (cellblock)"
    cmd = jupyter_subcommand("notebook", "jupyter-notebook")
    token, port = secrets.token_hex(16), _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd += ["--no-browser", "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
            f"--NotebookApp.token={token}", f"--ServerApp.token={token}",
            f"--notebook-dir={tmp_path}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = tmp_path / "server.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(cmd, env=frontend_env, cwd=str(tmp_path),
                                stdin=subprocess.DEVNULL, stdout=logf,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"`jupyter notebook` exited:\n{log.read_text()[-3000:]}"
            try:
                _api(url, token, "GET", "/api/status", timeout=2)
                break
            except (OSError, urllib.error.URLError):
                assert time.monotonic() < deadline, f"not up in 30 s:\n{log.read_text()[-3000:]}"
                time.sleep(0.2)
        specs = _api(url, token, "GET", "/api/kernelspecs")["kernelspecs"]
        assert "cellblock" in specs, sorted(specs)
        assert specs["cellblock"]["spec"]["display_name"] == "Python 3 (cellblock)"
        # what picking it does: the server starts the kernel; a client on the
        # connection file the server wrote runs a cell in it
        kernel = _api(url, token, "POST", "/api/kernels", {"name": "cellblock"}, timeout=60)
        assert kernel["name"] == "cellblock"
        conn = os.path.join(frontend_env["JUPYTER_RUNTIME_DIR"], f"kernel-{kernel['id']}.json")
        kc = BlockingKernelClient(connection_file=conn)
        kc.load_connection_file()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=30)
            out = []
            reply = kc.execute_interactive(
                "print(6*7)", timeout=30,
                output_hook=lambda m: out.append(m["content"].get("text", "")))
            assert reply["content"]["status"] == "ok", reply["content"]
            assert "".join(out) == "42\n", out
            kc.kernel_info()
            banner = kc.get_shell_msg(timeout=10)["content"]["banner"]
            assert "cellblock" in banner, banner
        finally:
            kc.stop_channels()
        tracker.sample()
        comms = {v[1] for v in tracker.seen.values()}
        assert "cellblock-kerne" in comms, comms
        _api(url, token, "DELETE", f"/api/kernels/{kernel['id']}", timeout=30)
    finally:
        stop_process(proc, timeout=15)


def readme_block(section, lang="python"):
    """The first ```lang block of the README's `## section`."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("\n## " + section + "\n")
    end = text.find("\n## ", start + 1)
    body = text[start:end if end >= 0 else len(text)]
    fence = "```" + lang + "\n"
    i = body.index(fence) + len(fence)
    return body[i:body.index("```", i)]


@pytest.mark.timeout(240)
def test_the_debugger_example_as_in_readme(tracker, frontend_env, tmp_path):
    # "## The debugger": from jupyter_client, the requests a frontend sends
    script = tmp_path / "debugger_example.py"
    script.write_text(readme_block("The debugger"))
    r = run([SYS_PYTHON, str(script)], timeout=220, env=frontend_env, cwd=str(tmp_path))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    # what its comments say it prints: the stopped frame's locals, the cell's end
    assert r.stdout.splitlines() == ["{'a': '2', 'b': '3'}", "ok"], r.stdout + r.stderr[-2000:]
