"""--env NAME / --env NAME=VALUE (issue 11): the only way an environment
variable reaches the sandbox.  Through jupyter_client with kernelspecs whose
`env` entries jupyter_client puts in the kernel's environment, through
`cellblock run`, `cellblock-kernel install` and cellblock.Sandbox.

The control is the stock python3 ipykernel with the same kernelspec `env`:
every entry reaches it, named or not; in cellblock only the named ones do.
"""

import json
import os
import queue
import subprocess
import sys
import uuid

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from .helpers import descendants, wait_gone

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")
KSPEC = os.path.join(BUILD, "share", "jupyter", "kernels", "cellblock", "kernel.json")
KERNEL_BIN = os.path.join(BUILD, "bin", "cellblock-kernel")
CELLBLOCK = os.path.join(BUILD, "bin", "cellblock")
TIMEOUT = 60

pytestmark = pytest.mark.skipif(not os.path.exists(KSPEC), reason="cellblock not built (make)")

SPEC_ENV = {
    "CB_API_TOKEN": "tok-" + uuid.uuid4().hex,   # named with --env: passes
    "CB_UNNAMED": "not-for-the-sandbox",         # not named: stays out
    "PYTHONHASHSEED": "0",                       # named: honoured by the interpreter
    "TZ": "Europe/Lisbon",
}
FLAGS = ["--env", "CB_API_TOKEN", "--env", "PYTHONHASHSEED", "--env", "TZ",
         "--env", "CB_LITERAL=a=b c", "--env", "CB_NOT_IN_ENV"]

PROBE = ("import os, sys, json\n"
         "print(json.dumps({'env': {k: os.environ.get(k) for k in "
         "['CB_API_TOKEN','CB_UNNAMED','PYTHONHASHSEED','TZ','CB_LITERAL','CB_NOT_IN_ENV',"
         "'JPY_PARENT_PID','HOME']}, 'hash': hash('cellblock'), "
         "'seed_flag': sys.flags.hash_randomization}))\n")


def _spec_kernel(tmp_path, name, flags, spec_env):
    ksm = KernelSpecManager()
    if name == "cellblock":
        ksm = KernelSpecManager(kernel_dirs=[os.path.dirname(os.path.dirname(KSPEC))])
    elif name not in ksm.find_kernel_specs():
        pytest.skip("control kernelspec %r is not installed" % name)
    d = ksm.get_kernel_spec(name).to_dict()
    d["argv"] = d["argv"] + (flags if name == "cellblock" else [])
    d["env"] = spec_env
    kd = tmp_path / ("k-" + uuid.uuid4().hex[:6]) / (name + "-env")
    kd.mkdir(parents=True)
    (kd / "kernel.json").write_text(json.dumps(d))
    km = KernelManager(kernel_name=name + "-env",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kd.parent)]))
    km.start_kernel(env={k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"})
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    return km, kc


def _run(kc, code):
    msg_id = kc.execute(code)
    out = []
    while True:
        m = kc.get_iopub_msg(timeout=TIMEOUT)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "stream":
            out.append(m["content"]["text"])
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return "".join(out)


def _stop(km, kc):
    pid = km.provisioner.process.pid
    kc.stop_channels()
    km.shutdown_kernel(now=False)
    km.cleanup_resources()
    assert not wait_gone({pid}, 10)


def _expected_hash():
    return int(subprocess.run([sys.executable, "-c", "print(hash('cellblock'))"],
                              env={"PYTHONHASHSEED": "0"}, capture_output=True, text=True,
                              check=True).stdout)


@pytest.mark.parametrize("name", ["cellblock", "python3"])
def test_kernelspec_env_named_with_env_flag(tmp_path, name):
    km, kc = _spec_kernel(tmp_path, name, FLAGS, SPEC_ENV)
    try:
        got = json.loads(_run(kc, PROBE))
        pid = km.provisioner.process.pid
        procs = {pid} | descendants(pid)
        cmdlines = b""
        for p in procs:
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    cmdlines += f.read()
            except OSError:
                pass
    finally:
        _stop(km, kc)
    env = got["env"]
    assert env["CB_API_TOKEN"] == SPEC_ENV["CB_API_TOKEN"]
    assert env["TZ"] == "Europe/Lisbon"
    assert got["hash"] == _expected_hash(), "PYTHONHASHSEED=0 took effect in the interpreter"
    if name == "python3":       # the control: the kernelspec env reaches everything
        assert env["CB_UNNAMED"] == "not-for-the-sandbox"
        return
    assert env["CB_UNNAMED"] is None, "a kernelspec env entry not named with --env leaked in"
    assert env["CB_LITERAL"] == "a=b c", "NAME=VALUE sets it (the value may hold '=' and spaces)"
    assert env["CB_NOT_IN_ENV"] is None, "a NAME the kernel's environment lacks stays unset"
    assert env["JPY_PARENT_PID"] is None, "nothing else of the kernel's environment"
    assert env["HOME"] == "/home/user"
    # the value taken from the environment was never on a command line
    assert SPEC_ENV["CB_API_TOKEN"].encode() not in cmdlines
    assert len(procs) >= 3, "kernel, launcher and sandbox processes were inspected"


@pytest.mark.parametrize("bad", ["LD_PRELOAD=/tmp/x.so", "LD_LIBRARY_PATH", "PYTHONPATH=/tmp",
                                 "PYTHONSTARTUP", "HOME=/", "PATH", "HTTPS_PROXY=http://x:1",
                                 "GLIBC_TUNABLES", "CELLBLOCK_NETWORK_ALLOW=x", "1BAD", "A-B"])
def test_refused_names_exit_2(tmp_path, bad):
    # the kernel, at start-up, before it binds anything
    p = subprocess.run([KERNEL_BIN, "-f", str(tmp_path / "none.json"), "--env", bad],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 2, p.stderr
    assert "--env" in p.stderr
    # cellblock run
    p = subprocess.run([CELLBLOCK, "run", "--env", bad, "-"], input="print(1)",
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert (p.returncode, p.stdout) == (2, ""), p.stderr
    # install writes nothing
    p = subprocess.run([KERNEL_BIN, "install", "--prefix", str(tmp_path / "pfx"), "--name",
                        "cb-bad", "--env", bad], capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 2, p.stderr
    assert not (tmp_path / "pfx").exists()


def test_refusal_says_why(tmp_path):
    p = subprocess.run([CELLBLOCK, "run", "--env", "LD_PRELOAD=/x.so", "-"], input="1",
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert "dynamic loader" in p.stderr, p.stderr


def test_cellblock_run_env(tmp_path):
    env = dict(os.environ, CB_FROM_SHELL="shell-value", CB_OTHER="other")
    p = subprocess.run([CELLBLOCK, "run", "--env", "CB_FROM_SHELL", "--env", "X=1", "-"],
                       input="import os\nprint(os.environ.get('CB_FROM_SHELL'), "
                             "os.environ.get('X'), os.environ.get('CB_OTHER'))",
                       env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert (p.returncode, p.stdout) == (0, "shell-value 1 None\n"), p.stderr


def test_install_bakes_names_not_values(tmp_path):
    env = dict(os.environ, CB_SECRET_AT_INSTALL="install-time-secret")
    p = subprocess.run([KERNEL_BIN, "install", "--prefix", str(tmp_path), "--name", "cb-env",
                        "--env", "CB_SECRET_AT_INSTALL", "--env", "MODE=test"],
                       env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    spec = (tmp_path / "share" / "jupyter" / "kernels" / "cb-env" / "kernel.json").read_text()
    argv = json.loads(spec)["argv"]
    assert argv[-4:] == ["--env", "CB_SECRET_AT_INSTALL", "--env", "MODE=test"], argv
    assert "install-time-secret" not in spec


def test_client_sandbox_envs(monkeypatch):
    sys.path.insert(0, os.path.join(REPO, "client"))
    try:
        from cellblock import Sandbox
    finally:
        sys.path.pop(0)
    token = "client-" + uuid.uuid4().hex
    with Sandbox(envs={"CB_CLIENT_TOKEN": token, "PYTHONHASHSEED": "0"}) as sb:
        ex = sb.run_code("import os\n(os.environ['CB_CLIENT_TOKEN'], hash('cellblock'))")
        assert ex.error is None, ex.error
        assert ex.text == repr((token, _expected_hash()))
        with open("/proc/%d/cmdline" % sb.kernel_pid, "rb") as f:
            assert token.encode() not in f.read()
