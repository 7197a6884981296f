"""Checkpoints in place (docs/SNAPSHOTS.md), through jupyter_client as a
frontend or an agent uses them: the cellblock_* control requests, the magics
of both shells, what a rollback restores (variables, the shell's history and
count, files of the home and /tmp, random's state, file offsets) and what it
says it cannot (threads, processes), rollback of a running cell, the bounds.
Confinement after a rollback and hostile runners: tests/security/test_snapshots.py."""

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from .helpers import Kernel, request

pytestmark = pytest.mark.cellblock_only


def ctl(k, msg_type, timeout=60, **content):
    r = request(k.kc, msg_type, content, channel="control", timeout=timeout)
    return r.reply["content"]


def run(k, code, timeout=60):
    r = k.execute(code, timeout=timeout)
    assert r.status == "ok", r.reply["content"]
    return r


def value(k, expr):
    r = run(k, expr)
    res = r.of_type("execute_result")
    assert res, r.iopub
    return res[0]["content"]["data"]["text/plain"]


def text(r, name="stdout"):
    return "".join(m["content"]["text"] for m in r.of_type("stream") if m["content"]["name"] == name)


@pytest.fixture
def spec_kernel(kernel_factory):
    """A cellblock kernel with extra kernel flags (a kernelspec of its own)."""
    made = []

    def start(*extra):
        from jupyter_client.kernelspec import KernelSpecManager
        spec = KernelSpecManager().get_kernel_spec("cellblock")
        tmp = tempfile.mkdtemp(prefix="cb-snap-kspec-")
        made.append(tmp)
        kdir = os.path.join(tmp, "kernels", "cellblock-snap")
        os.makedirs(kdir)
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump(dict(spec.to_dict(), argv=spec.argv + list(extra)), f)
        ksm = KernelSpecManager(kernel_dirs=[os.path.join(tmp, "kernels")])
        return kernel_factory(kernel_name="cellblock-snap", kernel_spec_manager=ksm)

    yield start
    for t in made:
        shutil.rmtree(t, ignore_errors=True)


@pytest.fixture(scope="module")
def venv_python():
    """A Python without IPython (a venv of the system's, without its site
    packages): the kernel then runs its minimal shell."""
    d = tempfile.mkdtemp(prefix="cb-snap-venv-", dir="/var/tmp")  # not /tmp: the sandbox has its own
    os.chmod(d, 0o755)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", d], check=True)
    yield os.path.join(d, "bin", "python3")
    shutil.rmtree(d, ignore_errors=True)


def test_kernel_info_advertises_checkpoints(kernel):
    run(kernel, "1")  # the sandbox is up: its agent has said whether it can
    r = request(kernel.kc, "kernel_info_request", {}, channel="control")
    snap = r.reply["content"]["cellblock_snapshots"]
    assert snap["available"] is True, snap
    assert snap["max"] == 8
    assert "cellblock_rollback_request" in snap["requests"]
    assert "%checkpoint" in snap["magics"]


def test_rollback_restores_state_files_history_and_count(kernel):
    run(kernel, "x = 1\nimport os, random\nrandom.seed(5)\n"
                "open('keep.txt', 'w').write('v1')\nopen('/tmp/t.txt', 'w').write('t1')\n"
                "os.mkdir('d'); open('d/inner', 'w').write('in')")
    c = ctl(kernel, "cellblock_checkpoint_request", name="base")
    assert c["status"] == "ok", c
    assert c["execution_count"] == 1
    assert c["files"]["count"] >= 4
    after = value(kernel, "x = 2\nopen('keep.txt', 'w').write('v2 longer')\n"
                          "open('new.txt', 'w').write('n')\nos.remove('/tmp/t.txt')\n"
                          "import shutil; shutil.rmtree('d')\nrandom.random()")
    for _ in range(2):  # the same checkpoint, twice
        rb = ctl(kernel, "cellblock_rollback_request", name="base")
        assert rb["status"] == "ok", rb
        assert rb["execution_count"] == 1  # the kernel's record, not the runner's word
        assert rb["processes_ended"] == 0
        assert any("threads" in s for s in rb["lost"])
        r = run(kernel, "print(x, open('keep.txt').read(), os.path.exists('new.txt'),\n"
                        "      open('/tmp/t.txt').read(), open('d/inner').read())\nrandom.random()")
        assert r.reply["content"]["execution_count"] == 2
        assert text(r) == "1 v1 False t1 in\n"
        # random's state is the checkpoint's: the same draw as the discarded timeline's
        assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == after
    shell = value(kernel, "type(get_ipython()).__name__ if get_ipython() else 'minimal'")
    if shell != "'minimal'":  # IPython's own history is the checkpoint's
        assert value(kernel, "(len(In), In[1].splitlines()[0])") == "(5, 'x = 1')"


def test_several_checkpoints_list_forget_and_the_bound(kernel):
    run(kernel, "v = 'a'")
    assert ctl(kernel, "cellblock_checkpoint_request", name="a")["status"] == "ok"
    run(kernel, "v = 'b'")
    assert ctl(kernel, "cellblock_checkpoint_request", name="b")["status"] == "ok"
    run(kernel, "v = 'c'")
    lst = ctl(kernel, "cellblock_checkpoints_request")
    assert [e["name"] for e in lst["checkpoints"]] == ["a", "b"]
    assert [e["execution_count"] for e in lst["checkpoints"]] == [1, 2]
    assert ctl(kernel, "cellblock_rollback_request", name="a")["status"] == "ok"
    assert value(kernel, "v") == "'a'"
    assert ctl(kernel, "cellblock_rollback_request", name="b")["status"] == "ok"
    assert value(kernel, "v") == "'b'"
    f = ctl(kernel, "cellblock_forget_request", name="a")
    assert f["status"] == "ok" and [e["name"] for e in f["checkpoints"]] == ["b"]
    e = ctl(kernel, "cellblock_rollback_request", name="a")
    assert e["status"] == "error" and "no checkpoint named 'a'" in e["evalue"]
    for i in range(7):
        assert ctl(kernel, "cellblock_checkpoint_request", name="n%d" % i)["status"] == "ok"
    full = ctl(kernel, "cellblock_checkpoint_request", name="ninth")
    assert full["status"] == "error" and "8 checkpoints" in full["evalue"], full
    run(kernel, "v = 'replaced'")  # the same name, at the bound: replaced
    assert ctl(kernel, "cellblock_checkpoint_request", name="b")["status"] == "ok"
    assert len(ctl(kernel, "cellblock_checkpoints_request")["checkpoints"]) == 8
    run(kernel, "v = 'later'")
    assert ctl(kernel, "cellblock_rollback_request", name="b")["status"] == "ok"
    assert value(kernel, "v") == "'replaced'"
    bad = ctl(kernel, "cellblock_checkpoint_request", name="no/slashes")
    assert bad["status"] == "error" and "name" in bad["evalue"]


def test_rollback_ends_a_running_cell_and_checkpoints_wait_for_cells(kernel):
    run(kernel, "state = 'saved'")
    assert ctl(kernel, "cellblock_checkpoint_request", name="s")["status"] == "ok"
    msg_id = kernel.kc.execute("state = 'running'\nimport time\ntime.sleep(60)")
    time.sleep(1.0)
    busy = ctl(kernel, "cellblock_checkpoint_request", name="t")
    assert busy["status"] == "error" and "between cells" in busy["evalue"], busy
    rb = ctl(kernel, "cellblock_rollback_request", name="s")
    assert rb["status"] == "ok" and rb["ended_request"] is True, rb
    reply = kernel.kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "RolledBack"
    assert value(kernel, "state") == "'saved'"


def test_threads_and_processes_of_the_code_are_said_lost(kernel):
    run(kernel, "import threading, time, subprocess, os\n"
                "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()")
    c = ctl(kernel, "cellblock_checkpoint_request", name="th")
    assert c["threads_not_kept"] == 1, c
    r = run(kernel, "p = subprocess.Popen(['sleep', '600']); print(p.pid)")
    pid = int(text(r))
    rb = ctl(kernel, "cellblock_rollback_request", name="th")
    assert rb["processes_ended"] == 1, rb
    assert any("1 were running" in s for s in rb["lost"]), rb["lost"]
    # ended: gone, or a zombie init has not reaped yet (the rollback does not wait for that)
    out = text(run(kernel, "import os\ntry:\n    st = open('/proc/%d/stat').read()\n"
                           "    print('gone' if st.split(') ')[1][0] in 'ZX' else 'alive')\n"
                           "except FileNotFoundError:\n    print('gone')\n"
                           "print(threading.active_count())" % pid))
    assert out == "gone\n1\n"


def test_a_lock_a_thread_held_at_the_checkpoint_is_free_in_the_copy(kernel):
    # A thread whose display waits for its ack holds the runner's frame lock
    # (and one that imports, sys.path's lock); the fork keeps the lock and
    # not the thread that would release it.  Held here on purpose, between
    # cells, across the checkpoint, so that the fork lands while it is held.
    run(kernel, "import sys, threading, time\n_S = sys.modules['_cellblock_runner']._S\n"
                "def hold():\n"
                "    time.sleep(0.2)\n"
                "    with _S.lock, _S.path_lock:\n"
                "        time.sleep(3)\n"
                "threading.Thread(target=hold, daemon=True).start()")
    time.sleep(1.0)
    assert ctl(kernel, "cellblock_checkpoint_request", name="held")["status"] == "ok"
    run(kernel, "x = 'after'")
    assert ctl(kernel, "cellblock_rollback_request", name="held")["status"] == "ok"
    r = kernel.execute("print('copy runs')", timeout=20)
    assert r.status == "ok" and text(r) == "copy runs\n", r.iopub


def test_open_file_offsets_are_the_checkpoints(kernel):
    run(kernel, "f = open('log.txt', 'w'); f.write('a'); f.flush()")
    ctl(kernel, "cellblock_checkpoint_request", name="off")
    run(kernel, "f.write('bbb'); f.flush()")
    ctl(kernel, "cellblock_rollback_request", name="off")
    assert value(kernel, "f.write('c'); f.close(); open('log.txt').read()") == "'ac'"


def _magics(k):
    run(k, "a = 1")
    r = run(k, "%checkpoint one")
    n = r.reply["content"]["execution_count"]
    assert "Checkpoint 'one' saved at In [%d]" % n in text(r), r.iopub
    r = run(k, "a = 2\n%checkpoints")
    assert text(r).startswith("one ") and "In [%d]" % n in text(r)
    r = run(k, "%rollback one")
    assert "Rolled back to checkpoint 'one' (In [%d])" % n in text(r)
    assert r.reply["content"]["execution_count"] == n  # numbered as the checkpoint's cell
    assert value(k, "a") == "1"
    r = k.execute("%rollback nope")
    assert r.status == "error" and r.reply["content"]["ename"] == "CheckpointError"
    assert "no checkpoint named 'nope'" in r.reply["content"]["evalue"]
    r = run(k, "%checkpoint -d one")
    assert "forgotten" in text(r)
    assert ctl(k, "cellblock_checkpoints_request")["checkpoints"] == []


def test_magics_ipython_shell(kernel):
    _magics(kernel)


def test_magics_minimal_shell(spec_kernel, venv_python):
    k = spec_kernel("--python", venv_python)
    assert text(run(k, "print(get_ipython())")) == "None\n"  # the minimal shell
    _magics(k)


def test_checkpoint_while_the_shell_loads(kernel):
    """A checkpoint taken right after start-up: cells on the fast path, the
    IPython shell perhaps half loaded; both continue after a rollback."""
    run(kernel, "y = 41")
    ctl(kernel, "cellblock_checkpoint_request", name="early")
    run(kernel, "y = 0")
    ctl(kernel, "cellblock_rollback_request", name="early")
    r = run(kernel, "%time y += 1")  # needs the shell: it finishes loading now
    assert "Wall time" in text(r)
    assert value(kernel, "y") == "42"
    assert value(kernel, "In[1]") == "'y = 41'"


def test_checkpoint_files_are_bounded_by_disk(spec_kernel):
    k = spec_kernel("--disk", "64")
    run(k, "import os\nopen('big', 'wb').write(b'x' * (40 << 20))")
    assert ctl(k, "cellblock_checkpoint_request", name="one")["status"] == "ok"
    two = ctl(k, "cellblock_checkpoint_request", name="two")
    assert two["status"] == "error" and "--disk" in two["evalue"], two
    assert [e["name"] for e in ctl(k, "cellblock_checkpoints_request")["checkpoints"]] == ["one"]
    run(k, "os.remove('big')")
    assert ctl(k, "cellblock_rollback_request", name="one")["status"] == "ok"
    assert value(k, "os.path.getsize('big')") == str(40 << 20)
