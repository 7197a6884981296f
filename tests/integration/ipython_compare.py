"""Side by side: the same cells through cellblock and through the stock
ipykernel (the `python3` kernelspec), messages compared modulo what must
differ -- ids, dates, timings, memory addresses, the kernels' working
directories and the names they give cells (`/tmp/ipykernel_N/M.py` there,
`/tmp/cellblock_T/M.py` here) -- and minus what only cellblock sends (the files a cell
wrote, returned as artifacts).

Used by tests/integration/test_ipython*.py and tests/notebooks/.
"""

import json
import os
import re
import time

import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from .helpers import TIMEOUT, Kernel, collect_iopub, get_reply

REFERENCE = "python3"

# ipykernel's cell file names, and cellblock's
_CELL_NAME = re.compile(r"/tmp/ipykernel_\d+/\d+\.py|/tmp/cellblock_[0-9a-f]+/\d+\.py"
                        r"|<cell-\d+(?:\.\d+)?>")
# the same cell file names as they appear in SyntaxError messages: "(1234.py, line 2)"
_CELL_BASENAME = re.compile(r"(?<![\w/.])\d+(?:\.\d+)?\.py(?=, line )")
_ADDR = re.compile(r"0x[0-9a-fA-F]{6,16}")
# %time / %timeit / %prun figures
_DURATION = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?\s*(?:ns|\xb5s|us|ms|s|min|h)\b")
_TIMEIT_LOOPS = re.compile(r"\d+(?:,\d+)* loops? each")
_PRUN_FIGURES = re.compile(r"\d+(?:\.\d+)?")
_SLOWEST_RUN = re.compile(r"The slowest run took [\d.]+ times longer than the fastest\. "
                          r"This could mean that an intermediate result is being cached\.\n")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(msgs):
    """Colours that programs choose by isatty() (pip, ls): cellblock's `!cmd`
    has no terminal when the sandbox has no pty."""
    def strip(o):
        if isinstance(o, str):
            return _ANSI.sub("", o)
        if isinstance(o, list):
            return [strip(v) for v in o]
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items()}
        return o
    return strip(msgs)


class Pair:
    """A cellblock kernel and an ipykernel, each with its own empty working
    directory (the sandbox always has one)."""

    def __init__(self, tmp_path, extra_env=None):
        self.dirs = {}
        self.kernels = {}
        for name in ("cellblock", REFERENCE):
            d = tmp_path / ("wd-" + name)
            d.mkdir(exist_ok=True)
            self.dirs[name] = str(d)
        self.extra_env = extra_env or {}

    def start(self):
        for name in ("cellblock", REFERENCE):
            k = Kernel(kernel_name=name)
            env = {kk: v for kk, v in os.environ.items() if kk != "PYTEST_CURRENT_TEST"}
            env.update(self.extra_env)
            if name == REFERENCE:
                # ipykernel's profile (history, %store) lives in IPYTHONDIR: a
                # fresh one, as every sandbox has
                env["IPYTHONDIR"] = str(tmp_ipython(self.dirs[name]))
            k.km.start_kernel(env=env, cwd=self.dirs[name])
            k.pid = k.km.provisioner.process.pid
            k.kc = k.km.client()
            k.kc.allow_stdin = False
            k.kc.start_channels()
            k.kc.wait_for_ready(timeout=TIMEOUT)
            self.kernels[name] = k
        return self

    def stop(self):
        problems = []
        for k in self.kernels.values():
            problems += k.stop(check=False)
        return problems

    def workdir(self, name):
        """The working directory the code sees (the sandbox's is not the host's)."""
        return self.kernels[name].execute("import os; print(os.getcwd())").stream().strip()

    def run(self, code, timeout=TIMEOUT, answers=None, **kw):
        """Run `code` on both kernels; -> {name: normalised messages}.
        answers: what to type at each input_request (then allow_stdin)."""
        out, statuses = {}, {}
        for name, k in self.kernels.items():
            if answers is not None:
                iopub, reply, asked = run_with_input(k.kc, code, answers, timeout=timeout)
                msgs = normalise(iopub, reply, self.cwds.get(name), self.homes.get(name))
                out[name] = [["stdin", "input_request", _norm(a, self.cwds.get(name),
                                                               self.homes.get(name))]
                             for a in asked] + msgs
            else:
                iopub, reply = run_raw(k.kc, code, timeout=timeout, **kw)
                if (name == REFERENCE and reply["content"]["status"] == "aborted"
                        and statuses.get("cellblock") != "aborted"):
                    # ipykernel's own race: after an error it aborts what
                    # arrives before it has flushed its queue, even a request
                    # sent after the error's reply (seen under load): again
                    time.sleep(0.5)
                    iopub, reply = run_raw(k.kc, code, timeout=timeout, **kw)
                statuses[name] = reply["content"]["status"]
                out[name] = normalise(iopub, reply, self.cwds.get(name), self.homes.get(name))
        return out

    def request(self, msg_type, content, timeout=TIMEOUT):
        """A shell request (complete, inspect, is_complete...) on both: -> {name: content}."""
        out = {}
        for name, k in self.kernels.items():
            msg = k.kc.session.msg(msg_type, content)
            k.kc.shell_channel.send(msg)
            reply = get_reply(k.kc, msg["header"]["msg_id"], "shell", timeout)
            collect_iopub(k.kc, msg["header"]["msg_id"], timeout)
            out[name] = _norm(reply["content"], self.cwds.get(name), self.homes.get(name))
        return out

    def prepare(self):
        self.cwds, self.homes = {}, {}
        for name, k in self.kernels.items():
            where = k.execute("import os; print(os.getcwd()); print(os.path.expanduser('~'))")
            self.cwds[name], self.homes[name] = where.stream().split("\n")[:2]
        # that used a cell on each: both go on from the same count
        return self


def started_pair(tmp_path, probe="print(type(get_ipython()).__name__)", missing=None):
    """For a fixture: yields a started, prepared Pair and stops it after.
    Skips when there is no reference kernel, when `probe` (a cell ending in a
    print of the shell's class name) fails on either kernel (`missing` says
    what to install then), or when cellblock runs its minimal runner.  The
    probe runs on both kernels, so their histories stay the same."""
    try:
        KernelSpecManager().get_kernel_spec(REFERENCE)
    except NoSuchKernel:
        pytest.skip("no stock ipykernel (python3 kernelspec) to compare with")
    p = Pair(tmp_path)
    try:
        p.start().prepare()
        outs = {n: k.execute(probe) for n, k in p.kernels.items()}
        if missing and any(r.status != "ok" for r in outs.values()):
            pytest.skip("%s is not installed for the sandbox's Python" % missing)
        if outs["cellblock"].stream().strip() != "ZMQInteractiveShell":
            pytest.skip("the sandbox's Python has no IPython: cellblock runs its minimal runner")
        yield p
    finally:
        problems = p.stop()
        assert not problems, problems


def tmp_ipython(workdir):
    d = os.path.join(os.path.dirname(workdir), "ipythondir-" + os.path.basename(workdir))
    os.makedirs(d, exist_ok=True)
    return d


def run_raw(kc, code, timeout=TIMEOUT, **kw):
    kw.setdefault("allow_stdin", False)
    msg_id = kc.execute(code, **kw)
    iopub = collect_iopub(kc, msg_id, timeout)
    reply = get_reply(kc, msg_id, "shell", timeout)
    return iopub, reply


def run_with_input(kc, code, answers, timeout=TIMEOUT):
    """Execute with allow_stdin, typing `answers` in turn; -> (iopub, reply,
    the input_request contents)."""
    msg_id = kc.execute(code, allow_stdin=True)
    asked = []
    answers = list(answers)
    deadline = time.monotonic() + timeout
    from queue import Empty
    reply = None
    while reply is None:
        assert time.monotonic() < deadline, "no reply to %r" % code
        try:
            req = kc.get_stdin_msg(timeout=0.05)
        except Empty:
            req = None
        if req is not None:
            asked.append(req["content"])
            kc.input(answers.pop(0) if answers else "\x04")
        try:
            m = kc.get_shell_msg(timeout=0.05)
        except Empty:
            continue
        if m["parent_header"].get("msg_id") == msg_id:
            reply = m
    iopub = collect_iopub(kc, msg_id, timeout)
    return iopub, reply, asked


def normalise_text(s, cwd=None, home=None):
    if cwd:
        s = s.replace(cwd, "<CWD>")
        if home and cwd == home:
            # the sandbox's working directory is its HOME: IPython writes ~/x
            s = re.sub(r"~(?=/)", "<CWD>", s)
    s = _CELL_NAME.sub("<CELL>", s)
    s = _CELL_BASENAME.sub("<CELL>", s)
    s = _ADDR.sub("0x<ADDR>", s)
    return s


def _norm(obj, cwd, home=None):
    if isinstance(obj, str):
        return normalise_text(obj, cwd, home)
    if isinstance(obj, list):
        return [_norm(v, cwd, home) for v in obj]
    if isinstance(obj, dict):
        return {k: _norm(v, cwd, home) for k, v in obj.items()}
    return obj


def is_artifact(msg):
    md = msg["content"].get("metadata") or {}
    return isinstance(md, dict) and "cellblock" in md


def normalise(iopub, reply, cwd=None, home=None):
    """-> list of (channel, msg_type, content) with streams coalesced."""
    out = []
    for m in iopub:
        t = m["msg_type"]
        if t == "status":
            continue
        if t == "display_data" and is_artifact(m):
            continue
        c = dict(m["content"])
        if t == "stream" and out and out[-1][1] == "stream" and out[-1][2]["name"] == c["name"]:
            out[-1][2]["text"] += c["text"]
            continue
        out.append(["iopub", t, c])
    rc = dict(reply["content"])
    rc.pop("engine_info", None)
    out.append(["shell", reply["msg_type"], rc])
    return _norm(out, cwd, home)


def blur_timings(msgs):
    """For %time/%timeit/%prun cells: figures are not comparable, the shape is."""
    def fix(s):
        s = _SLOWEST_RUN.sub("", s)
        s = _DURATION.sub("<T>", s)
        s = _TIMEIT_LOOPS.sub("<N> loops each", s)
        return s
    out = []
    for ch, t, c in msgs:
        c = json.loads(json.dumps(c))
        if t == "stream":
            c["text"] = fix(c["text"])
        if t == "shell":
            pass
        for p in c.get("payload", []) if isinstance(c, dict) else []:
            d = p.get("data", {})
            if "text/plain" in d:
                d["text/plain"] = _PRUN_FIGURES.sub("<F>", d["text/plain"])
        out.append([ch, t, c])
    return out


def describe(a, b):
    """A readable diff of two normalised message lists."""
    ja = json.dumps(a, indent=1, sort_keys=True, ensure_ascii=False)
    jb = json.dumps(b, indent=1, sort_keys=True, ensure_ascii=False)
    import difflib
    return "\n".join(difflib.unified_diff(jb.splitlines(), ja.splitlines(), "ipykernel",
                                          "cellblock", lineterm="", n=2))


def assert_same(pair, code, blur=None, **kw):
    """Run `code` on both kernels and assert the same messages; returns them.
    blur: a function applied to both message lists first."""
    r = pair.run(code, **kw)
    a, b = r["cellblock"], r[REFERENCE]
    if blur is not None:
        a, b = blur(a), blur(b)
    assert a == b, "cell %r differs from ipykernel:\n%s" % (code, describe(a, b))
    return a


def outputs_of(msgs, msg_type=None):
    return [c for ch, t, c in msgs if ch == "iopub" and (msg_type is None or t == msg_type)]


def reply_of(msgs):
    return [c for ch, t, c in msgs if ch == "shell"][-1]
