"""stdin, control, interrupts, heartbeat, shutdown and restart
(PROTOCOL.md 3.1.6, 3.9, 3.10, 2.1; section 6 items 7-9, 15).

Expectations checked against ipykernel 6.17 (CB_TEST_KERNEL=python3).
"""

import os
import signal
import time
from queue import Empty

import pytest
import zmq

from .helpers import (Kernel, RawClient, collect_iopub, execute, get_reply, is_cellblock, kernel_alive_check,
                      pid_alive, request, wait_gone)


def _wait_stdin(kc, timeout=15):
    try:
        return kc.get_stdin_msg(timeout=timeout)
    except Empty:
        raise AssertionError("no input_request on stdin") from None


def _wait_stream(kc, msg_id, text, timeout=15):
    """Read iopub until a stream of `msg_id` contains `text` (the cell is
    running); returns the messages read."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
        except Empty:
            break
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append(m)
        if m["msg_type"] == "stream" and text in m["content"]["text"]:
            return seen
    raise AssertionError(f"cell never printed {text!r}: {[x['msg_type'] for x in seen]}")


# ---------------------------------------------------------------- stdin

def test_input_round_trip(shared_kernel):
    kc = shared_kernel.kc
    mid = kc.execute("r = input('name? ')\nprint('got', r)", allow_stdin=True)
    req = _wait_stdin(kc)
    assert req["msg_type"] == "input_request"
    assert req["content"] == {"prompt": "name? ", "password": False}
    assert req["parent_header"]["msg_id"] == mid
    kc.input("cell\u00e9 \U0001F600")
    reply = get_reply(kc, mid)
    io = collect_iopub(kc, mid)
    assert reply["content"]["status"] == "ok"
    out = "".join(m["content"]["text"] for m in io if m["msg_type"] == "stream")
    assert "got cell\u00e9 \U0001F600\n" in out


def test_getpass_sets_password_flag(shared_kernel):
    kc = shared_kernel.kc
    mid = kc.execute("import getpass\npw = getpass.getpass('pw: ')\nprint(len(pw))",
                     allow_stdin=True)
    req = _wait_stdin(kc)
    assert req["content"] == {"prompt": "pw: ", "password": True}
    kc.input("secret")
    assert get_reply(kc, mid)["content"]["status"] == "ok"
    io = collect_iopub(kc, mid)
    out = "".join(m["content"]["text"] for m in io if m["msg_type"] == "stream")
    assert out.endswith("6\n") and "secret" not in out


def test_input_without_allow_stdin_fails_fast(shared_kernel):
    kc = shared_kernel.kc
    t0 = time.monotonic()
    r = execute(kc, "input('never: ')", allow_stdin=False, timeout=15)
    assert time.monotonic() - t0 < 10, "input() with allow_stdin=False must not wait"
    assert r.status == "error"
    text = (r.content["ename"] + " " + r.content["evalue"]).lower()
    assert "stdin" in text or "input" in text, r.content
    if not is_cellblock():
        assert r.content["ename"] == "StdinNotImplementedError"
    with pytest.raises(Empty):
        kc.get_stdin_msg(timeout=0.5)


def test_input_eof(shared_kernel):
    kc = shared_kernel.kc
    mid = kc.execute("input('eof? ')", allow_stdin=True)
    _wait_stdin(kc)
    kc.input("\x04")
    reply = get_reply(kc, mid)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "EOFError"
    collect_iopub(kc, mid)


def test_input_routed_to_requesting_client_only(kernel):
    kc1 = kernel.kc
    kc2 = kernel.new_client()
    # both directions: each client's input_request reaches only that client
    for asker, other in ((kc1, kc2), (kc2, kc1)):
        mid = asker.execute("v = input('who? ')\nprint('v=' + v)", allow_stdin=True)
        req = _wait_stdin(asker)
        assert req["parent_header"]["msg_id"] == mid
        assert req["parent_header"]["session"] == asker.session.session
        with pytest.raises(Empty):
            other.get_stdin_msg(timeout=1)
        asker.input("me")
        assert get_reply(asker, mid)["content"]["status"] == "ok"
        io = collect_iopub(asker, mid)
        assert "v=me\n" in "".join(m["content"]["text"] for m in io if m["msg_type"] == "stream")


def test_interrupt_during_input(kernel):
    kc = kernel.kc
    execute(kc, "cb_state = 'kept'")
    mid = kc.execute("input('wait: ')", allow_stdin=True)
    _wait_stdin(kc)
    kernel.km.interrupt_kernel()
    reply = get_reply(kc, mid, timeout=15)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    collect_iopub(kc, mid)
    r = execute(kc, "print(cb_state)")
    assert r.stream() == "kept\n"


# ---------------------------------------------------------------- interrupts

def _interrupt_via_control(kc):
    msg = kc.session.msg("interrupt_request", {})
    kc.control_channel.send(msg)
    rep = get_reply(kc, msg["header"]["msg_id"], channel="control", timeout=10)
    assert rep["msg_type"] == "interrupt_reply"
    if is_cellblock():  # ipykernel echoes the request content instead
        assert rep["content"] == {"status": "ok"}
    return rep


@pytest.mark.parametrize("how", ["interrupt_request", "manager", "sigint"])
def test_interrupt_running_loop(kernel, how):
    kc = kernel.kc
    execute(kc, "cb_state = 41")
    mid = kc.execute("print('looping', flush=True)\nwhile True: pass")
    _wait_stream(kc, mid, "looping")
    if how == "interrupt_request":
        _interrupt_via_control(kc)
    elif how == "manager":
        kernel.km.interrupt_kernel()  # message mode for cellblock, signal for ipykernel
    else:
        # SIGINT to the kernel process itself (a terminal ^C, or a frontend
        # using signal mode): forwarded to the code, the kernel survives.
        os.kill(kernel.pid, signal.SIGINT)
    reply = get_reply(kc, mid, timeout=15)
    io = collect_iopub(kc, mid)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    errs = [m for m in io if m["msg_type"] == "error"]
    assert len(errs) == 1 and errs[0]["content"]["ename"] == "KeyboardInterrupt"
    assert io[-1]["content"] == {"execution_state": "idle"}
    assert kernel.km.is_alive()
    r = execute(kc, "cb_state + 1")
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "42"


def test_interrupt_when_idle_is_harmless(shared_kernel):
    _interrupt_via_control(shared_kernel.kc)
    kernel_alive_check(shared_kernel.kc)


def test_interrupt_during_sleep_then_queue_aborted(kernel):
    """An interrupted cell is an error: with stop_on_error the next queued
    cell is aborted."""
    kc = kernel.kc
    m1 = kc.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(30)")
    m2 = kc.execute("cb_after = 1")
    _wait_stream(kc, m1, "sleeping")
    _interrupt_via_control(kc)
    assert get_reply(kc, m1, timeout=15)["content"]["ename"] == "KeyboardInterrupt"
    assert get_reply(kc, m2, timeout=15)["content"]["status"] == "aborted"


# ---------------------------------------------------------------- control + hb

def test_control_answers_while_cell_runs(shared_kernel):
    kc = shared_kernel.kc
    mid = kc.execute("import time\nprint('running', flush=True)\ntime.sleep(4)")
    _wait_stream(kc, mid, "running")
    t0 = time.monotonic()
    msg = kc.session.msg("kernel_info_request", {})
    kc.control_channel.send(msg)
    rep = get_reply(kc, msg["header"]["msg_id"], channel="control", timeout=10)
    elapsed = time.monotonic() - t0
    assert rep["msg_type"] == "kernel_info_reply" and rep["content"]["status"] == "ok"
    assert elapsed < 2.0, f"control answered only after {elapsed:.1f} s (cell still running)"
    # and the cell was indeed still running: its reply comes later
    with pytest.raises(Empty):
        kc.get_shell_msg(timeout=0.2)
    assert get_reply(kc, mid, timeout=15)["content"]["status"] == "ok"
    collect_iopub(kc, mid)


def _hb_ping(info, payload, timeout):
    ctx = zmq.Context()
    s = ctx.socket(zmq.REQ)
    s.linger = 0
    try:
        if info["transport"] == "ipc":
            s.connect(f"ipc://{info['ip']}-{info['hb_port']}")
        else:
            s.connect(f"tcp://{info['ip']}:{info['hb_port']}")
        s.send(payload)
        if not s.poll(int(timeout * 1000)):
            return None
        return s.recv()
    finally:
        s.close(0)
        ctx.term()


def test_heartbeat_echo_while_busy(shared_kernel):
    info = shared_kernel.connection_info()
    assert _hb_ping(info, b"ping", 5) == b"ping"
    payload = bytes(range(256)) * 4
    assert _hb_ping(info, payload, 5) == payload
    kc = shared_kernel.kc
    mid = kc.execute("import time\nprint('busy', flush=True)\ntime.sleep(3)")
    _wait_stream(kc, mid, "busy")
    t0 = time.monotonic()
    assert _hb_ping(info, b"ping-busy", 2) == b"ping-busy", "no heartbeat while a cell runs"
    assert time.monotonic() - t0 < 2
    assert get_reply(kc, mid, timeout=15)["content"]["status"] == "ok"
    collect_iopub(kc, mid)
    assert kc.is_alive()


# ---------------------------------------------------------------- shutdown / restart

@pytest.mark.parametrize("channel", ["control", "shell"])
@pytest.mark.parametrize("restart", [False, True])
def test_shutdown_request(kernel, channel, restart):
    """shutdown_reply on the request's channel with the restart flag echoed,
    a copy on iopub (busy, shutdown_reply, idle), then the process exits by
    itself (no SIGTERM from the manager) and so does everything it started.
    On shell the request is deprecated (5.4) but must still work."""
    execute(kernel.kc, "x = 1")  # make sure the runner exists
    children = kernel.snapshot_children()
    if is_cellblock():
        assert children, "cellblock kernel has no child processes (runner/)?"
    with kernel.raw() as raw:
        raw.wait_ready()
        m, ev = raw.request(channel, "shutdown_request", {"restart": restart}, timeout=15,
                            after_idle=0.5)
        mid = m["header"]["msg_id"]
        rep = [e for e in ev if e.channel == channel and e.parent_id == mid]
        assert len(rep) == 1 and rep[0].msg_type == "shutdown_reply"
        assert rep[0].content["restart"] is restart
        assert rep[0].content.get("status", "ok") == "ok"
        io = [e for e in ev if e.channel == "iopub" and e.parent_id == mid]
        copies = [e for e in io if e.msg_type == "shutdown_reply"]
        assert len(copies) == 1 and copies[0].content["restart"] is restart
        assert copies[0].header_json["msg_id"] != rep[0].header_json["msg_id"]
        assert io[0].msg_type == "status" and io[0].content["execution_state"] == "busy"
    t0 = time.monotonic()
    while kernel.km.is_alive() and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert not kernel.km.is_alive(), "kernel still running 10 s after shutdown_reply"
    left = wait_gone(children, 5)
    assert not left, f"processes left behind by the kernel: {sorted(left)}"


def test_restart_kernel(kernel):
    kc = kernel.kc
    execute(kc, "cb_before_restart = 1")
    old_pid = kernel.pid
    old_children = kernel.snapshot_children()
    old_session = request(kc, "kernel_info_request", {}).reply["header"]["session"]
    kernel.km.restart_kernel(now=False)
    kernel.pid = kernel.km.provisioner.process.pid
    assert kernel.pid != old_pid
    assert not pid_alive(old_pid)
    assert not wait_gone(old_children, 5), "old kernel's children survived the restart"
    kc.wait_for_ready(timeout=30)
    info = request(kc, "kernel_info_request", {})
    assert info.reply["header"]["session"] != old_session, "session id must change on restart"
    r = execute(kc, "cb_before_restart")
    assert r.status == "error" and r.content["ename"] == "NameError"
    r = execute(kc, "1 + 1")
    assert r.content["execution_count"] == 2  # counter restarted (error was In [1])
    kernel_alive_check(kc)



# ---------------------------------------------------------------- starting

def _starting_seen():
    """Starts a kernel with a SUB connected before it binds; returns the
    iopub statuses seen."""
    k = Kernel(cache_ports=False)  # keep the ports written below
    k.km.write_connection_file()
    raw = RawClient(k.km.get_connection_info(session=False))
    try:
        k.start()
        raw.wait_ready()
        raw.recv_all(quiet=0.3)
        statuses = [e for e in raw.log if e.channel == "iopub" and e.msg_type == "status"]
        return statuses
    finally:
        raw.close()
        k.stop(check=True)


def test_starting_status_once_without_parent():
    """`starting` is published once at start-up, without parent, before any
    other status.  A subscriber usually misses it (slow joiner: the kernel
    publishes right after binding; PROTOCOL.md 3.1 rule 7), so what is
    checked is what a client can see: never more than one `starting`, never
    after another status, never with a parent, whether or not it was caught."""
    statuses = _starting_seen()
    starting = [e for e in statuses if e.content["execution_state"] == "starting"]
    assert len(starting) <= 1, [e.content for e in statuses]
    if starting:
        assert statuses[0] is starting[0], "starting must precede every other status"
        assert starting[0].parent_json == {}
    assert statuses, "no status at all on iopub"
    assert all(e.parent_json for e in statuses if e not in starting), \
        "every other status has its request as parent"
