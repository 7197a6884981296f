"""Side by side: the same cells through cellblock and through the stock
ipykernel (the `python3` kernelspec), messages compared modulo what must
differ -- ids, dates, timings, memory addresses, the kernels' working
directories and the names they give cells (`/tmp/ipykernel_N/M.py` there,
`<cell-N>` here) -- and minus what only cellblock sends (the files a cell
wrote, returned as artifacts).

Used by tests/integration/test_ipython*.py and tests/notebooks/.
"""

import json
import os
import re
import time

from .helpers import TIMEOUT, Kernel, collect_iopub, get_reply

REFERENCE = "python3"

# ipykernel's cell file names, and cellblock's
_CELL_NAME = re.compile(r"/tmp/ipykernel_\d+/\d+\.py|/tmp/cellblock-cells/\d+(?:\.\d+)?\.py"
                        r"|<cell-\d+(?:\.\d+)?>")
_ADDR = re.compile(r"0x[0-9a-fA-F]{6,16}")
# %time / %timeit / %prun figures
_DURATION = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?\s*(?:ns|\xb5s|us|ms|s|min|h)\b")
_TIMEIT_LOOPS = re.compile(r"\d+(?:,\d+)* loops? each")
_PRUN_FIGURES = re.compile(r"\d+(?:\.\d+)?")


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

    def run(self, code, timeout=TIMEOUT, **kw):
        """Run `code` on both kernels; -> {name: normalised messages}."""
        out = {}
        for name, k in self.kernels.items():
            out[name] = run_normalised(k.kc, code, self.cwds.get(name), timeout=timeout, **kw)
        return out

    def prepare(self):
        self.cwds = {name: self.workdir(name) for name in self.kernels}
        # the calls above used a cell each: start both from the same count
        return self


def run_raw(kc, code, timeout=TIMEOUT, **kw):
    kw.setdefault("allow_stdin", False)
    msg_id = kc.execute(code, **kw)
    iopub = collect_iopub(kc, msg_id, timeout)
    reply = get_reply(kc, msg_id, "shell", timeout)
    return iopub, reply


def normalise_text(s, cwd=None):
    if cwd:
        s = s.replace(cwd, "<CWD>")
    s = _CELL_NAME.sub("<CELL>", s)
    s = _ADDR.sub("0x<ADDR>", s)
    return s


def _norm(obj, cwd):
    if isinstance(obj, str):
        return normalise_text(obj, cwd)
    if isinstance(obj, list):
        return [_norm(v, cwd) for v in obj]
    if isinstance(obj, dict):
        return {k: _norm(v, cwd) for k, v in obj.items()}
    return obj


def is_artifact(msg):
    md = msg["content"].get("metadata") or {}
    return isinstance(md, dict) and "cellblock" in md


def normalise(iopub, reply, cwd=None):
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
    return _norm(out, cwd)


def run_normalised(kc, code, cwd=None, timeout=TIMEOUT, **kw):
    iopub, reply = run_raw(kc, code, timeout=timeout, **kw)
    return normalise(iopub, reply, cwd)


def blur_timings(msgs):
    """For %time/%timeit/%prun cells: figures are not comparable, the shape is."""
    def fix(s):
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


def wait_shell_loaded(kc, timeout=30):
    """Return once cellblock's IPython shell has finished loading (a cell that
    needs it waits for it); leaves no trace in In/Out."""
    deadline = time.monotonic() + timeout
    run_raw(kc, "%%capture\npass", timeout=timeout, store_history=False)
    assert time.monotonic() < deadline
