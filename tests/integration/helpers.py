"""Helpers for the integration tests: start/stop kernels as a frontend does,
collect the messages of one request, and a raw ZeroMQ client that can send
hand-crafted (and broken) frames.

Everything here is bounded in time: no helper waits without a timeout.
"""

import json
import os
import signal
import time
import uuid
from queue import Empty

import zmq
from jupyter_client.manager import KernelManager
from jupyter_client.session import Session

DELIM = b"<IDS|MSG>"

# Default bound for one request (kernel start-up included where it applies).
TIMEOUT = 30


def kernel_name():
    """Kernelspec under test (set by conftest from --kernel / CB_TEST_KERNEL)."""
    return os.environ.get("CB_TEST_KERNEL") or "cellblock"


def is_cellblock():
    return kernel_name() == "cellblock"


# --------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------

def _proc_stat(pid):
    """(ppid, sid, state) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm may contain spaces/parens: split after the last ')'
    rest = data[data.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[3]), rest[0]


def pid_alive(pid):
    st = _proc_stat(pid)
    return st is not None and st[2] != "Z"


def descendants(root):
    """Pids of every live process below `root` (by parent links) plus every
    process in the session led by `root` (the kernel is started with
    start_new_session, so its sandbox children stay in that session unless
    they setsid themselves)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _proc_stat(int(name))
            if st is not None and st[2] != "Z":
                table[int(name)] = st
    found = {p for p, (_, sid, _) in table.items() if sid == root and p != root}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for p, (ppid, _, _) in table.items():
            if ppid == parent and p not in found and p != root:
                found.add(p)
                frontier.append(p)
    return found


def wait_gone(pids, timeout):
    """Wait until none of `pids` is alive; return those still alive."""
    deadline = time.monotonic() + timeout
    alive = {p for p in pids if pid_alive(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = {p for p in alive if pid_alive(p)}
    return alive


# --------------------------------------------------------------------------
# kernel handle
# --------------------------------------------------------------------------

class Kernel:
    """A kernel started through jupyter_client's KernelManager, with a
    blocking client, as a frontend would have it."""

    def __init__(self, kernel_name=None, **km_kwargs):
        self.km = KernelManager(kernel_name=kernel_name or globals()["kernel_name"](), **km_kwargs)
        self.kc = None
        self.pid = None
        self.children = set()
        self.extra_clients = []

    # -- life cycle --------------------------------------------------------
    def start(self, timeout=TIMEOUT, extra_arguments=None, env=None, stderr=None):
        # ipykernel disables its fd-level output capture when it sees
        # PYTEST_CURRENT_TEST; give kernels the environment a user would
        # (env: variables added to it).
        full = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
        full.update(env or {})
        kw = {"extra_arguments": extra_arguments} if extra_arguments else {}
        self.km.start_kernel(env=full, stderr=stderr, **kw)
        self.pid = self.km.provisioner.process.pid
        self.kc = self.km.client()
        self.kc.allow_stdin = False  # tests that want stdin ask for it
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=timeout)
        except Exception:
            self.stop(check=False)
            raise
        return self

    def new_client(self):
        """A second frontend: its own Session, hence its own identity."""
        kc = self.km.client(session=Session(key=self.km.session.key,
                                            signature_scheme=self.km.session.signature_scheme))
        kc.allow_stdin = False
        kc.start_channels()
        kc.wait_for_ready(timeout=TIMEOUT)
        self.extra_clients.append(kc)
        return kc

    def snapshot_children(self):
        if self.pid is not None:
            self.children |= descendants(self.pid)
        return self.children

    def stop(self, check=True, wait=10):
        """Shut the kernel down (shutdown_request, then the manager's
        SIGTERM/SIGKILL escalation) and check that the kernel process and
        every process it started are gone.  Returns a list of problems."""
        problems = []
        if self.pid is None:
            return problems
        self.snapshot_children()
        for kc in [self.kc] + self.extra_clients:
            if kc is not None:
                try:
                    kc.stop_channels()
                except Exception:
                    pass
        try:
            if self.km.has_kernel:
                self.km.shutdown_kernel(now=False)
        except Exception as e:  # still clean up below
            problems.append(f"shutdown_kernel raised {e!r}")
        try:
            self.km.cleanup_resources()
        except Exception:
            pass
        left = wait_gone({self.pid}, wait)
        if left:
            problems.append(f"kernel process {self.pid} still alive after shutdown")
        left_children = wait_gone(self.children, wait)
        if left_children:
            problems.append(
                f"processes started by the kernel still alive after shutdown: {sorted(left_children)}")
        # Last resort: kill what we started (only those pids).
        for p in ({self.pid} if left else set()) | left_children:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.pid = None
        if check:
            assert not problems, "; ".join(problems)
        return problems

    # -- convenience -------------------------------------------------------
    def execute(self, code, timeout=TIMEOUT, kc=None, **kw):
        return execute(kc or self.kc, code, timeout=timeout, **kw)

    def connection_info(self):
        return self.km.get_connection_info(session=False)

    def raw(self, **kw):
        return RawClient(self.connection_info(), **kw)


# --------------------------------------------------------------------------
# collecting the messages of one request through a BlockingKernelClient
# --------------------------------------------------------------------------

class Result:
    """Messages of one request: reply (or None), the iopub messages whose
    parent is the request, in arrival order."""

    def __init__(self, msg_id, reply, iopub):
        self.msg_id = msg_id
        self.reply = reply
        self.iopub = iopub

    @property
    def status(self):
        return self.reply["content"]["status"] if self.reply else None

    @property
    def content(self):
        return self.reply["content"]

    def types(self):
        return [m["msg_type"] for m in self.iopub]

    def outputs(self):
        """iopub messages other than status and execute_input."""
        return [m for m in self.iopub if m["msg_type"] not in ("status", "execute_input")]

    def of_type(self, msg_type):
        return [m for m in self.iopub if m["msg_type"] == msg_type]

    def stream(self, name="stdout"):
        return "".join(m["content"]["text"] for m in self.iopub
                       if m["msg_type"] == "stream" and m["content"]["name"] == name)

    def error_text(self):
        """ename, evalue and traceback of the reply and error outputs, as one string."""
        parts = []
        for c in [self.reply["content"] if self.reply else {}] + [
                m["content"] for m in self.of_type("error")]:
            parts += [c.get("ename", ""), c.get("evalue", "")] + list(c.get("traceback", []))
        return "\n".join(str(p) for p in parts)

    def __repr__(self):
        return f"Result(status={self.status!r}, iopub={self.types()!r})"


def _get(getter, deadline, what):
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise AssertionError(f"timed out waiting for {what}")
    try:
        return getter(timeout=remaining)
    except Empty:
        raise AssertionError(f"timed out waiting for {what}") from None


def collect_iopub(kc, msg_id, timeout=TIMEOUT):
    """iopub messages with parent `msg_id` until (and including) its idle."""
    deadline = time.monotonic() + timeout
    msgs = []
    while True:
        msg = _get(kc.get_iopub_msg, deadline, f"iopub idle for {msg_id}")
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        msgs.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return msgs


def get_reply(kc, msg_id, channel="shell", timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    getter = getattr(kc, f"get_{channel}_msg")
    while True:
        msg = _get(getter, deadline, f"{channel} reply to {msg_id}")
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg


def collect_iopub_many(kc, msg_ids, timeout=TIMEOUT):
    """iopub messages of several requests (dict msg_id -> list), until every
    one of them is idle."""
    deadline = time.monotonic() + timeout
    out = {m: [] for m in msg_ids}
    pending = set(msg_ids)
    while pending:
        msg = _get(kc.get_iopub_msg, deadline, f"iopub idle for {sorted(pending)}")
        pid = msg["parent_header"].get("msg_id")
        if pid not in out:
            continue
        out[pid].append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            pending.discard(pid)
    return out


def execute(kc, code, timeout=TIMEOUT, **kw):
    kw.setdefault("allow_stdin", False)
    msg_id = kc.execute(code, **kw)
    iopub = collect_iopub(kc, msg_id, timeout)
    reply = get_reply(kc, msg_id, "shell", timeout)
    return Result(msg_id, reply, iopub)


def request(kc, msg_type, content, channel="shell", timeout=TIMEOUT, expect_reply=True):
    """Send any request on shell or control through the client's session."""
    msg = kc.session.msg(msg_type, content)
    getattr(kc, f"{channel}_channel").send(msg)
    msg_id = msg["header"]["msg_id"]
    iopub = collect_iopub(kc, msg_id, timeout)
    reply = get_reply(kc, msg_id, channel, timeout) if expect_reply else None
    return Result(msg_id, reply, iopub)


def drain(getter, quiet=0.2):
    """Read and return everything that arrives until `quiet` s of silence."""
    out = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            out.append(getter(timeout=quiet))
        except Empty:
            break
    return out


# --------------------------------------------------------------------------
# raw ZeroMQ client
# --------------------------------------------------------------------------

class Received:
    """One message received on a raw socket."""

    def __init__(self, channel, frames, session):
        self.channel = channel
        self.frames = frames
        self.time = time.monotonic()
        i = frames.index(DELIM)
        self.idents = frames[:i]
        self.signature = frames[i + 1]
        self.raw = frames[i + 2:i + 6]
        self.buffers = frames[i + 6:]
        # check the signature the way jupyter_client does
        self.msg = session.deserialize(frames[i + 1:], content=True)
        self.header_json = json.loads(self.raw[0])
        self.parent_json = json.loads(self.raw[1])

    @property
    def msg_type(self):
        return self.msg["msg_type"]

    @property
    def parent_id(self):
        return self.parent_json.get("msg_id")

    @property
    def content(self):
        return self.msg["content"]

    def __repr__(self):
        extra = ""
        if self.msg_type == "status":
            extra = " " + self.content["execution_state"]
        return f"<{self.channel}:{self.msg_type}{extra}>"


class RawClient:
    """Plain pyzmq sockets + jupyter_client Session, to send arbitrary frames
    and observe arrival order across shell, control and iopub."""

    def __init__(self, info, identity=None, key=None, connect_iopub=True):
        self.info = info
        self.ctx = zmq.Context()
        k = info["key"] if key is None else key
        if isinstance(k, str):
            k = k.encode()
        self.session = Session(key=k, signature_scheme=info.get("signature_scheme", "hmac-sha256"))
        self.identity = identity or uuid.uuid4().hex.encode()
        self.sockets = {}
        for name, kind in (("shell", zmq.DEALER), ("control", zmq.DEALER),
                           ("stdin", zmq.DEALER), ("iopub", zmq.SUB)):
            if name == "iopub" and not connect_iopub:
                continue
            s = self.ctx.socket(kind)
            s.linger = 0
            if name in ("shell", "stdin"):
                s.setsockopt(zmq.IDENTITY, self.identity)
            if kind == zmq.SUB:
                s.setsockopt(zmq.SUBSCRIBE, b"")
            s.connect(self.url(name))
            self.sockets[name] = s
        self.sent = []  # headers we sent (dicts)
        self.log = []  # every Received, in arrival order

    def url(self, channel):
        port = self.info[f"{channel}_port"]
        if self.info["transport"] == "ipc":
            return f"ipc://{self.info['ip']}-{port}"
        return f"tcp://{self.info['ip']}:{port}"

    def close(self):
        for s in self.sockets.values():
            s.close(linger=0)
        self.ctx.term()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- building frames ---------------------------------------------------
    def msg(self, msg_type, content=None, parent=None, metadata=None):
        return self.session.msg(msg_type, content if content is not None else {},
                                parent=parent, metadata=metadata)

    def frames(self, msg, idents=(), buffers=()):
        """Properly signed frames for `msg`."""
        return list(idents) + self.session.serialize(msg) + list(buffers)

    def sign(self, parts):
        """Signature (bytes) over the four JSON frames `parts`, as the kernel
        computes it."""
        if self.session.auth is None:
            return b""
        h = self.session.auth.copy()
        for p in parts:
            h.update(p)
        return h.hexdigest().encode()

    def custom_frames(self, header=None, parent=b"{}", metadata=b"{}", content=b"{}",
                      signature=None, idents=(), buffers=()):
        """Frames with arbitrary JSON byte strings; signed correctly unless
        `signature` is given."""
        parts = [header, parent, metadata, content]
        sig = self.sign(parts) if signature is None else signature
        return list(idents) + [DELIM, sig] + parts + list(buffers)

    def header_bytes(self, msg_type, msg_id=None):
        h = self.session.msg_header(msg_type)
        if msg_id:
            h["msg_id"] = msg_id
        h["date"] = h["date"].isoformat()
        return json.dumps(h).encode(), h

    # -- sending -----------------------------------------------------------
    def send_frames(self, channel, frames):
        self.sockets[channel].send_multipart(frames, copy=True)

    def send(self, channel, msg_type, content=None, idents=(), buffers=()):
        msg = self.msg(msg_type, content)
        self.send_frames(channel, self.frames(msg, idents, buffers))
        self.sent.append(msg["header"])
        return msg

    # -- receiving ---------------------------------------------------------
    def poll(self, timeout, channels=("shell", "control", "iopub", "stdin")):
        """Next message from any of `channels` within `timeout` s, or None."""
        poller = zmq.Poller()
        for c in channels:
            if c in self.sockets:
                poller.register(self.sockets[c], zmq.POLLIN)
        ready = dict(poller.poll(max(0, int(timeout * 1000))))
        for c in channels:
            s = self.sockets.get(c)
            if s is not None and ready.get(s):
                r = Received(c, s.recv_multipart(), self.session)
                self.log.append(r)
                return r
        return None

    def recv_all(self, quiet=0.3, channels=("shell", "control", "iopub", "stdin"), limit=10):
        out = []
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            m = self.poll(quiet, channels)
            if m is None:
                break
            out.append(m)
        return out

    def wait_ready(self, timeout=TIMEOUT):
        """Slow-joiner dance: kernel_info on shell until an iopub message
        arrives, then drain."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.send("shell", "kernel_info_request")
            end = min(deadline, time.monotonic() + 1.0)
            got_iopub = False
            while time.monotonic() < end:
                r = self.poll(end - time.monotonic())
                if r is None:
                    break
                if r.channel == "iopub" and r.parent_id == m["header"]["msg_id"]:
                    got_iopub = True
            if got_iopub:
                self.recv_all(quiet=0.3)
                return
        raise AssertionError("raw client: kernel did not answer on shell+iopub")

    def collect(self, msg_id, reply_channel="shell", timeout=TIMEOUT, expect_reply=True,
                after_idle=0.3):
        """Everything that arrives until the idle of `msg_id` (and its reply);
        keeps listening `after_idle` s more to catch late messages.
        Returns the list of Received in arrival order."""
        events = []
        deadline = time.monotonic() + timeout
        idle = reply = None
        while time.monotonic() < deadline:
            if idle is not None and (reply is not None or not expect_reply):
                break
            m = self.poll(deadline - time.monotonic())
            if m is None:
                break
            events.append(m)
            if (m.channel == "iopub" and m.parent_id == msg_id and m.msg_type == "status"
                    and m.content["execution_state"] == "idle"):
                idle = m
            if m.channel == reply_channel and m.parent_id == msg_id:
                reply = m
        events += self.recv_all(quiet=after_idle)
        return events

    def request(self, channel, msg_type, content=None, timeout=TIMEOUT, expect_reply=True,
                idents=(), buffers=(), after_idle=0.3):
        msg = self.send(channel, msg_type, content, idents=idents, buffers=buffers)
        events = self.collect(msg["header"]["msg_id"], channel, timeout, expect_reply,
                              after_idle=after_idle)
        return msg, events


def for_parent(events, msg_id, channel=None):
    return [e for e in events if e.parent_id == msg_id and (channel is None or e.channel == channel)]


def kernel_alive_check(kc, timeout=TIMEOUT):
    """The kernel executes code and answers: returns the execute Result."""
    r = execute(kc, "6 * 7", timeout=timeout)
    assert r.status == "ok", r.reply["content"]
    res = r.of_type("execute_result")
    assert res and res[0]["content"]["data"]["text/plain"] == "42"
    return r
