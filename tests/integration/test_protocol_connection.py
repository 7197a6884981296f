"""Connection files and transports (PROTOCOL.md 2.2, 1.3; section 6 items 1,
13): errors in the connection file, unknown keys, ipc transport, empty key.

The error cases run the cellblock binary directly (cellblock_only); ipc and
the empty key go through KernelManager and also run on ipykernel.
"""

import json
import os
import signal
import subprocess
import time

import pytest
from jupyter_client import BlockingKernelClient
from jupyter_client.connect import write_connection_file

from .conftest import KERNEL_BIN, KSPEC_FILE
from .helpers import RawClient, descendants, execute, kernel_alive_check, wait_gone


def _argv(conn_file):
    with open(KSPEC_FILE) as f:
        spec = json.load(f)
    return [a.replace("{connection_file}", str(conn_file)) for a in spec["argv"]]


def _run_to_exit(argv, timeout=15):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # our own child's group
        p.communicate()
        raise AssertionError(f"{argv} did not exit within {timeout} s")
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


@pytest.mark.cellblock_only
def test_missing_connection_file(tmp_path):
    path = tmp_path / "nope.json"
    rc, _, err = _run_to_exit(_argv(path))
    assert rc != 0
    assert "nope.json" in err, err


@pytest.mark.cellblock_only
@pytest.mark.parametrize("text", ['{"transport": "tcp", ', "", "[1, 2]", "not json at all"])
def test_malformed_connection_file(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    rc, _, err = _run_to_exit(_argv(path))
    assert rc != 0
    assert err.strip(), "no message on stderr"
    assert "bad.json" in err or "connection" in err.lower() or "json" in err.lower(), err


def _conn_file(tmp_path, **extra):
    path = str(tmp_path / "kernel-test.json")
    fname, info = write_connection_file(path, ip="127.0.0.1",
                                        key=b"k3y-" + os.urandom(8).hex().encode())
    with open(fname) as f:
        data = json.load(f)
    data.update(extra)
    with open(fname, "w") as f:
        json.dump(data, f)
    return fname, data


@pytest.mark.cellblock_only
@pytest.mark.parametrize("scheme", ["hmac-md5", "hmac-sha1", "rsa", ""])
def test_unsupported_signature_scheme(tmp_path, scheme):
    fname, _ = _conn_file(tmp_path, signature_scheme=scheme)
    rc, _, err = _run_to_exit(_argv(fname))
    assert rc == 2, (rc, err)
    assert "signature_scheme" in err or (scheme and scheme in err), err


@pytest.mark.cellblock_only
@pytest.mark.parametrize("field,value", [("shell_port", "not-a-port"), ("shell_port", 70000),
                                         ("transport", "udp"), ("key", 12)])
def test_invalid_connection_fields(tmp_path, field, value):
    fname, _ = _conn_file(tmp_path, **{field: value})
    rc, _, err = _run_to_exit(_argv(fname))
    assert rc != 0 and err.strip(), (rc, err)


@pytest.mark.cellblock_only
def test_extra_keys_ignored(tmp_path):
    """Unknown keys (kernel_name is written by jupyter_client itself) are
    ignored; the kernel serves normally."""
    fname, info = _conn_file(tmp_path, kernel_name="cellblock", cb_future={"x": [1, 2]},
                             another_key=None)
    p = subprocess.Popen(_argv(fname), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    kc = BlockingKernelClient(connection_file=fname)
    kc.load_connection_file()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=30)
        kernel_alive_check(kc)
        children = descendants(p.pid)
        kc.shutdown()
        assert p.wait(timeout=10) == 0, "exit status after shutdown_request"
        assert not wait_gone(children, 5)
    finally:
        kc.stop_channels()
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        p.stderr.close()


def test_ipc_transport(kernel_factory, tmp_path):
    k = kernel_factory(transport="ipc", ip=str(tmp_path / "cb-ipc"))
    info = k.connection_info()
    assert info["transport"] == "ipc"
    assert os.path.exists(f"{info['ip']}-{info['shell_port']}")
    r = execute(k.kc, "print('over ipc')")
    assert r.status == "ok" and r.stream() == "over ipc\n"
    with RawClient(info) as raw:
        raw.wait_ready()
        _, ev = raw.request("control", "kernel_info_request")
        assert any(e.msg_type == "kernel_info_reply" for e in ev)


@pytest.mark.cellblock_only
def test_kernel_exits_when_sigterm(tmp_path):
    """SIGTERM (jupyter_client's escalation after shutdown_wait_time) ends
    the kernel and its sandbox promptly."""
    fname, _ = _conn_file(tmp_path)
    p = subprocess.Popen(_argv(fname), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    kc = BlockingKernelClient(connection_file=fname)
    kc.load_connection_file()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=30)
        kernel_alive_check(kc)
        children = descendants(p.pid)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=5)
        assert not wait_gone(children, 5), "sandbox survived SIGTERM of the kernel"
    finally:
        kc.stop_channels()
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _frozen(pid):
    """Whether pid's v1 freezer group is frozen (or freezing)."""
    try:
        for line in open("/proc/%d/cgroup" % pid):
            _, ctrl, path = line.rstrip("\n").split(":", 2)
            if "freezer" in ctrl.split(","):
                with open("/sys/fs/cgroup/freezer%s/freezer.state" % path) as f:
                    return f.read().strip() in ("FROZEN", "FREEZING")
    except (OSError, ValueError):
        pass
    return False


@pytest.mark.cellblock_only
def test_sweep_removes_what_a_sigkill_of_every_process_left(tmp_path):
    """SIGKILL of the kernel and of every process it started at once (the
    test helpers' last resort after a shutdown that hangs, `kill -9` of them
    all, the host's OOM killer): none can remove its cgroup.  The next
    launcher below the same cgroup would sweep them; when none comes,
    `cellblock-kernel sweep` does (tests/conftest.py runs it at the end)."""
    from .test_tiers import cgroup_dirs
    fname, _ = _conn_file(tmp_path)
    # --warm off: only this kernel's own processes are in its session
    p = subprocess.Popen(_argv(fname) + ["--warm", "off"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    kc = BlockingKernelClient(connection_file=fname)
    kc.load_connection_file()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=30)
        kernel_alive_check(kc)
        launchers = descendants(p.pid)
        groups = cgroup_dirs(launchers, p.pid)
        if not groups:
            pytest.skip("no cgroups for sandboxes here (limits by rlimits)")
        for pid in [p.pid] + sorted(launchers):
            os.kill(pid, signal.SIGKILL)
        p.wait(timeout=10)
        left = wait_gone(launchers, 10)
        # on cgroup v1 a launcher killed between its freeze and its thaw
        # leaves the sandbox frozen, and frozen tasks cannot act on SIGKILL:
        # those are the sweep's to end (it thaws first); anything else must
        # be gone by now
        assert not [q for q in left if not _frozen(q)], \
            "not frozen, yet alive after SIGKILL: %s" % sorted(left)
        assert cgroup_dirs(launchers, p.pid), "nothing left to sweep: the test shows nothing"
        r = subprocess.run([KERNEL_BIN, "sweep"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert cgroup_dirs(launchers, p.pid) == [], r.stdout + r.stderr
        assert not wait_gone(left, 10), "the sweep left frozen processes alive"
        assert "removed" in r.stdout and not r.stdout.startswith("removed 0 "), r.stdout
    finally:
        kc.stop_channels()
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.mark.cellblock_only
@pytest.mark.parametrize("flags,what", [(["--pids", "2"], "--pids"),
                                        (["--memory", "8"], "--memory"),
                                        (["--cpus", "0"], "--cpus"),
                                        (["--ro-bind", "/etc:/proc/x"], "--ro-bind")])
def test_sandbox_flags_checked_before_anything_starts(tmp_path, flags, what):
    """The launcher's bounds are checked by the kernel at start-up (one flag
    table): a bad value is a message naming the flag and exit 2, never a
    kernel that relaunches a refused sandbox for ever."""
    fname = tmp_path / "kernel.json"
    fname.write_text(json.dumps({"transport": "tcp", "ip": "127.0.0.1", "shell_port": 0,
                                 "iopub_port": 0, "stdin_port": 0, "control_port": 0,
                                 "hb_port": 0, "key": "k", "signature_scheme": "hmac-sha256"}))
    rc, out, err = _run_to_exit(_argv(fname) + flags)
    assert rc == 2, (rc, err)
    assert what in err, err


@pytest.mark.cellblock_only
def test_traitlets_options_are_ignored_with_a_warning(kernel_factory, tmp_path):
    """nbclient adds --HistoryManager.hist_file=:memory: to any kernel named
    python3; a site that installs cellblock under that name must still run."""
    from .test_artifacts import spec_kernel
    k = spec_kernel(kernel_factory, tmp_path, "--HistoryManager.hist_file=:memory:",
                    "--InteractiveShell.colors=NoColor")
    r = k.execute("6 * 7")
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "42"


@pytest.mark.cellblock_only
@pytest.mark.timeout(90)
def test_a_sandbox_that_cannot_start_is_not_relaunched_for_ever(kernel_factory, tmp_path):
    """A launcher that fails at set-up (here: a read-only bind of a path that
    does not exist) is retried a few times with back-off, then left alone:
    each cell gets the cause at once."""
    from .helpers import descendants
    from .test_artifacts import spec_kernel
    k = spec_kernel(kernel_factory, tmp_path, "--ro-bind", "/nonexistent/cb-dir:/mnt/x")
    r = k.execute("1", timeout=30)
    assert r.status == "error" and r.content["ename"] == "SandboxError", r.content
    assert "could not be started" in r.content["evalue"] and "/nonexistent" in r.content["evalue"]
    time.sleep(4)  # the back-off retries (0.5 + 1 + 2 s) are over by now
    launches = set()
    t_end = time.monotonic() + 5
    while time.monotonic() < t_end:
        launches |= descendants(k.pid)
        time.sleep(0.05)
    assert not launches, "the kernel keeps relaunching a sandbox that cannot start"
    r = k.execute("1", timeout=30)
    assert r.status == "error" and "could not be started" in r.content["evalue"]
