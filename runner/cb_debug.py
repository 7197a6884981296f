"""cellblock runner: the debugger's channel (fd 4) and debugpy, in process.

The kernel outside the sandbox speaks the Jupyter debug protocol with the
frontends and forwards their Debug Adapter Protocol requests here, on a
channel of its own (docs/RUNNER_PROTOCOL.md section 4): 4-byte big-endian
length + UTF-8 JSON, one DAP message per frame; requests come in, responses
and events go out.  It is not the request channel on fd 3 (one request at a
time): a cell stopped at a breakpoint is a request that never ends while the
debugger is being driven.

A thread of its own (cb_core._debug_bridge), which the debugger never
traces, reads fd 4.  On `initialize` it starts pydevd (Debian's debugpy
1.6.6 without its adapter process: pydevd speaks DAP itself) connected to a
socketpair instead of the TCP port debugpy would listen on, so no socket of
the sandbox's network is involved (under --network host a listener on
loopback would be reachable by every local user).  A second thread relays
what pydevd writes back to fd 4.  What ipykernel's debugger adds on top of
DAP (dumpCell, source, inspectVariables, richInspectVariables, modules,
variable filtering, trimming its own frames from stack traces) is done here
(cb_debug_req); debugInfo, configurationDone and the attach handshake are
the kernel's.

pydevd must see the interpreter's threading module as imported by the main
thread (else it takes this thread for the main one): the main thread imports
it while idle (cb_core._idle_step) and this thread waits for it.
"""

import sys
import os
import _thread
import itertools

_runner = sys.modules["_cellblock_runner"]
_S = _runner._S
_FD = _runner._DEBUG_FD
_FRAME_MAX = 8 * 1024 * 1024         # CB_DAP_FRAME_MAX: the kernel drops larger frames
_READ = 1 << 16
_INTERNAL_SEQ = 1 << 40              # seq of the requests this module sends pydevd itself
_THREADING_WAIT_S = 30.0             # for the main thread to import threading
_PATH_LOCK_WAIT_S = 30.0             # ... and for it to finish changing sys.path (cb_core._std)
_HEADER = b"Content-Length: "        # pydevd's framing (DAP's base protocol)
_SEP = b"\r\n\r\n"

# what the frontend's attach request cannot change
_ATTACH_FORCED = {"redirectOutput": False, "subProcess": False}


class _State:
    wlock = _thread.allocate_lock()  # one frame written to fd 4 at a time
    started = False                  # pydevd runs
    sock = None                      # our end of pydevd's socketpair
    slock = _thread.allocate_lock()  # one message written to pydevd at a time
    internal = {}                    # seq -> callback(response) for our own requests
    seqs = itertools.count(_INTERNAL_SEQ)
    hook = None                      # debugpy's breakpointhook, installed once it runs
    stopped = set()                  # DAP ids of threads stopped now
    retrace = False                  # an interrupt ended the main thread's tracing


_D = _State

# ---------------------------------------------------------------- fd 4


def _write_frame(obj):
    """One DAP message to the kernel.  A response too large for the channel
    becomes a failed one (the kernel answers every request), an event too
    large is dropped."""
    data = _runner._dumps(obj).encode("utf-8", "replace")
    if len(data) > _FRAME_MAX:
        if obj.get("type") != "response":
            return
        obj = {"type": "response", "seq": obj.get("seq", 0), "request_seq": obj.get("request_seq"),
               "command": obj.get("command"), "success": False,
               "message": "the reply is larger than the debugger's channel allows (%d bytes)"
                          % _FRAME_MAX}
        data = _runner._dumps(obj).encode("utf-8", "replace")
    frame = memoryview(len(data).to_bytes(4, "big") + data)
    with _D.wlock:
        while frame:
            frame = frame[os.write(_FD, frame):]


def after_fork():
    """In a checkpoint's copy woken by a rollback: locks a thread of the old
    runner may have held when it forked are new ones."""
    _D.wlock = _thread.allocate_lock()
    _D.slock = _thread.allocate_lock()


def respond(req, success=True, body=None, message=None):
    """The response to a request from the kernel."""
    r = {"type": "response", "seq": 0, "request_seq": req.get("seq"), "command": req.get("command"),
         "success": bool(success)}
    if body is not None:
        r["body"] = body
    if message is not None:
        r["message"] = message
    _write_frame(r)


def _frames():
    """Requests from the kernel, decoded; ends at EOF or a broken stream."""
    buf = bytearray()                   # grows in place: a large request is not copied per read
    while True:
        while len(buf) >= 4:
            n = int.from_bytes(buf[:4], "big")
            if n == 0 or n > _FRAME_MAX:
                return                  # cannot be re-synchronised: the debugger stops
            if len(buf) < 4 + n:
                break
            body = bytes(buf[4:4 + n])
            del buf[:4 + n]
            try:
                obj = _runner._frames._loads(body.decode("utf-8", "replace"))
            except BaseException:
                continue
            if isinstance(obj, dict) and obj.get("type") == "request" \
                    and isinstance(obj.get("command"), str):
                yield obj
        try:
            data = os.read(_FD, _READ)
        except OSError:
            return
        if not data:
            return
        buf += data


def bridge():
    """The bridge thread: serves fd 4 until it closes."""
    req_mod = _runner._mod("cb_debug_req")
    for req in _frames():
        try:
            _handle(req, req_mod)
        except BaseException as e:      # a bug here must not cost the frontend its reply
            try:
                respond(req, False, message="cellblock debugger: %s: %s" % (type(e).__name__, e))
            except BaseException:
                return


def _handle(req, req_mod):
    cmd = req["command"]
    local = req_mod.LOCAL.get(cmd)
    if local is not None:
        local(req)
        return
    if not _D.started:
        if cmd != "initialize":
            respond(req, False, message="the debugger is not started (initialize and attach first)")
            return
        why = _start()
        if why is not None:
            respond(req, False, message=why)
            return
    if cmd == "initialize" and isinstance(req.get("arguments"), dict):
        req["arguments"].setdefault("adapterID", "")    # pydevd requires it, DAP does not
    if cmd == "attach":
        args = req.setdefault("arguments", {})
        if isinstance(args, dict):
            args.update(_ATTACH_FORCED)
            # the runner's own files are not the user's: never stepped into, never shown
            rules = args.get("rules") if isinstance(args.get("rules"), list) else []
            args["rules"] = rules + [{"path": _runner._DIR, "include": False}]
        req_mod.debugging(True)
    elif cmd == "disconnect":
        args = req.setdefault("arguments", {})
        if isinstance(args, dict):
            args["terminateDebuggee"] = False   # the kernel ends sandboxes, not the debugger
        req_mod.debugging(False)
        _D.stopped.clear()
    elif cmd == "variables" and not _D.stopped:
        req_mod.variables_not_stopped(req)
        return
    forward(req)


# ---------------------------------------------------------------- pydevd


def _mark_untraced():
    """This thread is the debugger's own: pydevd neither traces nor lists it."""
    import threading
    t = threading.current_thread()
    t.pydev_do_not_trace = True
    t.is_pydev_daemon_thread = True


def _start():
    """Starts pydevd on a socketpair.  None, or why it could not."""
    why = load()
    if why is not None:
        return why
    _mark_untraced()
    import socket
    import debugpy
    import pydevd
    ours, theirs = socket.socketpair()
    prefixes = []
    for mod in (pydevd, debugpy):
        path = os.path.abspath(mod.__file__)
        if os.path.basename(path) == "__init__.py":
            path = os.path.dirname(path)
        prefixes.append(path)
    site = os.path.dirname(os.path.abspath(pydevd.__file__))
    for name in ("_pydevd_bundle", "_pydev_bundle", "_pydevd_frame_eval", "pydevd_plugins",
                 "_pydev_runfiles", "pydevd_file_utils.py", "pydevd_tracing.py",
                 "pydev_ipython"):
        prefixes.append(os.path.join(site, name))
    # its compiled speedups name their code by relative paths
    prefixes += ["_pydevd_bundle" + os.sep, "_pydevd_frame_eval" + os.sep]
    orig = pydevd.start_client
    pydevd.start_client = lambda host, port: theirs
    try:
        pydevd.settrace(host="cellblock", port=0, suspend=False, trace_only_current_thread=False,
                        patch_multiprocessing=False, block_until_connected=True,
                        wait_for_ready_to_run=False, notify_stdin=False,
                        dont_trace_start_patterns=(_runner._DIR, prefixes[1]),
                        dont_trace_end_patterns=())
    except BaseException as e:
        return "the debugger could not start (%s: %s)" % (type(e).__name__, e)
    finally:
        pydevd.start_client = orig
    _D.sock = ours
    if _D.hook is not None:
        sys.breakpointhook = _D.hook    # breakpoint() stops in the frontend's debugger now
    _S.debug_dirs = tuple(prefixes)
    _D.started = True
    _thread.start_new_thread(_relay, ())
    return None


def load():
    """Imports debugpy's pydevd as debugpy sets it up (DAP, its defaults);
    the variable explorer needs it before the debugger starts.  Importing it
    makes breakpoint() call debugpy, which ignores it until a frontend is
    attached: until the debugger starts, breakpoint() stays pdb.  None, or
    why debugpy cannot be used."""
    if "debugpy.server.api" in sys.modules:
        return None
    waited = 0.0
    while "threading" not in sys.modules:
        if waited >= _THREADING_WAIT_S:
            return "the sandbox is still starting up (busy): try again when the cell ends"
        import time
        time.sleep(0.05)
        waited += 0.05
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"   # else a warning lands in the cell
    hook = sys.breakpointhook
    # debugpy's import adds its vendored directory to sys.path and removes it:
    # not while the runner's own _std has sys.path swapped (cb_core)
    if not _S.path_lock.acquire(True, _PATH_LOCK_WAIT_S):
        return "the sandbox is busy importing: try again"
    try:
        from debugpy.server import api  # noqa: F401
    except BaseException as e:
        return "debugpy cannot be imported in the sandbox (%s: %s)" % (type(e).__name__, e)
    finally:
        _S.path_lock.release()
        _D.hook, sys.breakpointhook = sys.breakpointhook, hook
    return None


def forward(req):
    """A request to pydevd, as DAP's base protocol frames it."""
    data = _runner._dumps(req).encode("utf-8")
    with _D.slock:
        _D.sock.sendall(_HEADER + str(len(data)).encode("ascii") + _SEP + data)


def ask(command, arguments, callback):
    """Our own request to pydevd; callback(response) runs on the relay thread."""
    seq = next(_D.seqs)
    _D.internal[seq] = callback
    forward({"type": "request", "seq": seq, "command": command, "arguments": arguments})


def _messages():
    """What pydevd writes, one message at a time."""
    buf = bytearray()                   # grows in place: a large message is not copied per read
    while True:
        i = buf.find(_SEP)
        if i >= 0:
            head = buf[:i]
            n = None
            for line in head.split(b"\r\n"):
                if line.startswith(_HEADER):
                    try:
                        n = int(line[len(_HEADER):])
                    except ValueError:
                        n = None
            if n is None:
                del buf[:i + len(_SEP)]
                continue
            if len(buf) >= i + len(_SEP) + n:
                body = bytes(buf[i + len(_SEP):i + len(_SEP) + n])
                del buf[:i + len(_SEP) + n]
                try:
                    yield _runner._frames._loads(body.decode("utf-8", "replace"))
                except BaseException:
                    pass
                continue
        try:
            data = _D.sock.recv(_READ)
        except OSError:
            return
        if not data:
            return
        buf += data


def _relay():
    """The relay thread: pydevd's responses and events to the kernel."""
    _mark_untraced()
    req_mod = _runner._mod("cb_debug_req")
    for msg in _messages():
        if not isinstance(msg, dict):
            continue
        try:
            kind = msg.get("type")
            if kind == "response":
                cb = _D.internal.pop(msg.get("request_seq"), None)
                if cb is not None:
                    cb(msg)
                    continue
                msg = req_mod.adjust_response(msg)
            elif kind == "event":
                _track(msg)
            else:
                continue
            _write_frame(msg)
        except BaseException:
            pass


def _track(ev):
    body = ev.get("body") if isinstance(ev.get("body"), dict) else {}
    if ev.get("event") == "stopped":
        if isinstance(body.get("threadId"), int):
            _D.stopped.add(body["threadId"])
    elif ev.get("event") == "continued":
        if body.get("allThreadsContinued", True):
            _D.stopped.clear()
        else:
            _D.stopped.discard(body.get("threadId"))


# ---------------------------------------------------------------- interrupts


def in_debugger(frame):
    """True when frame runs inside the debugger's own code (its trace
    function, or a thread stopped at a breakpoint)."""
    dirs = _S.debug_dirs
    while frame is not None:
        if frame.f_code.co_filename.startswith(dirs):
            return True
        frame = frame.f_back
    return False


def interrupted():
    """SIGINT landed in the debugger's own code (cb_core._on_sigint), which
    then raises KeyboardInterrupt there: it leaves the debugger's trace
    function into the cell, which ends with it.  The stopped threads are
    resumed first (pydevd says `continued`), and since an exception out of a
    trace function ends tracing in that thread, the next cell traces again
    (retrace)."""
    _D.retrace = True
    try:
        from _pydevd_bundle.pydevd_api import PyDevdAPI
        import pydevd
        if pydevd.get_global_debugger() is not None:
            PyDevdAPI().request_resume_thread("*")
    except BaseException:
        pass


def retrace():
    """Main thread, before a cell: tracing again after an interrupt."""
    if not _D.retrace:
        return
    _D.retrace = False
    try:
        import pydevd
        py_db = pydevd.get_global_debugger()
        if py_db is not None:
            py_db.enable_tracing()
    except BaseException:
        pass
