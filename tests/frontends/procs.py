"""Process bookkeeping for the frontend tests: "nothing is left running".

Every process a test starts (notebook server, jupyter console, tmux server,
node, chromium, nbconvert) gets an environment variable CB_FE_TAG=<uuid>.
Kernels inherit it from the frontend that starts them; the kernel's own
children (launcher, sandboxed runner) get an explicit environment without
it, so the tracker also follows parent links: a sampler thread records, every
few hundred ms, every tagged process and all its descendants (pid + start
time, so a recycled pid is never mistaken for ours).  After the test, every
recorded process must be gone.  Only recorded pids are ever signalled.
"""

import os
import signal
import threading
import time
import uuid

TAG_VAR = "CB_FE_TAG"


def _stat(pid):
    """(ppid, starttime, state, comm) or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    lp, rp = data.index("("), data.rindex(")")
    rest = data[rp + 2:].split()
    return int(rest[1]), int(rest[19]), rest[0], data[lp + 1:rp]


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def _has_tag(pid, needle):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read()
    except OSError:
        return False


def _table():
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                table[int(name)] = st
    return table


class Tracker:
    """Records the processes of one test (see the module doc)."""

    def __init__(self, interval=0.25):
        self.tag = uuid.uuid4().hex
        self._needle = f"{TAG_VAR}={self.tag}\0".encode()
        self.seen = {}  # pid -> (starttime, comm, cmdline)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._interval = interval
        self._thread = None

    def env(self, base=None, **extra):
        env = dict(os.environ if base is None else base)
        env[TAG_VAR] = self.tag
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def sample(self):
        me = os.getpid()
        table = _table()
        roots = [p for p, st in table.items()
                 if p != me and st[2] != "Z" and _has_tag(p, self._needle)]
        found = set(roots)
        children = {}
        for p, st in table.items():
            children.setdefault(st[0], []).append(p)
        stack = list(roots)
        while stack:
            for c in children.get(stack.pop(), ()):
                if c not in found and c != me:
                    found.add(c)
                    stack.append(c)
        with self._lock:
            for p in found:
                st = table[p]
                if p not in self.seen and st[2] != "Z":
                    self.seen[p] = (st[1], st[3], _cmdline(p))
        return found

    def start(self):
        def loop():
            while not self._stop.wait(self._interval):
                try:
                    self.sample()
                except Exception:  # a process vanished mid-scan: next round
                    pass
        self._thread = threading.Thread(target=loop, name="cb-fe-tracker", daemon=True)
        self._thread.start()
        return self

    def stop_sampling(self):
        self._stop.set()
        if self._thread:
            self._thread.join(5)

    def alive(self):
        """Recorded processes that still run (same pid and start time),
        plus tagged processes never recorded."""
        self.sample()
        out = []
        with self._lock:
            items = list(self.seen.items())
        for pid, (start, comm, cmd) in items:
            st = _stat(pid)
            if st is not None and st[1] == start and st[2] != "Z":
                out.append((pid, comm, cmd))
        return out

    def wait_gone(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            left = self.alive()
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.2)

    def kill_leftovers(self):
        for pid, _, _ in self.alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def names(self, comm_prefix):
        with self._lock:
            return [(p, v[2]) for p, v in self.seen.items() if v[1].startswith(comm_prefix)]


def stop_process(proc, sig=signal.SIGTERM, timeout=10.0):
    """Stop a Popen we started: `sig`, then SIGKILL after `timeout`."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        proc.send_signal(sig)
        return proc.wait(timeout)
    except Exception:
        pass
    try:
        proc.kill()
    except OSError:
        pass
    return proc.wait(5)
