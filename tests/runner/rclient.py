"""Test helper: run runner/runner.py with a socketpair on fd 3."""

import json
import os
import select
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "runner", "runner.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


# Frames the runner waits on (docs/RUNNER_PROTOCOL.md, ordering rule).
ACKED = {"display", "update_display", "execute_result", "clear_output", "error", "started",
         "comm_open", "comm_msg", "comm_close"}


class Runner:
    """One runner process: frames on .sock, raw output collected from pipes."""

    def __init__(self, cwd=None, env=None, path=None, debug=False, address_space=None):
        """address_space: RLIMIT_AS in bytes, as the launcher sets --memory
        without a cgroup."""
        self.seqs = []  # seq of every frame received
        self.started = []  # seq of every `started` frame
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = parent
        e = {"PATH": "/usr/bin:/bin", "HOME": cwd or "/tmp", "LANG": "C.UTF-8",
             "TERM": "dumb", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
             "CELLBLOCK": "1", "TMPDIR": "/tmp"}
        if env:
            e.update(env)
        self.t0 = time.perf_counter()
        child_fd = child.fileno()
        # debug: the debugger's channel on fd 4 (docs/RUNNER_PROTOCOL.md section 4)
        self.dbg, dchild = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) if debug \
            else (None, None)
        dchild_fd = dchild.fileno() if dchild else -1
        self.dbuf = b""

        def preexec():
            if address_space is not None:
                import resource
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
            os.dup2(child_fd, 3)
            os.set_inheritable(3, True)
            if dchild_fd >= 0:
                os.dup2(dchild_fd, 4)
                os.set_inheritable(4, True)

        self.proc = subprocess.Popen(
            [PYTHON, "-I", "-u", path or RUNNER], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, cwd=cwd,
            preexec_fn=preexec, close_fds=False)
        child.close()
        if dchild:
            dchild.close()
        self.buf = b""
        self.out = b""
        self.err = b""
        # events in arrival order: ("stdout", bytes) / ("stderr", bytes) / ("frame", dict)
        self.events = []
        self.hello = self.recv(timeout=20)
        self.startup = time.perf_counter() - self.t0
        self.shell = self.hello.get("shell")

    # -- low level
    seq = 0       # the last request's sequence number

    def send(self, obj):
        if obj.get("type") in self.REQUESTS and "seq" not in obj:
            self.seq += 1
            obj = dict(obj, seq=self.seq)
        data = json.dumps(obj).encode()
        self.sock.sendall(len(data).to_bytes(4, "big") + data)

    def _read_pipes(self, timeout):
        got = False
        r, _, _ = select.select([self.proc.stdout, self.proc.stderr], [], [], timeout)
        for f, name in ((self.proc.stdout, "stdout"), (self.proc.stderr, "stderr")):
            if f in r:
                d = os.read(f.fileno(), 65536)
                if d:
                    got = True
                    setattr(self, name[3:], getattr(self, name[3:]) + d)
                    self.events.append((name, d))
        return got

    def _pump(self, timeout):
        """Wait for output or a frame header; read pipes only."""
        r, _, _ = select.select([self.sock, self.proc.stdout, self.proc.stderr], [], [],
                                timeout)
        self._read_pipes(0)
        return r

    def _drain_pipes(self):
        while self._read_pipes(0):
            pass

    def _read_exact(self, n):
        out = b""
        while len(out) < n:
            d = self.sock.recv(n - len(out))
            if not d:
                raise EOFError("runner closed fd 3")
            out += d
        return out

    def recv(self, timeout=30):
        """Next frame but `started` (which the runner sends as it begins an
        execute: recorded in .started).  Output written before the frame is
        recorded before it."""
        while True:
            f = self._recv1(timeout)
            if f.get("type") != "started":
                return f
            self.started.append(self.seqs[-1])

    def _recv1(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame from runner; stderr=%r" % self.err)
            r = self._pump(left)
            if self.sock in r:
                break
        head = self._read_exact(4)
        # everything the runner wrote to fd 1/2 before this frame is in the pipes now
        self._drain_pipes()
        n = int.from_bytes(head, "big")
        obj = json.loads(self._read_exact(n).decode("utf-8"))
        if obj.get("type") != "hello":
            # every frame names the request it belongs to; tests compare the rest
            seq = obj.pop("seq", None)
            assert isinstance(seq, int), "frame without seq: %r" % (obj,)
            self.seqs.append(seq)
        self.events.append(("frame", obj))
        if obj.get("type") in ACKED:
            # like the kernel: output so far is recorded, the runner may go on
            self.send({"type": "ack"})
        return obj

    # -- requests
    def execute(self, code, timeout=60, **kw):
        """Run a cell; returns (frames before done, done, stdout text, stderr text)."""
        req = {"type": "execute", "code": code, "silent": False, "store_history": True,
               "user_expressions": {}, "allow_stdin": False, "execution_count": 1}
        req.update(kw)
        n_out, n_err, n_ev = len(self.out), len(self.err), len(self.events)
        self.send(req)
        frames = []
        while True:
            f = self.recv(timeout)
            if f["type"] == "done":
                self._drain_pipes()
                break
            frames.append(f)
        self.last_events = self.events[n_ev:]
        return (frames, f, self.out[n_out:].decode("utf-8", "replace"),
                self.err[n_err:].decode("utf-8", "replace"))

    # -- the debugger's channel (fd 4)
    def dap_send(self, obj):
        data = json.dumps(obj).encode()
        self.dbg.sendall(len(data).to_bytes(4, "big") + data)

    def dap_recv(self, timeout=30):
        """The next DAP message from fd 4 (a dict)."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.dbuf) >= 4:
                n = int.from_bytes(self.dbuf[:4], "big")
                if len(self.dbuf) >= 4 + n:
                    obj = json.loads(self.dbuf[4:4 + n])
                    self.dbuf = self.dbuf[4 + n:]
                    return obj
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no DAP message; stderr=%r" % self.err)
            r, _, _ = select.select([self.dbg], [], [], min(left, 0.1))
            if r:
                d = self.dbg.recv(65536)
                if not d:
                    raise EOFError("runner closed fd 4")
                self.dbuf += d

    def request(self, obj, timeout=30):
        self.send(obj)
        return self.recv(timeout)

    REQUESTS = ("execute", "complete", "inspect", "is_complete", "preload")

    def close(self):
        for s in (self.sock, self.dbg):
            try:
                if s is not None:
                    s.close()
            except OSError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()
