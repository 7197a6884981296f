#!/usr/bin/python3
"""The debugger, cellblock vs the stock ipykernel, side by side in one run:

    /usr/bin/python3 bench/debugger.py [--rounds N]

Per round, a fresh kernel of each (alternating which goes first) and:
  start      initialize + attach (debugpy's import and start, the handshake)
  debugInfo  one request's round trip (median of 20)
  refresh    at a breakpoint: stackTrace, scopes, the scopes' variables,
             as JupyterLab's panel asks on every stop (median of 5 stops)
  traced     a 300 000-iteration loop with the debugger attached, over the
             same loop before it started (tracing's cost)
Medians over the rounds and cellblock/ipykernel ratios.  A benchmark, not a
test: it asserts nothing about times.  It shuts down every kernel it started.
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
BUILD = os.environ.get("CELLBLOCK_BUILD", os.path.join(HERE, "..", "build"))
os.environ["JUPYTER_PATH"] = os.path.join(BUILD, "share", "jupyter")

from jupyter_client.manager import start_new_kernel  # noqa: E402

from integration.dapclient import DapClient  # noqa: E402

CELL = "def f(a, b):\n    c = a + b\n    return c\n\nf(2, 3)"
LOOP = "t0 = __import__('time').perf_counter()\nfor i in range(300000):\n    pass\n" \
       "print(__import__('time').perf_counter() - t0)"


def _loop_s(dap):
    mid = dap.execute(LOOP)
    dap.execute_reply(mid, timeout=300)
    return float("".join(m["content"]["text"] for m in dap.outputs(mid)
                         if m["msg_type"] == "stream").split()[-1])


def one(name):
    km, kc = start_new_kernel(kernel_name=name, startup_timeout=120)
    try:
        dap = DapClient(kc)
        dap.execute_reply(dap.execute("1"))
        plain = _loop_s(dap)
        t0 = time.perf_counter()
        dap.start()
        start = time.perf_counter() - t0
        info = []
        for _ in range(20):
            t0 = time.perf_counter()
            dap.request("debugInfo")
            info.append(time.perf_counter() - t0)
        traced = _loop_s(dap)
        path = dap.breakpoint_cell(CELL, [2])
        refresh = []
        for _ in range(5):
            mark = dap.mark()
            mid = dap.execute(CELL)
            tid = dap.wait_event("stopped", since=mark)["body"]["threadId"]
            t0 = time.perf_counter()
            frames = dap.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]
            scopes = dap.request("scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
            ids = [dap.send("variables", {"variablesReference": s["variablesReference"]})
                   for s in scopes]
            for i in ids:
                dap.reply(i)
            refresh.append(time.perf_counter() - t0)
            dap.request("continue", {"threadId": tid})
            dap.execute_reply(mid)
        assert path
        return {"start": start, "debugInfo": statistics.median(info),
                "refresh": statistics.median(refresh), "traced": traced / plain}
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    res = {"cellblock": [], "python3": []}
    for r in range(args.rounds):
        order = ["cellblock", "python3"] if r % 2 == 0 else ["python3", "cellblock"]
        for name in order:
            res[name].append(one(name))
    print("%-10s %12s %12s %8s" % ("", "cellblock", "ipykernel", "ratio"))
    for key, unit in (("start", "s"), ("debugInfo", "ms"), ("refresh", "ms"),
                      ("traced", "x")):
        scale = 1000 if unit == "ms" else 1
        a = statistics.median(x[key] for x in res["cellblock"]) * scale
        b = statistics.median(x[key] for x in res["python3"]) * scale
        print("%-10s %10.3f%-2s %10.3f%-2s %8.2f" % (key, a, unit, b, unit, a / b))


if __name__ == "__main__":
    main()
