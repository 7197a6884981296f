"""The sandbox when cellblock runs as an ordinary user (no root, no cgroups).

The suite creates a throwaway user, runs `cellblock run` (the same launcher,
runner and sandbox as the kernel) as that user from a staged `make install`,
and checks containment from inside and from the host.  Each probe is also run unsandboxed as the same
user (`python3 -c`), which must escape, so every test can fail.
"""
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import textwrap
import time

import pytest

from .conftest import RUNUSER, skip_or_fail

# The user runs a staged `make install` (conftest.staged_install), not the
# build tree: a clone in a directory only root can enter (/root is 0700 on
# Debian) is out of the user's reach, which would test the file mode of the
# clone, not the sandbox.


@pytest.fixture(scope="module")
def user(throwaway_user):
    return throwaway_user


@pytest.fixture(scope="module")
def cellblock(staged_install):
    return staged_install.cellblock


def _run_sandboxed(user, cellblock, code, *args, timeout=60):
    return subprocess.run(
        [RUNUSER, "-u", user.pw_name, "--", cellblock, "run", "--json", *args, "-"],
        input=code.encode(), capture_output=True, timeout=timeout, cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"})


def _run_plain(user, code, timeout=60):
    return subprocess.run(
        [RUNUSER, "-u", user.pw_name, "--", "/usr/bin/python3", "-c", code],
        capture_output=True, timeout=timeout, cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"})


def _stdout(proc):
    ex = json.loads(proc.stdout.decode())
    return "".join(ex["logs"]["stdout"]), ex


@pytest.fixture(scope="module")
def works(user, cellblock):
    p = _run_sandboxed(user, cellblock, "print('ok')")
    if p.returncode != 0:
        msg = p.stderr.decode()[-2000:]
        if "user namespace" in msg.lower():
            skip_or_fail("unprivileged user namespaces unavailable: " + msg)
        pytest.fail("cellblock run as an ordinary user failed: " + msg)
    return True


def test_runs_confined_as_ordinary_user(user, cellblock, works):
    code = textwrap.dedent("""
        import os
        st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
        print('caps', st['CapEff'].strip(), 'nnp', st['NoNewPrivs'].strip(), 'seccomp', st['Seccomp'].strip())
        print('pid1', open('/proc/1/cmdline').read().split('\\0')[0].rsplit('/', 1)[-1])
        print('ifaces', sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else 'nosys')
    """)
    out, ex = _stdout(_run_sandboxed(user, cellblock, code))
    assert "caps 0000000000000000 nnp 1 seccomp 2" in out, out
    assert "nosys" in out, out                      # no /sys in the sandbox
    assert "pid1 python" not in out and "pid1 systemd" not in out, out  # own pid namespace
    # control: the same user without the sandbox sees the host's init and /sys
    plain = _run_plain(user, code).stdout.decode()
    assert "nnp 0" in plain and "nosys" not in plain, plain


def test_pausable_says_it_needs_root(user, cellblock, works):
    """--pausable maps the sandbox's uid 0 to a second host id, which only a
    root launcher may: an ordinary user gets the cause and the fix, and no
    sandbox half-made (docs/SNAPSHOTS.md)."""
    p = _run_sandboxed(user, cellblock, "print('ran')", "--pausable")
    err = p.stderr.decode()
    assert p.returncode != 0 and b"ran" not in p.stdout, (p.returncode, p.stdout, err)
    assert "--pausable needs a root launcher" in err and "drop --pausable" in err, err


def test_host_files_invisible_as_ordinary_user(user, cellblock, works, tmp_path_factory):
    secret = secrets.token_hex(16)
    path = "/tmp/cb-unpriv-secret-" + secrets.token_hex(4)
    with open(path, "w") as f:
        f.write(secret)
    os.chmod(path, 0o644)                           # readable by the user on the host
    try:
        code = "import os\ntry:\n print(open(%r).read())\nexcept OSError as e:\n print('denied', e.errno)\n" % path
        out, _ = _stdout(_run_sandboxed(user, cellblock, code))
        assert secret not in out and "denied" in out, out
        assert secret in _run_plain(user, code).stdout.decode()   # control escapes
    finally:
        os.unlink(path)


def test_writes_stay_inside_as_ordinary_user(user, cellblock, works):
    target = "/tmp/cb-unpriv-write-" + secrets.token_hex(4)
    code = "open(%r, 'w').write('x'); print('wrote')" % target
    try:
        _run_sandboxed(user, cellblock, code)
        assert not os.path.exists(target), "a sandboxed write reached the host's /tmp"
        _run_plain(user, code)
        assert os.path.exists(target)               # control escapes
    finally:
        if os.path.exists(target):
            os.unlink(target)


def test_memory_limit_without_cgroups(user, cellblock, works):
    # Bounded: 600 MiB would be harmless even if the limit failed.
    code = "x = bytearray(600 * 1024 * 1024); print('allocated')"
    p = _run_sandboxed(user, cellblock, code, "--memory", "128M")
    out, ex = _stdout(p)
    assert "allocated" not in out
    assert p.returncode in (1, 125), (p.returncode, ex)
    assert "allocated" in _run_plain(user, code).stdout.decode()   # control allocates


def test_nothing_left_after_run_as_ordinary_user(user, cellblock, works):
    code = "import subprocess; subprocess.Popen(['sleep', '300'], start_new_session=True); print('spawned')"
    out, _ = _stdout(_run_sandboxed(user, cellblock, code))
    assert "spawned" in out
    left = subprocess.run(["pgrep", "-u", user.pw_name, "-f", "sleep 300"], capture_output=True)
    assert left.stdout.strip() == b"", "a background process survived the sandbox"


# ---- the kernel itself as an ordinary user, through jupyter_client --------------------


@contextlib.contextmanager
def _kernel_as(user, staged_install, *flags):
    """cellblock-kernel started by jupyter_client but running as `user`, with
    `flags` on its command line.

    jupyter_client writes the connection file 0600 for root, so the kernelspec
    copies it into a directory owned by the user and then execs the kernel
    through setpriv (no fork: the kernel keeps the pid jupyter_client knows)."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    if not os.path.exists(setpriv):
        skip_or_fail("setpriv (util-linux) missing")
    import pathlib
    import tempfile
    home = pathlib.Path(tempfile.mkdtemp(prefix="cb-user-kernel-"))  # pytest's tmp is root-only
    os.chmod(home, 0o711)
    conn_dir = home / "conn"
    conn_dir.mkdir()
    os.chown(conn_dir, user.pw_uid, user.pw_gid)
    os.chmod(conn_dir, 0o700)
    kernel = staged_install.bin
    script = ('cp "$0" {d}/conn.json && chown {u} {d}/conn.json && '
              'exec {sp} --reuid={uid} --regid={gid} --clear-groups -- {k} -f {d}/conn.json "$@"').format(
                  d=conn_dir, u=user.pw_name, sp=setpriv, uid=user.pw_uid, gid=user.pw_gid, k=kernel)
    kdir = home / "kernels" / "cellblock-user"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": ["/bin/sh", "-c", script, "{connection_file}"] + list(flags),
        "display_name": "cellblock as an ordinary user", "language": "python",
        "interrupt_mode": "message"}))
    km = KernelManager(kernel_name="cellblock-user",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(home / "kernels")]))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield km, kc
    finally:
        kc.stop_channels()
        if km.has_kernel:  # a test may have shut it down already
            km.shutdown_kernel(now=False)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def user_kernel(user, works, staged_install):
    with _kernel_as(user, staged_install) as k:
        yield k


def _execute(kc, code, timeout=60):
    msg_id = kc.execute(code)
    out = []
    reply = kc.get_shell_msg(timeout=timeout)
    while True:
        m = kc.get_iopub_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "stream":
            out.append(m["content"]["text"])
        elif m["msg_type"] == "execute_result":
            out.append(m["content"]["data"]["text/plain"])
        elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return reply["content"], "".join(out)


def test_kernel_as_ordinary_user(user, user_kernel):
    km, kc = user_kernel
    pid = km.provisioner.process.pid
    assert os.stat("/proc/%d" % pid).st_uid == user.pw_uid   # the kernel really is the user's
    kc.kernel_info()
    banner = kc.get_shell_msg(timeout=30)["content"]["banner"]
    assert "user" in banner and "seccomp" in banner, banner  # user namespace; honest about limits
    secret = secrets.token_hex(16)
    path = "/tmp/cb-unpriv-kernel-" + secrets.token_hex(4)
    with open(path, "w") as f:
        f.write(secret)
    os.chmod(path, 0o644)
    try:
        reply, out = _execute(kc, textwrap.dedent("""
            import os
            st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
            print('caps', st['CapEff'].strip(), 'seccomp', st['Seccomp'].strip())
            try:
                print(open(%r).read())
            except OSError as e:
                print('denied', e.errno)
        """ % path))
        assert reply["status"] == "ok", reply
        assert "caps 0000000000000000 seccomp 2" in out, out
        assert secret not in out and "denied" in out, out
    finally:
        os.unlink(path)
    # interrupt and state work as for a root kernel
    _execute(kc, "kept = 41")
    msg_id = kc.execute("while True: pass")
    time.sleep(1.0)
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    _, out = _execute(kc, "kept + 1")
    assert out == "42"


def test_kernel_as_ordinary_user_leaves_nothing(user, user_kernel):
    km, kc = user_kernel
    _execute(kc, "import subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True)")
    km.shutdown_kernel(now=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-u", user.pw_name], capture_output=True).stdout.split()
        if not left:
            break
        time.sleep(0.2)
    assert not left, "processes of the kernel's user survived shutdown: %r" % left


def test_memory_used_up_as_ordinary_user(user, works, staged_install):
    """Without a delegated cgroup an ordinary user's kernel enforces --memory
    as the sandbox's address space (rlimits only, DEGRADED).  A cell that uses
    it up ends with a MemoryError and the session goes on: its variables and
    the next cell's result are there.  (Before the runner kept a reserve
    (runner/cb_memory.py) it died of the MemoryError: "exited with code 1", a
    fresh sandbox, the next cell's result lost; issue 19.)"""
    fills = ("kept = 41\nx = []\nwhile True:\n    x.append(str(len(x)) * 20)\n",
             "chunks = []\nfor i in range(32):\n    chunks.append(bytearray(16 << 20))\n")
    with _kernel_as(user, staged_install, "--memory", "128M") as (km, kc):
        for code in fills:      # the first right away: the IPython shell is still loading
            reply, out = _execute(kc, code)
            assert reply["status"] == "error" and reply["ename"] == "MemoryError", reply
            reply, out = _execute(kc, "kept + 1")
            assert reply["status"] == "ok" and out == "42", (reply, out)
            reply, _ = _execute(kc, "x = chunks = None")
            assert reply["status"] == "ok", reply
        kc.kernel_info()
        banner = kc.get_shell_msg(timeout=30)["content"]["banner"]
        assert "DEGRADED" in banner and "address space 128 MiB" in banner, banner
