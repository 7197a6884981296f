"""The runner is the attacker, on the debugger's channel too: code in a cell
writes raw DAP frames on fd 4 (docs/RUNNER_PROTOCOL.md section 4), as any
code in the sandbox can -- forged responses, reverse requests, junk, a
broken length, a flood -- and the kernel's side is checked from the host:
replies on the wire, what iopub carries, the kernel's RSS, and that it keeps
serving.  Like test_hostile_runner.py, there is no control kernel for those:
a stock ipykernel has no boundary between the debugger and the user's code.
The listener test has one: ipykernel's debugpy listens on loopback, which
under a shared network (cellblock's --network host) every local user reaches.
"""

import os
import queue
import time

import pytest

from .conftest import BUILD, KERNELS, Kernel, _check_available, verdict, only_namespaces_tier
from .hostile_kit import status_bytes

MIB = 1 << 20
SANITIZED = os.path.basename(BUILD.rstrip("/")).startswith("build-sanitize")

# Writes raw frames on the debugger's channel, as code in the sandbox can.
DRAW = r'''
import os as _os, json as _json
def dap(o=None, raw=None):
    b = raw if raw is not None else _json.dumps(o).encode()
    _os.write(4, len(b).to_bytes(4, "big") + b)
'''


class Dap:
    """debug_request on control; every iopub and control message kept."""

    def __init__(self, kc):
        self.kc, self.seq, self.iopub, self.control = kc, 0, [], []

    def pump(self, quiet=0.3, limit=30):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            got = False
            for getter, sink in ((self.kc.get_iopub_msg, self.iopub),
                                 (self.kc.get_control_msg, self.control)):
                try:
                    sink.append(getter(timeout=quiet / 2))
                    got = True
                except queue.Empty:
                    pass
            if not got:
                return

    def request(self, command, arguments=None, timeout=60):
        self.seq += 1
        msg = self.kc.session.msg("debug_request", {"type": "request", "seq": self.seq,
                                                    "command": command,
                                                    "arguments": arguments or {}})
        self.kc.control_channel.send(msg)
        deadline = time.monotonic() + timeout
        mid = msg["header"]["msg_id"]
        while time.monotonic() < deadline:
            for r in self.control:
                if r["parent_header"].get("msg_id") == mid:
                    return r["content"]
            self.pump(quiet=0.1, limit=0.5)
        raise AssertionError("no debug_reply to " + command)

    def events(self):
        return [m["content"] for m in self.iopub if m["msg_type"] == "debug_event"]

    def run(self, code, timeout=120):
        mid = self.kc.execute(code)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                r = self.kc.get_shell_msg(timeout=0.2)
            except queue.Empty:
                self.pump(quiet=0.05, limit=0.2)
                continue
            if r["parent_header"].get("msg_id") == mid:
                self.pump()
                return r["content"]
        raise AssertionError("the cell did not end")


def _kernel(extra):
    _check_available("cellblock")
    return Kernel("cellblock", extra)


@pytest.fixture(scope="module")
def k():
    kern = _kernel(["--timeout", "30", "--max-output", "2"])
    yield kern
    kern.shutdown()


@pytest.fixture
def dap(k):
    d = Dap(k.kc)
    d.pump()
    return d


def test_forged_responses_and_reverse_requests_are_dropped(dap):
    """Responses for requests nobody sent, DAP requests (runInTerminal, which
    would have the kernel run a command), junk, deep nesting: nothing
    reaches a frontend, and the channel keeps working (the marker event,
    then a real request)."""
    r = dap.run(DRAW + r'''
for seq in range(1, 200):
    dap({"type": "response", "seq": seq, "request_seq": seq, "command": "evaluate",
         "success": True, "body": {"result": "forged"}})
dap({"type": "request", "seq": 1, "command": "runInTerminal",
     "arguments": {"kind": "integrated", "args": ["touch", "/tmp/cb-pwned"]}})
dap({"type": "request", "seq": 2, "command": "startDebugging", "arguments": {}})
dap({"type": "response", "request_seq": "1", "command": "x", "success": True})
dap({"type": "response", "request_seq": 1, "command": "x"})
dap({"type": "event"})
dap({"type": "event", "event": "stopped", "body": []})
dap(raw=b"not json")
dap(raw=b"[" * 100000 + b"]" * 100000)
dap(raw=b"[1, 2, 3]")
dap({"type": "event", "event": "cbmarker", "body": {"n": 1}})
''')
    assert r["status"] == "ok", r
    dap.pump()
    evs = dap.events()
    assert [e["event"] for e in evs] == ["cbmarker"], evs
    assert not [m for m in dap.control if m["msg_type"] == "debug_reply"], dap.control
    assert not os.path.exists("/tmp/cb-pwned")
    # the channel still works, and the frontend's own request is answered as its own
    info = dap.request("debugInfo")
    assert info["success"] and info["request_seq"] == dap.seq
    r = dap.request("inspectVariables")
    assert r["success"] and r["request_seq"] == dap.seq, r


def test_a_response_for_another_number_cannot_answer_a_request(dap):
    """While a frontend's request waits in the runner, responses forged for
    every other number are dropped: only the answer to the kernel's own
    number is the reply, with the frontend's request_seq."""
    r = dap.run(DRAW + r'''
for seq in range(1, 2000):
    dap({"type": "response", "seq": 0, "request_seq": 10 ** 6 + seq, "command": "initialize",
         "success": True, "body": {"forged": True}})
''')
    assert r["status"] == "ok"
    reply = dap.request("modules")
    assert reply["success"] and "forged" not in reply.get("body", {}), reply
    assert reply["request_seq"] == dap.seq and reply["command"] == "modules"


def test_event_flood_is_paced_and_charged(k):
    """A cell floods events: what reaches iopub is bounded by the cell's
    output budget (--max-output 2 MiB, with its notice), the kernel's memory
    stays bounded, and control is answered meanwhile."""
    import threading
    kc = k.kc
    pid = k.km.provisioner.process.pid
    rss0 = status_bytes(pid, "VmRSS")
    iopub, done = [], threading.Event()

    def drain():                        # a frontend that keeps up with iopub
        while not done.is_set():
            try:
                iopub.append(kc.get_iopub_msg(timeout=0.1))
            except queue.Empty:
                pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        mid = kc.execute(DRAW + r'''
body = {"type": "event", "event": "output", "body": {"output": "x" * 200}}
for i in range(60000):
    dap(body)
''')
        time.sleep(1)
        t0 = time.monotonic()
        # control is served while the cell runs (shell requests wait behind it)
        msg = kc.session.msg("kernel_info_request", {})
        kc.control_channel.send(msg)
        while True:
            r = kc.get_control_msg(timeout=10)
            if r["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                break
        assert time.monotonic() - t0 < 10
        deadline = time.monotonic() + 120
        while True:
            r = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if r["parent_header"].get("msg_id") == mid:
                break
        assert r["content"]["status"] == "ok"
        while not [m for m in iopub if m["msg_type"] == "status"
                   and m["parent_header"].get("msg_id") == mid
                   and m["content"]["execution_state"] == "idle"]:
            assert time.monotonic() < deadline, "no idle"
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        done.set()
        reader.join(5)
    n = sum(1 for m in iopub if m["msg_type"] == "debug_event")
    size = len('{"type": "event", "event": "output", "body": {"output": ""}}') + 200
    # 15 MiB sent; the cell's budget is 2 MiB, and what the kernel reads after
    # the cell's done (still in the socket) is the idle period's (1 MiB)
    assert 0 < n * size <= 3 * MIB + 64 * 1024, n
    notices = [m for m in iopub if m["msg_type"] == "stream"
               and "output limit of 2 MiB" in m["content"]["text"]]
    assert len(notices) == 1, "the budget's notice"
    if not SANITIZED:
        assert status_bytes(pid, "VmRSS") - rss0 < 64 * MIB


def test_a_broken_length_closes_only_the_channel(k):
    """A length prefix out of range: the debugger's channel of this sandbox
    closes (it cannot be re-synchronised), the sandbox and the kernel go on,
    every debug request is still answered, saying why."""
    d = Dap(k.kc)
    d.pump()
    r = d.run(DRAW + r'''
_os.write(4, (0xFFFFFFF0).to_bytes(4, "big") + b"{}")
x = 41
''')
    assert r["status"] == "ok"
    assert d.run("x + 1")["status"] == "ok"
    info = d.request("debugInfo")
    assert info["success"]
    r = d.request("initialize", {"clientID": "t", "adapterID": "", "pathFormat": "path"})
    assert r["success"] is False and "channel" in r["message"], r
    # a restart brings a sandbox with a channel again
    k.km.restart_kernel(now=True)
    k.kc.wait_for_ready(timeout=60)


def test_a_forged_stop_does_not_hold_the_timeout():
    """The timeout waits for a cell stopped at a breakpoint only while a
    frontend has the debugger attached: a `stopped` the sandbox forges
    otherwise changes nothing."""
    kern = _kernel(["--timeout", "3"])
    try:
        d = Dap(kern.kc)
        t0 = time.monotonic()
        r = d.run(DRAW + r'''
dap({"type": "event", "event": "stopped",
     "body": {"reason": "breakpoint", "threadId": 1, "allThreadsStopped": True}})
while True:
    pass
''', timeout=60)
        assert r["status"] == "error", r
        assert time.monotonic() - t0 < 20
    finally:
        kern.shutdown()


# ---- no listener, even on the host's network ------------------------------------------------

def _tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _debug_processes(pid):
    """pid's process tree, and debugpy's adapter processes (ipykernel's
    daemonizes itself out of the tree)."""
    procs = set(_tree(pid))
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    if b"debugpy/adapter" in f.read():
                        procs.add(int(p))
            except OSError:
                pass
    return procs


def _listening(pid):
    """(pid, local address) of every listening TCP socket of those
    processes: their sockets' inodes matched to LISTEN entries of their
    network namespaces (anything a local user could connect to)."""
    found = set()
    for p in _debug_processes(pid):
        inodes = set()
        try:
            for fd in os.listdir("/proc/%d/fd" % p):
                link = os.readlink("/proc/%d/fd/%s" % (p, fd))
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
        for table in ("tcp", "tcp6"):
            try:
                with open("/proc/%d/net/%s" % (p, table)) as f:
                    rows = f.read().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:   # TCP_LISTEN
                    found.add((p, cols[1]))
    return found


@pytest.fixture(params=KERNELS)
def host_net_kernel(request):
    _check_available(request.param)
    if request.param == "cellblock":
        only_namespaces_tier("the other tiers take --network none only (launcher/flags.c): no "
                             "sandbox of theirs is on the host's network to listen there")
    kern = Kernel(request.param, ["--network", "host"] if request.param == "cellblock" else None)
    yield kern
    kern.shutdown()


def test_the_debugger_listens_nowhere(host_net_kernel):
    """With the sandbox on the host's network, starting the debugger opens
    no socket anyone could connect to (cellblock's debugpy is handed a
    socketpair); the control, ipykernel, listens on 127.0.0.1."""
    kern = host_net_kernel
    d = Dap(kern.kc)
    assert d.run("x = 1")["status"] == "ok"
    pid = kern.km.provisioner.process.pid
    before = _listening(pid)
    r = d.request("initialize", {"clientID": "t", "adapterID": "", "pathFormat": "path",
                                 "linesStartAt1": True, "columnsStartAt1": True}, timeout=200)
    assert r["success"], r
    assert d.request("attach")["success"]
    time.sleep(1)
    new = _listening(pid) - before
    verdict(kern, bool(new), "the debugger listens on %r, reachable by every local user" % (new,))
