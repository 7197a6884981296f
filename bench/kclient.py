"""Raw pyzmq Jupyter client for the benchmark.

No jupyter_client blocking client on the hot path: messages are signed and
parsed with jupyter_client.session.Session and moved with plain pyzmq
sockets, one poller, no threads.  Kernels are launched from their kernelspec
argv with subprocess (the same thing KernelManager does), so the launch clock
starts right before the exec.

Every process this module starts is remembered (pid, and the pids of its
descendants seen while it ran) and killed by pid at the end; nothing is ever
killed by name.
"""

import atexit
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import zmq
from jupyter_client.session import Session

now = time.perf_counter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CELLBLOCK_BUILD", os.path.join(REPO, "build"))

CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
_CTX = zmq.Context.instance()
_LIVE = []            # every Kernel launched and not yet cleaned up
_TMP = tempfile.mkdtemp(prefix="cellblock-bench-")


class HarnessError(RuntimeError):
    pass


class Timeout(HarnessError):
    pass


def built_kernelspecs():
    """(cellblock, python3) kernelspecs: cellblock's from the build (its
    share/jupyter first in JUPYTER_PATH), python3 the installed ipykernel or
    None when there is none."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    jp = os.path.join(BUILD, "share", "jupyter")
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = jp + (os.pathsep + old if old else "")
    ksm = KernelSpecManager()
    cb = ksm.get_kernel_spec("cellblock")
    if not cb.resource_dir.startswith(jp):
        raise HarnessError("cellblock kernelspec found at %s, not in %s" % (cb.resource_dir, jp))
    try:
        ipy = ksm.get_kernel_spec("python3")
    except NoSuchKernel:
        ipy = None
    return cb, ipy


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (held open together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# ------------------------------------------------------------ process tree

def children(pid):
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                    out.extend(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def tree(pid):
    """pid and all its descendants (host pids)."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.append(p)
        todo.extend(children(p))
    return seen


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


_KCMP_VM = 1  # kcmp(2): do two processes share one address space?


def _same_mm(a, b):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(312, a, b, _KCMP_VM, 0, 0) == 0  # SYS_kcmp, x86_64


def tree_pss(pid):
    """(total PSS KiB, [(pid, comm, pss)]) of pid's whole process tree.  A
    process that shares another's address space (gVisor's ptrace stubs from
    runsc 2024 on) shows that one's PSS again: it counts once."""
    rows, counted = [], []
    for p in tree(pid):
        shared = any(_same_mm(p, q) for q in counted)
        if not shared:
            counted.append(p)
        rows.append((p, comm(p), 0 if shared else pss_kib(p)))
    return sum(r[2] for r in rows), rows


# ------------------------------------------------------------ warm-start templates (issue 21)

WARM_DIR = "/run/cellblock/warm"


def _memfd_inode(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                if "/memfd:cellblock-warm" in line:
                    return line.split()[4]
    except OSError:
        pass
    return None


def template_of(kernel_pid):
    """The supervisor pid of the template whose fork runs the cells of the
    kernel kernel_pid (the one that maps the same copy of the template's
    library), or None: a cold start, or no template."""
    runner = [p for p in tree(kernel_pid) if _memfd_inode(p)]
    if not runner:
        return None
    ino = _memfd_inode(runner[0])
    try:
        names = os.listdir(WARM_DIR)
    except OSError:
        return None
    for name in names:
        if not name.endswith(".pid"):
            continue
        try:
            with open(os.path.join(WARM_DIR, name)) as f:
                sup, _start, tpl = (int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
        if _memfd_inode(tpl) == ino:
            return sup
    return None


# ------------------------------------------------------------ the kernel

class Kernel:
    """One kernel process plus a raw ZMQ client talking to it."""

    def __init__(self, label, argv, interrupt_mode="signal", env=None, log_dir=None):
        self.label = label
        self.argv_tmpl = list(argv)
        self.interrupt_mode = interrupt_mode
        self.env = dict(os.environ if env is None else env)
        self.log_dir = log_dir or _TMP
        self.proc = None
        self.pid = None
        self.socks = {}
        self.session = None
        self.known_pids = set()
        self.t_launch = None
        self.pending = {}          # msg_id -> Request

    # ---- launch / connect
    def write_connection(self, ports=None, key=None):
        ports = ports or free_ports(5)
        self.key = key or os.urandom(16).hex()
        self.conn = {"transport": "tcp", "ip": "127.0.0.1", "signature_scheme": "hmac-sha256",
                     "key": self.key, "kernel_name": self.label}
        for ch, p in zip(CHANNELS, ports):
            self.conn[ch + "_port"] = p
        fd, self.conn_file = tempfile.mkstemp(prefix="kernel-", suffix=".json", dir=_TMP)
        with os.fdopen(fd, "w") as f:
            json.dump(self.conn, f)

    def launch(self, ports=None):
        """Starts the kernel process and connects at once (ZMQ connects lazily)."""
        self.write_connection(ports)
        argv = [a.replace("{connection_file}", self.conn_file) for a in self.argv_tmpl]
        self.log_path = self.conn_file[:-5] + ".log"
        log = open(self.log_path, "wb")
        self.connect_sockets()
        self.t_launch = now()
        self.proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.pid = self.proc.pid
        _LIVE.append(self)
        return self

    def attach(self, conn_info, key, pid):
        """Connects to a kernel someone else (KernelManager) started."""
        self.conn = dict(conn_info)
        self.key = key.decode() if isinstance(key, bytes) else key
        self.pid = pid
        self.connect_sockets()
        if self not in _LIVE:
            _LIVE.append(self)
        return self

    def connect_sockets(self):
        self.close_sockets()
        self.session = Session(key=self.key.encode(), signature_scheme="hmac-sha256",
                               username="bench")
        kinds = {"shell": zmq.DEALER, "control": zmq.DEALER, "stdin": zmq.DEALER,
                 "iopub": zmq.SUB}
        for ch, kind in kinds.items():
            s = _CTX.socket(kind)
            s.linger = 0
            # default reconnect interval is 100 ms: it would quantise launch times
            s.setsockopt(zmq.RECONNECT_IVL, 2)
            s.setsockopt(zmq.RECONNECT_IVL_MAX, 20)
            if kind == zmq.DEALER:
                s.setsockopt(zmq.IDENTITY, self.session.bsession)
            if kind == zmq.SUB:
                s.setsockopt(zmq.SUBSCRIBE, b"")
                s.setsockopt(zmq.RCVHWM, 0)
            s.connect("tcp://127.0.0.1:%d" % self.conn[ch + "_port"])
            self.socks[ch] = s
        self.poller = zmq.Poller()
        for ch in ("shell", "control", "iopub", "stdin"):
            self.poller.register(self.socks[ch], zmq.POLLIN)
        self.by_sock = {self.socks[ch]: ch for ch in self.socks}
        self.pending = {}

    def close_sockets(self):
        for s in self.socks.values():
            s.close(0)
        self.socks = {}

    # ---- messaging
    def send(self, ch, msg_type, content=None):
        msg = self.session.msg(msg_type, content or {})
        req = Request(msg["header"]["msg_id"], msg_type)
        self.pending[req.msg_id] = req
        req.t_send = now()
        self.session.send(self.socks[ch], msg)
        return req

    def execute(self, code, silent=False, store_history=True):
        return self.send("shell", "execute_request",
                         {"code": code, "silent": silent, "store_history": store_history,
                          "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})

    def pump(self, timeout_ms):
        """Receives whatever arrives within timeout_ms; returns messages handled."""
        n = 0
        for sock, _ in self.poller.poll(timeout_ms):
            ch = self.by_sock[sock]
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK, copy=True)
                except zmq.Again:
                    break
                t = now()
                _, parts = self.session.feed_identities(frames, copy=True)
                msg = self.session.deserialize(parts, content=True, copy=True)
                n += 1
                self._route(ch, msg, t)
        return n

    def _route(self, ch, msg, t):
        pid = msg.get("parent_header", {}).get("msg_id")
        req = self.pending.get(pid)
        if req is None:
            return
        mt = msg["header"]["msg_type"]
        if ch in ("shell", "control"):
            req.reply = msg
            req.t_reply = t
        elif ch == "iopub":
            if mt == "status":
                st = msg["content"]["execution_state"]
                if st == "idle":
                    req.t_idle = t
                elif st == "busy":
                    req.t_busy = t
            elif mt == "stream":
                if req.keep_streams:
                    req.streams.append((msg["content"]["name"], msg["content"]["text"]))
                req.n_stream += 1
                if req.t_first_output is None:
                    req.t_first_output = t
            elif mt == "execute_input":
                req.t_input = t
            else:
                if mt in ("execute_result", "error") and req.t_result is None:
                    req.t_result = t
                if mt in ("display_data", "execute_result", "error", "update_display_data"):
                    req.outputs.append(msg)
                if req.t_first_output is None:
                    req.t_first_output = t
        elif ch == "stdin":
            pass

    def wait(self, req, timeout=60.0, idle=True, result=False):
        """Waits for req's reply (and idle status, and an execute_result/error)."""
        deadline = now() + timeout
        while not req.done(idle, result):
            left = deadline - now()
            if left <= 0:
                raise Timeout("%s: no %s for %s within %.0f s (reply=%s idle=%s)" % (
                    self.label, "reply" + ("/idle" if idle else ""), req.msg_type, timeout,
                    req.t_reply is not None, req.t_idle is not None))
            self.pump(min(int(left * 1000) + 1, 200))
            if self.proc is not None and self.proc.poll() is not None and not req.done(idle, result):
                self.pump(50)
                if not req.done(idle, result):
                    raise HarnessError("%s: kernel exited (rc %s) while waiting for %s; log %s"
                                       % (self.label, self.proc.returncode, req.msg_type,
                                          self.log_path))
        self.pending.pop(req.msg_id, None)
        return req

    def run(self, code, timeout=60.0, idle=True, result=False, keep_streams=False):
        req = self.execute(code)
        req.keep_streams = keep_streams
        return self.wait(req, timeout, idle, result)

    def wait_ready(self, timeout=60.0, iopub_wait=0.01):
        """launch -> kernel_info_reply; returns the FIRST reply's request.

        Like jupyter_client's wait_for_ready it then makes sure iopub is
        subscribed (the reply's busy/idle seen), re-sending kernel_info if
        not: a SUB that connects late silently misses the first messages.
        """
        first = req = self.send("shell", "kernel_info_request")
        self.wait(req, timeout, idle=False)
        for _ in range(1000):
            end = now() + iopub_wait
            while req.t_idle is None and now() < end:
                self.pump(10)
            if req.t_idle is not None:
                break
            req = self.send("shell", "kernel_info_request")
            self.wait(req, timeout, idle=False)
        self.pending.pop(req.msg_id, None)
        return first

    def interrupt(self):
        if self.interrupt_mode == "message":
            return self.send("control", "interrupt_request")
        os.kill(self.pid, signal.SIGINT)
        return None

    def remember_tree(self):
        if self.pid:
            self.known_pids.update(tree(self.pid))

    # ---- teardown
    def shutdown(self, graceful=True, wait=2.0):
        if self.pid is None:
            return
        self.remember_tree()
        if graceful and self.socks and self.alive():
            try:
                self.send("control", "shutdown_request", {"restart": False})
            except zmq.ZMQError:
                pass
            end = now() + wait
            while now() < end and self.alive():
                time.sleep(0.01)
        self.kill()

    def alive(self):
        if self.proc is not None:
            return self.proc.poll() is None
        try:
            os.kill(self.pid, 0)
            return True
        except OSError:
            return False

    def kill(self):
        self.remember_tree()
        for p in sorted(self.known_pids):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.close_sockets()
        try:
            os.unlink(self.conn_file)
        except (OSError, AttributeError):
            pass
        if self in _LIVE:
            _LIVE.remove(self)
        self.pid = None


class Request:
    __slots__ = ("msg_id", "msg_type", "t_send", "t_reply", "t_idle", "t_busy", "t_input",
                 "t_result", "t_first_output", "reply", "outputs", "streams", "n_stream",
                 "keep_streams")

    def __init__(self, msg_id, msg_type):
        self.msg_id, self.msg_type = msg_id, msg_type
        self.t_send = self.t_reply = self.t_idle = self.t_busy = self.t_input = None
        self.t_result = self.t_first_output = None
        self.reply = None
        self.outputs = []
        self.streams = []
        self.n_stream = 0
        self.keep_streams = False

    def done(self, idle=True, result=False):
        if self.t_reply is None:
            return False
        if idle and self.t_idle is None:
            return False
        if result and self.t_result is None:
            return False
        return True

    @property
    def status(self):
        return self.reply["content"].get("status") if self.reply else None

    @property
    def ename(self):
        return self.reply["content"].get("ename") if self.reply else None

    def rt_reply(self):
        return self.t_reply - self.t_send

    def rt_idle(self):
        return self.t_idle - self.t_send


def cleanup_all():
    for k in list(_LIVE):
        try:
            k.kill()
        except Exception:
            pass


atexit.register(cleanup_all)


def _remove_tmp():
    import shutil
    shutil.rmtree(_TMP, ignore_errors=True)


atexit.register(_remove_tmp)
