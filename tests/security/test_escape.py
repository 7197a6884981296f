"""Escape attempts, one class per section of issue 3.  Each test runs against
cellblock (must be contained) and the stock ipykernel (must escape)."""

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from .conftest import READY_S, SMALL, tier, verdict

# ---- reading host files ---------------------------------------------------------


@pytest.mark.parametrize("where", ["tmp", "home"])
def test_read_planted_secret(kernel, where):
    token = secrets.token_hex(16)
    base = tempfile.gettempdir() if where == "tmp" else os.path.expanduser("~")
    path = os.path.join(base, ".cb-secret-" + token[:8])
    with open(path, "w") as f:
        f.write(token)
    try:
        out, _ = kernel.run("""
import os
for p in [%r, %r]:
    try: print(open(p).read())
    except Exception as e: print(type(e).__name__)
for root in ['/tmp', os.path.expanduser('~'), '/root', '/home']:
    try:
        for n in os.listdir(root): print(n)
    except Exception as e: print(type(e).__name__)
""" % (path, path.replace(base, "/" + where)))
        verdict(kernel, token in out or os.path.basename(path) in out, "read " + path)
    finally:
        os.unlink(path)


def test_read_shadow_and_host_files(kernel):
    out, _ = kernel.run("""
for p in ['/etc/shadow', '/etc/ssh/sshd_config', '/proc/1/environ', '/sys/kernel/notes']:
    try: open(p, 'rb').read(64); print('READ', p)
    except Exception as e: print('DENIED', p, type(e).__name__)
""")
    verdict(kernel, "READ /etc/shadow" in out or "READ /etc/ssh" in out, "host /etc readable")


def test_connection_file_and_key(kernel):
    key = kernel.connection_key()
    cf = kernel.km.connection_file
    out, _ = kernel.run("""
import os, glob
found = []
try: found.append(open(%r).read())
except Exception as e: found.append(type(e).__name__)
found.append(repr(dict(os.environ)))
for pid in os.listdir('/proc'):
    if not pid.isdigit(): continue
    for f in ('cmdline', 'environ'):
        try: found.append(open('/proc/%%s/%%s' %% (pid, f), 'rb').read().decode(errors='replace'))
        except Exception: pass
    try:
        for fd in os.listdir('/proc/%%s/fd' %% pid):
            t = os.readlink('/proc/%%s/fd/%%s' %% (pid, fd))
            if t.endswith('.json'): found.append(open(t).read())
    except Exception: pass
for p in glob.glob(%r + '/*') + glob.glob('/run/user/*/jupyter/*') + glob.glob('/tmp/*.json'):
    try: found.append(open(p).read())
    except Exception: pass
print('\\n'.join(found))
""" % (cf, os.path.dirname(cf)))
    verdict(kernel, key in out, "HMAC key found from inside")


# ---- writing outside --------------------------------------------------------------


def test_write_outside(kernel):
    token = secrets.token_hex(8)
    targets = [os.path.join(tempfile.gettempdir(), "cb-written-" + token),
               os.path.join(os.path.expanduser("~"), ".cb-written-" + token)]
    try:
        kernel.run("""
for p in %r:
    try: open(p, 'w').write('x')
    except Exception as e: print(type(e).__name__)
""" % targets)
        verdict(kernel, any(os.path.exists(p) for p in targets), "wrote a host file")
    finally:
        for p in targets:
            if os.path.exists(p):
                os.unlink(p)


# ---- host processes --------------------------------------------------------------


def test_see_and_signal_host_process(kernel):
    marker = "cbdecoy" + secrets.token_hex(4)
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker])
    try:
        out, _ = kernel.run("""
import os, signal
seen = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            if %r in open('/proc/%%s/cmdline' %% pid).read():
                seen.append(int(pid))
        except Exception: pass
print('SEEN', seen)
for p in [%d] + seen:
    try: os.kill(p, signal.SIGTERM); print('KILLED', p)
    except Exception as e: print(type(e).__name__)
""" % (marker, decoy.pid))
        time.sleep(0.5)
        escaped = decoy.poll() is not None or "SEEN []" not in out
        verdict(kernel, escaped, "saw or signalled a host process")
    finally:
        decoy.kill()
        decoy.wait()


# ---- privilege -----------------------------------------------------------------------

PROBES = {
    "capabilities": "print('ESCAPED' if int([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1], 16) else 'no')",
    "uid0": "import os; print('ESCAPED' if os.geteuid() == 0 else 'no')",
    "unshare": """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print('ESCAPED' if libc.unshare(0x10000000 | 0x20000) == 0 else 'no')  # NEWUSER|NEWNS
""",
    "mount": """
import ctypes, os, tempfile
libc = ctypes.CDLL(None, use_errno=True)
d = tempfile.mkdtemp()
ok = libc.mount(b'none', d.encode(), b'tmpfs', 0, None) == 0
if ok: libc.umount2(d.encode(), 2)
os.rmdir(d)
print('ESCAPED' if ok else 'no')
""",
    "ptrace": """
import ctypes, os, time, signal
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    time.sleep(5); os._exit(0)
ok = libc.ptrace(16, pid, None, None) == 0  # PTRACE_ATTACH
os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)
print('ESCAPED' if ok else 'no')
""",
    "bpf": """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
attr = (ctypes.c_uint32 * 32)(1, 4, 4, 1)  # BPF_MAP_TYPE_HASH, key 4, value 4, 1 entry
print('ESCAPED' if libc.syscall(321, 0, attr, 128) >= 0 else 'no')
""",
    "io_uring": """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
params = (ctypes.c_uint8 * 120)()
print('ESCAPED' if libc.syscall(425, 4, params) >= 0 else 'no')
""",
    "setuid_su": """
import subprocess
# su is setuid root on the host; nosuid mounts and no_new_privs must make it useless
try:
    r = subprocess.run(['su', 'root', '-c', 'id -u'], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=10)
    print('ESCAPED' if r.stdout.strip() == '0' else 'no')
except (OSError, subprocess.TimeoutExpired):
    print('no')
""",
    "keyctl": """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print('ESCAPED' if libc.syscall(250, 0, -3, 1) >= 0 else 'no')  # get session keyring
""",
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_privilege(kernel, probe):
    # in a child interpreter, so a successful probe does not change the kernel
    out, _ = kernel.run("import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', %r], capture_output=True, text=True).stdout)" % PROBES[probe])
    verdict(kernel, "ESCAPED" in out, "privileged operation: " + probe)


# ---- network (loopback only) ------------------------------------------------------


def test_host_loopback_unreachable(kernel):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        out, _ = kernel.run("""
import socket
s = socket.socket(); s.settimeout(3)
try: s.connect(('127.0.0.1', %d)); print('CONNECTED')
except Exception as e: print(type(e).__name__)
""" % port)
        verdict(kernel, "CONNECTED" in out, "reached a listener on the host's loopback")
    finally:
        srv.close()


def test_only_loopback_interface(kernel):
    host_ifaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
    if host_ifaces == ["lo"]:
        pytest.skip("the host itself has only lo")
    out, _ = kernel.run("print([l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:]])")
    verdict(kernel, any(i != "lo" and i in out for i in host_ifaces), "host interfaces visible")


# ---- resources (bounded) --------------------------------------------------------------


def test_memory_limit(small_kernel):
    # tries 2.5x the sandbox limit (500 MiB): harmless for an unconfined kernel
    want = SMALL["memory_mb"] * 5 // 2
    out, err = small_kernel.run("""
import subprocess, sys
r = subprocess.run([sys.executable, '-c', 'b = bytearray(%d << 20); b[::4096] = b"x" * len(b[::4096]); print("ALLOCATED")'], capture_output=True, text=True)
print(r.stdout, r.returncode)
""" % want, timeout=120)
    verdict(small_kernel, "ALLOCATED" in out, "allocated %d MiB" % want)


def test_pids_limit(small_kernel):
    n = SMALL["pids"] * 2
    out, _ = small_kernel.run("""
import os, time
kids = []
try:
    for i in range(%d):
        p = os.fork()
        if p == 0:
            time.sleep(3); os._exit(0)
        kids.append(p)
except OSError as e:
    print('STOPPED', len(kids))
for p in kids: os.waitpid(p, 0)
print('FORKED', len(kids))
""" % n, timeout=120)
    verdict(small_kernel, "FORKED %d" % n in out, "forked %d processes" % n)


def test_fork_bomb(small_kernel):
    # a binary fork tree of depth 7: at most 254 processes, each gone after ~2 s,
    # so bounded for the control; far past the sandbox's pids limit (48)
    out, err = small_kernel.run("""
import os, time
r, w = os.pipe()
def bomb(depth):
    kids = []
    for _ in range(2 if depth else 0):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os.write(w, b'x')
            bomb(depth - 1)
            os._exit(0)
        kids.append(pid)
    time.sleep(2)
    for p in kids:
        os.waitpid(p, 0)
bomb(7)
os.close(w)
print('FORKED', len(b''.join(iter(lambda: os.read(r, 4096), b''))))
""", timeout=120)
    if not small_kernel.control and tier() == "gvisor" and "FORKED" not in out:
        # gVisor enforces no RLIMIT_NPROC (google/gvisor#169) and its cgroupfs
        # has no pids controller (runsc 20221219: cpu and memory only), so
        # the limit is the host cgroup's on runsc's processes: the Sentry,
        # refused a thread, ends (google/gvisor#2490) and the sandbox with it.
        # What must hold: the host limit, the cell told so, and the kernel
        # serving on with a fresh sandbox.
        assert err == "SandboxError" and "fresh sandbox" in out, out
        after, _ = small_kernel.run("print('alive')")
        assert "alive" in after, after
        return
    n = int(out.split("FORKED")[1].split()[0])
    after, _ = small_kernel.run("print('alive')")
    assert "alive" in after, after               # the kernel and its sandbox serve on
    verdict(small_kernel, n > SMALL["pids"], "a fork bomb made %d processes" % n)


def test_disk_limit(small_kernel):
    mb = SMALL["disk_mb"] * 2
    out, _ = small_kernel.run("""
import os, tempfile
d = tempfile.mkdtemp(dir='.')
p = os.path.join(d, 'big')
try:
    with open(p, 'wb') as f:
        for i in range(%d): f.write(b'x' * (1 << 20))
    print('WROTE')
except OSError as e: print(type(e).__name__)
finally:
    try: os.unlink(p)
    except OSError: pass
    os.rmdir(d)
""" % mb, timeout=120)
    verdict(small_kernel, "WROTE" in out, "wrote %d MiB" % mb)


def test_open_files_limit(small_kernel):
    n = SMALL["open_files"] * 2
    out, _ = small_kernel.run("""
import os
fds = []
try:
    for i in range(%d): fds.append(os.open('/dev/null', os.O_RDONLY))
    print('OPENED')
except OSError as e: print(type(e).__name__)
for f in fds: os.close(f)
""" % n)
    verdict(small_kernel, "OPENED" in out, "opened %d files" % n)


def test_cpu_limit(small_kernel):
    # two busy processes for 2 s; a 0.5-CPU quota keeps their CPU time near 1 s
    out, _ = small_kernel.run("""
import os, time, multiprocessing as mp
def spin(t):
    end = time.time() + t
    while time.time() < end: pass
ps = [mp.Process(target=spin, args=(2,)) for _ in range(2)]
c0 = os.times()  # children's times add up over the kernel's life: count this cell's only
t0 = time.time(); [p.start() for p in ps]; [p.join() for p in ps]
c1 = os.times()
print('CPU', c1.children_user - c0.children_user + c1.children_system - c0.children_system,
      'WALL', time.time() - t0)
""", timeout=120)
    cpu = float(out.split("CPU")[1].split()[0])
    wall = max(float(out.split("WALL")[1].split()[0]), 2.0)
    if os.cpu_count() < 2 and small_kernel.control:
        pytest.skip("one CPU: the control cannot show more than one CPU of use")
    # 0.5 CPU for 2 s is 1.0 CPU-second at most; unconfined, two spinners get
    # up to 4 on two cores (less on a loaded machine, hence the margin).  Per
    # second of wall time: starting the spinners takes long in an emulated
    # guest (bench/RESULTS.md, guest), and the quota holds per second.
    verdict(small_kernel, cpu / wall > 0.8, "used %.1f CPU-seconds in %.1f s" % (cpu, wall))


# ---- persistence ------------------------------------------------------------------------


def test_nothing_survives_shutdown(fresh_kernel):
    marker = "cbpersist" + secrets.token_hex(4)
    out, _ = fresh_kernel.run("""
import os, subprocess, sys
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', %r], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(%r, 'w').write('x')
print('PATH', os.path.abspath(%r))
""" % (marker, marker + ".txt", marker + ".txt"))
    written = out.split("PATH", 1)[1].strip() if "PATH" in out else ""
    time.sleep(0.5)
    fresh_kernel.shutdown()
    time.sleep(1.0)
    r = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    pids = [int(p) for p in r.stdout.split()]
    files = [written] if written and os.path.exists(written) else []
    for p in pids:  # the control's leftovers: ours to clean up
        try:
            os.kill(p, 9)
        except OSError:
            pass
    for f in files:
        os.unlink(f)
    verdict(fresh_kernel, bool(pids) or bool(files), "process/file survived shutdown")


def test_nothing_survives_restart(fresh_kernel):
    marker = "cbrestart" + secrets.token_hex(4)
    fresh_kernel.run("""
import subprocess, sys
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', %r], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(%r, 'w').write('x')
""" % (marker, marker + ".txt"))
    time.sleep(0.5)
    fresh_kernel.km.restart_kernel(now=False)
    fresh_kernel.kc.wait_for_ready(timeout=READY_S)
    out, _ = fresh_kernel.run("import os\nprint('FILE' if os.path.exists(%r) else 'gone')\n"
                              "print('PATH', os.path.abspath(%r))" % (marker + ".txt", marker + ".txt"))
    time.sleep(0.5)
    r = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    pids = [int(p) for p in r.stdout.split()]
    for p in pids:  # the control's leftovers: ours to clean up
        try:
            os.kill(p, 9)
        except OSError:
            pass
    written = out.split("PATH", 1)[1].strip() if "PATH" in out else ""
    if fresh_kernel.control and written and os.path.exists(written):
        os.unlink(written)
    verdict(fresh_kernel, bool(pids) or "FILE" in out, "process/file survived a restart")
