#!/usr/bin/python3
"""Isolation tiers side by side, in one run (issue 15):

    /usr/bin/python3 bench/tiers.py                   # about 2-4 minutes under TCG
    /usr/bin/python3 bench/tiers.py --write bench/TIERS.md

Contenders, taking turns round by round:
  ipykernel    the stock `python3` kernelspec (no sandbox: the floor)
  namespaces   cellblock, default tier (host kernel behind namespaces/seccomp/Landlock)
  gvisor       cellblock --isolation gvisor (gVisor's user-space kernel, runsc)
  microvm      cellblock --isolation microvm (a guest kernel in QEMU; KVM or TCG)

Figures: launch -> first result (kernel process started until the result of
`1+1` arrived on iopub), `pass` round trip (execute_request sent until
execute_reply), the first `import numpy, pandas, matplotlib.pyplot` (where
a user-space kernel or a VM pays for every file and system call), and the
memory of the kernel's process tree (PSS) afterwards.
A benchmark, not a test: it never asserts on timings.  It kills every process
it started, by pid, and only those.
"""

import argparse
import datetime
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("CELLBLOCK_BUILD", os.path.join(REPO, "build"))
sys.path.insert(0, HERE)

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402

import kclient  # noqa: E402
from kclient import Kernel, now, tree_pss, HarnessError  # noqa: E402
from stats import pct, median, fmt_num  # noqa: E402

MIB = 1024 * 1024
HEAVY = "import numpy, pandas, matplotlib.pyplot"


def log(*a):
    print("#", *a, file=sys.stderr, flush=True)


def contenders(only):
    jp = os.path.join(BUILD, "share", "jupyter")
    os.environ["JUPYTER_PATH"] = jp + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    ksm = KernelSpecManager()
    cb = ksm.get_kernel_spec("cellblock")
    ipy = ksm.get_kernel_spec("python3")
    cbm = cb.interrupt_mode or "signal"
    all_ = {
        "ipykernel": (ipy.argv, ipy.interrupt_mode or "signal"),
        "namespaces": (cb.argv, cbm),
        "gvisor": (cb.argv + ["--isolation", "gvisor"], cbm),
        "microvm": (cb.argv + ["--isolation", "microvm"], cbm),
    }
    return {k: v for k, v in all_.items() if k in only}


def launch_once(key, argv, mode, res):
    k = Kernel(key, argv, mode).launch()
    try:
        info = k.wait_ready(timeout=120)
        req = k.execute("1+1")
        k.wait(req, timeout=120, idle=True, result=True)
        res.setdefault("launch", {}).setdefault(key, []).append(
            max(req.t_result or req.t_reply, req.t_reply) - k.t_launch)
        # the banner names the isolation once the sandbox is up
        q = k.send("shell", "kernel_info_request")
        k.wait(q, timeout=60, idle=False)
        res.setdefault("banner", {})[key] = (q.reply or info.reply)["content"].get("banner", "")
    finally:
        k.kill()


def roundtrips(key, argv, mode, n, res):
    k = Kernel(key, argv, mode).launch()
    try:
        k.wait_ready(timeout=120)
        for _ in range(10):   # warm-up
            k.run("pass", timeout=60)
        for _ in range(n):
            q = k.run("pass", timeout=60)
            res.setdefault("pass", {}).setdefault(key, []).append(q.rt_reply())
        q = k.run(HEAVY, timeout=300)   # file- and syscall-heavy: where the tiers differ most
        res.setdefault("heavy", {}).setdefault(key, []).append(q.rt_reply())
        time.sleep(0.5)
        res.setdefault("pss", {})[key] = tree_pss(k.pid)[0] * 1024
    finally:
        k.kill()


def row(name, xs, unit):
    if not xs:
        return "| %s | - | - | - |" % name
    return "| %s | %s | %s | %d |" % (name, fmt_num(median(xs), unit), fmt_num(pct(xs, 90), unit),
                                      len(xs))


def report(res, keys, args, elapsed):
    out = []
    out.append("## Isolation tiers: %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"))
    out.append("")
    out.append("Machine: %s, %d CPUs, Python %s; /dev/kvm %s.  `bench/tiers.py --rounds %d "
               "--cells %d` took %.0f s." % (platform.node() and "this host", os.cpu_count(),
                                            platform.python_version(),
                                            "present" if os.path.exists("/dev/kvm") else "absent",
                                            args.rounds, args.cells, elapsed))
    out.append("")
    out.append("Launch -> first result (kernel started until `1+1`'s result):")
    out.append("")
    out.append("| tier | median | p90 | n |")
    out.append("|---|---|---|---|")
    for k in keys:
        out.append(row(k, res.get("launch", {}).get(k, []), "s"))
    out.append("")
    out.append("`pass` round trip (execute_request to execute_reply):")
    out.append("")
    out.append("| tier | median | p90 | n |")
    out.append("|---|---|---|---|")
    for k in keys:
        out.append(row(k, res.get("pass", {}).get(k, []), "s"))
    out.append("")
    out.append("First `%s` in a fresh kernel (file- and syscall-heavy):" % HEAVY)
    out.append("")
    out.append("| tier | median | p90 | n |")
    out.append("|---|---|---|---|")
    for k in keys:
        out.append(row(k, res.get("heavy", {}).get(k, []), "s"))
    out.append("")
    out.append("Memory of the kernel's process tree once idle, numpy/pandas/matplotlib loaded (PSS):")
    out.append("")
    out.append("| tier | PSS |")
    out.append("|---|---|")
    for k in keys:
        v = res.get("pss", {}).get(k)
        out.append("| %s | %s |" % (k, "-" if v is None else "%.0f MiB" % (v / MIB)))
    out.append("")
    for k in keys:
        b = res.get("banner", {}).get(k)
        if b:
            out.append("- %s banner: `%s`" % (k, b.splitlines()[-1][:400]))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="launches per tier (microvm: at most 3)")
    ap.add_argument("--cells", type=int, default=200, help="`pass` cells per tier (microvm: /4)")
    ap.add_argument("--only", default="ipykernel,namespaces,gvisor,microvm")
    ap.add_argument("--write", help="also append the report to this file")
    args = ap.parse_args()
    keys = [k for k in args.only.split(",") if k]
    C = contenders(keys)
    res = {}
    t0 = now()
    try:
        for r in range(args.rounds):
            for i in range(len(keys)):
                key = keys[(i + r) % len(keys)]
                if key == "microvm" and r >= 3:
                    continue
                launch_once(key, *C[key], res)
                time.sleep(0.2)
            log("launch round %d done" % (r + 1))
        for key in keys:
            n = args.cells // 4 if key == "microvm" else args.cells
            roundtrips(key, *C[key], n, res)
            log("round trips: %s done" % key)
    except HarnessError as e:
        log("harness error: %s" % e)
    finally:
        kclient.cleanup_all()
    text = report(res, keys, args, now() - t0)
    print(text)
    if args.write:
        with open(args.write, "a") as f:
            f.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
