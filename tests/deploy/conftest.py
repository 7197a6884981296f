"""Fixtures for tests/deploy: real servers on loopback (Jupyter Server), with
the cellblock kernelspec built by `make` ($CELLBLOCK_BUILD, default
<repo>/build).

A missing prerequisite (node/npm, python3-jupyter-server) skips the test with
the reason; CB_MUST_WORK=1 (CI) turns that skip into a failure.  Every server
a test starts is stopped by pid afterwards, and its kernels with it.
"""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
import json

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")
KSPEC_ROOT = os.path.join(BUILD, "share", "jupyter")
SYS_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
MUST_WORK = os.environ.get("CB_MUST_WORK") == "1"
SERVER_START_S = 60      # a Jupyter Server answering /api
SERVER_STOP_S = 20       # SIGTERM to exit (it shuts its kernels down first)


def skip_or_fail(reason):
    if MUST_WORK:
        pytest.fail("missing (CB_MUST_WORK=1 forbids skipping): " + reason, pytrace=False)
    pytest.skip(reason)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(url, token, path, method="GET", body=None, timeout=30):
    req = urllib.request.Request(url + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "token " + token,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data = r.read()
    return json.loads(data) if data else None


def descendants(pid):
    """Every live process below pid (from /proc; children lists)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


class JupyterServer:
    """`jupyter server` on 127.0.0.1 with a random token, cellblock on its path."""

    def __init__(self, extra_env=None):
        self.tmp = tempfile.mkdtemp(prefix="cb-deploy-server-")
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.url = "http://127.0.0.1:%d" % self.port
        env = dict(os.environ, JUPYTER_PATH=KSPEC_ROOT,
                   JUPYTER_RUNTIME_DIR=os.path.join(self.tmp, "runtime"),
                   JUPYTER_CONFIG_DIR=os.path.join(self.tmp, "config"),
                   JUPYTER_DATA_DIR=os.path.join(self.tmp, "data"))
        env.update(extra_env or {})
        argv = [SYS_PYTHON, "-m", "jupyter_server", "--no-browser",
                "--ServerApp.ip=127.0.0.1", "--ServerApp.port=%d" % self.port,
                "--ServerApp.port_retries=0", "--ServerApp.token=" + self.token,
                "--ServerApp.root_dir=" + self.tmp,
                "--KernelSpecManager.ensure_native_kernel=False"]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        self.log = open(os.path.join(self.tmp, "server.log"), "wb")
        self.proc = subprocess.Popen(argv, cwd=self.tmp, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if self.proc.poll() is not None:
                raise AssertionError("jupyter server exited: " + self.log_text())
            try:
                api(self.url, self.token, "/api/status", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("jupyter server did not answer: " + self.log_text())
                time.sleep(0.2)

    def log_text(self):
        with open(os.path.join(self.tmp, "server.log"), "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def stop(self):
        """SIGTERM, then returns the pids that were below the server and survived."""
        below = descendants(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=SERVER_STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        left = [p for p in below if os.path.exists("/proc/%d" % p)]
        for p in left:   # ours: leave nothing behind even when the test fails
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)
        return left


@pytest.fixture
def jupyter_server():
    if not os.path.exists(os.path.join(KSPEC_ROOT, "kernels", "cellblock", "kernel.json")):
        skip_or_fail("cellblock kernelspec not built; run make")
    if subprocess.run([SYS_PYTHON, "-c", "import jupyter_server"], capture_output=True).returncode:
        skip_or_fail("jupyter_server not installed (apt-get install python3-jupyter-server)")
    srv = JupyterServer()
    try:
        yield srv
    finally:
        left = srv.stop()
        assert not left, "processes of the server survived its stop: %r" % left


def node_with_packages(pkg_dir, module="@jupyterlab/services"):
    """node, once `npm ci` has installed pkg_dir's locked packages (when
    node_modules/<module> is missing); skips (fails with CB_MUST_WORK=1)
    without node/npm or when npm ci fails."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        skip_or_fail("node/npm not found (apt-get install nodejs npm)")
    if not os.path.exists(os.path.join(pkg_dir, "node_modules", *module.split("/"))):
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=pkg_dir, capture_output=True, text=True, timeout=600)
        if r.returncode:
            skip_or_fail("npm ci in %s failed: %s" % (pkg_dir, r.stderr[-2000:]))
    return node
