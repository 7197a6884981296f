"""cellblock runner: memory used up by a cell does not end the session.

Without a cgroup (an ordinary user without a delegated one: DEGRADED),
--memory is an address-space rlimit: a cell that uses it up gets a
MemoryError, and so does every allocation after it while the cell's objects
hold the memory -- the runner's own too.  Before this part a runner in that
state loaded the IPython shell to show the cell's traceback (tens of MiB, in
the cell's except block and while idle), failed half-way, and then died of a
MemoryError reading the next request: "exited with code 1", the next cell's
result lost (issue 19).

So the runner keeps a reserve of address space: a mapping it never touches
(no page, so nothing under a cgroup) that it unmaps as soon as memory has run
out, a cell's MemoryError or its own, to format the error and read on; it maps
it again between requests once there is room.  While memory is short the shell
is not loaded: a load that fails for memory is taken back and tried again when
there is room for it (a broken IPython, by contrast, is given up for good),
and a cell that needs the shell meanwhile is told why.  Part of the runner core
(cb_core.py), which adopts these names.
"""

import sys
import os

_runner = sys.modules["_cellblock_runner"]
_S = _runner._S

# What the runner needs once a cell has used up the memory: IPython's first
# traceback imports stack_data and its helpers (about 4 MiB of address
# space), a request is read 64 KiB at a time.
_RESERVE_BYTES = 8 << 20
# What loading the IPython shell takes (about 25 MiB: IPython, traitlets,
# pygments, prompt_toolkit's pieces); memory is short until this fits too.
_LOAD_ROOM_BYTES = 32 << 20
_PROT_NONE = 0                          # mmap has no name for it: never readable, never touched
_NO_SHELL = ("the IPython shell could not be loaded: the sandbox's memory is used up (its "
             "--memory limit). Free some (del the objects that hold it) and run the cell again.")
_NO_ROOM = ("out of memory while handling this request: the sandbox's memory is used up (its "
            "--memory limit)")
_NO_MEMORY_LEFT = ("cellblock runner: out of memory, the runner's own reserve used up too (the "
                   "sandbox's --memory limit): the sandbox ends\n")


def _map(size):
    mmap = _runner._std("mmap")
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=_PROT_NONE)


def _recover():
    """Between requests: map the reserve again if it was given back; memory is
    no longer short once, besides, the shell still to load would fit.  True
    when both hold."""
    if _S.reserve is None:
        try:
            _S.reserve = _map(_RESERVE_BYTES)
        except (MemoryError, OSError, ImportError):
            return False
    if _S.mem_short:
        if _runner._loading():
            try:
                _map(_LOAD_ROOM_BYTES).close()
            except (MemoryError, OSError):
                return False
        _S.mem_short = False
    return True


def _out_of_memory():
    """Memory has run out: give the reserve back and load nothing until there
    is room again.  False when there was no reserve left to give."""
    _S.mem_short = True
    reserve, _S.reserve = _S.reserve, None
    if reserve is None:
        return False
    reserve.close()
    return True


def _no_memory_left():
    """Nothing left to give and the runner cannot read its next request."""
    try:
        os.write(2, _NO_MEMORY_LEFT.encode())
    except OSError:
        pass
    os._exit(1)


def _no_shell(req):
    """An execute the shell must run while it cannot be loaded for memory."""
    _runner._send({"type": "error", "ename": "MemoryError", "evalue": _NO_SHELL,
                   "traceback": ["MemoryError: " + _NO_SHELL]})
    _runner._send({"type": "done", "status": "error", "ename": "MemoryError",
                   "evalue": _NO_SHELL, "traceback": ["MemoryError: " + _NO_SHELL],
                   "user_expressions": {}, "payload": []})
