"""cellblock runner core: the request loop, dispatch, interrupts, loading the
shell while idle; it assembles the core's parts (frames: cb_frames, stdin:
cb_stdin, import hooks: cb_hooks, the minimal executor and errors: cb_exec,
start-up: cb_startup, memory: cb_memory).

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
- "minimal": cb_exec's executor plus cb_display/cb_assist/cb_magics, for
  interpreters without IPython.

Start-up time matters: this file and its parts import nothing that is not
already loaded by the interpreter's own start-up (``_json``, ``_signal`` and
``_thread`` are built in).  The other sibling modules and heavy stdlib
modules (ast, traceback, ...) are loaded on first use.

User code shares this interpreter.  Runner state lives in this module's
globals (the user's ``__main__`` is a separate, fresh module), and frames of
the runner's files are removed from user tracebacks.
"""

import sys
import os
import _thread

_VERSION = 1
_FD = 3
_DEBUG_FD = 4           # the debugger's channel (docs/RUNNER_PROTOCOL.md section 4), if present
_DIR = os.path.dirname(os.path.abspath(__file__))
_MODULE_NAMES = ("cb_core", "cb_frames", "cb_stdin", "cb_hooks", "cb_exec", "cb_display",
                 "cb_assist", "cb_magics", "cb_fast", "cb_shell", "cb_shell_io", "cb_shell_magics",
                 "cb_lazy", "cb_comm", "cb_snap", "cb_debug", "cb_debug_req", "cb_warm",
                 "cb_shell_fast", "cb_startup", "cb_memory")
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
    # lock, rlock, path_lock, ack_waiter: _new_locks
    acks = 0             # acks read for the frame being written (by whichever thread read)
    deferred = []        # frames to send at the next safe point (_defer)
    request = None       # the execute or comm request being handled (kernel.get_parent())
    request_serial = 0   # counts them
    user = None          # the user's __main__ module
    flags = 0            # __future__ flags collected from earlier cells
    cell_prefix = "/tmp/cellblock/"  # the cells' file names start with this (runner.py)
    cell_counts = {}     # cell file name -> the count that ran it last (minimal tracebacks)
    debug_dirs = ()      # the debugger's own source dirs once it runs (cb_debug; SIGINT)
    debugging = False    # a frontend has the debugger attached (cb_debug)
    debug_available = False  # fd 4 is open and debugpy can be imported (runner.py)
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
    snap_zombies = []    # intermediate children of checkpoint forks, to reap (cb_snap)
    shell_version = ""   # the hello's (a restored runner says it again)
    hello_debugger = False  # ... and its "debugger"
    reserve = None       # address space kept for the runner when a cell uses up memory (cb_memory)
    mem_short = False    # memory ran out: the shell waits until there is room (cb_memory)


_S = _State


def _new_locks():
    """The runner's locks, made at start and anew in a checkpoint's copy
    (cb_snap), where one that another thread held at the fork would never
    be released."""
    _S.lock = _thread.allocate_lock()  # held while a frame is written and its ack awaited
    _S.rlock = _thread.RLock()         # held while fd 3 is read and rbuf parsed
    _S.path_lock = _thread.RLock()     # held while the runner changes sys.path (_std, cb_debug)
    _S.ack_waiter = None               # lock released to wake a sender whose ack another thread read


_new_locks()
_PATH_LOCK_S = 5.0   # the longest _std waits for another thread's change of sys.path
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
    if _S.debug_dirs and frame is not None and _mod("cb_debug").in_debugger(frame):
        # in the debugger's own code (stopped at a breakpoint, or its trace
        # function): the stopped threads resume and the interrupt goes on
        # into the cell, which ends with it (cb_debug.interrupted)
        _mod("cb_debug").interrupted()
    _S.pending = False
    raise KeyboardInterrupt


def _hidden_file(filename):
    """The runner's own files, and the debugger's: never in user tracebacks."""
    return filename in _RUNNER_FILES or (bool(_S.debug_dirs) and filename.startswith(_S.debug_dirs))


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


# ---------------------------------------------------------------- lazy modules


def _std(name):
    """Import a standard-library module for the runner's own use.  The working
    directory is on sys.path (as in ipykernel), so a user's select.py must not
    shadow what the runner needs: it is left out while importing."""
    m = sys.modules.get(name)
    if m is not None:
        return m
    # one change of sys.path at a time: the debugger's thread imports debugpy,
    # which puts its own entry on sys.path and takes it off again (a restore
    # of ours in between lost it: "list.remove(x): x not in list").  Bounded:
    # an import that waits on the other thread's module lock must not deadlock
    got = _S.path_lock.acquire(True, _PATH_LOCK_S)
    try:
        cwd = _S.cwd_path
        saved = sys.path[:]
        try:
            sys.path[:] = [p for p in saved if p and p != cwd]
            __import__(name)
        finally:
            sys.path[:] = saved
    finally:
        if got:
            _S.path_lock.release()
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


# ---------------------------------------------------------------- the parts
# The core's other pieces, each a module of its own loaded by path like the
# siblings (cb_frames, cb_stdin, cb_hooks, cb_exec, in the order they depend
# on each other).  What this module and the siblings call is adopted into
# its namespace, so `_runner._send` and the calls below work unchanged.
# Nothing rebinds these names later: each is the part's own function.

sys.modules.setdefault("_cellblock_runner", sys.modules[__name__])


_frames = _mod("cb_frames")
_bad_request = _frames._bad_request
_defer = _frames._defer
_dumps = _frames._dumps
_flush = _frames._flush
_recv = _frames._recv
_send = _frames._send
_send_deferred = _frames._send_deferred

_stdin = _mod("cb_stdin")
_Stdin = _stdin._Stdin
_getpass = _stdin._getpass
_input = _stdin._input

_hooks = _mod("cb_hooks")
_IpykernelFinder = _hooks._IpykernelFinder
_PostImportFinder = _hooks._PostImportFinder
_minimal_hooks = _hooks._minimal_hooks
_patch_getpass = _hooks._patch_getpass

_exec = _mod("cb_exec")
_ExitAutocall = _exec._ExitAutocall
_cell_filename = _exec._cell_filename
_code_pos = _exec._code_pos
_comm_request = _exec._comm_request
_compile_cell = _exec._compile_cell
_complete = _exec._complete
_execute = _exec._execute
_execute_fields = _exec._execute_fields
_format_error = _exec._format_error
_guarded = _exec._guarded
_inspect = _exec._inspect
_is_complete = _exec._is_complete
_needs_transform = _exec._needs_transform
_preload = _exec._preload
_publish_result = _exec._publish_result
_register_source = _exec._register_source
_request_waiting = _exec._request_waiting
_run_code = _exec._run_code
_semicolon_after = _exec._semicolon_after
_store_result = _exec._store_result


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
    try:
        if i < len(_LOAD_STEPS):
            _S.load_step = i + 1
            if _LOAD_STEPS[i] == _PREPARE:
                _mod("cb_lazy").prepare()
                return
            try:
                _std("importlib").import_module(_LOAD_STEPS[i])
            except MemoryError:
                raise
            except BaseException:
                pass
            return
        _S.load_step = None
        _mod("cb_shell").create()
    except MemoryError:
        # not a broken IPython: this step again once there is room (cb_memory)
        _S.load_step = i
        _out_of_memory()
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
        while _loading() and not _S.mem_short:
            _load_step()
    finally:
        _S.sigmode = prev
    return _S.shell is not None


def _idle_step():
    """One piece of work while no request waits; False when there is none."""
    if _S.debug_available and "threading" not in sys.modules:
        _std("threading")               # the debugger needs it imported by this thread
        return True
    if _loading() and _S.idle_load and not _S.mem_short:
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
    if _S.mode == "ipython" and _mod("cb_fast").try_execute(req):
        return
    if _ensure_shell():
        _mod("cb_shell").execute(req)
    elif _S.mode == "ipython":          # not loaded for lack of memory (cb_memory)
        _no_shell(req)
    else:
        _execute(req)


def _assist_ipython(kind):
    def handler(req):
        if _ensure_shell():
            getattr(_mod("cb_shell"), kind)(req)
        else:
            _MINIMAL_HANDLERS[kind](req)
    return handler


def _checkpoint(req):
    _mod("cb_snap").checkpoint(req)


def _resume(req):
    _mod("cb_snap").resume(req)


def _reseed(req):
    _mod("cb_snap").reseed()


_MINIMAL_HANDLERS = {
    "checkpoint": _checkpoint,
    "resume": _resume,
    "reseed": _reseed,
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
    "checkpoint": _checkpoint,     # at any point of loading: the fork keeps it
    "resume": _resume,
    "reseed": _reseed,
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
# (cb_startup.py, a part like those above, loaded once everything it uses
# is defined)

_startup = _mod("cb_startup")
_IPYKERNEL_ENV = _startup._IPYKERNEL_ENV
_minimal_builtins = _startup._minimal_builtins
_minimal_namespace = _startup._minimal_namespace
_setup = _startup._setup

_memory = _mod("cb_memory")
_no_memory_left = _memory._no_memory_left
_no_shell = _memory._no_shell
_out_of_memory = _memory._out_of_memory
_recover = _memory._recover


def _debug_bridge():
    """The debugger's channel (fd 4), served by a thread of its own that the
    debugger does not trace (cb_debug)."""
    try:
        _mod("cb_debug").bridge()
    except BaseException:
        pass                            # the channel is gone, and the debugger with it


def _main(mode="minimal", prefix=None, channel=False):
    """The request loop (runner.py has sent the hello frame already).
    channel: fd 4, the debugger's, is open (its thread answers every
    request, also when debugpy is missing)."""
    _setup(mode)
    _loop(prefix, channel)


def _loop(prefix=None, channel=False):
    """Requests until the sandbox ends (a warm start enters here, its _setup
    done by the template: cb_warm)."""
    if prefix:
        _S.cell_prefix = prefix
    if channel:
        _S.debug_available = True
        _thread.start_new_thread(_debug_bridge, ())
    while True:
        try:
            if _S.reserve is None or _S.mem_short:
                _recover()
            if _S.deferred:
                _send_deferred()
            if _S.snap_zombies:
                _mod("cb_snap").reap()
            req = _next_request()
        except MemoryError:             # the cell's objects hold the memory (cb_memory)
            if not _out_of_memory():
                _no_memory_left()
            continue
        kind = req.get("type")
        handler = (_IPYTHON_HANDLERS if _S.mode == "ipython" else _MINIMAL_HANDLERS).get(kind)
        if handler is None:
            if kind not in _STRAY:
                _bad_request("unknown request type %r" % (kind[:40],), req.get("seq"))
            continue
        if _S.debug_dirs and kind == "execute":
            _mod("cb_debug").retrace()          # an interrupt may have stopped its tracing
        started = False
        if isinstance(req.get("seq"), int):
            _S.seq = req["seq"]
            if kind in ("execute", "comm_open", "comm_msg", "comm_close"):
                _S.request = req                # kernel.get_parent() (cb_comm)
                _S.request_serial += 1
                started = True
        try:
            if started:
                # what is printed from now on belongs to this request
                _send({"type": "started"})      # ordered: waits for the ack
            handler(req)
        except BaseException as e:    # a runner bug must not end the session
            _S.sigmode = _SIG_IGNORE
            _S.in_cell = False
            oom = isinstance(e, MemoryError)
            if oom:                     # not a bug: the cell's objects hold the memory
                _out_of_memory()
            evalue = _memory._NO_ROOM if oom else str(e)
            try:
                sys.__stderr__.write("cellblock runner: %s\n" % (
                    evalue if oom else "internal error: %r" % (e,)))
            except Exception:
                pass
            if kind == "execute":
                _send({"type": "done", "status": "error", "ename": type(e).__name__,
                       "evalue": evalue, "traceback": [], "user_expressions": {},
                       "payload": []})
            elif kind in ("comm_open", "comm_msg", "comm_close"):
                _send({"type": "comm_done"})
