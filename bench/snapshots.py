#!/usr/bin/python3
"""Snapshots of a session (issue 20, docs/SNAPSHOTS.md): what checkpoints in
place, rollback, pause/resume and fork cost, beside a cold start of the same
session, in one run.

    make bench-snapshots
    make bench-snapshots-guest      # the namespaces tier's pause by CRIU, in the test guest
    /usr/bin/python3 bench/snapshots.py [--mib 500] [--pause-mib 100] [--reps 5]
    /usr/bin/python3 bench/snapshots.py --write bench/RESULTS.md

namespaces tier, a session holding --mib MiB of numpy/pandas state:
  cold start    launch -> kernel_info -> the cell that imports numpy and pandas
                and builds the state -> its reply (the session a rollback saves)
  checkpoint    cellblock_checkpoint_request -> its reply: the session takes no
                cell meanwhile (the pause); and the sandbox cgroup's memory
                before and after it (copy-on-write: nothing is copied until
                pages change), then after the code rewrites every page
  rollback      cellblock_rollback_request -> reply -> a cell `1` -> its result
                (and the reply alone, and the same cell once more)
namespaces tier by CRIU (as root, where a criu dumps on this kernel:
Debian's, or the one scripts/criu.sh put beside it), and the gvisor tier,
--pause-mib MiB of state:
  cold start    as above, in gVisor
  pause         cellblock_pause_request -> reply; the image's size beside the
                sandbox's resident memory (its cgroup's) before the pause
  resume        the kernel's next cell (it resumes the image) -> result; and a
                new kernel (--resume ID): launch -> its first cell's result
                (three of them, the median)
  fork          4 new kernels from one image: launch of all -> every one's first
                result; each answers with its own state and has its own host uid
  resume curve  pause and resume (the same kernel) by the session's size
                (1-100 MiB) and --cpus (1, 2): runsc restores the whole
                compressed image on the sandbox's own CPUs

A benchmark, not a test: nothing asserts on timings.  Every kernel it starts
is killed by pid (kclient.py); the images go to a temporary store, removed.
"""

import argparse
import datetime
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from kclient import Kernel, built_kernelspecs, cleanup_all, now  # noqa: E402
from stats import write_section  # noqa: E402

STATE = ("import numpy as np, pandas as pd\n"
         "a = np.random.rand({n} * 2**20 // 8)\n"
         "df = pd.DataFrame({{'x': np.arange(10**5), 'y': np.random.rand(10**5)}})\n"
         "a.nbytes + df.memory_usage().sum()")


def start(spec, extra, label):
    k = Kernel(label, spec.argv + list(extra)).launch()
    k.wait_ready(120)
    return k


def control(k, msg_type, content=None, timeout=300):
    req = k.wait(k.send("control", msg_type, content), timeout, idle=False)
    c = req.reply["content"]
    if c.get("status") != "ok":
        raise RuntimeError("%s: %s" % (msg_type, c.get("evalue")))
    return c, req.rt_reply()


def cell(k, code, timeout=300):
    req = k.run(code, timeout, result=False)
    if req.status != "ok":
        raise RuntimeError("cell failed: %s" % req.reply["content"].get("evalue"))
    return req


def banner_uid(k):
    req = k.wait(k.send("shell", "kernel_info_request"), 30, idle=False)
    m = re.search(r"host uid (\d+)", req.reply["content"]["banner"])
    return int(m.group(1)) if m else None


def sandbox_memory(k):
    """The sandbox cgroup's memory in use (bytes): its runner's memory group."""
    for p in sorted(k_tree(k)):
        try:
            with open("/proc/%d/cgroup" % p) as f:
                for line in f:
                    parts = line.strip().split(":", 2)
                    if len(parts) == 3 and "cellblock-" in parts[2] and (
                            parts[1] == "memory" or parts[1] == ""):
                        root = "/sys/fs/cgroup/memory" if parts[1] else "/sys/fs/cgroup"
                        for f2 in ("memory.usage_in_bytes", "memory.current"):
                            path = root + parts[2] + "/" + f2
                            if os.path.exists(path):
                                return int(open(path).read())
        except OSError:
            continue
    return None


def k_tree(k):
    from kclient import tree
    return tree(k.pid)


def cold(spec, extra, mib, label, kind="random"):
    t0 = now()
    k = start(spec, extra, label)
    state = STATE if kind == "random" else STATE.replace("np.random.rand({n}", "np.ones({n}")
    cell(k, state.format(n=mib))
    return k, now() - t0


def bench_namespaces(spec, mib, reps):
    r = {}
    # room for the state, its copy once rewritten, and the interpreter
    k, r["cold"] = cold(spec, ["--memory", str(3 * mib + 512)], mib, "ns")
    cell(k, "1")
    before = sandbox_memory(k)
    times = []
    for i in range(reps):
        _, t = control(k, "cellblock_checkpoint_request", {"name": "c%d" % i})
        times.append(t)
    after = sandbox_memory(k)
    r["checkpoint"] = statistics.median(times)
    r["mem_before"], r["mem_after"] = before, after
    for i in range(1, reps):
        control(k, "cellblock_forget_request", {"name": "c%d" % i})
    cell(k, "a += 1.0")  # every page written: the copy now costs its size
    r["mem_changed"] = sandbox_memory(k)
    rolls, replies, plain = [], [], []
    for _ in range(reps):
        t0 = now()
        _, t = control(k, "cellblock_rollback_request", {"name": "c0"})
        cell(k, "1")
        rolls.append(now() - t0)
        replies.append(t)
        t0 = now()
        cell(k, "1")            # the same cell once the first has paid for its pages
        plain.append(now() - t0)
    r["rollback"] = statistics.median(rolls)
    r["rollback_reply"] = statistics.median(replies)
    r["cell"] = statistics.median(plain)
    k.shutdown()
    return r


def gvisor_flags(store, mib):
    """The gvisor tier's flags for a session of mib MiB, its images in store."""
    return ["--isolation", "gvisor", "--image-dir", store, "--memory", str(max(1024, 4 * mib))]


def bench_gvisor(spec, mib, store):
    return bench_pause(spec, mib, gvisor_flags(store, mib), "gv")


def bench_pause(spec, mib, extra, label):
    """Pause, resume (the same kernel, a new one) and fork of a session of mib
    MiB, the tier's flags in extra."""
    r = {}
    k, r["cold"] = cold(spec, extra, mib, label)
    cell(k, "1")
    r["resident"] = sandbox_memory(k)
    c, r["pause"] = control(k, "cellblock_pause_request")
    image, r["image"] = c["image"], c["bytes"]
    t0 = now()
    cell(k, "a.sum() > 0")
    r["resume_same"] = now() - t0
    uid0 = banner_uid(k)
    news = []  # a new kernel's resume, three times: the median
    for i in range(3):
        t0 = now()
        k2 = start(spec, extra + ["--resume", image], "%s-resume%d" % (label, i))
        cell(k2, "a.sum() > 0")
        news.append(now() - t0)
        k2.shutdown()
    r["resume_new"], r["resume_new_all"] = statistics.median(news), news
    # fork: 4 kernels from one image, side by side
    c, _ = control(k, "cellblock_pause_request")
    t0 = now()
    clones = [Kernel("fork%d" % i, spec.argv + extra + ["--resume", c["image"]]).launch()
              for i in range(4)]
    for i, cl in enumerate(clones):
        cl.wait_ready(120)
        cell(cl, "n = %d" % i)
    r["fork"] = now() - t0
    vals = []
    for cl in clones:
        req = cl.run("n", 60, result=True)
        vals.append(req.outputs[0]["content"]["data"]["text/plain"] if req.outputs else "?")
    r["fork_values"] = vals
    r["fork_uids"] = len({banner_uid(cl) for cl in clones} | {uid0})
    for cl in clones:
        cl.shutdown()
    k.shutdown()
    return r


# (MiB of state, --cpus, its values) for the gvisor resume curve: runsc
# loads the whole image on the sandbox's CPUs before anything runs, and
# one that can only compress (Debian 12's own, 20221219) inflates it there.
# Random floats do not compress (its worst case); np.ones does (its best).
CURVE = ((1, 1, "random"), (10, 1, "random"), (50, 1, "random"), (100, 1, "random"),
         (100, 2, "random"), (100, 1, "ones"))


def bench_resume_curve(spec, store):
    """gvisor: pause, then the same kernel's next cell (it resumes), by the
    session's size and --cpus; the median of two pauses each."""
    rows = []
    for mib, cpus, kind in CURVE:
        extra = gvisor_flags(store, mib) + ["--cpus", str(cpus)]
        k, t_cold = cold(spec, extra, mib, "curve", kind)
        cell(k, "1")
        pauses, resumes, size = [], [], 0
        for _ in range(2):
            c, t = control(k, "cellblock_pause_request")
            pauses.append(t)
            size = c["bytes"]
            t0 = now()
            cell(k, "a.sum() > 0")
            resumes.append(now() - t0)
        k.shutdown()
        rows.append({"mib": mib, "cpus": cpus, "kind": kind, "cold": t_cold, "image": size,
                     "pause": statistics.median(pauses), "resume": statistics.median(resumes)})
    return rows


def curve_rows(curve):
    return ["| gvisor: %d MiB of state (%s), --cpus %d: pause / resume -> first result | "
            "%s / %s | %.2f / %.2f | image %.0f MiB; cold start %s |" % (
                r["mib"], "np.ones" if r["kind"] == "ones" else "random floats", r["cpus"],
                fmt_ms(r["pause"]), fmt_ms(r["resume"]),
                r["pause"] / r["cold"], r["resume"] / r["cold"], r["image"] / 2**20,
                fmt_ms(r["cold"])) for r in curve]


def fmt_ms(s):
    return "%.0f ms" % (s * 1000) if s < 10 else "%.1f s" % s


def pause_rows(tier, gv, pmib):
    return [
        "| %s: cold start, %d MiB of state | %s | 1 | |" % (tier, pmib, fmt_ms(gv["cold"])),
        "| %s: pause (image written, sandbox ended) | %s | %.3f | image %.0f MiB, "
        "resident memory %.0f MiB before (ratio %.2f) |" % (
            tier, fmt_ms(gv["pause"]), gv["pause"] / gv["cold"], gv["image"] / 2**20,
            (gv["resident"] or 0) / 2**20, gv["image"] / gv["resident"] if gv["resident"]
            else float("nan")),
        "| %s: resume -> first result (the same kernel) | %s | %.3f | |" % (
            tier, fmt_ms(gv["resume_same"]), gv["resume_same"] / gv["cold"]),
        "| %s: resume -> first result (a new kernel, --resume) | %s | %.3f | median of "
        "%s |" % (tier, fmt_ms(gv["resume_new"]), gv["resume_new"] / gv["cold"],
                  ", ".join(fmt_ms(t) for t in gv.get("resume_new_all", [gv["resume_new"]]))),
        "| %s: fork, 4 kernels from one image, all answering | %s | %.3f | values %s, "
        "%d distinct host uids with the original |" % (
            tier, fmt_ms(gv["fork"]), gv["fork"] / gv["cold"], "/".join(gv["fork_values"]),
            gv["fork_uids"])]


def report_guest(data, boot, pmib):
    lines = ["## Snapshots in the test guest (issue 20): the namespaces tier's pause by CRIU",
             "",
             "`make bench-snapshots-guest` (bench/snapshots.py --guest), %s: Debian's criu "
             "%s on the guest's kernel %s under QEMU TCG (booted in %.0f s), a --pausable "
             "session of %d MiB of numpy/pandas state; one run.  Emulated, so only the ratios "
             "to the cold start carry over to real hardware." % (
                 datetime.date.today().isoformat(), data["criu"], data["uname"], boot, pmib),
             "", "| what | time | ratio to the cold start | note |", "|---|---|---|---|"]
    return "\n".join(lines + pause_rows("namespaces (CRIU)", data["r"], pmib)) + "\n"


def runsc_line():
    """Which runsc the gvisor tier uses here, and whether its images are compressed
    (the resume's time depends on it: docs/SNAPSHOTS.md)."""
    runsc = shutil.which("runsc", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    if runsc is None:
        return "no runsc"
    v = subprocess.run([runsc, "--version"], capture_output=True, text=True, timeout=30)
    h = subprocess.run([runsc, "checkpoint", "--help"], capture_output=True, text=True, timeout=30)
    raw = "-compression" in h.stdout + h.stderr
    return "%s (%s)" % (v.stdout.split("\n")[0].strip(),
                        "images written uncompressed" if raw
                        else "images compressed: it has no choice")


def criu_here():
    """The criu the launcher takes here (launcher/criu_dump.c: Debian's where
    `criu check` passes, else the newer one scripts/criu.sh put beside it) and
    its version, or None where none can dump on this kernel."""
    for criu in ("/usr/sbin/criu", "/usr/local/sbin/criu"):
        if not os.access(criu, os.X_OK):
            continue
        if subprocess.run([criu, "check"], capture_output=True, timeout=120).returncode == 0:
            v = re.search(r"Version: (\S+)", subprocess.run(
                [criu, "--version"], capture_output=True, text=True).stdout)
            return criu, v.group(1) if v else "?"
    return None


def report(ns, gv, mib, pmib, reps, curve=None, nsp=None, criu=None):
    lines = ["## Snapshots (issue 20): checkpoints in place, rollback, pause, resume, fork", "",
             "Run %s on %s (%s, %d CPUs, load average %.1f at the end: the host is shared), "
             "one run, medians of %d where repeated; ratios are beside a cold start of the "
             "same session (launch to the reply of the cell that builds its state); "
             "gvisor: %s." % (
                 datetime.date.today().isoformat(), platform.node(), platform.release(),
                 os.cpu_count(), os.getloadavg()[0], reps, runsc_line()), "",
             "| what | time | ratio to the cold start | note |", "|---|---|---|---|"]
    if ns:
        extra = (ns["mem_after"] - ns["mem_before"]) / ns["mem_before"] * 100 \
            if ns["mem_before"] and ns["mem_after"] else float("nan")
        changed = (ns["mem_changed"] - ns["mem_before"]) / ns["mem_before"] * 100 \
            if ns["mem_before"] and ns["mem_changed"] else float("nan")
        lines += [
            "| namespaces: cold start, %d MiB of numpy/pandas state | %s | 1 | |" % (
                mib, fmt_ms(ns["cold"])),
            "| namespaces: checkpoint in place (the session takes no cell) | %s | %.4f | "
            "memory +%.1f %% (%d -> %d MiB); +%.0f %% once every page of the array is "
            "rewritten |" % (fmt_ms(ns["checkpoint"]), ns["checkpoint"] / ns["cold"], extra,
                             ns["mem_before"] >> 20, ns["mem_after"] >> 20, changed),
            "| namespaces: rollback -> first result | %s | %.4f | the rollback's reply %s; "
            "the same cell `1` afterwards %s |" % (
                fmt_ms(ns["rollback"]), ns["rollback"] / ns["cold"],
                fmt_ms(ns["rollback_reply"]), fmt_ms(ns["cell"]))]
    if nsp:
        lines += pause_rows("namespaces (CRIU %s, %s)" % (criu[1], criu[0]), nsp, pmib)
    if gv:
        lines += pause_rows("gvisor", gv, pmib)
    if curve:
        lines += curve_rows(curve)
    return "\n".join(lines) + "\n"


def in_guest(pmib, out):
    """Runs inside the test guest: the namespaces tier's pause by CRIU."""
    import json
    import subprocess
    spec, _ = built_kernelspecs()
    store = tempfile.mkdtemp(prefix="cb-bench-images-", dir="/var/tmp")
    os.chmod(store, 0o700)
    import glob
    import kclient
    error = None
    try:
        # (TCG: a cell that imports numpy and pandas takes longer than --timeout's default)
        r = bench_pause(spec, pmib, ["--pausable", "--image-dir", os.path.join(store, "s"),
                                     "--memory", str(max(1024, 4 * pmib)), "--timeout", "900"],
                        "ns")
    except (kclient.HarnessError, RuntimeError) as e:  # the kernels' logs come back with it
        r, error = None, str(e)
        for log in sorted(glob.glob(os.path.join(kclient._TMP, "*.log"))):
            with open(log, errors="replace") as f:
                error += "\n--- %s\n%s" % (log, f.read()[-4000:])
    finally:
        cleanup_all()
        shutil.rmtree(store, ignore_errors=True)
    v = subprocess.run(["criu", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Version: (\S+)", v)
    with open(out, "w") as f:
        json.dump({"r": r, "error": error, "uname": os.uname().release,
                   "criu": m.group(1) if m else "?"}, f)


def guest(pmib, write):
    import json
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "guest"))
    import guestvm
    ok, why = guestvm.available()
    if not ok:
        print("bench/snapshots.py --guest: cannot boot the test guest: %s" % why,
              file=sys.stderr)
        return
    step = guestvm.Step(["/usr/bin/python3", os.path.abspath(__file__), "--pause-mib",
                         str(pmib), "--in-guest", "/mnt/cbout/bench.json"],
                        env={"CELLBLOCK_BUILD": os.path.abspath(guestvm.BUILD)}, cwd="/",
                        timeout=3000)
    res = guestvm.Guest().run([step])
    raw = res.files.get("bench.json")
    if raw is None:
        print("rc %s\n%s\n%s" % (res.steps[0].rc, res.steps[0].output[-3000:], res.error),
              file=sys.stderr)
        sys.exit("bench/snapshots.py --guest: no figures came back")
    data = json.loads(raw)
    if data.get("error"):
        sys.exit("bench/snapshots.py --guest: %s" % data["error"])
    text = report_guest(data, res.boot_seconds, pmib)
    print(text)
    if write:
        write_section(write, "snapshots-guest", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=500)
    ap.add_argument("--pause-mib", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--skip-gvisor", action="store_true")
    ap.add_argument("--skip-criu", action="store_true",
                    help="not the namespaces tier's pause by CRIU on this host")
    ap.add_argument("--guest", action="store_true",
                    help="the namespaces tier's pause by CRIU, in the test guest")
    ap.add_argument("--in-guest", metavar="OUT", help=argparse.SUPPRESS)
    ap.add_argument("--write", metavar="FILE")
    a = ap.parse_args()
    if a.in_guest:
        in_guest(a.pause_mib, a.in_guest)
        return
    if a.guest:
        guest(a.pause_mib, a.write)
        return
    spec, _ = built_kernelspecs()
    store = tempfile.mkdtemp(prefix="cb-bench-images-")
    try:
        ns = bench_namespaces(spec, a.mib, a.reps)
        gv = curve = nsp = None
        # the namespaces tier's pause by CRIU, where a criu can dump on this kernel
        criu = criu_here() if os.geteuid() == 0 and not a.skip_criu else None
        if criu:
            nsp = bench_pause(spec, a.pause_mib,
                              ["--pausable", "--image-dir", os.path.join(store, "n"),
                               "--memory", str(max(1024, 4 * a.pause_mib))], "ns-pause")
        if not a.skip_gvisor and shutil.which("runsc", path="/usr/sbin:/usr/bin") and \
                os.geteuid() == 0:
            gv = bench_gvisor(spec, a.pause_mib, os.path.join(store, "s"))
            curve = bench_resume_curve(spec, os.path.join(store, "c"))
        text = report(ns, gv, a.mib, a.pause_mib, a.reps, curve, nsp, criu)
        print(text)
        if a.write:
            write_section(a.write, "snapshots", text)
    finally:
        cleanup_all()
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
