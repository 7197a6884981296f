"""cellblock runner: import hooks.

Post-import patches (getpass answered by the frontend, IPython.display and
pyplot.show routed to the runner, matplotlib's font cache seeded, the comm
package served by cb_comm) and the stand-in `ipykernel` package that code
written for ipykernel imports.  Part of the runner core (cb_core.py)."""

import sys
import os

_runner = sys.modules["_cellblock_runner"]
_DIR, _mod, _std = _runner._DIR, _runner._mod, _runner._std
_getpass = _runner._getpass


# the ipykernel version the stand-in package says when none is installed
_IPYKERNEL_COMPAT = "6.17.0"

# module name -> function(module) called right after the module has executed
_POST_IMPORT = {}


class _PostImportLoader:
    def __init__(self, loader, fn):
        self._loader = loader
        self._fn = fn

    def create_module(self, spec):
        cm = getattr(self._loader, "create_module", None)
        return cm(spec) if cm is not None else None

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._fn(module)
        except Exception:
            pass

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _PostImportFinder:
    """sys.meta_path entry: patches watched modules just after they execute."""

    def find_spec(self, name, path=None, target=None):
        fn = _POST_IMPORT.get(name)
        if fn is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PostImportLoader(spec.loader, fn)
        return spec

    def invalidate_caches(self):
        pass


def _patch_getpass(m):
    m.getpass = _getpass


def _patch_ipython(m):
    _mod("cb_display").patch_ipython(m)


def _patch_pyplot(m):
    _mod("cb_display").patch_pyplot(m)


def _seed_matplotlib_cache(m):
    """Give a fresh sandbox the font list `make` built once (runner/mplcache),
    so the first matplotlib use does not rescan every font (~130 ms here).
    Runs after `matplotlib` itself is imported, before font_manager is."""
    try:
        src_dir = os.path.join(_DIR, "mplcache")
        names = [n for n in os.listdir(src_dir) if n.startswith("fontlist-") and n.endswith(".json")]
        dst_dir = m.get_cachedir()
        for n in names:
            dst = os.path.join(dst_dir, n)
            if not os.path.exists(dst):
                with open(os.path.join(src_dir, n), "rb") as f, open(dst, "xb") as g:
                    g.write(f.read())
    except Exception:
        pass                          # no seed: matplotlib builds the list itself


def _patch_comm(m):
    """The `comm` package creates the runner's comms (as ipykernel >= 6.18
    makes it create its own)."""
    _mod("cb_comm").patch_comm_package(m)


_POST_IMPORT["matplotlib"] = _seed_matplotlib_cache
_POST_IMPORT["getpass"] = _patch_getpass
_POST_IMPORT["comm"] = _patch_comm


class _ShimLoader:
    def __init__(self, fill):
        self._fill = fill

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self._fill(module)


class _IpykernelFinder:
    """sys.meta_path entry: `ipykernel` and `ipykernel.comm` are the
    runner's, whether or not ipykernel is installed in the sandbox's Python.
    Widgets import `ipykernel.comm.Comm` and find the kernel through
    `get_ipython().kernel`; the real package would bring ZMQ sockets and a
    kernel that do not exist here (cellblock's kernel is outside the
    sandbox), and its comms would publish nothing.  The `ipykernel` package
    served here has the real one's directories on its __path__, so its
    other modules (jsonutil, ...) still import from there."""

    _COMM = ("ipykernel.comm", "ipykernel.comm.comm", "ipykernel.comm.manager")

    def find_spec(self, name, path=None, target=None):
        if name != "ipykernel" and name not in self._COMM:
            return None
        machinery = _std("importlib.machinery")
        if name == "ipykernel":
            spec = machinery.ModuleSpec(name, _ShimLoader(self._package), is_package=True)
            real = None
            try:
                real = machinery.PathFinder.find_spec(
                    name, [p for p in sys.path if p and p != _DIR])
            except Exception:
                pass
            locations = getattr(real, "submodule_search_locations", None)
            spec.submodule_search_locations = list(locations) if locations else []
            return spec
        spec = machinery.ModuleSpec(name, _ShimLoader(self._comm),
                                    is_package=name == "ipykernel.comm")
        if name == "ipykernel.comm":
            spec.submodule_search_locations = []
        return spec

    @staticmethod
    def _package(module):
        module.__doc__ = ("ipykernel as cellblock's sandbox provides it: ipykernel.comm is the "
                         "runner's; the kernel itself runs outside the sandbox.")
        try:                            # the installed ipykernel's version, if any
            v = _std("importlib").import_module("ipykernel._version")
            for name in ("__version__", "version_info", "kernel_protocol_version",
                         "kernel_protocol_version_info"):
                if hasattr(v, name):
                    setattr(module, name, getattr(v, name))
        except Exception:
            pass
        if not hasattr(module, "__version__"):
            # none installed: the ipykernel whose comm and debugger this
            # kernel speaks (VS Code debugs cells through the kernel's debug
            # protocol only when ipykernel >= 6 says it can)
            module.__version__ = _IPYKERNEL_COMPAT
            module.version_info = tuple(int(p) for p in _IPYKERNEL_COMPAT.split("."))

    @staticmethod
    def _comm(module):
        _mod("cb_comm").fill_ipykernel_comm(module)

    def invalidate_caches(self):
        pass


def _minimal_hooks():
    """Without an IPython shell, cellblock's display() replaces IPython's and
    plt.show() sends figures itself (cb_display)."""
    _POST_IMPORT["IPython.core.display_functions"] = _patch_ipython
    _POST_IMPORT["IPython.core.display"] = _patch_ipython
    _POST_IMPORT["IPython.display"] = _patch_ipython
    _POST_IMPORT["matplotlib.pyplot"] = _patch_pyplot
