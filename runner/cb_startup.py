"""cellblock runner: start-up, what a runner does before its first request.

The user's fresh ``__main__``, sys.path as ipykernel has it (the working
directory first, ``''`` before site-packages), the namespace, builtins and
environment variables of the shell that will run the cells (IPython's
stand-ins, or the minimal shell's display/get_ipython/exit), input() and
stdin answered by the frontend, and the import hooks.  A warm template does
it once for all its forks (cb_warm).  Part of the runner core (cb_core.py),
which adopts what it and the siblings call."""

import sys
import os
import _signal
import builtins

_runner = sys.modules["_cellblock_runner"]
_S, _DIR, _on_sigint = _runner._S, _runner._DIR, _runner._on_sigint
_Stdin, _input = _runner._Stdin, _runner._input
_IpykernelFinder, _PostImportFinder = _runner._IpykernelFinder, _runner._PostImportFinder
_minimal_hooks, _patch_getpass = _runner._minimal_hooks, _runner._patch_getpass
_ExitAutocall, _Magic = _runner._ExitAutocall, _runner._Magic
display, clear_output = _runner.display, _runner.clear_output
update_display, get_ipython = _runner.update_display, _runner.get_ipython


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
                return f.find_spec(name, [p for p in sys.path if p and p != _S.cwd_path]) is not None
            except Exception:
                return False
    return False


def _ipython_env():
    """The environment variables ipykernel sets for the code it runs (again
    after a warm start has restored the sandbox's own, cb_warm)."""
    for name, value in _IPYKERNEL_ENV:
        os.environ[name] = value
    if _has_module("matplotlib_inline"):
        os.environ["MPLBACKEND"] = _INLINE_BACKEND


def _ipython_environment(ns):
    """The namespace and environment a cell sees under ipykernel, set before
    any cell runs so that fast-path cells see them too (cb_shell then adopts
    the same module).  The names IPython adds are there already, in IPython's
    order, holding stand-ins until the shell puts its own in their place:
    the namespace is never emptied under a running thread."""
    _ipython_env()
    hist_in, hist_out = [""], {}
    ns.update({"__doc__": _IPYTHON_MAIN_DOC, "__builtin__": builtins, "__builtins__": builtins,
               "_ih": hist_in, "_oh": hist_out, "_dh": [_S.cwd_path], "In": hist_in,
               "Out": hist_out, "get_ipython": lambda: _S.shell,
               "exit": getattr(builtins, "exit", None), "quit": getattr(builtins, "quit", None),
               "_": "", "__": "", "___": ""})


def _setup(mode):
    _signal.signal(_signal.SIGINT, _on_sigint)
    sys.modules["_cellblock_runner"] = _runner
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
    # and '' (the working directory of the moment), where IPython's
    # init_path puts it under ipykernel: after the standard library, before
    # the first site-/dist-packages.  The runner's own imports (_std,
    # _has_module) look past both entries.
    if "" not in sys.path:
        at = next((i for i, p in enumerate(sys.path)
                   if os.path.basename(p) in ("site-packages", "dist-packages")), 0)
        sys.path.insert(at, "")
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
