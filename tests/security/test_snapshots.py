"""Checkpoints in place against a hostile sandbox (docs/SNAPSHOTS.md "What
holds"): after a rollback every layer of the banner is in force again
(the refused syscalls, the denied write, uid and cgroup, seen from the host),
the code cannot wake, read or change a checkpoint's copy or files, what it
forges on fd 3 changes nothing, stale bytes of a killed runner are skipped,
what a cell can make the kernel print is bounded, and a parked copy, not the
runner, is what the OOM killer takes.

The confinement test runs against the stock python3 kernel too, without the
rollback (it has none): there the same probes must escape, so they can see
an escape at all."""

import os
import queue
import re
import time

import pytest

from .conftest import Kernel, _check_available, tier, verdict
from .hostile_kit import RAW
from .test_escape import PROBES

CHECK = ["capabilities", "uid0", "unshare", "ptrace", "mount"]

# writes outside the home, /tmp and /dev/shm: in cellblock the park directory
# is a writable tmpfs that only Landlock closes; the rest is read-only
OUTSIDE = """
import os
done = []
for d in ('/opt/cellblock/park', '/var/tmp', '/opt', '/etc'):
    try:
        with open(os.path.join(d, 'cb-snap-probe'), 'w') as f:
            f.write('x')
        os.remove(os.path.join(d, 'cb-snap-probe'))
        done.append(d)
    except OSError:
        pass
print('ESCAPED' if done else 'no', done)
"""


def ctl(k, msg_type, timeout=60, **content):
    msg = k.kc.session.msg(msg_type, content)
    k.kc.control_channel.send(msg)
    deadline = time.monotonic() + timeout
    while True:
        r = k.kc.get_control_msg(timeout=max(0.1, deadline - time.monotonic()))
        if r["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return r["content"]


def _descendants(root):
    kids = {}
    for n in os.listdir("/proc"):
        if n.isdigit():
            try:
                with open("/proc/%s/stat" % n) as f:
                    st = f.read()
            except OSError:
                continue
            kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(n))
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def runner_view(k, ns_pid):
    """(uid, cgroup lines) of the runner (pid ns_pid in the sandbox).  In the
    namespaces tier, and for the control kernel, as the host sees it (host
    uid, host cgroup).  Under gVisor the runner is no host process at all (the
    host sees only runsc's, and the sandbox's pids are the Sentry's): its uid
    and cgroup as gVisor's kernel keeps them, read from inside."""
    if k.control or tier() != "gvisor":
        return host_view(k, ns_pid)
    out, err = k.run("import os\nprint(os.getpid(), os.getuid(), "
                     "' '.join(sorted(open('/proc/self/cgroup').read().split())))")
    assert err is None, out
    pid, uid, cg = out.split(" ", 2)
    assert int(pid) == ns_pid, (pid, ns_pid)
    return int(uid), cg.split()


def host_view(k, ns_pid):
    """(host uid, cgroup lines) of the process whose innermost pid is ns_pid,
    below the kernel process (as the host sees it)."""
    root = k.km.provisioner.process.pid
    for p in [root] + _descendants(root):
        try:
            with open("/proc/%d/status" % p) as f:
                status = f.read()
            with open("/proc/%d/cgroup" % p) as f:
                cg = f.read()
        except OSError:
            continue
        nspid = re.search(r"^NSpid:\s+(.*)$", status, re.M).group(1).split()
        if int(nspid[-1]) == ns_pid and (len(nspid) > 1 or p == ns_pid):
            uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
            return uid, sorted(cg.split())
    raise AssertionError("no process with pid %d in the sandbox" % ns_pid)


@pytest.fixture(params=["cellblock", "python3"])
def any_kernel(request):
    _check_available(request.param)
    k = Kernel(request.param)
    yield k
    k.shutdown()


@pytest.fixture
def cb_kernel():
    _check_available("cellblock")
    k = Kernel("cellblock")
    yield k
    k.shutdown()


def test_every_layer_holds_after_a_rollback(any_kernel):
    k = any_kernel
    out, _ = k.run("import os; print(os.getpid())")
    before = runner_view(k, int(out))
    if not k.control:
        k.run("x = 'saved'")
        assert ctl(k, "cellblock_checkpoint_request", name="c")["status"] == "ok"
        k.run("x = 'changed'")
        assert ctl(k, "cellblock_rollback_request", name="c")["status"] == "ok"
        assert k.run("print(x)")[0] == "saved\n"
    out, _ = k.run("import os; print(os.getpid())")
    after = runner_view(k, int(out))
    if not k.control:  # the same id (the sandbox's host lease; gVisor's uid) and cgroup as before
        assert after == before, (before, after)
    verdict(k, after[0] == 0, "the runner is root on the host")
    for name in CHECK:  # in a child interpreter, as test_escape runs them
        probe, _ = k.run("import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', "
                         "%r], capture_output=True, text=True).stdout)" % PROBES[name])
        verdict(k, "ESCAPED" in probe, "%s after a rollback: %s" % (name, probe.strip()))
    probe, _ = k.run(OUTSIDE)
    verdict(k, "ESCAPED" in probe, "a write outside the writable places after a rollback: " + probe)


def test_the_code_cannot_wake_read_or_change_a_checkpoint(cb_kernel):
    k = cb_kernel
    gvisor = tier() == "gvisor"
    k.run("secret = 'kept'\nopen('f', 'w').write('saved')")
    assert ctl(k, "cellblock_checkpoint_request", name="c")["status"] == "ok"
    out, _ = k.run("""
import os, signal
fifos = os.listdir('/opt/cellblock/park')
res = []
for n in fifos:                      # wake a parked copy: only init may write its fifo
    try:
        os.open('/opt/cellblock/park/' + n, os.O_WRONLY | os.O_NONBLOCK); res.append('opened ' + n)
    except OSError as e:
        res.append(type(e).__name__)
for p in ('/proc/1/fd', '/proc/1/root', '/proc/1/cwd'):   # init's store is behind these
    try:
        names = os.listdir(p)
    except OSError as e:
        res.append(type(e).__name__)
        continue
    if p != '/proc/1/fd' or not GVISOR:
        res.append('listed ' + p)
        continue
    # gVisor's procfs lists any task's fds to any uid (fd directories are
    # 0555 there, dumpability or not): none of init's may be the store, and
    # none may open for writing what init holds of the park fifos
    seen = []
    for n in names:
        try:
            t = os.readlink(p + '/' + n)
        except OSError:
            continue
        if t.startswith('/run/cellblock'):
            seen.append('store ' + t)
        if t.startswith('/opt/cellblock/park/'):
            try:
                os.open(p + '/' + n, os.O_WRONLY | os.O_NONBLOCK); seen.append('opened ' + t)
            except OSError:
                pass
    res.append(' '.join(seen) or 'no store among init fds')
if GVISOR:                          # where the store lives: root's alone
    try:
        os.listdir('/run/cellblock'); res.append('listed /run/cellblock')
    except OSError as e:
        res.append(type(e).__name__)
import time
def parked(p):                      # holds its park fifo and waits in read(): init took it
    try:
        fds = [os.readlink('/proc/%s/fd/%s' % (p, f)) for f in os.listdir('/proc/%s/fd' % p)]
        with open('/proc/%s/stat' % p) as f:
            state = f.read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return False
    return state == 'S' and any(t.startswith('/opt/cellblock/park/') for t in fds)
others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, os.getpid())]
deadline = time.monotonic() + 20    # the copy parks after the checkpoint's reply: wait for it
while time.monotonic() < deadline:
    if any(parked(p) for p in others):
        time.sleep(0.05)
        if any(parked(p) for p in others):
            break
    time.sleep(0.05)
for p in others:                    # signals that would wake (or stop) a parked copy
    for s in (signal.SIGCONT, signal.SIGUSR1, signal.SIGSTOP):
        try:
            os.kill(int(p), s)
        except OSError:
            pass
open('f', 'w').write('changed')
secret = 'changed'
print(len(fifos), res)
""".replace("GVISOR", repr(gvisor)))
    if gvisor:
        assert out.startswith("1 ['PermissionError', 'no store among init fds', "
                              "'PermissionError', 'PermissionError', 'PermissionError']"), out
    else:
        assert out.startswith("1 ['PermissionError', 'PermissionError', 'PermissionError', "
                              "'PermissionError']"), out
    assert ctl(k, "cellblock_rollback_request", name="c")["status"] == "ok"
    assert k.run("print(secret, open('f').read())")[0] == "kept saved\n"
    # killing the parked copy loses the checkpoint, and only that
    k.run("import os, signal\nfor p in os.listdir('/proc'):\n"
          "    if p.isdigit() and int(p) not in (1, os.getpid()):\n"
          "        os.kill(int(p), signal.SIGKILL)")
    if gvisor:
        # gVisor's init holds no host socket (runsc checkpoints it whole): the
        # kernel hears of the copy's death with its next command.  The
        # rollback is refused before anything changes, the session goes on
        e = ctl(k, "cellblock_rollback_request", name="c")
        assert e["status"] == "error" and "no such checkpoint" in e["evalue"], e
    else:
        deadline = time.monotonic() + 10
        while ctl(k, "cellblock_checkpoints_request")["checkpoints"] and time.monotonic() < deadline:
            time.sleep(0.1)
    assert ctl(k, "cellblock_checkpoints_request")["checkpoints"] == []
    e = ctl(k, "cellblock_rollback_request", name="c")
    assert e["status"] == "error" and "no checkpoint named" in e["evalue"]
    assert k.run("print(secret)")[0] == "kept\n"


def test_forged_frames_change_nothing(cb_kernel):
    k = cb_kernel
    k.run("v = 1")
    assert ctl(k, "cellblock_checkpoint_request", name="c")["status"] == "ok"
    out, err = k.run(RAW + """
frame({"type": "checkpoint_reply", "status": "ok", "threads": 5})
frame({"type": "resumed", "nonce": "0" * 32})
frame({"type": "snapshot_request", "op": "checkpoint", "name": "first"})
for i in range(2000):
    frame({"type": "snapshot_request", "op": "list"})
    frame({"type": "snapshot_request", "op": "rollback", "name": "c"})
import time; time.sleep(0.5)
v = 2
""")
    assert err is None, out
    assert out.count("one checkpoint operation and one listing per cell") == 1, out[-500:]
    assert out.count("In [") <= 4, "listings are bounded per cell"
    names = [e["name"] for e in ctl(k, "cellblock_checkpoints_request")["checkpoints"]]
    assert names == ["c", "first"], names
    assert k.run("print(v)")[0] == "2\n"
    assert ctl(k, "cellblock_rollback_request", name="c")["status"] == "ok"
    assert k.run("print(v)")[0] == "1\n"


@pytest.mark.parametrize("second", [
    {"type": "done", "status": "ok", "user_expressions": {"second": {}}},
    {"type": "bad_request", "error": "forged"},
], ids=["done", "bad_request"])
def test_a_second_done_while_one_is_held_ends_nothing(cb_kernel, second):
    """A cell that asked for a checkpoint has its done held until the
    checkpoint is made; a second done or a bad_request then (forged with
    the seq the kernel's checkpoint frame took) is refused.  It used to end the cell at once, and
    the held done then ended the *next* cell, queued behind the checkpoint,
    with the old cell's answer."""
    k = cb_kernel
    first = k.kc.execute(RAW + """
frame({"type": "snapshot_request", "op": "checkpoint", "name": "held"})
frame({"type": "done", "status": "ok", "user_expressions": {"held": {}}})
frame(SECOND, seq=_S.seq + 1)
""".replace("SECOND", repr(second)))
    second = k.kc.execute("print('second ran')")
    replies, out = {}, []
    deadline = time.monotonic() + 60
    while len(replies) < 2 and time.monotonic() < deadline:
        try:
            m = k.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        replies[m["parent_header"].get("msg_id")] = m["content"]
    while True:
        try:
            m = k.kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            break
        if m["parent_header"].get("msg_id") == second and m["msg_type"] == "stream":
            out.append(m["content"]["text"])
    assert set(replies) == {first, second}, replies
    assert list(replies[first].get("user_expressions", {})) == ["held"], replies[first]
    assert replies[second]["status"] == "ok", replies[second]
    assert not replies[second].get("user_expressions"), replies[second]
    assert "second ran" in "".join(out), out
    names = [e["name"] for e in ctl(k, "cellblock_checkpoints_request")["checkpoints"]]
    assert names == ["held"], names
    assert k.run("print(1 + 1)")[0] == "2\n"
    assert ctl(k, "cellblock_forget_request", name="held")["status"] == "ok"


def test_stale_bytes_of_a_killed_runner_are_skipped(cb_kernel):
    k = cb_kernel
    k.run("v = 'saved'")
    assert ctl(k, "cellblock_checkpoint_request", name="c")["status"] == "ok"
    # half a frame towards the kernel, and an ack from it left unread
    msg_id = k.kc.execute(RAW + """
frame({"type": "display", "data": {"text/plain": "x"}, "metadata": {}})
import os, time
os.write(3, (1000).to_bytes(4, "big") + b'{"type": "disp')
time.sleep(60)
""")
    time.sleep(1.5)
    rb = ctl(k, "cellblock_rollback_request", name="c")
    assert rb["status"] == "ok" and rb["ended_request"], rb
    for _ in range(3):
        assert k.run("print(v)")[0] == "saved\n"
    assert msg_id


def test_a_parked_copy_is_what_the_oom_killer_takes():
    _check_available("cellblock")
    if tier() == "gvisor":
        pytest.skip("gVisor has no OOM killer of its own (oom_score_adj is kept, never acted "
                    "on): its memory is the host cgroup's on runsc's processes, and the host's "
                    "OOM killer ends the Sentry, the whole sandbox, parked copies and runner alike")
    k = Kernel("cellblock", ["--memory", "300"])
    try:
        k.run("a = bytearray(120 << 20)\nfor i in range(0, len(a), 4096): a[i] = 1")
        assert ctl(k, "cellblock_checkpoint_request", name="big")["status"] == "ok"
        out, err = k.run("for i in range(0, len(a), 4096): a[i] = 2\n"     # copy-on-write: 240 MiB
                         "b = bytearray(100 << 20)\n"                          # and 100 more
                         "for i in range(0, len(b), 4096): b[i] = 1\nprint('survived')")
        assert err is None and "survived" in out, out
        # the kernel hears of the parked copy's death from the sandbox's
        # init, which may be after the cell's reply: in the cell's output
        # ("checkpoint 'big' is gone") or, shortly, in the list
        deadline = time.monotonic() + 5
        while ctl(k, "cellblock_checkpoints_request")["checkpoints"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ctl(k, "cellblock_checkpoints_request")["checkpoints"] == []
        assert k.run("print(len(a) + len(b))")[0] == "%d\n" % (220 << 20)
    finally:
        k.shutdown()
