"""cellblock runner: keep IPython's import lean (loaded by the first loading step).

Importing IPython also imports big packages that a kernel needs late or
never.  ipykernel pays for them at start-up; cellblock defers them, which
keeps the idle sandbox at about half of ipykernel's memory:

- jedi (completion) is hidden while IPython's completer module is imported
  (it then records "jedi not installed") and handed to it on the first
  completion request (cb_shell.enable_jedi): the completions are then
  jedi's, as with ipykernel.
- IPython.terminal.embed (IPython/__init__ imports it; it brings
  prompt_toolkit, the terminal front end) and the modules IPython imports
  with a plain `import X` but only uses inside functions -- asyncio (and
  ssl with it; only for top-level await and %%bash), pydoc and stack_data
  (tracebacks) -- are stand-ins while IPython loads: the first attribute
  IPython reads from one imports the real module.  urllib.request (for %load
  of a URL) is taken with `from ... import`, so its stand-in carries the
  two functions IPython takes, which import the real module when called.
  Once the shell exists the stand-ins leave sys.modules: the user's own
  imports always get the real modules.
"""

import sys
import types

_EMBED = "IPython.terminal.embed"
# module -> names IPython takes from it with `from module import name` (wrapped)
_STAND_INS = {_EMBED: ("embed",), "asyncio": (), "pydoc": (), "stack_data": (),
              "urllib.request": ("Request", "urlopen")}
_hidden = []          # names set to None in sys.modules by prepare()
_placed = []          # stand-ins put in sys.modules by prepare()


class _LazyModule(types.ModuleType):
    """Stands in for a module until something uses it; then the real one is
    imported (once, into sys.modules) and answers."""

    def __getattr__(self, name):
        if name == "__path__" and not getattr(self.__spec__, "submodule_search_locations", None):
            raise AttributeError(name)      # the import system asks; not a package
        return getattr(_real(self.__name__), name)


def _real(name):
    mod = sys.modules.get(name)
    if mod is None or isinstance(mod, _LazyModule):
        sys.modules.pop(name, None)
        import importlib
        mod = importlib.import_module(name)
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, mod)
    return mod


def _wrapper(module, name):
    def call(*args, **kwargs):
        return getattr(_real(module), name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = "%s.%s (imported on first use by cellblock)" % (module, name)
    return call


def _find_spec(name):
    """The spec of a (sub)module, found without importing its packages."""
    from importlib.machinery import PathFinder
    path, spec, prefix = None, None, ""
    for part in name.split("."):
        prefix = prefix + "." + part if prefix else part
        spec = PathFinder.find_spec(prefix, path)
        if spec is None:
            return None
        path = spec.submodule_search_locations
    return spec


def _stand_in(name, wrapped):
    spec = _find_spec(name)
    if spec is None:
        return None
    mod = _LazyModule(name, "Imported on first use (cellblock runner).")
    mod.__spec__ = spec
    mod.__loader__ = spec.loader
    mod.__file__ = spec.origin
    mod.__package__ = name if spec.submodule_search_locations else name.rpartition(".")[0]
    for n in wrapped:
        setattr(mod, n, _wrapper(name, n))
    return mod


def prepare():
    """Before IPython is imported: hide jedi, put the stand-ins in place."""
    if "jedi" not in sys.modules:
        sys.modules["jedi"] = None
        _hidden.append("jedi")
    if "IPython" in sys.modules:
        return
    for name, wrapped in _STAND_INS.items():
        if name in sys.modules:
            continue
        try:
            mod = _stand_in(name, wrapped)
        except Exception:
            mod = None
        if mod is not None:
            sys.modules[name] = mod
            _placed.append(name)
            # `import a.b` finds a.b in sys.modules and then reads a.b off the
            # package: the stand-in must be there too, or a cell that runs
            # before release() gets "module 'urllib' has no attribute 'request'"
            parent, _, child = name.rpartition(".")
            if parent and parent in sys.modules and not hasattr(sys.modules[parent], child):
                setattr(sys.modules[parent], child, mod)


def release():
    """After the shell exists: hidden modules can be imported again, and the
    stand-ins IPython did not use leave sys.modules (IPython keeps its own
    references to them)."""
    while _hidden:
        name = _hidden.pop()
        if sys.modules.get(name, 0) is None:
            del sys.modules[name]
    while _placed:
        name = _placed.pop()
        if isinstance(sys.modules.get(name), _LazyModule):
            del sys.modules[name]
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and isinstance(getattr(sys.modules[parent], child, None),
                                                _LazyModule):
            delattr(sys.modules[parent], child)
