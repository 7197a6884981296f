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
from IPython.core.compilerop import CachingCompiler  # noqa: E402
from IPython.core.displayhook import DisplayHook  # noqa: E402
from IPython.core.displaypub import DisplayPublisher  # noqa: E402
from IPython.core.error import StdinNotImplementedError, UsageError  # noqa: E402
from IPython.core.history import HistoryManager  # noqa: E402
from IPython.core.interactiveshell import (  # noqa: E402
    ExecutionInfo, ExecutionResult, InteractiveShell, InteractiveShellABC)
from IPython.core.magic import Magics, line_magic, magics_class  # noqa: E402
from IPython.core.usage import default_banner  # noqa: E402
from traitlets import Any, CBool, Instance, Type, default  # noqa: E402
from traitlets.config import Config  # noqa: E402

# ipykernel's name for the completions' metadata (jupyterlab reads it)
_COMPLETION_TYPES_KEY = "_jupyter_types_experimental"
# the config section ipykernel's shell has (its IPKernelApp); libraries look
# for it to tell a notebook kernel from a terminal (tqdm.autonotebook)
_KERNEL_APP_SECTION = "IPKernelApp"

# ---------------------------------------------------------------- JSON as ipykernel sends it


class _NotStrict(Exception):
    pass


def _strict(obj):
    """obj with what json.dumps(default=jupyter_client's json_default,
    allow_nan=False) would do to it; _NotStrict where that raises."""
    t = type(obj)
    if t is str or obj is None or t is bool or t is int:
        return obj
    if t is float:
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise _NotStrict
        return obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str):
                pass
            elif isinstance(k, bool):
                k = "true" if k else "false"
            elif k is None:
                k = "null"
            elif isinstance(k, (int, float)):
                k = _runner._dumps(k)
            else:
                raise _NotStrict
            out[k] = _strict(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return _strict(_json_default(obj))


def _json_default(obj):
    import numbers
    from collections.abc import Iterable
    from datetime import datetime, timezone
    if isinstance(obj, datetime):
        if obj.tzinfo is None:
            obj = obj.replace(tzinfo=timezone.utc)
        return obj.isoformat().replace("+00:00", "Z")
    if isinstance(obj, bytes):
        import binascii
        return binascii.b2a_base64(obj).decode("ascii")
    if isinstance(obj, Iterable):
        return list(obj)
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        return float(obj)
    raise _NotStrict


def _json_clean(obj):
    """jupyter_client's json_clean: the fallback when strict encoding fails."""
    import math
    import numbers
    import types
    from datetime import datetime
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        if math.isnan(obj) or math.isinf(obj):
            return repr(obj)
        return float(obj)
    if isinstance(obj, (str, type(None))):
        return obj
    if isinstance(obj, bytes):
        import binascii
        return binascii.b2a_base64(obj).decode("ascii")
    if isinstance(obj, (tuple, set, types.GeneratorType)) or (
            hasattr(obj, "__iter__") and hasattr(obj, "__next__")):
        obj = list(obj)
    if isinstance(obj, list):
        return [_json_clean(x) for x in obj]
    if isinstance(obj, dict):
        if len(obj) != len(set(map(str, obj))):
            raise ValueError("dict cannot be safely converted to JSON: "
                             "key collision would lead to dropped values")
        return {str(k): _json_clean(v) for k, v in obj.items()}
    if isinstance(obj, datetime):
        return obj.strftime("%Y-%m-%dT%H:%M:%S.%f")
    raise ValueError("Can't clean for JSON: %r" % (obj,))


def jsonable(obj):
    """obj as ipykernel (jupyter_client >= 7's json_packer) puts it on the wire."""
    try:
        return _strict(obj)
    except (_NotStrict, ValueError, TypeError, RecursionError):
        return _strict(_json_clean(obj))


# ---------------------------------------------------------------- display routing


class FramePublisher(DisplayPublisher):
    """display() and friends become `display`/`update_display`/`clear_output` frames."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        import threading
        self._local = threading.local()

    @property
    def _hooks(self):
        hooks = getattr(self._local, "hooks", None)
        if hooks is None:
            hooks = self._local.hooks = []
        return hooks

    def register_hook(self, hook):
        """As ipykernel's: hook(msg) -> msg to send, or None to swallow it (widgets)."""
        self._hooks.append(hook)

    def unregister_hook(self, hook):
        try:
            self._hooks.remove(hook)
            return True
        except ValueError:
            return False

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                **kwargs):
        __tracebackhide__ = True
        self._validate_data(data, metadata)
        content = {"data": data, "metadata": metadata if metadata is not None else {},
                   "transient": transient if transient is not None else {}}
        msg_type = "update_display_data" if update else "display_data"
        if self._hooks:
            msg = {"msg_type": msg_type, "header": {"msg_type": msg_type},
                   "parent_header": {}, "metadata": {}, "content": content}
            for hook in list(self._hooks):
                msg = hook(msg)
                if msg is None:
                    return
            content = msg.get("content", content)
        _runner._send({"type": "update_display" if update else "display",
                       "data": jsonable(content.get("data", {})),
                       "metadata": jsonable(content.get("metadata", {})),
                       "transient": jsonable(content.get("transient", {}))})
        _runner._check_pending()

    def clear_output(self, wait=False):
        __tracebackhide__ = True
        _runner._send({"type": "clear_output", "wait": bool(wait)})
        _runner._check_pending()


class FrameDisplayHook(DisplayHook):
    """The value of a cell's last expression becomes an `execute_result` frame."""

    def start_displayhook(self):
        self._data = None
        self._md = None

    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        self._data = format_dict
        self._md = md_dict

    def finish_displayhook(self):
        __tracebackhide__ = True
        data, md = self._data, self._md
        self._data = self._md = None
        if data:
            _runner._send({"type": "execute_result", "data": jsonable(data),
                           "metadata": jsonable(md if md is not None else {})})
        else:
            _runner._flush()


class CellCompiler(CachingCompiler):
    """Cells are named <cell-N> (as in cellblock's minimal runner and its
    fast path, which must agree); tracebacks show them as IPython does,
    'Cell In [N], line L'."""

    def get_code_name(self, raw_code, transformed_code, number):
        return _runner._cell_filename(number)


# ---------------------------------------------------------------- magics ipykernel adds


@magics_class
class KernelMagics(Magics):
    """The magics ipykernel's ZMQInteractiveShell adds, and %pip saying why
    an install failed in the sandbox."""

    @line_magic
    def pip(self, line):
        """Run the pip package manager within the current kernel.

        Usage:
          %pip install [pkgs]

        In cellblock's sandbox there is no network unless the kernel was
        started with --network host, and a system Python (PEP 668) refuses
        installs; a failed install says which.
        """
        import shlex
        self.shell.system(" ".join([shlex.quote(sys.executable), "-m", "pip", line]))
        rc = self.shell.user_ns.get("_exit_code")
        if rc:
            note = _runner._mod("cb_magics").pip_failure_note(line, rc)
            if note:
                print(note, file=sys.stderr)
        print("Note: you may need to restart the kernel to use updated packages.")

    @line_magic
    def autosave(self, arg_s):
        """Set the autosave interval in the notebook (in seconds).

        The default value is 120, or two minutes.
        ``%autosave 0`` will disable autosave.
        """
        from IPython.display import Javascript, display
        try:
            interval = int(arg_s)
        except ValueError as e:
            raise UsageError("%%autosave requires an integer, got %r" % arg_s) from e
        display(Javascript("IPython.notebook.set_autosave_interval(%i)" % (1000 * interval)),
                include=["application/javascript"])
        print("Autosaving every %i seconds" % interval if interval else "Autosave disabled")

    @line_magic
    def less(self, arg_s):
        """Show a file through the pager.

        Files ending in .py are syntax-highlighted."""
        if not arg_s:
            raise UsageError("Missing filename.")
        if arg_s.endswith(".py"):
            from IPython.utils import openpy
            cont = self.shell.pycolorize(openpy.read_py_file(arg_s, skip_encoding_cookie=False))
        else:
            with open(arg_s) as f:
                cont = f.read()
        page.page(cont)

    more = line_magic("more")(less)

    @line_magic
    def man(self, arg_s):
        """Find the man page for the given command and display in pager."""
        page.page(self.shell.getoutput("man %s | col -b" % arg_s, split=False))

    @line_magic
    def clear(self, arg_s):
        """Clear the terminal."""
        self.shell.system("clear")

    @line_magic
    def edit(self, parameter_s="", last_call=None):
        """Ask the frontend to open a file in its editor (edit_magic payload).

        %edit [-n N] [-p] [-r] target: as ipykernel's %edit."""
        from IPython.core.magics import CodeMagics, MacroToEdit
        last_call = last_call or ["", ""]
        opts, args = self.parse_options(parameter_s, "prn:")
        try:
            filename, lineno, _ = CodeMagics._find_edit_target(self.shell, args, opts, last_call)
        except MacroToEdit:
            print("Macro editing not yet implemented in 2-process model.")
            return
        self.shell.payload_manager.write_payload(
            {"source": "edit_magic", "filename": os.path.abspath(filename),
             "line_number": lineno})

    @line_magic
    def connect_info(self, arg_s):
        """Print information for connecting other clients to this kernel."""
        import warnings
        warnings.warn("Could not get connection info: %r" % (
            RuntimeError("the sandbox never sees the kernel's connection file"),))

    @line_magic
    def qtconsole(self, arg_s):
        """Open a qtconsole connected to this kernel."""
        import warnings
        warnings.warn("Could not start qtconsole: %r" % (
            RuntimeError("the sandbox has no display"),))


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
        return etype, value, tb

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
    adopt()
    return shell


def _register_cell(shell, filename, count, cell):
    """What CachingCompiler.cache does for a cell the shell did not compile."""
    import linecache
    import time
    shell.compile._filename_map[filename] = count
    entry = (len(cell), time.time(), [line + "\n" for line in cell.splitlines()], filename)
    linecache.cache[filename] = entry
    if isinstance(getattr(linecache, "_ipython_cache", None), dict):
        linecache._ipython_cache[filename] = entry


def adopt():
    """Take over the cells the fast path ran: history, In/Out, _iN/_N, the
    execution count, the cells' names in tracebacks."""
    shell = _S.shell
    hm = shell.history_manager
    dh = shell.displayhook
    for count, raw, cell, filename, value in _S.fast_cells:
        _register_cell(shell, filename, count, cell)
        hm.store_inputs(count, shell.transform_cell(raw), raw)
        if value is not None:
            shell.push({"_%d" % count: value}, interactive=False)
            hm.output_hist[count] = value
            try:
                hm.output_hist_reprs[count] = repr(value)
            except Exception:
                pass
        hm.store_output(count)
        shell.execution_count = count + 1
    del _S.fast_cells[:]
    dh._, dh.__, dh.___ = _S.unders


def finish_fast(raw, cell, filename, count, value=None, error=False):
    """Finish a cell the fast path started, as run_cell would have: history
    first, then the traceback (called in the except block, where IPython's
    showtraceback looks) or the result, then the post-execution events.
    Returns the done frame."""
    shell = _S.shell
    shell._last_traceback = None
    _apply_colors(shell)
    info = ExecutionInfo(raw, True, False, True, None)
    result = ExecutionResult(info)
    result.execution_count = count
    shell.execution_count = count
    _register_cell(shell, filename, count, cell)
    shell.history_manager.store_inputs(count, shell.transform_cell(raw), raw)
    if error:
        etype, evalue, _ = sys.exc_info()
        result.error_in_exec = evalue
        _report(shell, etype)
    elif value is not None:
        shell.displayhook.exec_result = result
        try:
            _S.sigmode = _runner._SIG_USER
            shell.displayhook(value)
        except BaseException:
            _S.sigmode = _runner._SIG_DEFER
            result.error_in_exec = sys.exc_info()[1]
            shell.showtraceback()
        finally:
            _S.sigmode = _runner._SIG_DEFER
            shell.displayhook.exec_result = None
    shell.last_execution_succeeded = result.error_in_exec is None
    shell.last_execution_result = result
    shell.events.trigger("post_execute")
    shell.events.trigger("post_run_cell", result)
    shell.history_manager.store_output(count)
    shell.execution_count = count + 1
    return _done(shell, result, {})


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
        import warnings
        shell.showtraceback(exception_only=True)
        warnings.warn("To exit: use 'exit', 'quit', or Ctrl-D.", stacklevel=1)
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


def execute(req):
    shell = _S.shell
    code, silent, store, uexpr, count = _runner._execute_fields(req)
    if store and count is not None:
        shell.execution_count = count      # the kernel numbers the cells
    _S.colors = req.get("colors")
    _apply_colors(shell)
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

