"""cellblock runner: IPython's own InteractiveShell runs the cells.

Loaded by cb_core as the last step of loading the shell while the sandbox
is idle (or at once when a request needs it).  The habit is xeus-python's
(xeus_python_shell) and ipykernel's (zmqshell.py): a subclass of
InteractiveShell whose display publisher, displayhook, traceback display,
pager and payloads are routed to the transport -- here the runner's frames
on fd 3 (docs/RUNNER_PROTOCOL.md) -- while magics, input transformers,
formatters, tracebacks, history, completer and inspector are IPython's,
unchanged.  What ipykernel adds on top (its kernel magics, the inline
matplotlib backend as default, the interruptible debugger, storemagic,
``_exit_code`` of ``!cmd``, ask_exit and set_next_input payloads) is
mirrored here, so that code written for ipykernel runs as it does there.

Differences that the sandbox imposes: ``!cmd`` runs without a terminal
(there is no pty in the sandbox), stdout and stderr merged as a pty would;
history lives in memory (a sandbox never outlives its session); jedi is
loaded on the first completion request (cb_lazy).

The shell's ``kernel`` attribute is the runner's kernel object (cb_comm):
widgets find the comm manager, the session and the request being handled
there, as under ipykernel.
"""

import sys
import os
import builtins

_runner = sys.modules["_cellblock_runner"]
_S = _runner._S

from IPython.core import page, payloadpage  # noqa: E402
from IPython.core.autocall import ZMQExitAutocall  # noqa: E402
from IPython.core.error import StdinNotImplementedError, UsageError  # noqa: E402
from IPython.core.history import HistoryManager  # noqa: E402
from IPython.core.interactiveshell import (  # noqa: E402
    ExecutionInfo, ExecutionResult, InteractiveShell, InteractiveShellABC)
from IPython.core.usage import default_banner  # noqa: E402
from traitlets import Any, CBool, Instance, Type, default  # noqa: E402
from traitlets.config import Config  # noqa: E402

# ipykernel's name for the completions' metadata (jupyterlab reads it)
_COMPLETION_TYPES_KEY = "_jupyter_types_experimental"
# the config section ipykernel's shell has (its IPKernelApp); libraries look
# for it to tell a notebook kernel from a terminal (tqdm.autonotebook)
_KERNEL_APP_SECTION = "IPKernelApp"

_shell_io = _runner._mod("cb_shell_io")
CellCompiler = _shell_io.CellCompiler
FrameDisplayHook = _shell_io.FrameDisplayHook
FramePublisher = _shell_io.FramePublisher
jsonable = _shell_io.jsonable           # cb_comm calls it here
KernelMagics = _runner._mod("cb_shell_magics").KernelMagics

# ---------------------------------------------------------------- the shell

_NO_LOOP_GUIS = (None, "inline", "nbagg", "webagg", "notebook", "ipympl", "widget")


class ZMQInteractiveShell(InteractiveShell):
    """IPython's InteractiveShell with its output routed to the runner's frames.

    The class is named as ipykernel's because libraries tell a notebook
    kernel from a terminal by it (``type(get_ipython()).__name__ ==
    'ZMQInteractiveShell'``); it has no ZMQ of its own: the C kernel outside
    the sandbox speaks the Jupyter protocol."""

    displayhook_class = Type(FrameDisplayHook)
    display_pub_class = Type(FramePublisher)
    kernel = Any()
    parent_header = Any()
    readline_use = CBool(False)
    autoindent = CBool(False)
    exiter = Instance(ZMQExitAutocall)
    keepkernel_on_exit = None

    @default("banner1")
    def _default_banner1(self):
        return default_banner

    @default("exiter")
    def _default_exiter(self):
        return ZMQExitAutocall(self)

    def init_history(self):
        """History in memory: every sandbox starts empty and none outlives its
        session, so a database file (and its writer thread) would only cost."""
        self.history_manager = HistoryManager(shell=self, parent=self, hist_file=":memory:")
        self.configurables.append(self.history_manager)

    def init_hooks(self):
        super().init_hooks()
        self.set_hook("show_in_pager", page.as_hook(payloadpage.page), 99)

    def init_environment(self):
        for name, value in _runner._IPYKERNEL_ENV:
            os.environ[name] = value

    def init_virtualenv(self):
        pass

    def init_data_pub(self):
        pass

    def init_magics(self):
        super().init_magics()
        self.register_magics(KernelMagics)
        self.magics_manager.register_alias("ed", "edit")

    def enable_gui(self, gui=None):
        # what ipykernel's eventloops.loop_map runs without a loop: inline
        # figures, and the ones drawn in the browser over comms
        # (%matplotlib notebook / nbagg, webagg, ipympl's widget)
        if gui in _NO_LOOP_GUIS:
            self.active_eventloop = gui
            return
        raise UsageError("Cannot enable the %r GUI event loop: the sandbox has no display; "
                         "use %%matplotlib inline" % (gui,))

    def ask_exit(self):
        self.exit_now = not self.keepkernel_on_exit
        self.payload_manager.write_payload({"source": "ask_exit",
                                            "keepkernel": self.keepkernel_on_exit})

    def set_next_input(self, text, replace=False):
        self.payload_manager.write_payload({"source": "set_next_input", "text": text,
                                            "replace": replace})

    def set_parent(self, parent):
        self.parent_header = parent

    def get_parent(self):
        return self.parent_header

    def _showtraceback(self, etype, evalue, stb):
        try:
            evalue_s = str(evalue)
        except Exception:
            evalue_s = "<unprintable %s object>" % etype.__name__
        _runner._send({"type": "error", "ename": str(etype.__name__), "evalue": evalue_s,
                       "traceback": [str(s) for s in stb]})
        self._last_traceback = stb

    def _get_exc_info(self, exc_tuple=None):
        etype, value, tb = super()._get_exc_info(exc_tuple)
        if etype is KeyboardInterrupt:
            tb = _runner._without_handler_frame(tb)
        # what %debug and %pdb stop in is the user's innermost frame, never
        # the runner's (input() without stdin raises in cb_stdin's bridge)
        tb = _without_runner_tail(tb)
        sys.last_traceback = tb
        return etype, value, tb

    _auto_pdb = False   # showtraceback is entering %pdb's debugger

    def showtraceback(self, exc_tuple=None, *args, **kwargs):
        if isinstance((exc_tuple or sys.exc_info())[1], MemoryError):
            _runner._out_of_memory()    # room to format it (cb_memory)
        self._auto_pdb = True
        try:
            return super().showtraceback(exc_tuple, *args, **kwargs)
        finally:
            self._auto_pdb = False

    def debugger(self, force=False):
        """pdb reads its commands with input(), which raises
        StdinNotImplementedError when the frontend allows no stdin (nbclient).
        %debug then fails with it, as under ipykernel; %pdb's automatic
        debugger shows it once and the cell ends with its own error (else
        the debugger of the debugger's error is entered again and again, and
        the last one escapes IPython)."""
        try:
            return super().debugger(force)
        except StdinNotImplementedError as e:
            if not self._auto_pdb:
                raise
            import traceback
            lines = traceback.format_exception_only(type(e), e)
            self._showtraceback(type(e), e, [line.rstrip("\n") for line in lines])

    def run_cell(self, *args, **kwargs):
        self._last_traceback = None
        return super().run_cell(*args, **kwargs)

    async def run_code(self, code_obj, result=None, *, async_=False):
        """User code (one top-level statement of a cell) runs with SIGINT
        raising KeyboardInterrupt; around it IPython's bookkeeping keeps an
        interrupt for the next statement instead of breaking half-way."""
        __tracebackhide__ = True
        if _S.pending:
            # an interrupt kept from IPython's bookkeeping: raised as the
            # statement's first act, so its traceback points at the statement
            # (Cell In [N], line L), as when it lands there, not at the runner
            _S.pending = False
            line = min((ln for _, _, ln in code_obj.co_lines() if ln), default=1)
            code_obj = compile("\n" * (line - 1) + "raise KeyboardInterrupt",
                               code_obj.co_filename, "exec")
        _S.sigmode = _runner._SIG_USER
        try:
            return await super().run_code(code_obj, result, async_=async_)
        finally:
            _S.sigmode = _runner._SIG_DEFER

    def system_piped(self, cmd):
        """!cmd: /bin/sh -c with stdout and stderr merged and newlines sent as
        CR LF, which is what ipykernel's pty gives; the exit status in
        _exit_code (negative for a signal, as IPython has it).  The sandbox
        has no pty: programs see a pipe, not a terminal."""
        if cmd.rstrip().endswith("&"):
            raise OSError("Background processes not supported.")
        expanded = self.var_expand(cmd, depth=1)
        self.user_ns["_exit_code"] = _run_piped(expanded)

    system = system_piped


InteractiveShellABC.register(ZMQInteractiveShell)


def _without_runner_tail(tb):
    """tb without its innermost entries that are the runner's own frames
    (or the debugger's: an interrupt while stopped at a breakpoint)."""
    last = None
    cur = tb
    while cur is not None:
        if not _runner._hidden_file(cur.tb_frame.f_code.co_filename):
            last = cur
        cur = cur.tb_next
    if last is None:
        return tb
    if last.tb_next is not None:
        last.tb_next = None
        # the frame an exception from a trace function entered is listed twice
        prev = tb
        while prev.tb_next is not None and prev.tb_next is not last:
            prev = prev.tb_next
        if prev.tb_next is last and prev.tb_frame is last.tb_frame:
            prev.tb_next = None
    return tb

# after an interrupt, how long the command may take to finish its output
# (IPython's ProcessHandler.terminate_timeout)
_SYSTEM_TERMINATE_S = 0.2
_SYSTEM_READ = 4096


def _run_piped(cmd):
    """Run cmd like IPython's pexpect-based system(): output printed as it
    comes, an interrupt passed on to the command (SIGINT to its process
    group, as ^C on a terminal) which then ends the command, not the cell.

    On a pseudo-terminal when the sandbox has one (programs then see a
    terminal, as under ipykernel); else on a pipe, where the terminal's
    newline translation (LF -> CR LF) is done here."""
    import codecs
    import signal
    import subprocess
    import time
    _runner._flush()
    try:
        master, slave = os.openpty()
    except OSError:
        master = slave = None
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL,
                                stdout=slave if slave is not None else subprocess.PIPE,
                                stderr=slave if slave is not None else subprocess.STDOUT,
                                start_new_session=True)
    except BaseException:
        for fd in (master, slave):
            if fd is not None:
                os.close(fd)
        raise
    if slave is not None:
        os.close(slave)
        fd, crlf = master, False
    else:
        fd, crlf = proc.stdout.fileno(), True
    decoder = codecs.getincrementaldecoder(_encoding())("replace")
    select = _runner._std("select")

    def pump(timeout):
        if not select.select([fd], [], [], timeout)[0]:
            return True
        try:
            data = os.read(fd, _SYSTEM_READ)
        except OSError:                 # EIO: the terminal's last writer is gone
            data = b""
        text = decoder.decode(data, final=not data)
        if text:
            sys.stdout.write(text.replace("\n", "\r\n") if crlf else text)
            sys.stdout.flush()
        return bool(data)

    prev = _S.sigmode
    try:
        try:
            while True:
                if prev == _runner._SIG_USER:
                    _S.sigmode = _runner._SIG_INPUT     # a SIGINT here raises at once
                if not pump(None):
                    break
                _S.sigmode = prev
        except KeyboardInterrupt:
            _S.sigmode = _runner._SIG_DEFER
            try:
                os.killpg(proc.pid, signal.SIGINT)
            except OSError:
                pass
            deadline = time.monotonic() + _SYSTEM_TERMINATE_S
            while time.monotonic() < deadline and pump(max(0.0, deadline - time.monotonic())):
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
    finally:
        _S.sigmode = prev
        if master is not None:
            os.close(master)
        else:
            proc.stdout.close()
        rc = proc.wait()
    if rc > 128:
        rc = -(rc - 128)
    return rc


def _encoding():
    from IPython.utils.encoding import DEFAULT_ENCODING
    return DEFAULT_ENCODING or "utf-8"


# ---------------------------------------------------------------- creation


def _interruptible_pdb():
    """As ipykernel's init_pdb: pdb is IPython's debugger, which a SIGINT can stop."""
    import pdb
    from IPython.core import debugger
    if hasattr(debugger, "InterruptiblePdb"):
        debugger.Pdb = debugger.InterruptiblePdb
        pdb.Pdb = debugger.Pdb
        pdb.set_trace = debugger.set_trace


def create():
    """Make the shell from the user's existing __main__ (the fast path may
    have run cells in it), then take those cells over."""
    import warnings
    ns = _S.user.__dict__
    unders = {k: ns[k] for k in ("_", "__", "___") if k in ns}
    # IPython adds this filter itself (init_deprecation_warnings)
    if _S.main_filter is not None:
        try:
            warnings.filters.remove(_S.main_filter)
        except ValueError:
            pass
        warnings._filters_mutated()
    cfg = Config()
    cfg[_KERNEL_APP_SECTION] = Config()
    kernel = _runner._mod("cb_comm").kernel()
    shell = ZMQInteractiveShell.instance(config=cfg, user_module=_S.user,
                                         compiler_class=CellCompiler, kernel=kernel)
    kernel.shell = shell
    ns.update(unders)                  # IPython's DisplayHook set them to ''
    shell.displayhook._, shell.displayhook.__, shell.displayhook.___ = _S.unders
    _interruptible_pdb()
    try:
        shell.extension_manager.load_extension("storemagic")
    except Exception:
        pass
    _S.stdin_error = StdinNotImplementedError
    builtins.input = _runner._input
    _S.shell = shell
    _runner._mod("cb_lazy").release()
    _runner._mod("cb_shell_fast").adopted(shell)
    return shell


_COLOR_SCHEMES = ("NoColor", "Neutral", "Linux", "LightBG")


def _apply_colors(shell):
    """The execute frame's optional `colors`: the traceback colour scheme from
    this cell on, as %colors sets it (`cellblock run` may want NoColor)."""
    c = _S.colors
    if c in _COLOR_SCHEMES and shell.colors != c:
        shell.run_line_magic("colors", c)


def _report(shell, etype):
    """run_code's except clauses, for an exception being handled now."""
    import bdb
    if issubclass(etype, SystemExit):
        # IPython's run_code reports it itself, so that its warning names
        # IPython's line as under ipykernel: it runs code that raises the
        # very exception (its one constant), and shows the exception only
        from IPython.core.async_helpers import _pseudo_sync_runner
        code = compile("raise 0", "<cellblock>", "exec")
        code = code.replace(co_consts=tuple(sys.exc_info()[1] if c == 0 and type(c) is int
                                            else c for c in code.co_consts))
        _pseudo_sync_runner(shell.run_code(code))
    elif issubclass(etype, bdb.BdbQuit):
        pass
    elif shell.custom_exceptions and issubclass(etype, shell.custom_exceptions):
        shell.CustomTB(*sys.exc_info())
    else:
        shell.showtraceback(running_compiled_code=True)


def _done(shell, res, uexpr):
    reply = {"type": "done", "status": "ok", "user_expressions": {}, "payload": []}
    err = res.error_before_exec if res.error_before_exec is not None else res.error_in_exec
    if res.success:
        if uexpr:
            reply["user_expressions"] = jsonable(shell.user_expressions(uexpr))
    else:
        try:
            evalue = str(err)
        except Exception:
            evalue = "<unprintable %s object>" % type(err).__name__
        reply.update(status="error", ename=str(type(err).__name__), evalue=evalue,
                     traceback=[str(s) for s in (shell._last_traceback or [])])
    reply["payload"] = jsonable(shell.payload_manager.read_payload())
    shell.payload_manager.clear_payload()
    return reply


# ---------------------------------------------------------------- requests


_removed_cleanup = {}   # IPython's cleanup transforms taken out while a debugger is attached


def _apply_debugging(shell):
    """While a frontend has the debugger attached (_S.debugging, set by the
    debugger's thread), IPython keeps a cell's leading empty lines, so that
    its lines are the lines of the file the frontend set breakpoints in
    (ipykernel does the same).  Here, on the main thread before each cell:
    the transforms are never changed under a cell IPython is reading."""
    if not _S.debugging and not _removed_cleanup:
        return                      # the usual case: nothing to change
    try:
        from IPython.core.inputtransformer2 import leading_empty_lines
    except ImportError:
        return
    cleanup = shell.input_transformer_manager.cleanup_transforms
    if _S.debugging and leading_empty_lines in cleanup:
        i = cleanup.index(leading_empty_lines)
        _removed_cleanup[i] = cleanup.pop(i)
    elif not _S.debugging:
        for i in sorted(_removed_cleanup):
            cleanup.insert(i, _removed_cleanup.pop(i))


def execute(req):
    shell = _S.shell
    code, silent, store, uexpr, count = _runner._execute_fields(req)
    if store and count is not None:
        shell.execution_count = count      # the kernel numbers the cells
    _S.colors = req.get("colors")
    _apply_colors(shell)
    _apply_debugging(shell)
    _S.count = count if count is not None else shell.execution_count
    _S.silent = silent
    _S.allow_stdin = bool(req.get("allow_stdin", False))
    _S.in_cell = True
    _S.pending = False
    _S.sigmode = _runner._SIG_DEFER
    try:
        res = shell.run_cell(code, store_history=store, silent=silent)
    except BaseException:
        # an interrupt (or a failure) in IPython's own bookkeeping
        _S.sigmode = _runner._SIG_DEFER
        shell.showtraceback()
        res = ExecutionResult(ExecutionInfo(code, store, silent, True, None))
        res.error_in_exec = sys.exc_info()[1]
    finally:
        _S.sigmode = _runner._SIG_IGNORE
    try:
        reply = _done(shell, res, uexpr)
    finally:
        _S.in_cell = False
        _S.sigmode = _runner._SIG_IGNORE
        _S.pending = False
    _runner._flush()
    _runner._send(reply)


def enable_jedi():
    """Give IPython's completer jedi, kept out of the shell's start (cb_lazy)."""
    from IPython.core import completer
    if getattr(completer, "JEDI_INSTALLED", True):
        return
    try:
        import jedi
        import jedi.api.classes  # noqa: F401
        import jedi.api.helpers  # noqa: F401
    except ImportError:
        return
    jedi.settings.case_insensitive_completion = False
    completer.jedi = jedi
    completer.JEDI_INSTALLED = True
    _S.shell.Completer.use_jedi = True


def complete(req):
    code, pos = _runner._code_pos(req)
    from IPython.core.completer import provisionalcompleter, rectify_completions
    matches, start, end, comps = [], pos, pos, []
    try:
        enable_jedi()
        with provisionalcompleter():
            raw = _S.shell.Completer.completions(code, pos)
            completions = list(rectify_completions(code, raw))
        for c in completions:
            comps.append({"start": c.start, "end": c.end, "text": c.text, "type": c.type,
                          "signature": c.signature})
        if completions:
            start, end = completions[0].start, completions[0].end
            matches = [c.text for c in completions]
    except Exception:
        matches, start, end, comps = [], pos, pos, []
    _runner._send({"type": "complete_reply", "matches": matches, "cursor_start": start,
                   "cursor_end": end, "metadata": {_COMPLETION_TYPES_KEY: comps}})


def inspect(req):
    code, pos = _runner._code_pos(req)
    level = req.get("detail_level", 0)
    from IPython.utils.tokenutil import token_at_cursor
    shell = _S.shell
    data, found = {}, False
    try:
        name = token_at_cursor(code, pos)
        bundle = shell.object_inspect_mime(name, detail_level=level if level in (0, 1) else 0)
        if not shell.enable_html_pager:
            bundle.pop("text/html", None)
        data, found = jsonable(bundle), True
    except KeyError:
        pass
    except Exception:
        pass
    _runner._send({"type": "inspect_reply", "found": found, "data": data, "metadata": {}})


def is_complete(req):
    _apply_debugging(_S.shell)     # check_complete runs the cleanup transforms too
    code = req.get("code")
    if not isinstance(code, str):
        code = ""
    try:
        status, indent = _S.shell.input_transformer_manager.check_complete(code)
    except Exception:
        status, indent = "unknown", None
    msg = {"type": "is_complete_reply", "status": status}
    if status == "incomplete":
        msg["indent"] = " " * (indent or 0)
    _runner._send(msg)

