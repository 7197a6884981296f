"""cellblock runner: the fast path for plain cells while IPython is loading.

The IPython shell (cb_shell) is loaded while the sandbox is idle; a cell
that arrives before it is ready runs here if, and only if, the shell would
give exactly the same result:

- the cell is plain Python (IPython's input transformers would leave it as
  it is, apart from dropping leading blank lines, which is done here too),
  stored in history, not silent, without user_expressions, top-level await
  or __future__ imports;
- a one-line cell does not start with a name that could be an automagic
  (IPython would run ``pwd`` or ``who`` as %pwd / %who);
- no name the shell provides or that looks at the interpreter's state is
  used (In, Out, display, get_ipython, exit, globals, sys.modules, ...);
- every import of a module that is neither loaded yet nor in the standard
  library waits for the shell first (libraries look for IPython when they
  are imported: tqdm.auto, matplotlib's inline backend, ...).

Results of the plain built-in scalars (int, float, complex, bool, str,
bytes) are displayed here: for them IPython's pretty printer is repr().
Anything else waits for the shell, which then formats the value, shows the
traceback, or finishes the cell (cb_shell_fast.finish_fast), as though it had
run it.  Each cell is recorded so that the shell's history, In/Out/_iN/_N
and execution count take it over unchanged (cb_shell_fast.adopt).
"""

import sys
import builtins
import _thread

_runner = sys.modules["_cellblock_runner"]
_S = _runner._S

# Names that make a cell wait for the shell: what IPython puts in the user
# namespace or builtins, and what looks at the interpreter's or the shell's
# state.  Attribute names count too (sys.modules, sys.exit, ...).
_SHELL_NAMES = frozenset((
    "In", "Out", "_ih", "_oh", "_dh", "_i", "_ii", "_iii", "_i00", "__", "___",
    "get_ipython", "display", "__IPYTHON__", "__builtin__", "exit", "quit",
    "dir", "globals", "vars", "locals", "eval", "exec", "compile", "breakpoint", "help",
    "__import__", "import_module", "reload", "modules", "displayhook", "excepthook",
    "_getframe", "f_globals", "f_back", "stdin", "set_trace", "pdb", "filterwarnings",
    "simplefilter", "resetwarnings", "showwarning", "path", "meta_path", "settrace",
    "setprofile", "asyncio",
))
# Built-in types whose text/plain under IPython is repr()
_SIMPLE = (int, float, complex, bool, str, bytes)
_CO_COROUTINE = 0x80
_AST_ONLY = 0x400                       # ast.PyCF_ONLY_AST, without importing ast
_MAIN_THREAD = _thread.get_ident()
_STDLIB = getattr(sys, "stdlib_module_names", None)
# standard modules that ipykernel changes (pdb becomes IPython's debugger)
_PATCHED_STDLIB = frozenset(("pdb",))


def _leading_empty_lines(code):
    """IPython's cleanup transform: drop leading blank lines; end with a newline."""
    if not code.endswith("\n"):
        code += "\n"
    lines = code.splitlines(True)
    for i, line in enumerate(lines):
        if line and not line.isspace():
            return "".join(lines[i:])
    return code


def _names(co, out):
    """Every global and attribute name used by a code object and the ones nested in it."""
    out.update(co.co_names)
    for c in co.co_consts:
        if type(c) is type(co):
            _names(c, out)
    return out


def _shell_name(name):
    if name in _SHELL_NAMES:
        return True
    # _iN, _N: input and output history variables
    if name[:1] == "_" and name[1:2] in ("i", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"):
        rest = name[2:] if name[1] == "i" else name[1:]
        return rest.isdigit() or (name[1] == "i" and rest == "")
    return False


def _maybe_automagic(cell, ns):
    """A one-line cell whose first name is undefined could be an automagic."""
    if cell.count("\n") > 1:
        return False
    s = cell.lstrip()
    i = 0
    while i < len(s) and (s[i].isalnum() or s[i] in "_*."):
        i += 1
    head = s[:i].split(".", 1)[0]
    if not head.isidentifier():
        return False
    if s[i:].lstrip()[:1] in ("=", ","):
        return False                    # IPython's AssignmentChecker: plain Python
    import keyword
    return not (keyword.iskeyword(head) or head in ns or hasattr(builtins, head))


def _semicolon_after(cell, node):
    return _runner._semicolon_after(cell, node)


def _import_hook(orig):
    """builtins.__import__ while a fast-path cell runs: a module that is
    neither loaded nor standard gets the shell loaded first."""

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        # a module IPython's loading stands in for (cb_lazy): the cell gets
        # the real one, bound on its package as an import would bind it
        if (level == 0 and isinstance(name, str) and globals is _S.user.__dict__
                and type(sys.modules.get(name)).__name__ == "_LazyModule"):
            _runner._mod("cb_lazy")._real(name)
        # only the cell's own imports (a library importing its optional
        # dependencies mid-import must not have the shell loaded under it);
        # IPython's own modules even when the loading has imported them
        # already: without the shell, IPython.display's clear_output prints
        # escape codes instead of sending clear_output
        if (level == 0 and _S.shell is None and globals is _S.user.__dict__
                and _thread.get_ident() == _MAIN_THREAD and isinstance(name, str)
                and (name not in sys.modules or name.partition(".")[0] == "IPython")):
            top = name.partition(".")[0]
            if _STDLIB is None or top not in _STDLIB or top in _PATCHED_STDLIB:
                _runner._ensure_shell()
                _runner._check_pending()
        return orig(name, globals, locals, fromlist, level)

    return __import__


def try_execute(req):
    """Run an execute request here when that is exactly what the shell would
    do.  False: nothing was run (the shell must do it)."""
    code = req.get("code")
    count = req.get("execution_count")
    if (not isinstance(code, str) or not isinstance(count, int) or req.get("silent")
            or not req.get("store_history", True) or req.get("user_expressions")
            or "_" in builtins.__dict__ or _STDLIB is None or _S.debugging):
        return False                    # (debugging: the shell keeps the cell's line numbers)
    ns = _S.user.__dict__
    shell = _S.shell
    if not code or code.isspace():
        if shell is not None:
            return False                  # the shell's own path is as cheap
        # IPython does nothing at all: no history, no count
        _start(req, count)
        _end({"type": "done", "status": "ok", "user_expressions": {}, "payload": []})
        return True
    cell = _leading_empty_lines(code)
    if _maybe_automagic(cell, ns):
        return False
    if shell is not None and not _runner._mod("cb_shell_fast").plain_ok(cell):
        return False
    try:
        tree = compile(cell, "<cell>", "exec", _AST_ONLY, True)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        return False                      # the shell transforms it or reports the error
    ast = _runner._std("ast")
    last = None
    body_nodes = tree.body
    if body_nodes and isinstance(body_nodes[-1], ast.Expr):
        last = body_nodes[-1]
        body_nodes = body_nodes[:-1]
    filename = _runner._cell_filename(code)
    try:
        body = compile(ast.Module(body=body_nodes, type_ignores=[]), filename, "exec", 0, True)
        expr = (compile(ast.Expression(last.value), filename, "eval", 0, True)
                if last is not None else None)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        return False                      # e.g. 'return' outside a function
    if (body.co_flags | (expr.co_flags if expr else 0)) & _CO_COROUTINE:
        return False
    names = _names(body, set())
    if expr is not None:
        _names(expr, names)
    if any(_shell_name(n) for n in names):
        return False
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            return False
    quiet = last is not None and _semicolon_after(cell, last)
    if shell is None:
        _runner._register_source(filename, cell)
    if shell is None and _S.main_filter is None:
        # IPython's init_deprecation_warnings: DeprecationWarnings of cells are shown
        import warnings
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        _S.main_filter = warnings.filters[0]
    _start(req, count)
    _run(code, cell, filename, count, body, expr, quiet)
    return True


def _start(req, count):
    _S.count = count
    _S.colors = req.get("colors")
    _S.silent = False
    _S.allow_stdin = bool(req.get("allow_stdin", False))
    _S.payload = []
    _S.in_cell = True
    _S.pending = False


def _end(reply):
    _S.in_cell = False
    _S.sigmode = _runner._SIG_IGNORE
    _S.pending = False
    _runner._flush()
    _runner._send(reply)


def _run(raw, cell, filename, count, body, expr, quiet):
    """Execute; on an exception, have the shell report it (in the except
    block, where IPython's showtraceback expects to be).  This function's
    frame heads every traceback, as IPython's run_code frame does, and is
    skipped the same way."""
    glob = _S.user.__dict__
    shell = _S.shell
    orig_import = builtins.__import__
    hook = _import_hook(orig_import) if shell is None else orig_import
    value = None
    # with the shell loaded, run_cell's bookkeeping around the code (cb_shell)
    result = _runner._mod("cb_shell_fast").plain_start(raw, cell, filename, count) if shell else None
    try:
        builtins.__import__ = hook
        if _S.pending:                    # an interrupt kept from the bookkeeping
            body, expr = _pending_raise(body), None
        _S.sigmode = _runner._SIG_USER
        exec(body, glob)
        if expr is not None:
            value = eval(expr, glob)
        _S.sigmode = _runner._SIG_DEFER
    except BaseException:
        _S.sigmode = _runner._SIG_DEFER
        if builtins.__import__ is hook:
            builtins.__import__ = orig_import
        if isinstance(sys.exc_info()[1], MemoryError):
            _runner._out_of_memory()      # room to report it; no shell loaded meanwhile
        if result is not None:
            _end(_runner._mod("cb_shell_fast").plain_finish(result, error=True))
        elif _runner._ensure_shell():
            _end(_runner._mod("cb_shell_fast").finish_fast(raw, cell, filename, count,
                                                      error=True))
        else:
            if _S.mode == "ipython":      # the shell, once there, takes the cell over
                _S.fast_cells.append((count, raw, cell, filename, None))
            _end(_minimal_error(sys.exc_info()))
        return
    finally:
        if builtins.__import__ is hook:
            builtins.__import__ = orig_import
    if quiet:
        value = None
    if result is not None:
        _end(_runner._mod("cb_shell_fast").plain_finish(result, value=value))
        return
    if _S.shell is None and (value is None or type(value) in _SIMPLE):
        text = None
        if value is not None:
            try:
                text = repr(value)
            except Exception:             # e.g. int too large to print: the shell says so
                text = None
        if value is None or text is not None:
            if text is not None:
                _runner._send({"type": "execute_result", "data": {"text/plain": text},
                               "metadata": {}})
                _unders(value, glob)
            _S.fast_cells.append((count, raw, cell, filename, value))
            _end({"type": "done", "status": "ok", "user_expressions": {}, "payload": []})
            return
    if _runner._ensure_shell():
        _end(_runner._mod("cb_shell_fast").finish_fast(raw, cell, filename, count, value=value))
    else:
        if _S.mode == "ipython":          # not loaded for memory: taken over later
            _S.fast_cells.append((count, raw, cell, filename, value))
        _end(_minimal_result(value, count, glob))


def _pending_raise(body):
    """As cb_shell.run_code does with an interrupt kept from IPython's
    bookkeeping: raised as the cell's first act, at its first line."""
    _S.pending = False
    line = min((ln for _, _, ln in body.co_lines() if ln), default=1)
    return compile("\n" * (line - 1) + "raise KeyboardInterrupt", body.co_filename, "exec")


def _unders(result, ns):
    """_, __ and ___ as IPython's DisplayHook.update_user_ns moves them: not
    when the user has assigned one of them himself."""
    mine = _S.unders
    update = True
    for name, obj in zip(("_", "__", "___"), mine):
        if name in ns and ns[name] is not obj:
            update = False
    _S.unders = [result, mine[0], mine[1]]
    if update:
        ns["_"], ns["__"], ns["___"] = _S.unders


def _minimal_error(exc_info):
    """The shell failed to load: report as the minimal runner does."""
    etype, value, tb = exc_info
    ename, evalue, lines = _runner._format_error(etype, value, tb)
    _runner._send({"type": "error", "ename": ename, "evalue": evalue, "traceback": lines})
    return {"type": "done", "status": "error", "ename": ename, "evalue": evalue,
            "traceback": lines, "user_expressions": {}, "payload": []}


def _minimal_result(value, count, glob):
    if value is not None:
        _runner._store_result(value, count, glob)
        err = _runner._guarded(_runner._publish_result, value)
        if err is not None:
            return _minimal_error(err)
    return {"type": "done", "status": "ok", "user_expressions": {}, "payload": []}
