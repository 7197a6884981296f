#!/usr/bin/python3
"""Warm starts, the client's own start and the IPython shell's cost per cell
(issue 21), beside ipykernel, in one run.

    make bench-warm
    /usr/bin/python3 bench/warm.py [--quick] [--write bench/RESULTS.md]

Contenders, round by round in rotating order:
  warm   cellblock, every runner a fork of its template (--warm wait)
  cold   cellblock, runners started as before issue 21 (--warm off)
  ipy    the stock ipykernel

Figures (medians; ratio = cellblock warm / ipykernel):
  first 1+1        launch -> the first `1+1` result (bench.py's launch_once)
  first magic      launch -> the reply of a first `%load_ext autoreload`
  first import     with --preload numpy,pandas,matplotlib.pyplot, launch ->
                   the reply of a first `import numpy, pandas, matplotlib.pyplot`
  Sandbox()        cellblock.Sandbox() -> its first run_code("1+1") result;
                   and jupyter_client's own client for every contender:
                   start_kernel, wait_for_ready, execute -> result
  idle PSS, 50     50 idle kernels (density.py's idle set), each kernel's tree
                   plus its share of the template's
  8 x 100 cells    8 kernels started at once, 100 cells each, cells/s with the
                   starts (bench.py's fig_many)
  pass             `pass` send -> reply on long-lived kernels (bench.py)

A benchmark, not a test: nothing asserts on timings.  Every process it starts
is killed by pid (bench/kclient.py), never by name.
"""

import argparse
import io
import os
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "client"))

import bench  # noqa: E402
import density  # noqa: E402
import ipython  # noqa: E402
import kclient  # noqa: E402
from kclient import now, HarnessError  # noqa: E402
from stats import ratio, fmt_num, fmt_ratio, publish  # noqa: E402

RES = bench.RES
MAGIC = "%load_ext autoreload"
LABELS = {"cb": "cellblock (warm)", "cb2": "cellblock (cold)", "ipy": "ipykernel"}
KEYS = ("cb", "cb2", "ipy")


def log(*a):
    print("#", *a, file=sys.stderr, flush=True)


def contenders():
    cb, ipy = kclient.built_kernelspecs()
    if ipy is None:
        raise HarnessError("no python3 kernelspec: ipykernel is the baseline")
    mode = cb.interrupt_mode or "signal"
    # fig_many and fig_roundtrip rotate over "cb", "ipy", "cb2"
    return {"cb": bench.Contender("cb", LABELS["cb"], cb.argv + ["--warm", "wait"], mode),
            "cb2": bench.Contender("cb2", LABELS["cb2"], cb.argv + ["--warm", "off"], mode),
            "ipy": bench.Contender("ipy", LABELS["ipy"], ipy.argv,
                                   ipy.interrupt_mode or "signal")}, cb


def spec_of(c, extra=()):
    return types.SimpleNamespace(argv=c.argv + list(extra), interrupt_mode=c.interrupt_mode)


def fig_first(C, rounds):
    for r in range(rounds):
        for key in bench.rotated(list(KEYS), r):
            bench.launch_once(C[key])
            RES.add("first_magic", key, ipython.first_cell(spec_of(C[key]), C[key].label, MAGIC))
            pre = ["--preload", bench.PRELOAD] if key != "ipy" else []
            RES.add("first_heavy", key, ipython.first_cell(spec_of(C[key], pre), C[key].label,
                                                           bench.HEAVY))
            bench.settle(0.2)
    log("first cells: %d rounds" % rounds)


# what jupyter_client's KernelManager is given for each contender
CLIENT_ARGS = {"cb": ("cellblock", ["--warm", "wait"]), "cb2": ("cellblock", ["--warm", "off"]),
               "ipy": ("python3", [])}


def _client_start(key):
    """jupyter_client's own path: start_kernel, wait_for_ready, execute -> result."""
    from jupyter_client.manager import KernelManager
    name, extra = CLIENT_ARGS[key]
    km = KernelManager(kernel_name=name)
    t0 = now()
    km.start_kernel(extra_arguments=extra)
    kc = km.blocking_client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        reply = kc.execute_interactive("1+1", timeout=60, output_hook=lambda m: None)
        if reply["content"]["status"] != "ok":
            raise HarnessError("jupyter_client start: %s" % reply["content"])
        return now() - t0
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _sandbox_start(extra):
    from cellblock import Sandbox
    t0 = now()
    sb = Sandbox(kernelspec_path=os.path.join(kclient.BUILD, "share", "jupyter", "kernels",
                                              "cellblock"), extra_args=extra)
    try:
        t1 = now()
        ex = sb.run_code("1+1")
        if ex.text != "2":
            raise HarnessError("Sandbox(): %r" % (ex.error,))
        return t1 - t0, now() - t0
    finally:
        sb.kill()


def fig_start(C, rounds):
    for r in range(rounds):
        for key in bench.rotated(list(KEYS), r):
            RES.add("jc_start", key, _client_start(key))
            if key != "ipy":
                extra = ["--warm", "wait" if key == "cb" else "off"]
                ready, first = _sandbox_start(extra)
                RES.add("sandbox_ready", key, ready)
                RES.add("sandbox_first", key, first)
            bench.settle(0.2)
    log("client starts: %d rounds" % rounds)


def fig_pss(C, n):
    for key in KEYS:
        res = density.idle_set(C[key].label, (C[key].argv, C[key].interrupt_mode), n)
        RES.add("pss50", key, res["pss_median_kib"])
        RES.checks["pss50_" + key] = res
    log("idle PSS: %d of each" % n)


def fig_long(C, args):
    ns = types.SimpleNamespace(cells=args.cells, many_kernels=8, many_cells=100,
                               rounds_many=args.rounds_many)
    bench.fig_many(ns, C)
    long_lived = {}
    try:
        for key in ("cb", "ipy", "cb2"):
            long_lived[key] = C[key].kernel().launch()
        for k in long_lived.values():
            k.wait_ready(timeout=120)
            k.run("1+1", result=True)
            time.sleep(0.5)          # the cold kernel's shell loads meanwhile
            k.run("%who")
        bench.fig_roundtrip(ns, long_lived)
    finally:
        for k in long_lived.values():
            k.shutdown(graceful=False)


ROWS = [
    ("launch → first `1+1` result", "launch_first", "s", 0.05, "le"),
    ("launch → first `%s` reply" % MAGIC, "first_magic", "s", 0.05, "le"),
    ("launch → first `%s` reply (cellblock --preload %s)" % (bench.HEAVY, bench.PRELOAD),
     "first_heavy", "s", 0.05, "le"),
    ("`Sandbox()` → first `run_code` result", "sandbox_first", "s", None, None),
    ("`Sandbox()` returns", "sandbox_ready", "s", None, None),
    ("jupyter_client: start_kernel → wait_for_ready → first result", "jc_start", "s", None, None),
    ("idle PSS per kernel with the shell loaded, 50 kernels (template shared out)", "pss50",
     "KiB", 1 / 6.0, "le"),
    ("8 kernels at once × 100 cells: cells/s, starts included", "many_cps", "/s", 5.0, "ge"),
    ("`pass` send → reply", "rt_pass_reply", "s", 0.15, "le"),
]


def report(elapsed, cbspec):
    buf = io.StringIO()

    def say(*p):
        print(*p, file=buf)

    say("## Warm starts, the client's start, the shell's cost per cell (issue 21, "
        "`make bench-warm`)\n")
    say("%s; %d CPUs; load average at the end %s; %s. "
        "cellblock (warm): `--warm wait`, the runner a fork of its template; cellblock (cold): "
        "`--warm off`. Medians; ratio = cellblock (warm) / ipykernel.\n" % (
            time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(),
            " ".join("%.2f" % x for x in os.getloadavg()),
            os.path.relpath(cbspec.argv[0], REPO)))
    say("| figure | n | cellblock (warm) | cellblock (cold) | ipykernel | warm / ipykernel "
        "| cold / ipykernel | target |")
    say("|---|---|---|---|---|---|---|---|")
    for label, fig, unit, target, how in ROWS:
        w, c, i = (RES.med(fig, k) for k in ("cb", "cb2", "ipy"))
        rw, rc = ratio(w, i), ratio(c, i)
        if target is None and fig == "sandbox_first":
            t = "≤ 50 ms %s" % ("✓" if w is not None and w <= 0.05 else "✗")
        elif target is None:
            t = "—"
        else:
            ok = rw is not None and (rw <= target if how == "le" else rw >= target)
            t = "%s %s %s" % ("≤" if how == "le" else "≥", fmt_ratio(target), "✓" if ok else "✗")
        say("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
            label, len(RES.get(fig, "cb")), fmt_num(w, unit), fmt_num(c, unit),
            fmt_num(i, unit), fmt_ratio(rw), fmt_ratio(rc), t))
    for key in ("cb", "cb2"):
        r = RES.checks.get("pss50_" + key)
        if r:
            parts = ", ".join("%s %s" % (n, fmt_num(v, "KiB")) for n, v in
                              sorted(r["by_comm_median_kib"].items(), key=lambda x: -x[1]))
            say("\n- idle set, %s: median PSS per process %s%s" % (
                LABELS[key], parts, "; %d of %d runners forked from %d template(s) holding %s "
                "(%s per kernel, counted)" % (
                    r["warm"], r["n"], r["templates"], fmt_num(r["template_kib"], "KiB"),
                    fmt_num(r["template_kib"] / r["n"], "KiB")) if r.get("templates") else ""))
    for n in RES.notes:
        say("- note: %s" % n)
    say("\n(elapsed %.0f s)" % elapsed)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pss-kernels", type=int, default=50)
    ap.add_argument("--cells", type=int, default=300)
    ap.add_argument("--rounds-many", type=int, default=2)
    ap.add_argument("--only", default="first,start,pss,long")
    ap.add_argument("--write", metavar="FILE")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.pss_kernels, args.cells, args.rounds_many = 3, 10, 100, 1
    C, cbspec = contenders()
    figs = args.only.split(",")
    t0 = now()
    # the templates of the warm contender's configurations, built before any timing
    for extra in ([], ["--preload", bench.PRELOAD]):
        k = kclient.Kernel("warm-up", C["cb"].argv + extra, C["cb"].interrupt_mode).launch()
        k.wait_ready(180)
        k.run("1+1", timeout=180)
        k.shutdown()
    if "first" in figs:
        fig_first(C, args.rounds)
    if "start" in figs:
        fig_start(C, args.rounds)
    if "pss" in figs:
        fig_pss(C, args.pss_kernels)
    if "long" in figs:
        fig_long(C, args)
    kclient.cleanup_all()
    text = report(now() - t0, cbspec)
    publish(text, args.write, "warm", log)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        log("harness error:", e)
        sys.exit(2)
