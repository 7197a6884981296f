"""cellblock runner: the minimal shell's executor and its other requests.

Compiling a cell under its own file name (kept in linecache for tracebacks),
running it with the last expression displayed, tracebacks with the runner's
frames removed, user_expressions, and complete/inspect/is_complete/preload
and comm requests.  Used when the interpreter has no IPython, and by the
fast path (cb_fast) for the helpers it shares.  Part of the runner core
(cb_core.py)."""

import sys

_runner = sys.modules["_cellblock_runner"]
_S, _FD, _RUNNER_FILES = _runner._S, _runner._FD, _runner._RUNNER_FILES
_mod, _std = _runner._mod, _runner._std
_flush, _send = _runner._flush, _runner._send


def _strip_tb(te):
    """Drop the runner's frames from a TracebackException (and its chain)."""
    seen = set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        st = te.stack
        keep = [f for f in st if not _runner._hidden_file(f.filename)]
        if len(keep) != len(st):
            # an exception out of the debugger's trace function lists the
            # frame it entered twice
            if len(keep) >= 2 and _runner._hidden_file(st[-1].filename) and \
                    (keep[-1].filename, keep[-1].lineno, keep[-1].name) == \
                    (keep[-2].filename, keep[-2].lineno, keep[-2].name):
                del keep[-1]
            st[:] = keep
        for f in st:
            label = _cell_label(f.filename)
            if label is not None:
                f.line                  # the source line, looked up under the real name
                f.filename = label
        nxt = te.__cause__ or te.__context__
        for other in (te.__cause__, te.__context__):
            if other is not None and other is not nxt:
                _strip_tb(other)
        te = nxt


def _format_error(etype, value, tb):
    """-> (ename, evalue, traceback lines) for the error frame."""
    if isinstance(value, MemoryError):
        _runner._out_of_memory()        # room to format it (cb_memory)
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


# What cells are called: ipykernel's scheme, which the debugger's frontends
# compute themselves (debugInfo's tmpFilePrefix, hashMethod and hashSeed) to
# match frames and breakpoints to cells: the prefix (one per sandbox, from
# runner.py) + murmur2(the cell's raw text, ipykernel's seed) + ".py".  The
# file exists only once the debugger's dumpCell writes it; tracebacks take
# the source from linecache.  IPython shows these names as "Cell In [N]"
# (its compiler's filename map); the minimal shell shows them as <cell-N>.
_HASH_SEED = 0xC70F6907
_MURMUR_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def _murmur2(text, seed=_HASH_SEED):
    """MurmurHash2 (x86, 32 bits) of text's UTF-8 bytes, as ipykernel's
    compiler.murmur2_x86 and JupyterLab's debugger compute it."""
    data = text.encode("utf-8", "surrogatepass")
    n = len(data)
    h = (seed ^ n) & _MASK32
    body = n & ~3
    m = _MURMUR_M
    for k in memoryview(data[:body]).cast("I"):      # little-endian on the platforms we run on
        k = (k * m) & _MASK32
        k ^= k >> 24
        k = (k * m) & _MASK32
        h = ((h * m) & _MASK32) ^ k
    tail = data[body:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h


def _cell_filename(source):
    """The file name a cell's code is compiled under (see above)."""
    return "%s%d.py" % (_S.cell_prefix, _murmur2(source))


def _cell_label(filename):
    """<cell-N> for a cell file of the minimal shell's tracebacks, else None."""
    count = _S.cell_counts.get(filename)
    return None if count is None else "<cell-%d>" % count


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
    filename = _cell_filename(code)
    _S.cell_counts[filename] = _S.count
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
