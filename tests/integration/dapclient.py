"""A frontend's side of the Jupyter debug protocol over jupyter_client:
debug_request on control, debug_reply, debug_event and status on iopub,
every message kept so that tests can look at what came in any order.

Used by tests/integration/test_debugger_session.py and the security tests'
DAP boundary checks."""

import time
from queue import Empty

TIMEOUT = 60

# what JupyterLab 3.6/4.x sends to start its debugger (@jupyterlab/debugger)
JUPYTERLAB_INITIALIZE = {
    "clientID": "jupyterlab", "clientName": "JupyterLab", "adapterID": "python",
    "pathFormat": "path", "linesStartAt1": True, "columnsStartAt1": True,
    "supportsVariableType": True, "supportsVariablePaging": True,
    "supportsRunInTerminalRequest": True, "locale": "en-us",
}


class DapClient:
    def __init__(self, kc):
        self.kc = kc
        self.seq = 0
        self.iopub = []          # every iopub message, in arrival order
        self.control = {}        # parent msg_id -> control reply
        self.sent = {}           # msg_id -> the DAP request's seq

    # -- reading -------------------------------------------------------------
    def _pump(self, until, timeout, what):
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("timed out waiting for " + what)
            got = False
            for getter, sink in ((self.kc.get_iopub_msg, None), (self.kc.get_control_msg, 1)):
                try:
                    m = getter(timeout=0.02 if got else min(left, 0.05))
                except Empty:
                    continue
                got = True
                if sink is None:
                    self.iopub.append(m)
                else:
                    self.control[m["parent_header"].get("msg_id")] = m

    def until(self, predicate, what, timeout=TIMEOUT):
        """Reads iopub and control until predicate() holds."""
        self._pump(predicate, timeout, what)

    def statuses(self, msg_id):
        return [m["content"]["execution_state"] for m in self.iopub
                if m["msg_type"] == "status" and m["parent_header"].get("msg_id") == msg_id]

    # -- requests --------------------------------------------------------------
    def send(self, command, arguments=None, content=None):
        """Sends one debug_request; returns its msg_id."""
        self.seq += 1
        c = content if content is not None else {
            "type": "request", "seq": self.seq, "command": command, "arguments": arguments or {}}
        msg = self.kc.session.msg("debug_request", c)
        self.kc.control_channel.send(msg)
        self.sent[msg["header"]["msg_id"]] = c.get("seq")
        return msg["header"]["msg_id"]

    def reply(self, msg_id, timeout=TIMEOUT):
        """The debug_reply's content, once it and the request's busy and idle
        have all arrived (a frontend waits for both)."""
        self._pump(lambda: msg_id in self.control and "idle" in self.statuses(msg_id),
                   timeout, "the debug_reply and idle of %s" % msg_id)
        assert self.statuses(msg_id)[:1] == ["busy"], self.statuses(msg_id)
        r = self.control[msg_id]
        assert r["msg_type"] == "debug_reply"
        return r["content"]

    def request(self, command, arguments=None, timeout=TIMEOUT):
        return self.reply(self.send(command, arguments), timeout)

    # -- events ----------------------------------------------------------------
    def events(self, name=None, since=0):
        return [m["content"] for m in self.iopub[since:] if m["msg_type"] == "debug_event"
                and (name is None or m["content"].get("event") == name)]

    def wait_event(self, name, since=0, timeout=TIMEOUT):
        self._pump(lambda: self.events(name, since), timeout, "debug_event " + name)
        return self.events(name, since)[0]

    def mark(self):
        return len(self.iopub)

    # -- cells -------------------------------------------------------------------
    def execute(self, code, **kw):
        kw.setdefault("allow_stdin", False)
        return self.kc.execute(code, **kw)

    def execute_reply(self, msg_id, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            self._pump(lambda: True, 0.01, "")
            try:
                m = self.kc.get_shell_msg(timeout=0.05)
            except Empty:
                if time.monotonic() > deadline:
                    raise AssertionError("timed out waiting for the execute_reply")
                continue
            if m["parent_header"].get("msg_id") == msg_id:
                self._pump(lambda: "idle" in self.statuses(msg_id), timeout, "idle")
                return m["content"]

    def outputs(self, msg_id):
        return [m for m in self.iopub if m["parent_header"].get("msg_id") == msg_id
                and m["msg_type"] in ("stream", "error", "execute_result", "display_data")]

    # -- the debugger, as JupyterLab starts it ------------------------------------
    def start(self):
        r = self.request("initialize", JUPYTERLAB_INITIALIZE, timeout=200)
        assert r["success"], r
        r = self.request("attach", {})
        assert r["success"], r
        return r

    def breakpoint_cell(self, code, lines):
        """dumpCell, debugInfo, setBreakpoints as JupyterLab does per cell;
        returns the cell's path."""
        path = self.request("dumpCell", {"code": code})["body"]["sourcePath"]
        self.request("debugInfo")
        r = self.request("setBreakpoints", {"breakpoints": [{"line": n} for n in lines],
                                            "source": {"path": path}, "sourceModified": False})
        assert r["success"] and all(b["verified"] for b in r["body"]["breakpoints"]), r
        return path
