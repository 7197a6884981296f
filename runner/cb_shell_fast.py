"""cellblock runner: run_cell's bookkeeping for the cells cb_fast runs.

cb_fast runs a plain-Python cell itself when the shell would give exactly the
same result.  Before the shell exists, the cells it ran are taken over once
the shell is made (adopt) or finished by the shell when they need it
(finish_fast).  Once it exists, a plain cell is bracketed by what run_cell
does around the code, in run_cell's order (plain_start, plain_finish), so
that history, In/Out/_iN, the count, the events and the displayhook are as
after run_cell -- whenever the shell is configured as when it was created
(plain_ok).  Loaded by cb_shell.create.
"""

import sys

from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult  # noqa: E402

_runner = sys.modules["_cellblock_runner"]
_S = _runner._S
_shell = _runner._mod("cb_shell")


def adopted(shell):
    """The shell exists: take over the fast path's cells; remember its
    configuration (plain_ok)."""
    adopt()
    _PLAIN[:] = [_plain_config(shell)]


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


# ---------------------------------------------------------------- the plain path with the shell

def _plain_config(shell):
    """What makes a plain-Python cell run under run_cell exactly as cb_fast
    runs it: the default transformers and prefilter checkers, no AST
    transformers, no autocall, no logging, no __future__ flags of earlier
    cells, last_expr interactivity.  Compared, cell by cell, with the same
    taken when the shell was created (plain_ok)."""
    tm, pm = shell.input_transformer_manager, shell.prefilter_manager
    return (tuple(tm.cleanup_transforms), tuple(tm.line_transforms), tuple(tm.token_transformers),
            tuple((type(c), c.enabled) for c in pm.checkers), tuple(shell.input_transformers_post),
            tuple(shell.ast_transformers), shell.autocall, shell.ast_node_interactivity,
            bool(shell.logger.log_active), shell.compile.flags & _FUTURE_FLAGS,
            shell.trio_runner is None)


_FUTURE_FLAGS = 0x3fe0000                # the CO_FUTURE_* bits a cell's __future__ import sets
_PLAIN = []                              # [_plain_config] of the shell as created


def plain_ok(cell):
    """Whether cb_fast may run this plain-Python cell with the shell loaded:
    the shell is as configured at creation and, for a one-line cell, no
    prefilter checker (a Macro or IPyAutocall object as its first name, an
    Emacs mode line) would change it."""
    shell = _S.shell
    if not _PLAIN or _plain_config(shell) != _PLAIN[0]:
        return False
    if cell.count("\n") <= 1:
        from IPython.core.autocall import IPyAutocall
        from IPython.core.macro import Macro
        if cell.rstrip().endswith("# PYTHON-MODE"):
            return False
        s = cell.lstrip()
        i = 0
        while i < len(s) and (s[i].isalnum() or s[i] in "_*."):
            i += 1
        obj = shell.user_ns.get(s[:i])
        if isinstance(obj, (IPyAutocall, Macro)):
            return False
    return True


def plain_start(raw, cell, filename, count):
    """run_cell's steps before the code of a plain cell runs (cb_fast runs it):
    the pre_execute and pre_run_cell events, history, the cell's name and
    source, the result the displayhook fills.  Enters the builtin and display
    traps, as run_cell does around the code.  Returns the ExecutionResult."""
    shell = _S.shell
    shell._last_traceback = None
    _shell._apply_colors(shell)
    shell.execution_count = count
    info = ExecutionInfo(raw, True, False, True, None)
    result = ExecutionResult(info)
    result.execution_count = count
    shell.events.trigger("pre_execute")
    shell.events.trigger("pre_run_cell", info)
    shell.history_manager.store_inputs(count, cell, raw)
    shell.builtin_trap.__enter__()
    _register_cell(shell, filename, count, cell)
    shell.display_trap.__enter__()
    shell.displayhook.exec_result = result
    return result


def plain_finish(result, value=None, error=False):
    """run_cell's steps after the code of a plain cell ran (or raised: called
    in the except block): the traceback or the result, then history and the
    post-execution events.  Returns the done frame."""
    shell = _S.shell
    try:
        if error:
            etype = sys.exc_info()[0]
            result.error_in_exec = sys.exc_info()[1]
            _shell._report(shell, etype)
        elif value is not None:
            _display(shell, result, value)
        shell.last_execution_succeeded = result.error_in_exec is None
        shell.last_execution_result = result
        shell.displayhook.exec_result = None
    finally:
        shell.display_trap.__exit__(None, None, None)
        shell.builtin_trap.__exit__(None, None, None)
    shell.history_manager.store_output(result.execution_count)
    shell.execution_count = result.execution_count + 1
    shell.events.trigger("post_execute")
    shell.events.trigger("post_run_cell", result)
    return _shell._done(shell, result, {})


def finish_fast(raw, cell, filename, count, value=None, error=False):
    """Finish a cell the fast path started, as run_cell would have: history
    first, then the traceback (called in the except block, where IPython's
    showtraceback looks) or the result, then the post-execution events.
    Returns the done frame."""
    shell = _S.shell
    shell._last_traceback = None
    _shell._apply_colors(shell)
    info = ExecutionInfo(raw, True, False, True, None)
    result = ExecutionResult(info)
    result.execution_count = count
    shell.execution_count = count
    _register_cell(shell, filename, count, cell)
    shell.history_manager.store_inputs(count, shell.transform_cell(raw), raw)
    if error:
        etype, evalue, _ = sys.exc_info()
        result.error_in_exec = evalue
        _shell._report(shell, etype)
    elif value is not None:
        shell.displayhook.exec_result = result
        try:
            _display(shell, result, value)
        finally:
            shell.displayhook.exec_result = None
    shell.last_execution_succeeded = result.error_in_exec is None
    shell.last_execution_result = result
    shell.events.trigger("post_execute")
    shell.events.trigger("post_run_cell", result)
    shell.history_manager.store_output(count)
    shell.execution_count = count + 1
    return _shell._done(shell, result, {})


def _display(shell, result, value):
    """The displayhook on a cell's value, as run_code's last statement: its
    formatting is user code (a _repr_*_ may raise or be interrupted)."""
    try:
        _S.sigmode = _runner._SIG_USER
        shell.displayhook(value)
    except BaseException:
        _S.sigmode = _runner._SIG_DEFER
        result.error_in_exec = sys.exc_info()[1]
        shell.showtraceback()
    finally:
        _S.sigmode = _runner._SIG_DEFER
