#!/usr/bin/python3
"""Density and concurrent starts: how many kernels one host holds (issue 13).

    make bench-density                           # 50 and 200 of each, plus 50 at once
    /usr/bin/python3 bench/density.py --counts 20 --burst 10 --kernels cellblock
    /usr/bin/python3 bench/density.py --write bench/RESULTS.md

For each kernel (cellblock = the kernelspec built in build/; ipykernel = the
stock `python3` kernelspec) and each N in --counts:
  idle N      start N kernels one after another, each answering a first `1+1`
              (cellblock's sandbox is up then), let them settle, then read PSS
              from /proc/PID/smaps_rollup of every process of every kernel's
              tree (kernel, launcher, sandbox init, runner); then a round trip
              (`1+1` -> result) on every kernel, all sent first and then
              collected, so every one must be responsive at the same time; and
              the CPU the N idle trees burn in IDLE_CPU_S seconds.
  burst B     B kernels launched at once (one Popen after another, no waiting):
              time from the first launch until every kernel answered
              kernel_info, and until every one returned its first `1+1`.

A benchmark, not a test: nothing asserts on timings.  Every process it starts
is killed by pid (bench/kclient.py), never by name.  200 ipykernels take
~11 GiB: the script refuses to start a set that would leave less than
MEM_RESERVE_GIB of MemAvailable, estimated from the first kernels.
"""

import argparse
import datetime
import os
import platform
import resource
import signal
import socket
import json
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("CELLBLOCK_BUILD", os.path.join(REPO, "build"))
sys.path.insert(0, HERE)

import zmq  # noqa: E402

import kclient  # noqa: E402
from kclient import Kernel, free_ports, now, tree, comm, pss_kib  # noqa: E402
from stats import write_section  # noqa: E402

SETTLE_S = 3.0           # after the last start, before PSS is read
IDLE_CPU_S = 10.0        # window over which idle CPU is measured
READY_TIMEOUT_S = 300.0  # one kernel (or a burst) to answer, under load
MEM_RESERVE_GIB = 3.0    # never leave less MemAvailable than this
ZMQ_SOCKETS_PER_KERNEL = 4
FDS_PER_KERNEL = 16      # sockets + their mailboxes + log files, with margin
MIB = 1024.0
TEARDOWN_S = 60.0        # every kernel's whole tree to exit after shutdown_request
PORT_SPAN = 12000        # kernel ports are taken from [ephemeral start - PORT_SPAN, ephemeral start)


def log(*a):
    print("#", *a, file=sys.stderr, flush=True)


def mem_available_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def tree_cpu_ticks(pid):
    total = 0
    for p in tree(pid):
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])   # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


def kernelspecs():
    try:
        cb, ipy = kclient.built_kernelspecs()
    except kclient.HarnessError as e:
        raise SystemExit(str(e))
    mode = cb.interrupt_mode or "signal"
    # issue 21: after (every runner a template's fork) and before (--warm off)
    out = {"cellblock": (cb.argv + ["--warm", "wait"], mode),
           "cellblock-cold": (cb.argv + ["--warm", "off"], mode)}
    if ipy is not None:
        out["ipykernel"] = (ipy.argv, ipy.interrupt_mode or "signal")
    else:
        log("no python3 kernelspec: ipykernel figures skipped")
    return out


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = min(len(xs) - 1, max(0, int(round(q / 100.0 * (len(xs) - 1)))))
    return xs[i]


def kernel_ports(n):
    """n distinct free ports BELOW the ephemeral range: the client's own outgoing
    connections (source ports from that range) can then never take a port reserved
    for a kernel that has not bound it yet, which happens when many start at once."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            eph_lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        eph_lo = 32768
    socks, port = [], max(1024, eph_lo - PORT_SPAN)
    try:
        while len(socks) < n and port < eph_lo:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
                socks.append(s)
            except OSError:
                s.close()
            port += 1
        if len(socks) < n:
            raise kclient.HarnessError("only %d free ports below %d" % (len(socks), eph_lo))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def teardown(kernels):
    """Graceful: shutdown_request to every kernel, then wait until each whole tree is
    gone, so every launcher finishes its own teardown (a launcher killed half-way
    through a cgroup v1 freeze would leave its sandbox frozen).  Only what is still
    there after TEARDOWN_S is killed by pid; returns how many were."""
    for k in kernels:
        k.remember_tree()
        if k.socks and k.alive():
            try:
                k.send("control", "shutdown_request", {"restart": False})
            except zmq.ZMQError:
                pass
    deadline = now() + TEARDOWN_S
    pids = set()
    for k in kernels:
        pids |= k.known_pids
    while now() < deadline and any(os.path.exists("/proc/%d" % p) for p in pids):
        for k in kernels:
            if k.proc is not None:
                k.proc.poll()       # reap the kernels we started
        time.sleep(0.05)
    left = [p for p in pids if os.path.exists("/proc/%d" % p)]
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    for k in kernels:   # sockets, connection file, bookkeeping; no pid is signalled again
        k.known_pids = set()
        k.pid = None if k.proc is None or k.proc.poll() is not None else k.pid
        k.kill()
    if left:
        log("teardown: %d processes still there after %.0f s were killed" % (len(left), TEARDOWN_S))
    return len(left)


def launch(label, spec, ports):
    argv, mode = spec
    k = Kernel(label, argv, mode)
    return k.launch(ports)


def wait_first_result(k, timeout):
    req = k.run("1+1", timeout=timeout, result=True)
    if req.status != "ok":
        raise kclient.HarnessError("%s: first cell %s" % (k.label, req.status))
    return req


def idle_set(label, spec, n):
    """N kernels, started one after another; PSS, round trips, idle CPU."""
    kernels = []
    avail0 = mem_available_kib()
    try:
        t0 = now()
        for i in range(n):
            if i == 5:   # estimate the whole set from the PSS of the first five
                per = sum(sum(pss_kib(p) for p in tree(k.pid)) for k in kernels) / 5
                need = per * n / MIB / MIB + MEM_RESERVE_GIB
                if need > avail0 / MIB / MIB:
                    raise SystemExit("%d x %s would need ~%.1f GiB with the reserve; %.1f GiB "
                                     "available" % (n, label, need, avail0 / MIB / MIB))
            k = launch(label, spec, free_ports(5))
            kernels.append(k)
            k.wait_ready(READY_TIMEOUT_S)
            wait_first_result(k, READY_TIMEOUT_S)
            if (i + 1) % 25 == 0:
                log("%s: %d/%d up (%.0f s)" % (label, i + 1, n, now() - t0))
        start_s = now() - t0
        time.sleep(SETTLE_S)
        per_kernel, procs, by_comm = [], 0, {}
        # a warm start's template (issue 21): its tree's PSS (supervisor,
        # template, spares: the pages every runner shares) is shared out
        sups = {kclient.template_of(k.pid) for k in kernels} - {None}
        tpl_kib = sum(pss_kib(p) for sup in sups for p in tree(sup))
        for k in kernels:
            pids = tree(k.pid)
            procs += len(pids)
            total = tpl_kib / len(kernels)
            for p in pids:
                v = pss_kib(p)
                total += v
                by_comm.setdefault(comm(p), []).append(v)
            per_kernel.append(total)
        # responsive, all at once: every request out first, then every answer in
        reqs = [(k, k.execute("1+1")) for k in kernels]
        t_all = now()
        rts = []
        for k, r in reqs:
            k.wait(r, READY_TIMEOUT_S, result=True)
            rts.append(r.t_result - r.t_send)
        all_s = now() - t_all
        ok = sum(1 for _, r in reqs if r.status == "ok")
        c0 = sum(tree_cpu_ticks(k.pid) for k in kernels)
        time.sleep(IDLE_CPU_S)
        c1 = sum(tree_cpu_ticks(k.pid) for k in kernels)
        hz = os.sysconf("SC_CLK_TCK")
        return {
            "kernel": label, "n": n, "start_s": start_s, "procs": procs,
            "pss_total_kib": sum(per_kernel), "pss_median_kib": statistics.median(per_kernel),
            "template_kib": tpl_kib, "templates": len(sups),
            "warm": sum(1 for k in kernels if kclient.template_of(k.pid) is not None),
            "pss_max_kib": max(per_kernel),
            "by_comm_median_kib": {c: statistics.median(v) for c, v in by_comm.items()},
            "responsive": ok, "rt_p50_s": pct(rts, 50), "rt_p99_s": pct(rts, 99),
            "rt_max_s": max(rts), "all_answered_s": all_s,
            "idle_cpu_pct": 100.0 * (c1 - c0) / hz / IDLE_CPU_S,
        }
    finally:
        teardown(kernels)


def burst(label, spec, n):
    """N kernels launched at once: until all answer kernel_info, and a first `1+1`."""
    ports = kernel_ports(5 * n)
    kernels = []
    try:
        t0 = now()
        for i in range(n):
            kernels.append(launch(label, spec, ports[5 * i:5 * i + 5]))
        launched = now() - t0
        # ask every kernel at once; pump each until it answers
        infos = [(k, k.send("shell", "kernel_info_request")) for k in kernels]
        t_info = []
        for k, r in infos:
            k.wait(r, READY_TIMEOUT_S, idle=False)
            t_info.append(r.t_reply - t0)
        # iopub may have been subscribed late: a second kernel_info settles it
        for k in kernels:
            k.wait_ready(READY_TIMEOUT_S)
        reqs = [(k, k.execute("1+1")) for k in kernels]
        t_first = []
        for k, r in reqs:
            k.wait(r, READY_TIMEOUT_S, result=True)
            t_first.append(r.t_result - t0)
        return {
            "kernel": label, "n": n, "launch_loop_s": launched,
            "all_info_s": max(t_info), "median_info_s": statistics.median(t_info),
            "all_first_result_s": max(t_first), "median_first_result_s": statistics.median(t_first),
            "ok": sum(1 for _, r in reqs if r.status == "ok"),
        }
    finally:
        teardown(kernels)


def fmt_mib(kib):
    return "%.1f MiB" % (kib / MIB) if kib < 10 * MIB * MIB else "%.2f GiB" % (kib / MIB / MIB)


def fmt_s(s):
    return "%.0f ms" % (s * 1000) if s < 1 else "%.2f s" % s


def markdown(idle, bursts, meta):
    out = ["## Density and concurrent starts (issues 13 and 21, `make bench-density`)", "",
           "cellblock: every runner a fork of its template (`--warm wait`), its PSS with its "
           "share of the template's tree (supervisor, template, spares: the pages the "
           "runners share); cellblock-cold: `--warm off`, runners started as before issue 21.",
           "",
           "%s. %s. Kernels started as %s; cgroup %s. Medians unless said otherwise; "
           "PSS from `/proc/PID/smaps_rollup` of every process of each kernel's tree "
           "(cellblock: kernel, launcher, sandbox init, runner; ipykernel: one process), "
           "read %.0f s after the last start. A round trip is `1+1` → its result, sent to "
           "every kernel before any answer is read." % (
               meta["date"], meta["machine"], meta["user"], meta["cgroup"], SETTLE_S)
           + ("" if not meta.get("ipykernel_200_note") else
              " 200 ipykernels (~11 GiB) were %s (`--keep`); everything else in this run."
              % meta["ipykernel_200_note"])
           + " The machine is shared with other work: compare within a row's kind of figure, "
             "not to the last digit.", "",
           "| idle kernels | N | PSS per kernel (median / max) | PSS total "
           "| processes | responsive | round trip p50 / p99 / max | last answer after the last request "
           "| idle CPU, all N (one tick = 0.1 %) | started one by one in |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in idle:
        out.append("| %s | %d | %s / %s | %s | %d | %d/%d | %s / %s / %s | %s | %.2f %% | %s |" % (
            r["kernel"], r["n"], fmt_mib(r["pss_median_kib"]), fmt_mib(r["pss_max_kib"]),
            fmt_mib(r["pss_total_kib"]), r["procs"],
            r["responsive"], r["n"], fmt_s(r["rt_p50_s"]), fmt_s(r["rt_p99_s"]),
            fmt_s(r["rt_max_s"]), fmt_s(r["all_answered_s"]), r["idle_cpu_pct"],
            fmt_s(r["start_s"])))
    out += ["", "| started at once | N | launch loop | all answered kernel_info "
            "(median) | all returned a first `1+1` (median) | ok |", "|---|---|---|---|---|---|"]
    for r in bursts:
        out.append("| %s | %d | %s | %s (%s) | %s (%s) | %d/%d |" % (
            r["kernel"], r["n"], fmt_s(r["launch_loop_s"]), fmt_s(r["all_info_s"]),
            fmt_s(r["median_info_s"]), fmt_s(r["all_first_result_s"]),
            fmt_s(r["median_first_result_s"]), r["ok"], r["n"]))
    out.append("")
    for r in idle:
        parts = ", ".join("%s %s" % (c, fmt_mib(v)) for c, v in
                          sorted(r["by_comm_median_kib"].items(), key=lambda x: -x[1]))
        what = (" (cellblock-launc: the launcher and the sandbox's init)"
                if r["kernel"].startswith("cellblock") else "")
        out.append("- %s × %d, median PSS per process%s: %s" % (r["kernel"], r["n"], what, parts))
        if r.get("templates"):
            out.append("  - %d of %d runners forked from %d template(s), whose trees hold "
                       "%s of PSS in all (%s per kernel, counted above)" % (
                           r["warm"], r["n"], r["templates"], fmt_mib(r["template_kib"]),
                           fmt_mib(r["template_kib"] / r["n"])))
    return "\n".join(out) + "\n"


def cgroup_kind():
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return "unknown"
    return "v2" if lines == ["0::/"] or all(l.startswith("0::") for l in lines) else "v1"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="50,200", help="idle set sizes (default 50,200)")
    ap.add_argument("--burst", type=int, default=50, help="kernels started at once (0: none)")
    ap.add_argument("--kernels", default="cellblock,cellblock-cold,ipykernel")
    ap.add_argument("--write", metavar="RESULTS_MD", help="replace/append the section there")
    ap.add_argument("--json", default=os.path.join(BUILD, "density.json"),
                    help="every result, saved as it comes (default build/density.json)")
    ap.add_argument("--keep", action="store_true",
                    help="reuse the sets already in --json instead of measuring them again "
                         "(200 ipykernels take ~11 GiB: measure them once)")
    a = ap.parse_args()
    counts = [int(x) for x in a.counts.split(",") if x]
    need_fds = FDS_PER_KERNEL * max(counts + [a.burst]) + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need_fds:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need_fds, soft)), hard))
    kclient._CTX.set(zmq.MAX_SOCKETS, ZMQ_SOCKETS_PER_KERNEL * max(counts + [a.burst]) + 64)
    specs = kernelspecs()
    which = [k for k in a.kernels.split(",") if k in specs]
    meta = {"date": datetime.date.today().isoformat(),
            "machine": "%d vCPU, %.0f GiB, Linux %s, %s" % (
                os.cpu_count(), os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
                platform.release(), platform.freedesktop_os_release().get("PRETTY_NAME", "")),
            "user": "root" if os.geteuid() == 0 else "an ordinary user", "cgroup": cgroup_kind()}
    saved = {"idle": [], "burst": [], "meta": meta}
    if a.keep and os.path.exists(a.json):
        with open(a.json) as f:
            saved = json.load(f)
    done = {(r["kernel"], r["n"]) for r in saved["idle"]}
    done_b = {(r["kernel"], r["n"]) for r in saved["burst"]}

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(saved, f, indent=1)

    for n in counts:
        for label in which:
            if (label, n) in done:
                log("idle set: %d x %s kept from %s" % (n, label, a.json))
                continue
            log("idle set: %d x %s" % (n, label))
            saved["idle"].append(idle_set(label, specs[label], n))
            log(saved["idle"][-1])
            save()
    if a.burst:
        for label in which:
            if (label, a.burst) in done_b:
                log("burst: %d x %s kept from %s" % (a.burst, label, a.json))
                continue
            log("burst: %d x %s at once" % (a.burst, label))
            saved["burst"].append(burst(label, specs[label], a.burst))
            log(saved["burst"][-1])
            save()
    idle = sorted(saved["idle"], key=lambda r: (r["n"], r["kernel"]))
    bursts = sorted(saved["burst"], key=lambda r: (r["n"], r["kernel"]))
    text = markdown(idle, bursts, saved.get("meta", meta))
    print(text)
    if a.write:
        write_section(a.write, "density", text)
        log("wrote the section in %s" % a.write)


if __name__ == "__main__":
    main()
