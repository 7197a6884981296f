"""cellblock runner core: frames, the request loop, errors, stdin, interrupts.

runner.py (the entry point) sends the hello frame, then loads this module
as ``_cellblock_runner`` and calls _main(shell).  Frames on fd 3 are a 4-byte
big-endian length + UTF-8 JSON object (docs/RUNNER_PROTOCOL.md, 3.x).

Two shells run cells:

- "ipython": a real IPython InteractiveShell (cb_shell.py).  Importing
  IPython costs most of a second, so it is loaded step by step while the
  sandbox is idle (_idle_step), never before a request that is waiting.  A
  plain-Python cell that arrives before the shell is ready runs on the fast
  path (cb_fast.py), which produces exactly what the shell would or, when in
  doubt, waits for the shell.
- "minimal": this file's own executor plus cb_display/cb_assist/cb_magics,
  for interpreters without IPython.

Start-up time matters: this file imports nothing that is not already loaded
by the interpreter's own start-up (``_json``, ``_signal`` and ``_thread`` are
built in).  The sibling modules and heavy stdlib modules (ast, traceback, ...)
are loaded on first use.

User code shares this interpreter.  Runner state lives in this module's
globals (the user's ``__main__`` is a separate, fresh module), and frames of
the runner's files are removed from user tracebacks.
"""

import sys
import os
import _signal
import _thread
import builtins

_VERSION = 1
_FRAME_MAX = 8 * 1024 * 1024     # CB_RUNNER_FRAME_MAX: the kernel drops larger frames
_REPLY_MAX = 4 * 1024 * 1024     # CB_FRAME_REPLY_MAX: done, error and *_reply frames
_REPLIES = frozenset(("done", "error", "complete_reply", "inspect_reply"))
_BAD_REQUEST_TEXT_MAX = 200          # characters of an unusable frame's error quoted back
_FD = 3
_DIR = os.path.dirname(os.path.abspath(__file__))
_MODULE_NAMES = ("cb_core", "cb_display", "cb_assist", "cb_magics", "cb_fast", "cb_shell",
                 "cb_lazy", "cb_comm")
# code filenames of the runner's own files: their frames are hidden from
# tracebacks and a SIGINT landing in them is deferred
_RUNNER_FILES = {os.path.join(_DIR, n + ".py") for n in ("runner",) + _MODULE_NAMES}
_RUNNER_FILES.add(__file__)

# sigmode values: what SIGINT does now
_SIG_IGNORE = 0        # idle, or runner bookkeeping: dropped
_SIG_USER = 1          # user code runs: KeyboardInterrupt
_SIG_INPUT = 2         # blocked waiting for input_reply: KeyboardInterrupt
_SIG_DEFER = 3         # runner or IPython bookkeeping inside a cell: remembered, raised
#                        when user code runs next (_check_pending, cb_shell.run_code)


class _State:
    """All mutable runner state (never visible in the user's globals)."""
    sigmode = _SIG_IGNORE
    pending = False      # a SIGINT arrived in runner code while user code runs
    allow_stdin = False
    count = 0            # execution_count of the running cell
    silent = False
    rbuf = b""           # bytes read from fd 3, not yet taken as frames (rlock)
    lock = _thread.allocate_lock()   # held while a frame is written and its ack awaited
    rlock = _thread.RLock()          # held while fd 3 is read and rbuf parsed
    acks = 0             # acks read for the frame being written (by whichever thread read)
    ack_waiter = None    # lock released to wake a sender whose ack another thread read
    deferred = []        # frames to send at the next safe point (_defer)
    request = None       # the execute or comm request being handled (kernel.get_parent())
    request_serial = 0   # counts them
    user = None          # the user's __main__ module
    flags = 0            # __future__ flags collected from earlier cells
    cell_serial = 0
    in_cell = False      # an execute request is being handled
    payload = None       # payload list of the running cell
    last_in = ""         # source of the previous stored cell (minimal shell)
    cwd_path = None      # the working directory as put on sys.path[0]
    mode = "minimal"     # "ipython" or "minimal" (the hello frame's "shell")
    shell = None         # the InteractiveShell once loaded (cb_shell)
    load_step = 0        # next step of _LOAD_STEPS; None when loading is over
    preload = []         # modules still to import while idle (--preload)
    fast_cells = []      # cells run by cb_fast before the shell existed (replayed into it)
    stdin_error = None   # exception class input() raises without allow_stdin
    unders = ["", "", ""]  # the shell's DisplayHook _, __, ___ (kept by cb_fast until then)
    main_filter = None   # the DeprecationWarning filter cb_fast added for __main__
    idle_load = True     # load the shell while idle (else only when a request needs it)
    colors = None        # the running execute's `colors` member (cb_shell)
    seq = 0              # the kernel's sequence number of the request being handled


_S = _State
_MAIN_THREAD = _thread.get_ident()

# ---------------------------------------------------------------- signals


def _on_sigint(signum, frame):
    mode = _S.sigmode
    if mode == _SIG_IGNORE:
        return
    if mode == _SIG_INPUT:              # blocked waiting for input_reply
        _S.sigmode = _SIG_USER
        raise KeyboardInterrupt
    if mode == _SIG_DEFER or (frame is not None and frame.f_code.co_filename in _RUNNER_FILES):
        _S.pending = True               # never unwind the runner's own code
        return
    raise KeyboardInterrupt


def _without_handler_frame(tb):
    """A traceback whose last entry, the SIGINT handler raising
    KeyboardInterrupt, is cut off (with the default handler there is no
    such frame)."""
    if tb is None:
        return tb
    prev, cur = None, tb
    while cur.tb_next is not None:
        prev, cur = cur, cur.tb_next
    if cur.tb_frame.f_code is _on_sigint.__code__ and prev is not None:
        prev.tb_next = None
    return tb


def _check_pending():
    """Raise a KeyboardInterrupt deferred while runner code ran for the user."""
    if _S.pending and _S.sigmode == _SIG_USER:
        _S.pending = False
        raise KeyboardInterrupt


# ---------------------------------------------------------------- JSON


def _json_default(o):
    if isinstance(o, (bytes, bytearray)):
        binascii = _std("binascii")
        return binascii.b2a_base64(bytes(o), newline=False).decode("ascii")
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def _nan_constant(name):
    raise ValueError("invalid constant " + name)


try:
    import _json

    class _DecodeCtx:
        strict = False
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = staticmethod(_nan_constant)
        memo = {}

    _scan = _json.make_scanner(_DecodeCtx)
    _encode = _json.make_encoder(None, _json_default, _json.encode_basestring,
                                 None, ":", ",", False, True, False)

    def _loads(s):
        obj, end = _scan(s, 0)
        return obj

    def _dumps(obj):
        return "".join(_encode(obj, 0))
except Exception:                                    # pragma: no cover
    import json as _jsonmod

    def _loads(s):
        return _jsonmod.loads(s)

    def _dumps(obj):
        return _jsonmod.dumps(obj, default=_json_default, allow_nan=False,
                              ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- frames


def _flush():
    for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            s.flush()
        except Exception:
            pass


def _die():
    _flush()
    os._exit(0)


# Frames whose position relative to stdout/stderr matters.  After writing one
# the runner waits for the kernel's {"type":"ack"}, sent once the kernel has
# drained the pipes and published the frame: without it, output printed right
# after a display could be drained (and published) before the display.
_ACKED = frozenset(("display", "update_display", "execute_result", "clear_output", "error",
                    "started", "comm_open", "comm_msg", "comm_close"))
# An ack frame is tiny: only frames shorter than this are decoded to look for one
_ACK_FRAME_MAX = 64
# A sender whose ack another thread is reading checks again at least this often
_ACK_POLL_S = 0.05

# Reading fd 3.  One thread at a time reads (_S.rlock, reentrant): the main
# thread for requests, or the thread that waits for the ack of its frame
# (a widget updated by a background thread, while the main thread runs a
# cell or sits idle waiting for a request).  Whoever reads moves every ack
# out of the read buffer into _S.acks and wakes the sender waiting for it;
# other frames stay buffered, in order, for the main thread.  Senders are
# serialised by _S.lock, so at most one ack is awaited at any time.


def _is_ack(body):
    if len(body) >= _ACK_FRAME_MAX or b'"ack"' not in body:
        return False
    obj, _ = _decode(body)
    return obj is not None and obj.get("type") == "ack"


def _got_acks(n):
    _S.acks += n
    waiter = _S.ack_waiter
    if waiter is not None:
        try:
            waiter.release()
        except RuntimeError:            # not waiting (any more)
            pass


def _extract_acks():
    """Move the complete ack frames out of the read buffer (rlock held)."""
    buf = _S.rbuf
    off = start = found = 0
    keep = []
    while len(buf) - off >= 4:
        n = int.from_bytes(buf[off:off + 4], "big")
        if n == 0 or n > _FRAME_MAX or len(buf) - off - 4 < n:
            break                       # incomplete, or broken (_recv reports it)
        if _is_ack(buf[off + 4:off + 4 + n]):
            keep.append(buf[start:off])
            start = off + 4 + n
            found += 1
        off += 4 + n
    if found:
        keep.append(buf[start:])
        _S.rbuf = b"".join(keep)
        _got_acks(found)


def _wait_ack():
    """Wait for the kernel's ack of the frame just written (_S.lock held)."""
    me = None
    while _S.acks <= 0:
        if _S.rlock.acquire(False):
            try:
                _extract_acks()
                if _S.acks <= 0:
                    _fill()
                    _extract_acks()
            finally:
                _S.rlock.release()
            continue
        # another thread reads (the main one, waiting for a request): it
        # hands the ack over through `me`
        if me is None:
            me = _thread.allocate_lock()
            me.acquire()
        _S.ack_waiter = me
        try:
            if _S.acks <= 0:
                me.acquire(True, _ACK_POLL_S)
        finally:
            _S.ack_waiter = None
    _S.acks -= 1


def _fill():
    """Append what the socket has to the read buffer (rlock held); EOF ends
    the runner."""
    try:
        data = os.read(_FD, 1 << 16)
    except OSError:
        data = b""
    if not data:
        _die()
    _S.rbuf += data


def _defer(obj):
    """Send a frame at the next safe point: for code that may run inside a
    frame being written (a comm closed by the garbage collector)."""
    _S.deferred.append(dict(obj, seq=_S.seq) if "seq" not in obj else obj)


def _send_deferred():
    while _S.deferred:
        try:
            obj = _S.deferred.pop(0)
        except IndexError:              # another thread took it
            break
        _write(obj)


def _send(obj):
    """Write one frame.  Flushes stdout/stderr first (ordering rule).  Every
    frame carries the sequence number of the request it belongs to."""
    if _S.deferred:
        _send_deferred()
    _write(obj)


def _write(obj):
    if "seq" not in obj and obj.get("type") != "hello":
        obj = dict(obj, seq=_S.seq)
    try:
        data = _dumps(obj).encode("utf-8", "replace")
    except ValueError:                                       # NaN, ...
        json = _std("json")
        data = json.dumps(json.loads(json.dumps(obj, default=_json_default),
                                     parse_constant=lambda c: None),
                          ensure_ascii=False).encode("utf-8", "replace")
    limit = _REPLY_MAX if obj.get("type") in _REPLIES else _FRAME_MAX
    if len(data) > limit:
        note = "cellblock: a %s output of %d bytes is over the %d-byte limit and was dropped\n" % (
            obj.get("type"), len(data), limit)
        try:
            sys.stderr.write(note)
        except Exception:
            pass
        if obj.get("type") not in ("done",):
            _flush()
            return
        obj = dict(obj, user_expressions={}, payload=[], traceback=[])
        data = _dumps(obj).encode("utf-8", "replace")
    frame = len(data).to_bytes(4, "big") + data
    _flush()
    with _S.lock:
        acked = obj.get("type") in _ACKED
        if acked:
            _S.acks = 0                 # none can be for this frame yet
        view = memoryview(frame)
        try:
            while view:
                n = os.write(_FD, view)
                view = view[n:]
        except OSError:
            _die()
        if acked:
            _wait_ack()


def _bad_request(error, seq=None):
    """Tell the kernel that a frame it sent could not be used (never drop one
    silently): the kernel ends the request in flight with an error reply."""
    msg = {"type": "bad_request", "error": error[:_BAD_REQUEST_TEXT_MAX]}
    if isinstance(seq, int):
        msg["seq"] = seq
    _send(msg)


def _decode(body):
    """A frame body -> (dict, None), or (None, why it cannot be used)."""
    try:
        obj = _loads(body.decode("utf-8", "replace"))
    except RecursionError:
        obj, why = None, "frame nested too deeply to decode (RecursionError)"
    except BaseException as e:          # bad JSON, MemoryError
        obj, why = None, "frame is not valid JSON (%s: %s)" % (type(e).__name__, e)
    else:
        why = "frame is not a JSON object"
    if isinstance(obj, dict) and isinstance(obj.get("type"), str):
        return obj, None
    if isinstance(obj, dict):
        why = "frame has no string member 'type'"
    return None, why


def _next_frame(interruptible):
    """The first complete frame of the read buffer that is not an ack (acks
    are counted for their sender), decoded; None when there is none (rlock
    held)."""
    while True:
        buf = _S.rbuf
        if len(buf) < 4:
            return None
        n = int.from_bytes(buf[:4], "big")
        if n > _FRAME_MAX or n == 0:
            # the stream cannot be re-synchronised: say why, then end
            _bad_request("frame length %d is outside 1..%d" % (n, _FRAME_MAX))
            _die()
        if len(buf) < 4 + n:
            return None
        _S.rbuf = buf[4 + n:]
        obj, why = _decode(buf[4:4 + n])
        if obj is not None:
            if obj.get("type") == "ack" and n < _ACK_FRAME_MAX:
                _got_acks(1)            # a background thread's frame
                continue
            return obj
        if interruptible:
            return {"type": "input_reply", "error": "the kernel's reply could not be read: " + why}
        _bad_request(why)


def _recv(interruptible=False):
    """Read one frame (a dict).  EOF ends the runner.

    interruptible: SIGINT raises KeyboardInterrupt while blocked (input wait);
    it can only land while nothing has been consumed from the socket.

    A frame that cannot be used is answered with bad_request (in place of
    the reply the kernel waits for); during an input wait it becomes an
    input_reply error instead, so that input() fails with the reason and the
    cell ends with its own done.
    """
    while True:
        with _S.rlock:
            obj = _next_frame(interruptible)
            if obj is not None:
                return obj
            if not interruptible:
                _fill()
                continue
        # wait outside the lock, where SIGINT can raise; another thread may
        # read fd 3 meanwhile (and buffer our reply): look again soon
        select = _std("select")
        _S.sigmode = _SIG_INPUT
        try:
            if _S.pending:              # it landed in the runner's code above: raise it now
                _S.pending = False
                raise KeyboardInterrupt
            ready = select.select([_FD], [], [], _ACK_POLL_S)[0]
        finally:
            _S.sigmode = _SIG_USER
        if ready:
            with _S.rlock:
                if select.select([_FD], [], [], 0)[0]:
                    _fill()


# ---------------------------------------------------------------- lazy modules


def _std(name):
    """Import a standard-library module for the runner's own use.  The working
    directory is on sys.path (as in ipykernel), so a user's select.py must not
    shadow what the runner needs: it is left out while importing."""
    m = sys.modules.get(name)
    if m is not None:
        return m
    cwd = _S.cwd_path
    saved = sys.path[:]
    try:
        sys.path[:] = [p for p in saved if p and p != cwd]
        __import__(name)
    finally:
        sys.path[:] = saved
    return sys.modules[name]


def _mod(name):
    """Load a sibling module (cb_display, ...) once, by file path."""
    m = sys.modules.get("_cellblock_" + name)
    if m is None:
        import importlib.util
        path = os.path.join(_DIR, name + ".py")
        spec = importlib.util.spec_from_file_location("_cellblock_" + name, path)
        m = importlib.util.module_from_spec(spec)
        m._runner = sys.modules["_cellblock_runner"]
        sys.modules[spec.name] = m
        try:
            spec.loader.exec_module(m)
        except BaseException:
            del sys.modules[spec.name]
            raise
    return m


# ---------------------------------------------------------------- stdin bridge


class StdinNotImplementedError(NotImplementedError):
    """raw_input was called, but this frontend does not support input requests."""


StdinNotImplementedError.__module__ = "builtins"


def _input_bridge(prompt, password):
    __tracebackhide__ = True            # IPython's tracebacks leave this frame out
    if not _S.allow_stdin or not _S.in_cell:
        raise (_S.stdin_error or StdinNotImplementedError)(
            "raw_input was called, but this frontend does not support input requests.")
    _send({"type": "input_request", "prompt": prompt, "password": password})
    prev = _S.sigmode
    if _thread.get_ident() != _MAIN_THREAD:
        prev = -1                       # signals only reach the main thread
    try:
        while True:
            msg = _recv(interruptible=prev == 1)
            if msg.get("type") == "input_reply":
                break
    except KeyboardInterrupt:
        raise KeyboardInterrupt("Interrupted by user") from None
    finally:
        if prev != -1:
            _S.sigmode = prev
    if "value" not in msg and "error" in msg:
        raise EOFError(str(msg.get("error")))
    value = msg.get("value")
    if not isinstance(value, str):
        value = ""
    if value == "\x04":
        raise EOFError("EOF when reading a line")
    _check_pending()
    return value


def _input(prompt=""):
    """input([prompt]) -> str, answered by the frontend (input_request)."""
    __tracebackhide__ = True
    return _input_bridge(str(prompt), False)


def _getpass(prompt="Password: ", stream=None):
    """getpass(prompt) -> str, answered by the frontend without echo."""
    __tracebackhide__ = True
    return _input_bridge(str(prompt), True)


import io as _io


class _Stdin(_io.TextIOBase):
    """sys.stdin: readline() goes through the same bridge as input()."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, orig):
        self._orig = orig
        self._eof = False

    @property
    def buffer(self):
        return self._orig.buffer

    def readable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return 0

    def readline(self, size=-1):
        if self._eof or not _S.allow_stdin or not _S.in_cell:
            return ""
        try:
            line = _input_bridge("", False) + "\n"
        except EOFError:
            return ""
        return line

    def read(self, size=-1):
        out = []
        while True:
            line = self.readline()
            if not line:
                break
            out.append(line)
            if size is not None and size >= 0 and sum(map(len, out)) >= size:
                break
        return "".join(out)

    def readlines(self, hint=-1):
        return list(iter(self.readline, ""))

    def __iter__(self):
        return iter(self.readline, "")


# ---------------------------------------------------------------- import hooks

# module name -> function(module) called right after the module has executed
_POST_IMPORT = {}


class _PostImportLoader:
    def __init__(self, loader, fn):
        self._loader = loader
        self._fn = fn

    def create_module(self, spec):
        cm = getattr(self._loader, "create_module", None)
        return cm(spec) if cm is not None else None

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._fn(module)
        except Exception:
            pass

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _PostImportFinder:
    """sys.meta_path entry: patches watched modules just after they execute."""

    def find_spec(self, name, path=None, target=None):
        fn = _POST_IMPORT.get(name)
        if fn is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PostImportLoader(spec.loader, fn)
        return spec

    def invalidate_caches(self):
        pass


def _patch_getpass(m):
    m.getpass = _getpass


def _patch_ipython(m):
    _mod("cb_display").patch_ipython(m)


def _patch_pyplot(m):
    _mod("cb_display").patch_pyplot(m)


def _seed_matplotlib_cache(m):
    """Give a fresh sandbox the font list `make` built once (runner/mplcache),
    so the first matplotlib use does not rescan every font (~130 ms here).
    Runs after `matplotlib` itself is imported, before font_manager is."""
    try:
        src_dir = os.path.join(_DIR, "mplcache")
        names = [n for n in os.listdir(src_dir) if n.startswith("fontlist-") and n.endswith(".json")]
        dst_dir = m.get_cachedir()
        for n in names:
            dst = os.path.join(dst_dir, n)
            if not os.path.exists(dst):
                with open(os.path.join(src_dir, n), "rb") as f, open(dst, "xb") as g:
                    g.write(f.read())
    except Exception:
        pass                          # no seed: matplotlib builds the list itself


def _patch_comm(m):
    """The `comm` package creates the runner's comms (as ipykernel >= 6.18
    makes it create its own)."""
    _mod("cb_comm").patch_comm_package(m)


_POST_IMPORT["matplotlib"] = _seed_matplotlib_cache
_POST_IMPORT["getpass"] = _patch_getpass
_POST_IMPORT["comm"] = _patch_comm


class _ShimLoader:
    def __init__(self, fill):
        self._fill = fill

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self._fill(module)


class _IpykernelFinder:
    """sys.meta_path entry: `ipykernel` and `ipykernel.comm` are the
    runner's, whether or not ipykernel is installed in the sandbox's Python.
    Widgets import `ipykernel.comm.Comm` and find the kernel through
    `get_ipython().kernel`; the real package would bring ZMQ sockets and a
    kernel that do not exist here (cellblock's kernel is outside the
    sandbox), and its comms would publish nothing.  The `ipykernel` package
    served here has the real one's directories on its __path__, so its
    other modules (jsonutil, ...) still import from there."""

    _COMM = ("ipykernel.comm", "ipykernel.comm.comm", "ipykernel.comm.manager")

    def find_spec(self, name, path=None, target=None):
        if name != "ipykernel" and name not in self._COMM:
            return None
        machinery = _std("importlib.machinery")
        if name == "ipykernel":
            spec = machinery.ModuleSpec(name, _ShimLoader(self._package), is_package=True)
            real = None
            try:
                real = machinery.PathFinder.find_spec(
                    name, [p for p in sys.path if p and p != _DIR])
            except Exception:
                pass
            locations = getattr(real, "submodule_search_locations", None)
            spec.submodule_search_locations = list(locations) if locations else []
            return spec
        spec = machinery.ModuleSpec(name, _ShimLoader(self._comm),
                                    is_package=name == "ipykernel.comm")
        if name == "ipykernel.comm":
            spec.submodule_search_locations = []
        return spec

    @staticmethod
    def _package(module):
        module.__doc__ = ("ipykernel as cellblock's sandbox provides it: ipykernel.comm is the "
                         "runner's; the kernel itself runs outside the sandbox.")
        try:                            # the installed ipykernel's version, if any
            v = _std("importlib").import_module("ipykernel._version")
            for name in ("__version__", "version_info", "kernel_protocol_version",
                         "kernel_protocol_version_info"):
                if hasattr(v, name):
                    setattr(module, name, getattr(v, name))
        except Exception:
            pass

    @staticmethod
    def _comm(module):
        _mod("cb_comm").fill_ipykernel_comm(module)

    def invalidate_caches(self):
        pass


def _minimal_hooks():
    """Without an IPython shell, cellblock's display() replaces IPython's and
    plt.show() sends figures itself (cb_display)."""
    _POST_IMPORT["IPython.core.display_functions"] = _patch_ipython
    _POST_IMPORT["IPython.core.display"] = _patch_ipython
    _POST_IMPORT["IPython.display"] = _patch_ipython
    _POST_IMPORT["matplotlib.pyplot"] = _patch_pyplot

# ---------------------------------------------------------------- builtins for users


def display(*objs, **kwargs):
    """Display objects as rich output (like IPython.display.display)."""
    return _mod("cb_display").display(*objs, **kwargs)


def clear_output(wait=False):
    """Clear the output of the current cell (wait: until new output arrives)."""
    return _mod("cb_display").clear_output(wait)


def update_display(obj, *, display_id, **kwargs):
    """Update an output shown earlier with display(..., display_id=...)."""
    return _mod("cb_display").display(obj, display_id=display_id, update=True, **kwargs)


def get_ipython():
    """cellblock is not IPython: there is no InteractiveShell."""
    return None


class _Magic:
    """Target of IPython-syntax lines after transformation (cb_magics)."""

    def __getattr__(self, name):
        return getattr(_mod("cb_magics"), "m_" + name)


# ---------------------------------------------------------------- tracebacks


def _strip_tb(te):
    """Drop the runner's frames from a TracebackException (and its chain)."""
    seen = set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        st = te.stack
        keep = [f for f in st if f.filename not in _RUNNER_FILES]
        if len(keep) != len(st):
            st[:] = keep
        nxt = te.__cause__ or te.__context__
        for other in (te.__cause__, te.__context__):
            if other is not None and other is not nxt:
                _strip_tb(other)
        te = nxt


def _format_error(etype, value, tb):
    """-> (ename, evalue, traceback lines) for the error frame."""
    traceback = _std("traceback")
    ename = getattr(etype, "__name__", str(etype))
    try:
        evalue = str(value)
    except Exception:
        evalue = "<unprintable %s object>" % ename
    # skip the runner's own leading frames
    while tb is not None and tb.tb_frame.f_code.co_filename in _RUNNER_FILES:
        tb = tb.tb_next
    try:
        value.__traceback__ = tb
    except Exception:
        pass
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if ename == "UsageError":
        return ename, evalue, ["UsageError: " + evalue]
    try:
        te = traceback.TracebackException(etype, value, tb, compact=True)
        _strip_tb(te)
        text = list(te.format())
    except Exception:
        text = traceback.format_exception_only(etype, value)
    lines = [t[:-1] if t.endswith("\n") else t for t in text]
    return ename, evalue, lines


# ---------------------------------------------------------------- execution


def _register_source(filename, code):
    linecache = _std("linecache")
    lines = code.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[filename] = (len(code), None, lines, filename)


# What cells are called in tracebacks, warnings and inspect: under IPython a
# path like ipykernel's (which IPython shows as "Cell In [N]", and which the
# inspector prints as it is); it never exists on disk, the source is in linecache.
_IPYTHON_CELL_NAME = "/tmp/cellblock-cells/%s.py"


def _cell_filename(count):
    linecache = _std("linecache")
    _S.cell_serial += 1
    if _S.mode == "ipython":
        name = _IPYTHON_CELL_NAME % count
        if name in linecache.cache:
            name = _IPYTHON_CELL_NAME % ("%d.%d" % (count, _S.cell_serial))
        return name
    name = "<cell-%d>" % count
    if name in linecache.cache:
        name = "<cell-%d.%d>" % (count, _S.cell_serial)
    return name


_FUTURE_MASK = None


def _compile_cell(source, filename, original=None):
    """-> (body code, last-expression code or None)."""
    global _FUTURE_MASK
    ast = _std("ast")
    if _FUTURE_MASK is None:
        __future__ = _std("__future__")
        _FUTURE_MASK = 0
        for n in __future__.all_feature_names:
            _FUTURE_MASK |= getattr(__future__, n).compiler_flag
    _register_source(filename, original if original is not None else source)
    flags = _S.flags | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(source, filename, "exec", flags | ast.PyCF_ONLY_AST, True)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not _semicolon_after(
            source, tree.body[-1]):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec", flags, True)
    _S.flags |= body.co_flags & _FUTURE_MASK
    expr = compile(last, filename, "eval", flags, True) if last is not None else None
    return body, expr


def _semicolon_after(source, node):
    """True when the source after the node's end starts with ';' (ignoring space/comments)."""
    lines = source.splitlines()
    row = node.end_lineno - 1
    if row >= len(lines):
        return False
    rest = lines[row].encode("utf-8")[node.end_col_offset:].decode("utf-8", "replace")
    rest += "\n" + "\n".join(lines[row + 1:])
    for line in rest.split("\n"):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        return s.startswith(";")
    return False


_CO_COROUTINE = 0x80


def _run_code(code, glob, loc=None):
    """Run a compiled cell part; top-level await is run on a private loop."""
    if code.co_flags & _CO_COROUTINE:
        coro = eval(code, glob, loc)
        loop = getattr(_S, "loop", None)
        if loop is None:
            asyncio = _std("asyncio")
            loop = _S.loop = asyncio.new_event_loop()
        return loop.run_until_complete(coro)
    return eval(code, glob, loc)


def _needs_transform(code):
    return "!" in code or "%" in code or "?" in code


def _run_cell(code, glob):
    """Compile and run one cell. Returns the last expression's value (or None).

    Raises whatever the user code raises.
    """
    source = code
    if _needs_transform(code):
        magics = _mod("cb_magics")
        page = magics.help_request(code)
        if page is not None:
            _S.payload.append(page)
            return None
        source = magics.transform(code)
    filename = _cell_filename(_S.count)
    body, expr = _compile_cell(source, filename, code)
    _run_code(body, glob)
    if expr is not None:
        return _run_code(expr, glob)
    return None


def _store_result(value, count, glob):
    glob["___"] = glob.get("__")
    glob["__"] = glob.get("_")
    glob["_"] = value
    glob["_%d" % count] = value
    out = glob.get("Out")
    if isinstance(out, dict):
        out[count] = value


def _execute_fields(req):
    """An execute request's (code, silent, store_history, user_expressions,
    execution_count), each of its type whatever the request holds (the count
    None when the kernel sent none).  Both shells read them here."""
    code = req.get("code")
    if not isinstance(code, str):
        code = ""
    silent = bool(req.get("silent", False))
    store = bool(req.get("store_history", not silent)) and not silent
    uexpr = req.get("user_expressions")
    if not isinstance(uexpr, dict):
        uexpr = {}
    count = req.get("execution_count")
    return code, silent, store, uexpr, count if isinstance(count, int) else None


def _execute(req):
    code, silent, store, uexpr, count = _execute_fields(req)
    if count is None:
        count = _S.count + 1
    _S.count = count
    _S.silent = silent
    _S.allow_stdin = bool(req.get("allow_stdin", False))
    _S.payload = payload = []
    _S.in_cell = True
    _S.pending = False
    glob = _S.user.__dict__
    if store:
        hist = glob.get("In")
        if isinstance(hist, list):
            while len(hist) < count:
                hist.append("")
            hist[count:count + 1] = [code]
        # like IPython: _i is the previous input, _iN and _i00 this one
        glob["_iii"], glob["_ii"], glob["_i"] = glob.get("_ii", ""), glob.get("_i", ""), _S.last_in
        glob["_i%d" % count] = glob["_i00"] = _S.last_in = code
    err = None
    value = None
    try:
        _S.sigmode = 1
        value = _run_cell(code, glob)
    except BaseException as e:                   # user code raised (or was interrupted)
        _S.sigmode = 0
        err = (type(e), e, e.__traceback__)
    _S.sigmode = 0
    if isinstance(value, _ExitAutocall):     # a bare `exit` / `quit`, as IPython's autocall
        value = value()
    if err is None and value is not None:
        if store:
            _store_result(value, count, glob)
        if not silent:
            err = _guarded(_publish_result, value)
    if "matplotlib.pyplot" in sys.modules:
        e2 = _guarded(_flush_figures)
        if err is None:
            err = e2
    status = "ok"
    reply = {"type": "done", "status": "ok", "user_expressions": {}, "payload": payload}
    if err is not None:
        ename, evalue, tb = _format_error(*err)
        err = None
        status = "error"
        _send({"type": "error", "ename": ename, "evalue": evalue, "traceback": tb})
        reply.update(status="error", ename=ename, evalue=evalue, traceback=tb)
    elif uexpr:
        reply["user_expressions"] = _user_expressions(uexpr, glob)
    _S.in_cell = False
    _S.sigmode = 0
    _S.pending = False
    _flush()
    _send(reply)
    return status


def _guarded(fn, *args):
    """Run fn in user mode (interruptible); return exc_info or None."""
    try:
        _S.sigmode = 1
        fn(*args)
    except BaseException as e:
        _S.sigmode = 0
        return (type(e), e, e.__traceback__)
    finally:
        _S.sigmode = 0
    return None


def _publish_result(value):
    data, md = _format(value)
    _send({"type": "execute_result", "data": data, "metadata": md})


def _flush_figures():
    _mod("cb_display").flush_figures()


_SIMPLE = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis))


def _format(value):
    """value -> (mimebundle, metadata); plain scalars never load cb_display."""
    if type(value) in _SIMPLE:
        return {"text/plain": repr(value)}, {}
    return _mod("cb_display").format(value)


def _user_expressions(exprs, glob):
    out = {}
    for name, expr in exprs.items():
        try:
            _S.sigmode = 1
            if not isinstance(expr, str):
                raise TypeError("user expression must be a string")
            value = eval(compile(expr, "<user_expression>", "eval", _S.flags, True), glob)
            _S.sigmode = 0
            data, md = _format(value)
            out[name] = {"status": "ok", "data": data, "metadata": md}
        except BaseException as e:
            _S.sigmode = 0
            ename, evalue, tb = _format_error(type(e), e, e.__traceback__)
            out[name] = {"status": "error", "ename": ename, "evalue": evalue, "traceback": tb}
        finally:
            _S.sigmode = 0
    return out


# ---------------------------------------------------------------- other requests


def _complete(req):
    code, pos = _code_pos(req)
    try:
        matches, start, end = _mod("cb_assist").complete(code, pos, _S.user.__dict__)
    except BaseException:
        matches, start, end = [], pos, pos
    _send({"type": "complete_reply", "matches": matches, "cursor_start": start,
           "cursor_end": end, "metadata": {}})


def _inspect(req):
    code, pos = _code_pos(req)
    level = req.get("detail_level", 0)
    try:
        data = _mod("cb_assist").inspect(code, pos, level == 1, _S.user.__dict__)
    except BaseException:
        data = None
    _send({"type": "inspect_reply", "found": bool(data), "data": data or {}, "metadata": {}})


def _is_complete(req):
    code = req.get("code")
    try:
        status, indent = _mod("cb_assist").is_complete(code if isinstance(code, str) else "")
    except BaseException:
        status, indent = "unknown", None
    msg = {"type": "is_complete_reply", "status": status}
    if status == "incomplete":
        msg["indent"] = indent or ""
    _send(msg)


def _code_pos(req):
    code = req.get("code")
    if not isinstance(code, str):
        code = ""
    pos = req.get("cursor_pos")
    if not isinstance(pos, int) or pos < 0 or pos > len(code):
        pos = len(code)
    return code, pos


def _request_waiting():
    """True when a request has arrived (buffered or readable on the socket)."""
    if len(_S.rbuf) >= 4:
        return True
    select = _std("select")
    try:
        return bool(select.select([_FD], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _preload(req):
    """Speculative imports while idle (--preload): queued here, done one
    module per idle step (after the IPython shell, which every cell that
    imports them would wait for anyway), so a cell waits at most for the
    module being imported, and a cell that imports the same modules finds
    them done.  Failures are ignored: the user's own import will report them."""
    mods = req.get("modules")
    if isinstance(mods, list):
        _S.preload = [m for m in mods if isinstance(m, str) and m]


class _ExitAutocall:
    """`exit`/`quit` as in IPython's kernel: ask the frontend to close (the
    ask_exit payload, which jupyter console acts on) instead of ending the
    interpreter.  exit(keep_kernel=True) keeps the kernel running."""

    def __call__(self, keep_kernel=False):
        if _S.payload is not None:
            _S.payload.append({"source": "ask_exit", "keepkernel": bool(keep_kernel)})

    def __repr__(self):
        return "Use exit() or Ctrl-D to leave the frontend; the kernel stays until it is shut down."


def _comm_request(req):
    """A frontend's comm_open, comm_msg or comm_close: the comm manager runs
    the handlers (cb_comm, in both shells), then comm_done."""
    _mod("cb_comm").handle(req)


# ---------------------------------------------------------------- the IPython shell, loaded while idle

# Imported one per idle step before IPython itself, leaves first, so that a
# request never waits for more than one of them.  Only a hint for speed: a
# name another IPython version does not use costs one failed lookup, and
# the last step imports whatever is left.  What cb_lazy defers (jedi,
# asyncio, pydoc, stack_data and its helpers, urllib.request) is not here;
# _PREPARE puts its stand-ins in place just before IPython is imported.
_PREPARE = "cellblock:prepare"
_LOAD_STEPS = (
    "logging", "inspect", "traitlets", "traitlets.config", "pygments.lexers.python",
    "pygments.formatters.terminal256", "pdb", "sqlite3", "decorator", "pickleshare",
    "pexpect", "cProfile", "timeit", _PREPARE, "IPython", "IPython.core.magics",
)


def _loading():
    return _S.mode == "ipython" and _S.shell is None and _S.load_step is not None


def _load_step():
    """Do the next step of loading the shell (_S.load_step None when over)."""
    i = _S.load_step
    if i < len(_LOAD_STEPS):
        _S.load_step = i + 1
        if _LOAD_STEPS[i] == _PREPARE:
            _mod("cb_lazy").prepare()
            return
        try:
            _std("importlib").import_module(_LOAD_STEPS[i])
        except BaseException:
            pass
        return
    _S.load_step = None
    try:
        _mod("cb_shell").create()
    except BaseException as e:
        _shell_failed(e)


def _shell_failed(e):
    """IPython is there but did not load: say so once, go on minimal."""
    _S.shell = None
    _S.mode = "minimal"
    try:
        sys.stderr.write("cellblock: the IPython shell could not be loaded (%s: %s); cells run "
                         "in cellblock's minimal runner\n" % (type(e).__name__, e))
    except Exception:
        pass
    try:
        _mod("cb_lazy").release()
    except Exception:
        pass
    _minimal_namespace(_S.user.__dict__)
    _minimal_builtins()
    _minimal_hooks()


def _ensure_shell():
    """Finish loading the shell now: a request needs it.  True when it is there.
    Inside a cell, a SIGINT meanwhile is kept for the cell (raised once user
    code runs again), never half-way through an import."""
    if not _loading():
        return _S.shell is not None
    prev = _S.sigmode
    if prev != _SIG_IGNORE:
        _S.sigmode = _SIG_DEFER
    try:
        while _loading():
            _load_step()
    finally:
        _S.sigmode = prev
    return _S.shell is not None


def _idle_step():
    """One piece of work while no request waits; False when there is none."""
    if _loading() and _S.idle_load:
        _load_step()
        return True
    if _S.preload:
        name = _S.preload.pop(0)
        try:
            _std("importlib").import_module(name)
        except BaseException:
            pass
        return True
    return False


# Loading starts once the sandbox has been idle this long after start-up:
# the first request a client sends on kernel_info's reply then never
# waits for a loading step.
_IDLE_START_S = 0.1


def _next_request():
    """The next request, doing idle work until one is there."""
    if _S.load_step == 0 and _S.idle_load and not _request_waiting():
        select = _std("select")
        try:
            select.select([_FD], [], [], _IDLE_START_S)
        except (OSError, ValueError):
            pass
    while not _request_waiting() and _idle_step():
        pass
    return _recv()


# ---------------------------------------------------------------- dispatch


def _execute_ipython(req):
    if _S.shell is None and _S.mode == "ipython" and _mod("cb_fast").try_execute(req):
        return
    if _ensure_shell():
        _mod("cb_shell").execute(req)
    else:
        _execute(req)


def _assist_ipython(kind):
    def handler(req):
        if _ensure_shell():
            getattr(_mod("cb_shell"), kind)(req)
        else:
            _MINIMAL_HANDLERS[kind](req)
    return handler


_MINIMAL_HANDLERS = {
    "comm_open": _comm_request,
    "comm_msg": _comm_request,
    "comm_close": _comm_request,
    "preload": _preload,
    "execute": _execute,
    "complete": _complete,
    "inspect": _inspect,
    "is_complete": _is_complete,
}

_IPYTHON_HANDLERS = {
    # comms do not wait for the shell: a frontend opens its widget version
    # comm as soon as it connects
    "comm_open": _comm_request,
    "comm_msg": _comm_request,
    "comm_close": _comm_request,
    "preload": _preload,
    "execute": _execute_ipython,
    "complete": _assist_ipython("complete"),
    "inspect": _assist_ipython("inspect"),
    "is_complete": _assist_ipython("is_complete"),
}

# frames that may arrive when nothing waits for them: dropped without a word
_STRAY = frozenset(("ack", "input_reply"))

# ---------------------------------------------------------------- start-up

# ipykernel's IPKernelApp/ZMQInteractiveShell set these for the code they run
_IPYKERNEL_ENV = (("TERM", "xterm-color"), ("CLICOLOR", "1"), ("PAGER", "cat"),
                  ("GIT_PAGER", "cat"))
_INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
# what IPython's own __main__ says about itself (InteractiveShell.prepare_user_module)
_IPYTHON_MAIN_DOC = "Automatically created module for IPython interactive environment"


def _minimal_namespace(ns):
    ns.update({"In": [""], "Out": {}, "_": None, "__": None, "___": None,
               "_i": "", "_ii": "", "_iii": ""})


def _minimal_builtins():
    builtins.display = display
    builtins.clear_output = clear_output
    builtins.update_display = update_display
    builtins.get_ipython = get_ipython
    builtins.exit = builtins.quit = _ExitAutocall()
    builtins.__cellblock__ = _Magic()


def _has_module(name):
    """Whether `name` (top level) can be imported, without importing it."""
    for f in sys.meta_path:
        if getattr(f, "__name__", "") == "PathFinder":
            try:
                return f.find_spec(name, [p for p in sys.path if p != _S.cwd_path]) is not None
            except Exception:
                return False
    return False


def _ipython_environment(ns):
    """The namespace and environment a cell sees under ipykernel, set before
    any cell runs so that fast-path cells see them too (cb_shell then adopts
    the same module).  The names IPython adds are there already, in IPython's
    order, holding stand-ins until the shell puts its own in their place:
    the namespace is never emptied under a running thread."""
    for name, value in _IPYKERNEL_ENV:
        os.environ[name] = value
    if _has_module("matplotlib_inline"):
        os.environ["MPLBACKEND"] = _INLINE_BACKEND
    hist_in, hist_out = [""], {}
    ns.update({"__doc__": _IPYTHON_MAIN_DOC, "__builtin__": builtins, "__builtins__": builtins,
               "_ih": hist_in, "_oh": hist_out, "_dh": [_S.cwd_path], "In": hist_in,
               "Out": hist_out, "get_ipython": lambda: _S.shell,
               "exit": getattr(builtins, "exit", None), "quit": getattr(builtins, "quit", None),
               "_": "", "__": "", "___": ""})


def _setup(mode):
    _signal.signal(_signal.SIGINT, _on_sigint)
    sys.modules["_cellblock_runner"] = sys.modules[__name__]
    _S.mode = mode
    user = type(sys)("__main__")
    if mode != "ipython":
        user.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = user
    _S.user = user
    if sys.path and os.path.abspath(sys.path[0] or ".") == _DIR:
        del sys.path[0]
    # the working directory first on sys.path, as ipykernel has it (its
    # launcher's cwd; -I left it out): `%%writefile helper.py` then
    # `import helper` works.  -I's other protections stay (no user site, no
    # PYTHON* variables).
    try:
        _S.cwd_path = os.getcwd()
        sys.path.insert(0, _S.cwd_path)
    except OSError:
        pass
    # PYTHONDONTWRITEBYTECODE=1, which -I ignores: no __pycache__ of the
    # user's modules in the working directory (they would come back as
    # artifacts, and a rewritten module of the same size within the same
    # second would be imported from its stale .pyc)
    sys.dont_write_bytecode = True
    if mode == "ipython":
        # CELLBLOCK_SHELL=ipython-on-demand (tests, bench): no loading while
        # idle, so that the fast path can be compared with the shell
        _S.idle_load = os.environ.get("CELLBLOCK_SHELL") != "ipython-on-demand"
        _ipython_environment(user.__dict__)
    else:
        _minimal_namespace(user.__dict__)
        _minimal_builtins()
        _minimal_hooks()
    builtins.input = _input
    if "getpass" in sys.modules:
        _patch_getpass(sys.modules["getpass"])
    try:
        sys.stdin = _Stdin(sys.stdin)
    except Exception:
        pass
    sys.meta_path.insert(0, _PostImportFinder())
    sys.meta_path.insert(0, _IpykernelFinder())
    sys.argv[:] = [""]


def _main(mode="minimal"):
    """The request loop (runner.py has sent the hello frame already)."""
    _setup(mode)
    while True:
        if _S.deferred:
            _send_deferred()
        req = _next_request()
        kind = req.get("type")
        handler = (_IPYTHON_HANDLERS if _S.mode == "ipython" else _MINIMAL_HANDLERS).get(kind)
        if handler is None:
            if kind not in _STRAY:
                _bad_request("unknown request type %r" % (kind[:40],), req.get("seq"))
            continue
        if isinstance(req.get("seq"), int):
            _S.seq = req["seq"]
            if kind in ("execute", "comm_open", "comm_msg", "comm_close"):
                _S.request = req                # kernel.get_parent() (cb_comm)
                _S.request_serial += 1
                # what is printed from now on belongs to this request
                _send({"type": "started"})      # ordered: waits for the ack
        try:
            handler(req)
        except BaseException as e:    # a runner bug must not end the session
            _S.sigmode = _SIG_IGNORE
            _S.in_cell = False
            try:
                sys.__stderr__.write("cellblock runner: internal error: %r\n" % (e,))
            except Exception:
                pass
            if kind == "execute":
                _send({"type": "done", "status": "error", "ename": type(e).__name__,
                       "evalue": str(e), "traceback": [], "user_expressions": {},
                       "payload": []})
            elif kind in ("comm_open", "comm_msg", "comm_close"):
                _send({"type": "comm_done"})
