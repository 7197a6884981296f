"""cellblock runner: keep IPython's import lean (loaded by the first loading step).

Importing IPython also imports two big packages that a kernel needs late or
never: jedi (completion, ~5 MB and a quarter of a second) and, through
IPython/__init__'s ``from .terminal.embed import embed``, prompt_toolkit (the
terminal front end, ~5 MB).  ipykernel pays for both at start-up; cellblock
defers them:

- jedi is hidden while IPython's completer module is imported (it then
  records "jedi not installed"), and handed to it on the first completion
  request (cb_shell.enable_jedi) -- the completions are then jedi's, as with
  ipykernel.
- IPython.terminal.embed is a stand-in module whose ``embed`` and any other
  attribute load the real module on first use.
"""

import sys
import types

_EMBED = "IPython.terminal.embed"
_hidden = []          # names set to None in sys.modules by prepare()


class _LazyModule(types.ModuleType):
    """Stands in for a module until something uses it; then the real one is
    imported, takes its place in sys.modules, and answers."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(_real(self.__name__), name)


def _real(name):
    mod = sys.modules.get(name)
    if isinstance(mod, _LazyModule):
        del sys.modules[name]
        import importlib
        mod = importlib.import_module(name)
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, mod)
    return mod


def _embed(**kwargs):
    """IPython.embed: start an IPython shell here (loads the terminal front end)."""
    return _real(_EMBED).embed(**kwargs)


def prepare():
    """Before IPython is imported: hide jedi, stand in for the terminal embed."""
    if "jedi" not in sys.modules:
        sys.modules["jedi"] = None
        _hidden.append("jedi")
    if _EMBED not in sys.modules and "IPython" not in sys.modules:
        stub = _LazyModule(_EMBED, "Loaded on first use (cellblock): IPython's terminal embed.")
        stub.embed = _embed
        sys.modules[_EMBED] = stub


def release():
    """After the shell exists: hidden modules can be imported again."""
    while _hidden:
        name = _hidden.pop()
        if sys.modules.get(name, 0) is None:
            del sys.modules[name]
