"""Sandbox lifecycle: limits on the kernel's argv, restart, close/kill,
context manager, and examples/agent_loop.py end to end."""

import time
import os
import subprocess
import sys

import pytest

from cellblock import Sandbox, SandboxError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().decode().split("\0")


def test_limits_become_kernel_flags(sandbox_factory):
    sb = sandbox_factory(memory=300, timeout=20, network=False, pids=64,
                         extra_args=["--max-output", "2M"])
    argv = _cmdline(sb.kernel_pid)
    joined = " ".join(argv)
    for flag in ["--memory 300", "--timeout 20", "--network none", "--pids 64", "--max-output 2M"]:
        assert flag in joined, joined
    banner = sb.kernel_info["banner"]
    assert "memory 300 MiB" in banner and "pids 64" in banner, banner
    with pytest.raises(ValueError):
        Sandbox(network="maybe")


def test_restart_clears_state(sandbox_factory):
    sb = sandbox_factory()
    sb.run_code("secret = 1")
    sb.run_code("secret")
    sb.files.write("f.txt", "x")
    old_pid = sb.run_code("import os; os.getpid()").text
    sb.restart()
    ex = sb.run_code("secret")
    assert ex.error is not None and ex.error.name == "NameError"
    assert ex.execution_count == 1
    assert not sb.files.exists("f.txt")
    assert sb.run_code("1 + 1").text == "2"
    assert sb.is_running()
    assert old_pid  # (pids are namespaced: the same number may come back)


def test_context_manager_leaves_nothing(procs):
    with Sandbox(kernelspec_path=os.path.join(os.environ.get("CELLBLOCK_BUILD") or
                                              os.path.join(REPO, "build"),
                                              "share", "jupyter", "kernels", "cellblock")) as sb:
        sb.run_code("import subprocess; p = subprocess.Popen(['sleep', '300'])")
        tree = procs.descendants(sb.kernel_pid)
        # kernel, launcher, sandbox init, runner, sleep
        assert len(tree) >= 4, tree
        conn = sb._km.connection_file
    assert procs.still_running(tree) == []
    assert not os.path.exists(conn)
    assert not sb.is_running()
    with pytest.raises(SandboxError):
        sb.run_code("1")
    sb.close()          # idempotent
    sb.kill()


def test_kill(sandbox_factory, procs):
    sb = sandbox_factory()
    tree = procs.descendants(sb.kernel_pid)
    sb.kill()
    # the kernel dies at once; its launcher gets SIGTERM from the kernel's
    # death and tears the sandbox (and its cgroup) down within moments
    deadline = time.monotonic() + 10
    while procs.still_running(tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procs.still_running(tree) == []


def test_bad_kernelspec_path(tmp_path):
    with pytest.raises(SandboxError):
        Sandbox(kernelspec_path=str(tmp_path))


def test_agent_loop_example(tmp_path):
    out = tmp_path / "artifacts"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)           # the example finds client/ by itself
    p = subprocess.run([sys.executable, os.path.join(REPO, "examples", "agent_loop.py"),
                        "--out", str(out)], capture_output=True, text=True, timeout=50,
                       cwd=str(tmp_path), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    text = p.stdout
    assert "error:   KeyError: 'Region'" in text
    assert "sending a corrected cell" in text
    assert "best region: east" in text
    assert "chart.png" in text and "summary.csv" in text
    assert "SHA256 MISMATCH" not in text
    assert text.count("[sha256 ok]") == 2
    assert "1 error(s), 1 corrected, 2 artifact(s)" in text
    assert (out / "chart.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert (out / "summary.csv").read_text().splitlines()[0] == "region,revenue"
    assert sorted(os.listdir(out)) == ["chart.png", "summary.csv"]
