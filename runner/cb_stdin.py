"""cellblock runner: input(), getpass() and sys.stdin through the frontend.

Each read becomes an input_request frame and waits for the kernel's
input_reply (interruptible: SIGINT raises KeyboardInterrupt while waiting).
Without allow_stdin, input() raises StdinNotImplementedError as under
ipykernel.  Part of the runner core (cb_core.py)."""

import sys
import _thread

_runner = sys.modules["_cellblock_runner"]
_S, _MAIN_THREAD = _runner._S, _runner._MAIN_THREAD
_check_pending = _runner._check_pending
_recv, _send = _runner._recv, _runner._send


class StdinNotImplementedError(NotImplementedError):
    """raw_input was called, but this frontend does not support input requests."""


StdinNotImplementedError.__module__ = "builtins"


def _input_bridge(prompt, password):
    __tracebackhide__ = True            # IPython's tracebacks leave this frame out
    if not _S.allow_stdin or not _S.in_cell:
        raise (_S.stdin_error or StdinNotImplementedError)(
            "raw_input was called, but this frontend does not support input requests.")
    _send({"type": "input_request", "prompt": prompt, "password": password})
    prev = _S.sigmode
    if _thread.get_ident() != _MAIN_THREAD:
        prev = -1                       # signals only reach the main thread
    try:
        while True:
            msg = _recv(interruptible=prev == 1)
            if msg.get("type") == "input_reply":
                break
    except KeyboardInterrupt:
        raise KeyboardInterrupt("Interrupted by user") from None
    finally:
        if prev != -1:
            _S.sigmode = prev
    if "value" not in msg and "error" in msg:
        raise EOFError(str(msg.get("error")))
    value = msg.get("value")
    if not isinstance(value, str):
        value = ""
    if value == "\x04":
        raise EOFError("EOF when reading a line")
    _check_pending()
    return value


def _input(prompt=""):
    """input([prompt]) -> str, answered by the frontend (input_request)."""
    __tracebackhide__ = True
    return _input_bridge(str(prompt), False)


def _getpass(prompt="Password: ", stream=None):
    """getpass(prompt) -> str, answered by the frontend without echo."""
    __tracebackhide__ = True
    return _input_bridge(str(prompt), True)


import io as _io


class _Stdin(_io.TextIOBase):
    """sys.stdin: readline() goes through the same bridge as input()."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, orig):
        self._orig = orig
        self._eof = False

    @property
    def buffer(self):
        return self._orig.buffer

    def readable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return 0

    def readline(self, size=-1):
        if self._eof or not _S.allow_stdin or not _S.in_cell:
            return ""
        try:
            line = _input_bridge("", False) + "\n"
        except EOFError:
            return ""
        return line

    def read(self, size=-1):
        out = []
        while True:
            line = self.readline()
            if not line:
                break
            out.append(line)
            if size is not None and size >= 0 and sum(map(len, out)) >= size:
                break
        return "".join(out)

    def readlines(self, hint=-1):
        return list(iter(self.readline, ""))

    def __iter__(self):
        return iter(self.readline, "")
