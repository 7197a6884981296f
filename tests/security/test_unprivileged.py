"""The sandbox when cellblock runs as an ordinary user (no root, no cgroups).

The suite creates a throwaway user, runs `cellblock run` (the same launcher,
runner and sandbox as the kernel) as that user, and checks containment from
inside and from the host.  Each probe is also run unsandboxed as the same
user (`python3 -c`), which must escape, so every test can fail.
"""
import json
import os
import pwd
import secrets
import shutil
import subprocess
import textwrap

import pytest

BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build")
CELLBLOCK = os.path.join(BUILD, "bin", "cellblock")
MUST_WORK = os.environ.get("CB_MUST_WORK") == "1"
RUNUSER = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin") or "runuser"


def _skip_or_fail(why):
    if MUST_WORK:
        pytest.fail("cannot run (CB_MUST_WORK=1): " + why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def user():
    """A temporary unprivileged user; removed afterwards."""
    if os.geteuid() != 0:
        _skip_or_fail("creating a test user needs root")
    if not os.path.exists(RUNUSER) or not (shutil.which("useradd") or os.path.exists("/usr/sbin/useradd")):
        _skip_or_fail("useradd/runuser missing")
    name = "cbt" + secrets.token_hex(4)
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
    try:
        # the build tree must be reachable for the user (it is, when world-readable)
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["userdel", name], check=False)


def _run_sandboxed(user, code, *args, timeout=60):
    return subprocess.run(
        [RUNUSER, "-u", user.pw_name, "--", CELLBLOCK, "run", "--json", *args, "-"],
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
def works(user):
    p = _run_sandboxed(user, "print('ok')")
    if p.returncode != 0:
        msg = p.stderr.decode()[-2000:]
        if "user namespace" in msg.lower():
            _skip_or_fail("unprivileged user namespaces unavailable: " + msg)
        pytest.fail("cellblock run as an ordinary user failed: " + msg)
    return True


def test_runs_confined_as_ordinary_user(user, works):
    code = textwrap.dedent("""
        import os
        st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
        print('caps', st['CapEff'].strip(), 'nnp', st['NoNewPrivs'].strip(), 'seccomp', st['Seccomp'].strip())
        print('pid1', open('/proc/1/cmdline').read().split('\\0')[0].rsplit('/', 1)[-1])
        print('ifaces', sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else 'nosys')
    """)
    out, ex = _stdout(_run_sandboxed(user, code))
    assert "caps 0000000000000000 nnp 1 seccomp 2" in out, out
    assert "nosys" in out, out                      # no /sys in the sandbox
    assert "pid1 python" not in out and "pid1 systemd" not in out, out  # own pid namespace
    # control: the same user without the sandbox sees the host's init and /sys
    plain = _run_plain(user, code).stdout.decode()
    assert "nnp 0" in plain and "nosys" not in plain, plain


def test_host_files_invisible_as_ordinary_user(user, works, tmp_path_factory):
    secret = secrets.token_hex(16)
    path = "/tmp/cb-unpriv-secret-" + secrets.token_hex(4)
    with open(path, "w") as f:
        f.write(secret)
    os.chmod(path, 0o644)                           # readable by the user on the host
    try:
        code = "import os\ntry:\n print(open(%r).read())\nexcept OSError as e:\n print('denied', e.errno)\n" % path
        out, _ = _stdout(_run_sandboxed(user, code))
        assert secret not in out and "denied" in out, out
        assert secret in _run_plain(user, code).stdout.decode()   # control escapes
    finally:
        os.unlink(path)


def test_writes_stay_inside_as_ordinary_user(user, works):
    target = "/tmp/cb-unpriv-write-" + secrets.token_hex(4)
    code = "open(%r, 'w').write('x'); print('wrote')" % target
    try:
        _run_sandboxed(user, code)
        assert not os.path.exists(target), "a sandboxed write reached the host's /tmp"
        _run_plain(user, code)
        assert os.path.exists(target)               # control escapes
    finally:
        if os.path.exists(target):
            os.unlink(target)


def test_memory_limit_without_cgroups(user, works):
    # Bounded: 600 MiB would be harmless even if the limit failed.
    code = "x = bytearray(600 * 1024 * 1024); print('allocated')"
    p = _run_sandboxed(user, code, "--memory", "128M")
    out, ex = _stdout(p)
    assert "allocated" not in out
    assert p.returncode in (1, 125), (p.returncode, ex)
    assert "allocated" in _run_plain(user, code).stdout.decode()   # control allocates


def test_nothing_left_after_run_as_ordinary_user(user, works):
    code = "import subprocess; subprocess.Popen(['sleep', '300'], start_new_session=True); print('spawned')"
    out, _ = _stdout(_run_sandboxed(user, code))
    assert "spawned" in out
    left = subprocess.run(["pgrep", "-u", user.pw_name, "-f", "sleep 300"], capture_output=True)
    assert left.stdout.strip() == b"", "a background process survived the sandbox"
