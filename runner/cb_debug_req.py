"""cellblock runner: what the Jupyter debug protocol adds to DAP, answered
in the sandbox (the requests ipykernel's debugger answers itself).

- dumpCell {code}: writes the cell's file (cb_exec._cell_filename: the name
  the cell is compiled under) so that breakpoints can be set in it;
- source {source: {path}}: a file's text (the kernel sources panel);
- inspectVariables: the user's globals while no thread is stopped, with
  `variables` on their references (pydevd's own variable classes, as
  ipykernel uses them);
- richInspectVariables {variableName, frameId?}: the variable's mime bundle
  (IPython's display formatter; repr() in the minimal shell), evaluated in
  the stopped frame when there is one;
- modules: the loaded modules that have a .py file;
- copyToGlobals {srcVariableName, dstVariableName, srcFrameId}: a variable
  of a stopped frame bound to a name in that frame's globals (the user's
  namespace for a cell's functions), through pydevd's setExpression as
  ipykernel does; the response carries setExpression's body.  debugInfo
  says `copyToGlobals: true` (the kernel's mirror), which JupyterLab reads
  before it offers "Copy Variable to Globals".

Responses from pydevd are adjusted on their way out: the runner's own frames
are trimmed from stack traces (justMyCode hides IPython's, the attach rules
hide the runner's; what is left is the cells' and the user's modules') and
internal names (In, Out, _iN, get_ipython, ...) are left out of variable
lists, as ipykernel does.  Runs on the bridge and relay threads (cb_debug).
"""

import sys
import os
import re

_runner = sys.modules["_cellblock_runner"]
_S = _runner._S
_debug = _runner._mod("cb_debug")
respond = _debug.respond
_SOURCE_MAX = 4 * 1024 * 1024          # bytes of a file `source` returns
_FORBIDDEN = frozenset((
    "__name__", "__doc__", "__package__", "__loader__", "__spec__", "__annotations__",
    "__builtins__", "__builtin__", "__display__", "get_ipython", "debugpy", "exit", "quit",
    "In", "Out", "_oh", "_dh", "_ih", "_", "__", "___", "__cellblock__",
))
_HISTORY_NAME = re.compile(r"^(_\d|_i)")
_GROUPS = ("special variables", "function variables")


def accept_variable(name):
    """ipykernel's filter: names IPython and the runner put in the namespace."""
    return isinstance(name, str) and name not in _FORBIDDEN and not _HISTORY_NAME.match(name)


def _user_ns():
    shell = _S.shell
    return shell.user_ns if shell is not None else _S.user.__dict__


# ---------------------------------------------------------------- leading lines


def debugging(on):
    """A frontend attached (on) or detached.  The shell follows before the
    next cell, on the main thread (cb_shell._apply_debugging), never from
    this one."""
    _S.debugging = on


# ---------------------------------------------------------------- files


def _dump_cell(req):
    code = (req.get("arguments") or {}).get("code")
    if not isinstance(code, str):
        respond(req, False, message="dumpCell needs a string 'code'")
        return
    path = _runner._cell_filename(code)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(code)
    respond(req, body={"sourcePath": path})


def _source(req):
    src = (req.get("arguments") or {}).get("source")
    path = src.get("path") if isinstance(src, dict) else None
    if not isinstance(path, str) or not os.path.isfile(path):
        respond(req, False, body={}, message="source unavailable")
        return
    with open(path, "rb") as f:
        data = f.read(_SOURCE_MAX + 1)
    if len(data) > _SOURCE_MAX:
        respond(req, False, body={}, message="source larger than %d bytes" % _SOURCE_MAX)
        return
    respond(req, body={"content": data.decode("utf-8", "replace")})


def _modules(req):
    args = req.get("arguments") or {}
    mods = list(sys.modules.values())
    start = args.get("startModule") if isinstance(args.get("startModule"), int) else 0
    count = args.get("moduleCount") if isinstance(args.get("moduleCount"), int) else 0
    end = len(mods) if count <= 0 else min(len(mods), start + count)
    out = []
    for i in range(max(0, start), end):
        spec = getattr(mods[i], "__spec__", None)
        origin = getattr(spec, "origin", None)
        if isinstance(origin, str) and origin.endswith(".py") and \
                not origin.startswith(_runner._DIR):
            out.append({"id": i, "name": mods[i].__name__, "path": origin})
    respond(req, body={"modules": out, "totalModules": len(mods)})


# ---------------------------------------------------------------- variables


class _Explorer:
    """The user's globals as pydevd's variable classes present a frame
    (what ipykernel's VariableExplorer does while no thread is stopped)."""

    def __init__(self):
        from _pydevd_bundle import pydevd_frame_utils
        from _pydevd_bundle.pydevd_api import PyDevdAPI
        from _pydevd_bundle.pydevd_suspended_frames import SuspendedFramesManager, _FramesTracker

        class _Code:
            co_filename = _runner._cell_filename("")
            co_name = "<module>"

        class _Frame:
            f_code = _Code()
            f_back = None

            def __init__(self, ns):
                self.f_globals = self.f_locals = ns

        class _DB:
            variable_presentation = PyDevdAPI.VariablePresentation()

        self.manager = SuspendedFramesManager()
        self.tracker = _FramesTracker(self.manager, _DB())
        self.frame = _Frame(_user_ns())
        self.tracker.track("thread1", pydevd_frame_utils.create_frames_list_from_frame(self.frame))

    def children(self, ref=None):
        var = self.manager.get_variable(ref or id(self.frame))
        return [v.get_var_data() for v in var.get_children_variables()]

    def close(self):
        self.tracker.untrack_all()


_explorer = [None]


def _variables_body(variables):
    return {"variables": [v for v in variables if accept_variable(v.get("name"))]}


def _inspect_variables(req):
    why = _debug.load()
    if why is not None:
        respond(req, False, message=why)
        return
    if _explorer[0] is not None:
        _explorer[0].close()
    _explorer[0] = _Explorer()
    respond(req, body=_variables_body(_explorer[0].children()))


def variables_not_stopped(req):
    """`variables` while no thread is stopped: the explorer's references."""
    ref = (req.get("arguments") or {}).get("variablesReference")
    ex = _explorer[0]
    if ex is None or not isinstance(ref, int):
        respond(req, False, message="no such variables reference (inspectVariables first)")
        return
    try:
        variables = ex.children(ref)
    except KeyError:
        respond(req, False, message="no such variables reference")
        return
    respond(req, body=_variables_body(variables))


def _rich_bundle(value):
    if _S.shell is not None:
        data, md = _S.shell.display_formatter.format(value)
    else:
        data, md = _runner._exec._format(value)
    return data, md


def _rich_inspect(req):
    args = req.get("arguments") or {}
    name = args.get("variableName")
    if not isinstance(name, str) or not name.isidentifier():
        respond(req, name in _GROUPS, body={"data": {}, "metadata": {}})
        return
    frame_id = args.get("frameId")
    if _debug._D.stopped and isinstance(frame_id, int):
        _rich_in_frame(req, name, frame_id)
        return
    data, md = {}, {}
    ns = _user_ns()
    if name in ns:
        try:
            data, md = _rich_bundle(ns[name])
        except BaseException:
            data, md = {}, {}
    _rich_reply(req, data, md)


def _rich_reply(req, data, md):
    data = _jsonable(data)
    md = _jsonable(md) if isinstance(md, dict) else {}
    respond(req, body={"data": data, "metadata": {k: v for k, v in md.items() if k in data}})


def _jsonable(obj):
    if _S.shell is not None:
        return _runner._mod("cb_shell_io").jsonable(obj)
    return obj if isinstance(obj, dict) else {}


def _rich_in_frame(req, name, frame_id):
    """The bundle of a variable of a stopped frame, formatted in that frame."""
    if _S.shell is not None:
        expr = "get_ipython().display_formatter.format(%s)" % name
    else:
        expr = "({'text/plain': repr(%s)}, {})" % name

    def done(resp):
        data, md = {}, {}
        body = resp.get("body") or {}
        if resp.get("success") and isinstance(body.get("result"), str):
            import ast
            try:
                data, md = ast.literal_eval(body["result"])
            except Exception:
                data, md = {}, {}
        _rich_reply(req, data if isinstance(data, dict) else {}, md)

    _debug.ask("evaluate", {"expression": expr, "frameId": frame_id, "context": "clipboard"},
               done)


def _copy_to_globals(req):
    args = req.get("arguments") or {}
    src, dst = args.get("srcVariableName"), args.get("dstVariableName")
    frame_id = args.get("srcFrameId")
    if not (_is_name(src) and _is_name(dst)) or not isinstance(frame_id, int) \
            or isinstance(frame_id, bool):
        respond(req, False, message="copyToGlobals needs variable names (srcVariableName, "
                                    "dstVariableName) and an integer srcFrameId")
        return
    if not accept_variable(dst):
        respond(req, False, message="copyToGlobals: %r is a name of the shell's own" % dst)
        return
    if not _debug._D.started or not _debug._D.stopped:
        respond(req, False, message="copyToGlobals copies from a stopped frame: no thread is "
                                    "stopped")
        return

    def done(resp):
        body = resp.get("body")
        respond(req, bool(resp.get("success")), body=body if isinstance(body, dict) else {},
                message=resp.get("message") if isinstance(resp.get("message"), str) else None)

    # globals() in an expression pydevd evaluates is the frame's f_globals
    _debug.ask("setExpression", {"expression": "globals()[%r]" % dst, "value": src,
                                 "frameId": frame_id}, done)


def _is_name(name):
    import keyword
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


LOCAL = {
    "dumpCell": _dump_cell,
    "copyToGlobals": _copy_to_globals,
    "source": _source,
    "modules": _modules,
    "inspectVariables": _inspect_variables,
    "richInspectVariables": _rich_inspect,
}


# ---------------------------------------------------------------- pydevd's responses


def _runner_frame(frame):
    src = frame.get("source") if isinstance(frame, dict) else None
    path = src.get("path") if isinstance(src, dict) else None
    return isinstance(path, str) and (path.startswith(_runner._DIR) or
                                      path.startswith(_S.debug_dirs or ("\0",)))


def adjust_response(msg):
    """A response of pydevd's on its way to the kernel."""
    body = msg.get("body")
    if not msg.get("success") or not isinstance(body, dict):
        return msg
    cmd = msg.get("command")
    if cmd == "stackTrace" and isinstance(body.get("stackFrames"), list):
        frames = [f for f in body["stackFrames"] if not _runner_frame(f)]
        body["stackFrames"] = frames
        body["totalFrames"] = len(frames)
    elif cmd == "variables" and isinstance(body.get("variables"), list):
        body["variables"] = [v for v in body["variables"]
                             if isinstance(v, dict) and accept_variable(v.get("name"))]
    return msg
