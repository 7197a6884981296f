"""cellblock runner: executes Python cells inside the sandbox.

Started as ``python -I -u runner.py`` with fd 0 = /dev/null, fd 1/2 = the
stdout/stderr pipes and fd 3 = a unix stream socket carrying length-prefixed
JSON frames (docs/RUNNER_PROTOCOL.md, section 3).

This entry point is deliberately tiny: it ignores SIGINT, sends the hello
frame at once, and only then compiles and loads the rest (cb_core.py, which
imports cb_display/cb_assist/cb_magics on demand), so the kernel learns that
the sandbox is up while the runner finishes loading.  The sandbox has no
writable __pycache__: every line of the runner is compiled at each start.
"""

import sys
import os
import _signal

PROTOCOL_VERSION = 2


def _ignore_sigint(signum, frame):
    pass


def _hello():
    impl = sys.implementation.name
    if not impl.isidentifier():
        impl = "unknown"
    body = ('{"type":"hello","version":%d,"python_version":"%d.%d.%d",'
            '"implementation":"%s","pid":%d}' % (
                (PROTOCOL_VERSION,) + tuple(sys.version_info[:3]) + (impl, os.getpid())))
    data = body.encode("ascii")
    view = memoryview(len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(3, view):]


def _load_core():
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("_cellblock_runner",
                                                  os.path.join(here, "cb_core.py"))
    core = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = core
    spec.loader.exec_module(core)
    return core


if __name__ == "__main__":
    _signal.signal(_signal.SIGINT, _ignore_sigint)
    try:
        _hello()
    except OSError:
        os._exit(0)
    _load_core()._main()
