#!/usr/bin/python3
"""cellblock's IPython shell vs the stock ipykernel, side by side (issue 11).

    make bench                          # bench.py, then this
    /usr/bin/python3 bench/ipython.py [--rounds N] [--quick]

Figures (medians over interleaved rounds; ratio = cellblock / ipykernel):

  first `1+1`         launch -> the first `1+1` result: cellblock answers
                      on its fast path while IPython is still loading
  first magic         launch -> reply of a first `%load_ext autoreload` cell,
                      which waits for cellblock's shell to finish loading
  idle PSS            PSS of the whole process tree, idle, with the shell
                      loaded (cellblock: after a magic cell; ipykernel: after
                      one cell)
  runner, both shells the runner alone (no sandbox, a socketpair, as
                      tests/runner drives it) with CELLBLOCK_SHELL=minimal and
                      with the IPython shell: time to hello, to the first
                      `1+1`, to the shell being loaded, and PSS before/after

Then it shows that outputs do not depend on whether the shell had finished
loading: each plain cell runs in a fresh cellblock kernel right after launch
(fast path) and in another one once its shell is loaded; the messages must
be the same (ids, dates and cell file names aside).

A benchmark, not a test: it never asserts on timings.  It kills every
process it started, by pid, and only those.
"""

import argparse
import io
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("CELLBLOCK_BUILD", os.path.join(REPO, "build"))
sys.path.insert(0, HERE)


import kclient  # noqa: E402
from kclient import Kernel, now, tree_pss, pss_kib, HarnessError  # noqa: E402
from stats import median, ratio, fmt_num, fmt_ratio, publish  # noqa: E402

# The cells of the equality check: plain Python that a first cell may be
# (results of every scalar type, output, errors, the _ variables), then
# cells that need the shell right away.
EQUALITY_CELLS = [
    "1+1",
    "x = 21\nx * 2",
    "print('hello'); 'text'",
    "import math, json\nmath.sqrt(2), json.dumps({'a': 1})",
    "b'\\x00bytes', 1.5e300, 3+4j, True, None",
    "def f(n):\n    return 1 / n\nf(0)",
    "undefined_name",
    "import warnings\nwarnings.warn('old', DeprecationWarning)",
    "[1, 2, 3] * 20",
    "{'k': list(range(30))}",
    "%who",
]


def log(*a):
    print("#", *a, file=sys.stderr, flush=True)


def kernelspecs():
    cb, ipy = kclient.built_kernelspecs()
    if ipy is None:
        raise HarnessError("no python3 kernelspec: ipykernel is the baseline")
    return cb, ipy


def kernel(spec, label):
    return Kernel(label, spec.argv, spec.interrupt_mode or "signal").launch()


def first_cell(spec, label, code):
    """launch -> the result (or reply) of `code` sent as soon as the kernel is ready."""
    k = kernel(spec, label)
    try:
        k.wait_ready(timeout=60)
        req = k.execute(code)
        k.wait(req, timeout=120, idle=True)
        if req.status != "ok":
            raise HarnessError("%s: %r failed: %s" % (label, code, req.reply["content"]))
        t = max(req.t_reply, req.t_result or 0)
        return t - k.t_launch
    finally:
        k.shutdown()


def idle_pss(spec, label, code, settle=1.5):
    k = kernel(spec, label)
    try:
        k.wait_ready(timeout=60)
        req = k.run(code, timeout=120)
        if req.status != "ok":
            raise HarnessError("%s: %r failed" % (label, code))
        time.sleep(settle)
        return tree_pss(k.pid)[0]
    finally:
        k.shutdown()


# ------------------------------------------------------------ the runner alone

class RawRunner:
    """runner.py on a socketpair, outside any sandbox (as tests/runner does)."""

    def __init__(self, shell):
        sys.path.insert(0, os.path.join(REPO, "tests", "runner"))
        from rclient import Runner
        env = {"CELLBLOCK_SHELL": shell} if shell else None
        self.r = Runner(cwd=os.environ.get("TMPDIR", "/tmp"), env=env)

    def close(self):
        self.r.close()


def sqlite_mapped(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "_sqlite3" in f.read()


def runner_figures(shell, rounds):
    """-> dict of lists: hello, first, loaded, pss_before, pss_after."""
    out = {"hello": [], "first": [], "loaded": [], "pss_before": [], "pss_after": []}
    for _ in range(rounds):
        rr = RawRunner(shell)
        r = rr.r
        try:
            out["hello"].append(r.startup)
            r.execute("1+1")
            out["first"].append(now() - r.t0)
            out["pss_before"].append(pss_kib(r.proc.pid))
            if shell == "minimal":
                continue
            # the shell loads while idle: when is it there?
            deadline = now() + 60
            while not sqlite_mapped(r.proc.pid) and now() < deadline:
                time.sleep(0.002)
            r.request({"type": "is_complete", "code": "x"})   # returns once loaded
            out["loaded"].append(now() - r.t0)
            time.sleep(0.5)
            out["pss_after"].append(pss_kib(r.proc.pid))
        finally:
            rr.close()
    return out


# ------------------------------------------------------------ equality

_CELL = re.compile(r"/tmp/cellblock_[0-9a-f]+/\d+\.py")


def messages(k, req):
    """iopub contents (status aside) and the reply content of one request."""
    out = [(m["msg_type"], m["content"]) for m in req.outputs]
    out.append(("execute_reply", {kk: v for kk, v in req.reply["content"].items()}))
    return json.loads(_CELL.sub("<CELL>", json.dumps(out, sort_keys=True)))


def run_keep(k, code):
    req = k.execute(code)
    req.keep_streams = True
    k.wait(req, timeout=120, idle=True)
    return messages(k, req) + [("streams", req.streams)]


def equality(cb):
    """Each cell: fresh kernel, sent at once (fast path) vs fresh kernel
    whose shell has loaded first.  -> list of (cell, same?, detail)."""
    rows = []
    for code in EQUALITY_CELLS:
        got = []
        for wait_shell in (False, True):
            k = kernel(cb, "cellblock")
            try:
                k.wait_ready(timeout=60)
                if wait_shell:
                    req = k.send("shell", "is_complete_request", {"code": "x"})
                    k.wait(req, timeout=60, idle=True)
                got.append(run_keep(k, code))
            finally:
                k.shutdown()
        rows.append((code, got[0] == got[1], got))
    return rows


# ------------------------------------------------------------ report

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--write", metavar="FILE", help="also put the report in FILE (its ipython section)")
    args = ap.parse_args()
    rounds = 3 if args.quick else args.rounds
    cb, ipy = kernelspecs()
    t_start = time.time()

    figs = {}
    for name, code in (("first `1+1`", "1+1"), ("first `%load_ext autoreload`",
                                                 "%load_ext autoreload")):
        a, b = [], []
        for r in range(rounds):
            order = [(cb, "cellblock", a), (ipy, "ipykernel", b)]
            if r % 2:
                order.reverse()
            for spec, label, acc in order:
                acc.append(first_cell(spec, label, code))
                time.sleep(0.2)
        figs[name] = (median(a), median(b), "s")
        log("%s: %d rounds" % (name, rounds))
    a, b = [], []
    for r in range(max(2, rounds // 2)):
        a.append(idle_pss(cb, "cellblock", "%who"))
        b.append(idle_pss(ipy, "ipykernel", "None"))
    figs["idle PSS, shell loaded"] = (median(a), median(b), "KiB")
    log("idle PSS: done")

    runner = {s: runner_figures(s, rounds) for s in ("minimal", None)}
    log("runner alone: done")
    eq = equality(cb)
    log("equality: done")

    targets = {"first `1+1`": 0.15, "first `%load_ext autoreload`": 1.0,
               "idle PSS, shell loaded": 0.5}
    buf = io.StringIO()

    def say(*parts):
        print(*parts, file=buf)

    say("\n## cellblock's IPython shell vs ipykernel (bench/ipython.py)\n")
    say("%d rounds, interleaved; %s; load average at the end %s\n" % (
        rounds, time.strftime("%Y-%m-%d %H:%M"), " ".join(
            "%.2f" % x for x in os.getloadavg())))
    say("| figure | cellblock | ipykernel | ratio | target |")
    say("|---|---|---|---|---|")
    for name, (x, y, unit) in figs.items():
        r = ratio(x, y)
        t = targets[name]
        ok = "✓" if r is not None and r <= t else "✗"
        say("| %s | %s | %s | %s | ≤ %g %s |" % (name, fmt_num(x, unit), fmt_num(y, unit),
                                                 fmt_ratio(r), t, ok))
    m, i = runner["minimal"], runner[None]
    say("\nThe runner alone (no sandbox, no kernel), medians:\n")
    say("| | minimal runner | IPython shell |")
    say("|---|---|---|")
    say("| start -> hello | %s | %s |" % (fmt_num(median(m["hello"]), "s"),
                                           fmt_num(median(i["hello"]), "s")))
    say("| start -> first `1+1` result | %s | %s (fast path) |" % (
        fmt_num(median(m["first"]), "s"), fmt_num(median(i["first"]), "s")))
    say("| start -> shell loaded (idle) | — | %s |" % fmt_num(median(i["loaded"]), "s"))
    say("| PSS after the first `1+1` | %s | %s |" % (fmt_num(median(m["pss_before"]), "KiB"),
                                                    fmt_num(median(i["pss_before"]), "KiB")))
    say("| PSS, idle, shell loaded | — | %s |" % fmt_num(median(i["pss_after"]), "KiB"))
    same = sum(1 for _, ok, _ in eq if ok)
    say("\nOutputs with the shell loaded vs not yet loaded (fresh kernel each): "
          "%d of %d cells identical\n" % (same, len(eq)))
    for code, ok, got in eq:
        say("- %s `%s`" % ("same" if ok else "DIFFERENT", code.replace("\n", "\\n")))
        if not ok:
            say("    fast path: %s\n    shell:     %s" % (json.dumps(got[0])[:400],
                                                           json.dumps(got[1])[:400]))
    say("\n(elapsed %.0f s)" % (time.time() - t_start))
    publish(buf.getvalue(), args.write, "ipython", log)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        log("harness error:", e)
        sys.exit(2)
