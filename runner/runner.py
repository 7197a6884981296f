"""cellblock runner: executes Python cells inside the sandbox.

Started as ``python -I -u runner.py`` with fd 0 = /dev/null, fd 1/2 = the
stdout/stderr pipes and fd 3 = a unix stream socket carrying length-prefixed
JSON frames (docs/RUNNER_PROTOCOL.md, section 3).

This entry point is deliberately tiny: it ignores SIGINT, sends the hello
frame at once, and only then compiles and loads the rest (cb_core.py, which
imports the other cb_*.py modules on demand), so the kernel learns that the
sandbox is up while the runner finishes loading.

The hello frame says which shell will run the cells: "ipython" when the
interpreter can import IPython (cb_shell.py, a real InteractiveShell loaded
while the sandbox is idle), else "minimal" (cb_core's own executor).  Finding
that out must not import IPython (most of a second): the package is only
located, and its version read from IPython/core/release.py as text.  It also
says where the cells' files are named (`cell_prefix`, one per sandbox: the
debugger's frontends match frames and breakpoints to cells by these names)
and whether the debugger can run (`debugger`: fd 4, the debugger's channel,
is open and debugpy can be imported; found the same way, without importing).
"""

import sys
import os
import _signal

PROTOCOL_VERSION = 2
_DEBUG_FD = 4               # the debugger's channel (docs/RUNNER_PROTOCOL.md section 4)
_PREFIX_TOKEN_BYTES = 4     # random bytes in the cells' file prefix: one per sandbox
_HERE = os.path.dirname(os.path.abspath(__file__))
# IPython/core/release.py names its version parts like this
_RELEASE_PARTS = ("_version_major", "_version_minor", "_version_patch", "_version_extra")


def _ignore_sigint(signum, frame):
    pass


def _release_version(path):
    """'8.5.0' from release.py's plain assignments (the last one of each part wins)."""
    parts = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            name, eq, value = line.partition("=")
            name = name.strip()
            if not eq or name not in _RELEASE_PARTS or line[:1].isspace():
                continue
            value = value.split("#", 1)[0].strip()
            if value.isdigit():
                parts[name] = value
            elif len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                parts[name] = value[1:-1]
    if not all(p in parts for p in _RELEASE_PARTS[:3]):
        return ""
    version = ".".join(parts[p] for p in _RELEASE_PARTS[:3]) + parts.get("_version_extra", "")
    return version if version.isprintable() and len(version) < 64 else ""


def _find(name):
    """The spec of top-level package `name` on sys.path (runner dir excluded),
    without importing it; None when there is none."""
    for f in sys.meta_path:
        if getattr(f, "__name__", "") == "PathFinder":
            try:
                return f.find_spec(name, [p for p in sys.path if p and os.path.abspath(p) != _HERE])
            except Exception:
                return None
    return None


def debug_info():
    """-> (cell_prefix, the debugger's channel is open, debugpy can be imported)."""
    prefix = "/tmp/cellblock_%s/" % os.urandom(_PREFIX_TOKEN_BYTES).hex()
    try:
        os.fstat(_DEBUG_FD)
    except OSError:
        return prefix, False, False
    return prefix, True, _find("debugpy") is not None


def shell_info():
    """-> ("ipython", version) when IPython can be imported, else ("minimal", "").

    CELLBLOCK_SHELL=minimal in the environment forces the minimal runner."""
    if os.environ.get("CELLBLOCK_SHELL") == "minimal":
        return "minimal", ""
    spec = _find("IPython")
    if spec is None or not spec.submodule_search_locations:
        return "minimal", ""
    version = ""
    for loc in spec.submodule_search_locations:
        try:
            version = _release_version(os.path.join(loc, "core", "release.py"))
        except (OSError, UnicodeDecodeError):
            continue
        if version:
            break
    return "ipython", version


def _hello(shell, version, prefix, debugger):
    impl = sys.implementation.name
    if not impl.isidentifier():
        impl = "unknown"
    body = ('{"type":"hello","version":%d,"python_version":"%d.%d.%d",'
            '"implementation":"%s","pid":%d,"shell":"%s","shell_version":"%s",'
            '"cell_prefix":"%s","debugger":%s}' % (
                (PROTOCOL_VERSION,) + tuple(sys.version_info[:3]) +
                (impl, os.getpid(), shell, version.replace("\\", "").replace('"', ""),
                 prefix, "true" if debugger else "false")))
    data = body.encode("ascii", "replace")
    view = memoryview(len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(3, view):]


def _load(file, name):
    """A sibling file loaded as module `name` (by path: never from sys.path)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, file))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _load_core():
    return _load("cb_core.py", "_cellblock_runner")


def _is_template():
    """fd 3 is a pipe (the configuration), not the event socket: this process
    is a warm-start template (cb_warm.py; launcher/warm_tpl.c starts it)."""
    try:
        return (os.fstat(3).st_mode & 0o170000) == 0o010000
    except OSError:
        return False


if __name__ == "__main__":
    _signal.signal(_signal.SIGINT, _ignore_sigint)
    shell, version = shell_info()
    if _is_template():
        _load("cb_warm.py", "_cellblock_warm").template_main(sys.modules[__name__], shell, version)
    prefix, channel, debugpy = debug_info()
    try:
        _hello(shell, version, prefix, channel and debugpy)
    except OSError:
        os._exit(0)
    core = _load_core()
    core._S.shell_version = version     # said again by a restored runner (cb_snap.resume)
    core._S.hello_debugger = channel and debugpy
    core._main(shell, prefix, channel)
