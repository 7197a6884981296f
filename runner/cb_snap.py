"""cellblock runner: the runner's part of checkpoints in place (docs/SNAPSHOTS.md).

A checkpoint is a fork of this process at a cell boundary.  The runner forks
twice, so that the copy is the child of the sandbox's init (the trusted agent)
and not ours (a cell's os.wait() never waits for it); the copy opens the park
fifo the agent made for it, stops, and once the agent has taken it (made it
the OOM killer's first choice, written one byte on the fifo) blocks reading
that fifo.  It never reads fd 3 while parked.

A rollback ends every other process of the sandbox; the agent then writes
"resume NONCE" on the fifo.  The woken copy forks once more (so the checkpoint
can be rolled back to again), puts back what its fork changed (random's state,
which os.fork reseeds; the offsets of files shared with the dead runner),
skips whatever the kernel had sent the old runner up to the kernel's resync
frame that carries NONCE, answers with a resumed frame carrying it, and goes
on as the runner from the point of the checkpoint.

Nothing here decides anything: the kernel keeps the names, numbers and times,
and this module only forks and waits.  The magics (%checkpoint, %rollback,
%checkpoints) are requests to the kernel, done when the cell ends.
"""

import sys
import os

_runner = sys.modules["_cellblock_runner"]
_S, _FD = _runner._S, _runner._FD
_std = _runner._std

_PARK_WAIT_S = 5.0          # the copy waits this long for its fifo
_PARK_NAP_S = 0.0002        # ... looking this often
_WAKE_MAX = 64              # bytes of the agent's message on the fifo (CB_SNAP_PARK_MSG)
_TAKEN = b"k"               # ... and the byte it writes when it takes a copy (CB_SNAP_PARK_TAKEN)
_FRAME_READ = 1 << 16
_RESYNC = '{"type":"resync","nonce":"%s"}'      # byte for byte what the kernel writes
_RESUMED = '{"type":"resumed","nonce":"%s"}'    # ... and what it looks for
_DBG_MARK = '{"type":"cellblock_resumed","nonce":"%s"}'  # on the debugger's channel, likewise


def reap():
    """Reap the intermediate children the double forks left (they exit at once)."""
    left = []
    for pid in _S.snap_zombies:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if not done:
            left.append(pid)
    _S.snap_zombies = left


def _offsets():
    """(fd, offset) of the open seekable files: the copy shares their open file
    descriptions with the runner, whose later reads and writes move them."""
    out = []
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for name in fds:
        try:
            fd = int(name)
            if fd > _FD:
                out.append((fd, os.lseek(fd, 0, os.SEEK_CUR)))
        except (ValueError, OSError):
            pass
    return out


def _park(fifo, mask):
    """In the copy (every signal blocked since the fork): open the fifo (the
    agent may make it a moment later), stop, and once the agent has taken the
    copy, wait for the wake-up.  Returns the rollback's nonce, with the signal
    mask back to `mask`; ends the process on anything else."""
    time = _std("time")
    signal = _std("signal")
    # a session of its own: a stopped copy in the runner's process group would
    # make it an orphaned group with a stopped member once this copy's parent
    # is reaped, and gVisor answers that with SIGHUP to the whole group (the
    # runner included); the copy has SIGHUP blocked, and re-stops after the
    # SIGCONT that comes with it.  Signals reach the runner by pid, never by group
    try:
        os.setsid()
    except OSError:
        pass
    deadline = time.monotonic() + _PARK_WAIT_S
    while True:
        try:
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            break
        except FileNotFoundError:
            if time.monotonic() > deadline:
                os._exit(0)
            time.sleep(_PARK_NAP_S)
        except OSError:
            os._exit(0)
    while True:
        # stopped, the agent sees this copy; it writes _TAKEN before it lets the
        # copy go on.  A SIGCONT from anyone else finds nothing to read: stop again
        os.kill(os.getpid(), signal.SIGSTOP)
        try:
            got = os.read(fd, 1)
        except BlockingIOError:
            continue
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)
        if got != _TAKEN:         # EOF: the agent dropped this checkpoint
            os._exit(0)
        break
    os.set_blocking(fd, True)
    msg = b""
    while not msg.endswith(b"\n") and len(msg) < _WAKE_MAX:
        try:
            chunk = os.read(fd, _WAKE_MAX)
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)
        if not chunk:             # the agent is gone, or dropped this checkpoint
            os._exit(0)
        msg += chunk
    os.close(fd)
    # signals the sandbox's code sent the parked copy are not the runner's: dropped
    pending = signal.sigpending()
    while pending:
        signal.sigwait(pending)
        pending = signal.sigpending()
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if not msg.startswith(b"resume "):
        os._exit(0)
    nonce = msg[7:].strip().decode("ascii", "replace")
    if len(nonce) != 32 or not all(c in "0123456789abcdef" for c in nonce):
        os._exit(0)
    return nonce


def _fork_copy(fifo):
    """-> ("runner", None) in this process; ("resumed", nonce) in its copy once
    a rollback woke it.  The copy is a grandchild: its parent exits at once,
    so it belongs to init and never to the runner.  Every signal is blocked
    across the forks, so none reaches the copy before it has parked (the
    sandbox's code may signal every process it sees)."""
    signal = _std("signal")
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _S.snap_zombies.append(pid)
        return "runner", None
    try:
        if os.fork():
            os._exit(0)
    except BaseException:
        os._exit(1)
    # the fork kept only the thread that forked, so a lock another thread
    # held then (a display from a thread waiting for its ack, a read of fd 3,
    # an import under sys.path's lock) would never be released: the copy's
    # first frame or read would wait for good.  None is held by this thread
    # here (the request loop, between requests)
    _runner._new_locks()
    return "resumed", _park(fifo, mask)


def _framed(text):
    """One frame of text, byte for byte (the markers the kernel matches)."""
    return len(text).to_bytes(4, "big") + text.encode("ascii")


def _write_frame(fd, text):
    view = memoryview(_framed(text))
    while view:
        view = view[os.write(fd, view):]


def _resync(nonce):
    """Skip what the kernel sent the old runner, up to its resync frame."""
    pattern = _framed(_RESYNC % nonce)
    buf = b""
    while True:
        try:
            chunk = os.read(_FD, _FRAME_READ)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            os._exit(0)
        buf += chunk
        i = buf.find(pattern)
        if i >= 0:
            _S.rbuf = buf[i + len(pattern):]
            break
        buf = buf[-(len(pattern) - 1):]
    _S.acks = 0
    _write_frame(_FD, _RESUMED % nonce)


def checkpoint(req):
    """The kernel's checkpoint request: fork (at a cell boundary) and say so."""
    fifo = req.get("fifo")
    if not isinstance(fifo, str) or not fifo.startswith("/opt/cellblock/park/"):
        _runner._send({"type": "checkpoint_reply", "status": "error", "error": "no park fifo"})
        return
    reap()
    _runner._flush()              # nothing buffered may be written twice
    threads = 0
    if "threading" in sys.modules:
        threads = max(0, sys.modules["threading"].active_count() - 1)
    rstate = sys.modules["random"].getstate() if "random" in sys.modules else None
    offsets = _offsets()
    try:
        role, nonce = _fork_copy(fifo)
    except OSError as e:
        _runner._send({"type": "checkpoint_reply", "status": "error",
                       "error": ("%s: %s" % (type(e).__name__, e))[:200]})
        return
    if role == "runner":
        _runner._send({"type": "checkpoint_reply", "status": "ok", "threads": threads})
        return
    while True:
        # a rollback woke this copy: it is the runner now, as of the checkpoint
        if rstate is not None:
            sys.modules["random"].setstate(rstate)
        for fd, off in offsets:
            try:
                os.lseek(fd, off, os.SEEK_SET)
            except OSError:
                pass
        _resync(nonce)
        woken_by = nonce
        # keep the checkpoint for the next rollback: a copy of this state parks
        # (after the kernel has its answer: the fork is off the rollback's path)
        try:
            role, nonce = _fork_copy(fifo)
        except OSError:
            _debug_again(woken_by)
            return                # the agent reports the checkpoint lost
        if role == "runner":
            _debug_again(woken_by)
            return


def _debug_again(nonce):
    """The woken copy serves the debugger's channel again: the fork kept only
    the thread that forked, so the old runner's bridge thread is not here.
    (The kernel takes no checkpoint once the debugger has run: what debugpy
    held, threads included, is not in a copy.)  Its first frame there is the
    marker up to which the kernel drops what the old runner left in the
    channel (relays included: gVisor's init, the micro-VM's mux)."""
    if not _S.debug_available:
        return
    try:
        _write_frame(_runner._DEBUG_FD, _DBG_MARK % nonce)
    except OSError:
        return                    # the channel is gone: the kernel closes its end
    _runner._mod("cb_debug").after_fork()
    _runner._thread.start_new_thread(_runner._debug_bridge, ())


# ---------------------------------------------------------------- restored from an image


def reseed():
    """A clone (a resumed or forked image) must not repeat its siblings'
    draws: random's and numpy's global generators and tempfile's names are
    seeded afresh from the OS.  What cannot differ: str hash seeds (every
    dict and set was built with them), the memory layout, pids."""
    if "random" in sys.modules:
        sys.modules["random"].seed()
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        try:
            np_random.seed()
        except Exception:
            pass
    if "tempfile" in sys.modules:
        sys.modules["tempfile"]._name_sequence = None


def resume(req):
    """The kernel's first request to a runner restored from an image: reseed,
    then answer with the nonce and the facts a hello gives."""
    nonce = req.get("nonce")
    if not isinstance(nonce, str) or len(nonce) != 32:
        _runner._bad_request("resume without a nonce")
        return
    _S.rbuf = b""
    reseed()
    v = sys.version_info
    _runner._send({"type": "resumed", "nonce": nonce,
                   "python_version": "%d.%d.%d" % (v[0], v[1], v[2]),
                   "shell": _S.mode if _S.mode in ("ipython", "minimal") else "minimal",
                   "shell_version": _S.shell_version if _S.mode == "ipython" else "",
                   "cell_prefix": _S.cell_prefix,
                   "debugger": _S.hello_debugger})


# ---------------------------------------------------------------- magics (both shells)

_USAGE = {
    "checkpoint": "%checkpoint [NAME]   save the session as it is when this cell ends\n"
                  "%checkpoint -d NAME  forget a checkpoint",
    "rollback": "%rollback NAME  go back to a checkpoint when this cell ends",
}


def request(op, name=None):
    """Ask the kernel for a checkpoint operation; it runs when the cell ends and
    the kernel prints its outcome in the cell's output."""
    msg = {"type": "snapshot_request", "op": op}
    if name:
        msg["name"] = name
    _runner._send(msg)


def magic(which, args, usage_error):
    """%checkpoint / %rollback / %checkpoints with their argument line;
    usage_error is the shell's UsageError class."""
    words = args.split()
    if which == "checkpoints":
        if words:
            raise usage_error("%checkpoints takes no arguments")
        return request("list")
    if which == "checkpoint":
        if words[:1] == ["-d"] and len(words) == 2:
            return request("forget", words[1])
        if len(words) <= 1 and not (words and words[0].startswith("-")):
            return request("checkpoint", words[0] if words else None)
    if which == "rollback" and len(words) == 1 and not words[0].startswith("-"):
        return request("rollback", words[0])
    raise usage_error(_USAGE.get(which, "bad arguments"))
