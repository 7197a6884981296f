#!/usr/bin/python3
"""cellblock vs the stock ipykernel, side by side, in one run (issue 5).

    make bench                      # full run (about 7-9 minutes on 2 cores)
    /usr/bin/python3 bench/bench.py --quick
    /usr/bin/python3 bench/bench.py --only launch,roundtrip --write bench/RESULTS.md

Three contenders take turns, round by round, in rotating order:
  cellblock   the kernelspec built in build/ (found relative to this file)
  ipykernel   the stock `python3` kernelspec (Debian's ipykernel)
  cellblock'  cellblock again (A/A: the ratio cellblock/cellblock' shows the noise)

It prints medians, p90/p99 and ratios, then the issue's targets with PASS/MISS.
A benchmark, not a test: it never asserts on timings and exits 0 unless the
harness itself breaks.  It kills every process it started, by pid, and only those.
"""

import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("CELLBLOCK_BUILD", os.path.join(REPO, "build"))
sys.path.insert(0, HERE)

import zmq  # noqa: E402
from jupyter_client.session import Session  # noqa: E402

import kclient  # noqa: E402
from kclient import Kernel, now, tree_pss, HarnessError  # noqa: E402
from stats import pct, median, ratio, fmt_num, fmt_ratio, write_section  # noqa: E402

HEAVY = "import numpy, pandas, matplotlib.pyplot"
PRELOAD = "numpy,pandas,matplotlib.pyplot"
MIB = 1024 * 1024


def log(*a):
    print("#", *a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ contenders

class Contender:
    def __init__(self, key, label, argv, interrupt_mode):
        self.key, self.label, self.argv, self.interrupt_mode = key, label, argv, interrupt_mode

    def kernel(self, extra=()):
        return Kernel(self.label, self.argv + list(extra), self.interrupt_mode)


def contenders(baseline=None):
    cb, ipy = kclient.built_kernelspecs()
    if ipy is None:
        raise HarnessError("no python3 kernelspec: ipykernel is the baseline")
    cbm = cb.interrupt_mode or "signal"
    cb2 = Contender("cb2", "cellblock'", cb.argv, cbm)
    if baseline:
        # --baseline BUILD: cellblock' is another build's kernel (before/after in one run)
        with open(os.path.join(baseline, "share", "jupyter", "kernels", "cellblock",
                               "kernel.json")) as f:
            cb2 = Contender("cb2", "cellblock (baseline)", json.load(f)["argv"], cbm)
    return {
        "cb": Contender("cb", "cellblock", cb.argv, cbm),
        "ipy": Contender("ipy", "ipykernel", ipy.argv, ipy.interrupt_mode or "signal"),
        "cb2": cb2,
        "cbp": Contender("cbp", "cellblock --preload", cb.argv + ["--preload", PRELOAD], cbm),
        "cbp2": Contender("cbp2", "cellblock --preload'", cb.argv + ["--preload", PRELOAD], cbm),
    }, cb, ipy


def rotated(keys, r):
    r %= len(keys)
    return keys[r:] + keys[:r]


# ------------------------------------------------------------------ results

class Results:
    def __init__(self):
        self.samples = {}     # (fig, contender) -> [values]
        self.notes = []       # free text lines printed after the tables
        self.checks = {}      # name -> value

    def add(self, fig, who, v):
        self.samples.setdefault((fig, who), []).append(v)

    def get(self, fig, who):
        return self.samples.get((fig, who), [])

    def med(self, fig, who):
        return median(self.get(fig, who))

    def note(self, s):
        log(s)
        self.notes.append(s)


RES = Results()


def settle(t=0.15):
    time.sleep(t)


# ------------------------------------------------------------------ figure 0: client overhead

def fig_overhead(args):
    """Echo of a signed execute_request through a C-level ROUTER proxy on loopback."""
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    th = threading.Thread(target=lambda: _proxy(router), daemon=True)
    th.start()
    dealer = ctx.socket(zmq.DEALER)
    dealer.linger = 0
    sess = Session(key=os.urandom(16).hex().encode(), signature_scheme="hmac-sha256",
                   username="bench")
    dealer.setsockopt(zmq.IDENTITY, sess.bsession)
    dealer.connect("tcp://127.0.0.1:%d" % port)
    content = {"code": "pass", "silent": False, "store_history": True,
               "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}
    n = 3000 if not args.quick else 1000
    rts, ser, de = [], [], []
    for i in range(n + 100):
        t0 = now()
        sess.send(dealer, "execute_request", content)
        frames = dealer.recv_multipart()
        _, parts = sess.feed_identities(frames)
        sess.deserialize(parts)
        t1 = now()
        if i >= 100:
            rts.append(t1 - t0)
    for i in range(n):
        msg = sess.msg("execute_request", content)
        t0 = now()
        parts = sess.serialize(msg)
        t1 = now()
        sess.deserialize(parts[1:])
        t2 = now()
        ser.append(t1 - t0)
        de.append(t2 - t1)
    dealer.close(0)
    ctx_term = router  # the proxy thread owns it; closing the context is left to exit
    del ctx_term
    for v in rts:
        RES.add("overhead_echo", "client", v)
    for v in ser:
        RES.add("overhead_sign", "client", v)
    for v in de:
        RES.add("overhead_verify", "client", v)


def _proxy(router):
    try:
        zmq.proxy(router, router)
    except zmq.ZMQError:
        pass


# ------------------------------------------------------------------ figure 1: launch + floor

def launch_once(c, fig_prefix="launch", extra=()):
    k = c.kernel(extra).launch()
    try:
        info = k.wait_ready(timeout=60)
        t_info = info.t_reply - k.t_launch
        req = k.execute("1+1")
        k.wait(req, timeout=60, idle=True, result=False)
        if req.t_result is None:       # iopub subscription may have lost the race
            end = now() + 1.0
            while req.t_result is None and now() < end:
                k.pump(50)
        if req.t_result is None:
            RES.note("%s: launch round had no execute_result on iopub (reply at %.0f ms)"
                     % (c.label, (req.t_reply - k.t_launch) * 1e3))
            t_first = req.t_reply - k.t_launch
        else:
            t_first = max(req.t_result, req.t_reply) - k.t_launch
        RES.add(fig_prefix + "_info", c.key, t_info)
        RES.add(fig_prefix + "_first", c.key, t_first)
        if c.key == "cb" and "banner" not in RES.checks:
            RES.checks["banner"] = info.reply["content"].get("banner", "")
        # graceful shutdown: how long until the kernel process has exited
        t0 = now()
        k.send("control", "shutdown_request", {"restart": False})
        while k.proc.poll() is None and now() - t0 < 5:
            time.sleep(0.0005)
        if k.proc.poll() is not None:
            RES.add("shutdown_exit", c.key, now() - t0)
        return k
    finally:
        k.kill()


def fig_launch(args, C):
    rounds = args.rounds_launch
    for r in range(rounds):
        for key in rotated(["cb", "ipy", "cb2"], r):
            launch_once(C[key])
            settle(0.2)
        floor_round()
    log("launch: %d rounds" % rounds)


_EMPTY_PY = None


def floor_round():
    global _EMPTY_PY
    if _EMPTY_PY is None:
        fd, _EMPTY_PY = tempfile.mkstemp(suffix=".py", dir=kclient._TMP)
        os.close(fd)
        os.chmod(_EMPTY_PY, 0o644)
        os.chmod(kclient._TMP, 0o755)
    t0 = now()
    subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", "pass"], check=True)
    RES.add("floor_py", "floor", now() - t0)
    t0 = now()
    r = subprocess.run(["unshare", "-Urpnmiu", "--fork", "true"], stderr=subprocess.DEVNULL)
    if r.returncode == 0:
        RES.add("floor_unshare", "floor", now() - t0)
    ok, t = launcher_trivial("/bin/true")
    if ok:
        RES.add("floor_ns", "floor", t)
    ok, t = launcher_trivial("/usr/bin/python3")
    if ok:
        RES.add("floor_sandbox_py", "floor", t)


def launcher_trivial(program):
    """The real launcher (full sandbox) running `program -I -u empty.py` instead of the runner."""
    launcher = os.path.join(BUILD, "libexec", "cellblock", "cellblock-launcher")
    ev = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    rep = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a, b = ev[1].fileno(), rep[1].fileno()

    def pre():
        os.dup2(a, 3)
        os.dup2(b, 4)
    t0 = now()
    p = subprocess.Popen([launcher, "--log-level", "warning", "--python", program, "--runner",
                          _EMPTY_PY], stdin=subprocess.DEVNULL, preexec_fn=pre, close_fds=False)
    ev[1].close()
    rep[1].close()
    ok = False
    rep[0].settimeout(20)
    try:
        while True:
            m = rep[0].recv(65536)
            if not m:
                break
            if m.startswith(b"exit code=0"):
                ok = True
            if m.startswith(b"fatal"):
                RES.note("floor: launcher fatal: %s" % m.decode(errors="replace"))
    except socket.timeout:
        p.kill()
    p.wait()
    t = now() - t0
    ev[0].close()
    rep[0].close()
    return ok, t


# ------------------------------------------------------------------ figure 2: round trips

def fig_roundtrip(args, L):
    n = args.cells
    batch = 25
    for k in L.values():
        for _ in range(20):
            k.run("pass")
    done = 0
    r = 0
    while done < n:
        for key in rotated(list(L), r):
            k = L[key]
            for code, fig in (("pass", "rt_pass"), ("x = 1", "rt_x1")):
                for _ in range(batch):
                    q = k.run(code, timeout=30)
                    RES.add(fig + "_reply", key, q.rt_reply())
                    RES.add(fig + "_idle", key, q.rt_idle())
        done += batch
        r += 1
    log("round trips: %d cells of each kind per kernel" % done)


# ------------------------------------------------------------------ figure 3: streams

LINES = 20 * 1024          # 20 MiB in 1 KiB lines

THROUGHPUT_CELL = (
    "for i in range(%d):\n"
    "    print('%%07d:' %% i + chr(97 + i %% 26) * 1015)\n" % LINES)


def expected_stdout():
    return "".join("%07d:" % i + chr(97 + i % 26) * 1015 + "\n" for i in range(LINES))


MIXED_N = 6000
MIXED_CELL = (
    "import sys\n"
    "for i in range(%d):\n"
    "    if i %% 3 == 2:\n"
    "        sys.stderr.write('E%%06d ' %% i + 'e' * (i %% 200) + '\\n')\n"
    "    else:\n"
    "        print('O%%06d ' %% i + 'o' * (i %% 300))\n" % MIXED_N)


def expected_mixed():
    out, err = [], []
    for i in range(MIXED_N):
        if i % 3 == 2:
            err.append("E%06d " % i + "e" * (i % 200) + "\n")
        else:
            out.append("O%06d " % i + "o" * (i % 300) + "\n")
    return "".join(out), "".join(err)


def check_lines(got, expected):
    """(lost bytes, reordered lines, corrupted/extra bytes) of got vs expected text."""
    if got == expected:
        return 0, 0, 0
    exp_lines = expected.splitlines(keepends=True)
    idx = {l: i for i, l in enumerate(exp_lines)}
    seen = set()
    reordered = corrupt = 0
    hi = -1
    for l in got.splitlines(keepends=True):
        i = idx.get(l)
        if i is None or i in seen:
            corrupt += len(l.encode())
            continue
        seen.add(i)
        if i < hi:
            reordered += 1
        hi = max(hi, i)
    lost = sum(len(exp_lines[i].encode()) for i in range(len(exp_lines)) if i not in seen)
    return lost, reordered, corrupt


def drain_late(k, q, t=0.3):
    end = now() + t
    n0 = len(q.streams)
    while now() < end:
        k.pump(50)
    return len(q.streams) - n0


def fig_streams(args, L):
    exp = expected_stdout()
    exp_out, exp_err = expected_mixed()
    for r in range(args.rounds_stream):
        for key in rotated(list(L), r):
            k = L[key]
            c0, r0 = tree_cpu(k.pid), self_cpu()
            q = k.execute(THROUGHPUT_CELL)
            q.keep_streams = True
            k.wait(q, timeout=300)
            dt = q.t_idle - q.t_send
            RES.add("stdout_cpu_tree", key, tree_cpu(k.pid) - c0)
            RES.add("stdout_cpu_client", key, self_cpu() - r0)
            late = drain_late(k, q)
            got = "".join(t for n, t in q.streams if n == "stdout")
            lost, reord, corrupt = check_lines(got, exp)
            RES.add("stdout_mibs", key, (len(exp) / MIB) / dt)
            RES.add("stdout_time", key, dt)
            RES.add("stdout_msgs", key, q.n_stream)
            RES.add("stdout_lost", key, lost)
            RES.add("stdout_reordered", key, reord)
            RES.add("stdout_corrupt", key, corrupt)
            RES.add("stdout_late", key, late)
            if q.t_first_output is not None:
                RES.add("stdout_first_byte", key, q.t_first_output - q.t_send)
            del got, q
            settle(0.1)
            q = k.execute(MIXED_CELL)
            q.keep_streams = True
            k.wait(q, timeout=120)
            dt = q.t_idle - q.t_send
            late = drain_late(k, q)
            out = "".join(t for n, t in q.streams if n == "stdout")
            err = "".join(t for n, t in q.streams if n == "stderr")
            lo, ro, co = check_lines(out, exp_out)
            le, re_, ce = check_lines(err, exp_err)
            RES.add("mixed_time", key, dt)
            RES.add("mixed_lost", key, lo + le)
            RES.add("mixed_reordered", key, ro + re_)
            RES.add("mixed_corrupt", key, co + ce)
            RES.add("mixed_late", key, late)
            RES.add("mixed_interleave", key, cross_order(q.streams))
            settle(0.1)
    log("streams: %d rounds" % args.rounds_stream)


def tree_cpu(pid):
    """user+system CPU seconds of pid's process tree (live processes only)."""
    t = 0
    for p in kclient.tree(pid):
        try:
            with open("/proc/%d/stat" % p) as f:
                v = f.read().rsplit(")", 1)[1].split()
            t += int(v[11]) + int(v[12])
        except (OSError, IndexError, ValueError):
            pass
    return t / os.sysconf("SC_CLK_TCK")


def self_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cross_order(streams):
    """Lines that arrive after a line with a higher sequence number of the OTHER stream."""
    merged = []
    for name, text in streams:
        merged.extend(text.splitlines())
    inv = 0
    hi = -1
    for line in merged:
        try:
            i = int(line[1:7])
        except ValueError:
            continue
        if i < hi:
            inv += 1
        hi = max(hi, i)
    return inv


# ------------------------------------------------------------------ figure 4: plot + DataFrame

PLOT_CELL = ("fig, ax = plt.subplots()\n"
             "ax.plot(np.arange(1000), np.sin(np.arange(1000) / 50))\n"
             "plt.show()\n")
DF_CELL = "df = pd.DataFrame(np.arange(1000.0).reshape(100, 10)); df"


def fig_rich(args, L):
    for k in L.values():
        q = k.run("import numpy as np, pandas as pd, matplotlib.pyplot as plt", timeout=120)
        if q.status != "ok":
            raise HarnessError("%s: import failed: %s" % (k.label, q.reply["content"]))
        k.run(PLOT_CELL, timeout=120)           # warm: first figure loads fonts etc.
        k.run(DF_CELL, timeout=60)
    for r in range(args.rounds_rich):
        for key in rotated(list(L), r):
            k = L[key]
            q = k.run(PLOT_CELL, timeout=60)
            png = any("image/png" in o["content"].get("data", {}) for o in q.outputs)
            RES.add("plot", key, q.rt_idle())
            RES.add("plot_png", key, 1 if png else 0)
            q = k.run(DF_CELL, timeout=60)
            html = any("text/html" in o["content"].get("data", {}) for o in q.outputs)
            RES.add("df", key, q.rt_idle())
            RES.add("df_html", key, 1 if html else 0)
    log("plot/DataFrame: %d rounds" % args.rounds_rich)


# ------------------------------------------------------------------ figures 5+6: memory, heavy first cell

def fig_heavy(args, C):
    keys = ["cb", "ipy", "cbp", "cbp2"]
    for r in range(args.rounds_heavy):
        for key in rotated(keys, r):
            c = C[key]
            k = c.kernel().launch()
            try:
                k.wait_ready(timeout=60)
                wait_until = k.t_launch + 2.8
                while now() < wait_until:
                    k.pump(20)
                total, rows = tree_pss(k.pid)
                RES.add("pss_idle", key, total)
                RES.add("procs_idle", key, len(rows))
                if r == 0:
                    RES.note("idle tree of %s: %s" % (c.label, ", ".join(
                        "%s %.1f MiB" % (n, p / 1024.0) for _, n, p in rows)))
                while now() < k.t_launch + 3.0:
                    k.pump(5)
                q = k.run(HEAVY, timeout=120)
                if q.status != "ok":
                    raise HarnessError("%s: heavy import failed: %s" % (c.label, q.reply["content"]))
                RES.add("heavy", key, q.rt_idle())
                total, rows = tree_pss(k.pid)
                RES.add("pss_heavy", key, total)
            finally:
                k.kill()
            settle(0.3)
    log("memory + heavy first cell: %d rounds" % args.rounds_heavy)


# ------------------------------------------------------------------ figure 7: interrupt, killed runner

def fig_interrupt(args, L):
    for r in range(args.rounds_interrupt):
        for key in rotated(list(L), r):
            k = L[key]
            q = k.execute("while True: pass")
            end = now() + 10
            while q.t_input is None and now() < end:
                k.pump(10)
            t_spin = now() + 0.1
            while now() < t_spin:
                k.pump(5)
            t0 = now()
            k.interrupt()
            k.wait(q, timeout=30)
            if q.ename != "KeyboardInterrupt":
                RES.note("%s: interrupt ended with %s/%s" % (k.label, q.status, q.ename))
            RES.add("interrupt_reply", key, q.t_reply - t0)
            RES.add("interrupt_idle", key, q.t_idle - t0)
            k.run("pass")
    log("interrupt: %d rounds" % args.rounds_interrupt)


def fig_killed(args, L):
    for r in range(args.rounds_killed):
        for key in rotated([x for x in L if x != "ipy"], r):
            k = L[key]
            t0 = now()
            q = k.run("import os; os.kill(os.getpid(), 9)", timeout=30)
            q2 = k.run("1+1", timeout=60, result=True)
            RES.add("killed_reply", key, q.t_reply - t0)
            RES.add("killed_next", key, q2.t_result - q.t_idle)
            RES.add("killed_total", key, q2.t_result - t0)
            settle(0.2)
    log("killed runner: %d rounds" % args.rounds_killed)


# ------------------------------------------------------------------ figure 8: restart

def fig_restart(args, C):
    from jupyter_client import KernelManager
    names = {"cb": "cellblock", "ipy": "python3", "cb2": "cellblock"}
    todo = [(key, hard) for hard in (False, True) for key in ("cb", "ipy", "cb2")]
    for r in range(args.rounds_restart):
        for key, hard in rotated(todo, r):
            sfx = "_now" if hard else ""
            km = KernelManager(kernel_name=names[key])
            km.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            k = Kernel(C[key].label, [], C[key].interrupt_mode)
            pids = set()
            try:
                k.attach(km.get_connection_info(), km.session.key, km.provisioner.process.pid)
                k.wait_ready(timeout=60)
                k.run("1+1", result=True)
                pids.update(kclient.tree(k.pid))
                k.close_sockets()
                t0 = now()
                km.restart_kernel(now=hard)
                t1 = now()
                k.attach(km.get_connection_info(), km.session.key, km.provisioner.process.pid)
                k.wait_ready(timeout=60)
                q = k.run("1+1", result=True, timeout=60)
                RES.add("restart_call" + sfx, key, t1 - t0)
                RES.add("restart_first" + sfx, key, max(q.t_result, q.t_reply) - t0)
                pids.update(kclient.tree(k.pid))
            finally:
                k.known_pids |= pids
                try:
                    km.shutdown_kernel(now=True)
                except Exception:
                    pass
                k.kill()
            settle(0.3)
    log("restart: %d rounds" % args.rounds_restart)


# ------------------------------------------------------------------ figure 9: 8 kernels x 100 cells

def fig_many(args, C):
    nk, nc = args.many_kernels, args.many_cells
    for r in range(args.rounds_many):
        for key in rotated(["cb", "ipy", "cb2"], r):
            c = C[key]
            ports = kclient.free_ports(5 * nk)
            ks = []
            try:
                t0 = now()
                for i in range(nk):
                    ks.append(c.kernel().launch(ports[5 * i:5 * i + 5]))
                poller = zmq.Poller()
                owner = {}
                for k in ks:
                    for ch in ("shell", "iopub"):
                        poller.register(k.socks[ch], zmq.POLLIN)
                        owner[k.socks[ch]] = k
                state = {}
                for k in ks:
                    state[k] = [k.send("shell", "kernel_info_request"), -1]
                t_first_cell = None
                left = nk
                deadline = now() + 300
                while left:
                    if now() > deadline:
                        raise HarnessError("%s: 8x100 did not finish in 300 s" % c.label)
                    ready = poller.poll(50)
                    for sock, _ in ready:
                        owner[sock].pump(0)
                    for k in ks:
                        st = state[k]
                        q, i = st
                        if q is None:
                            continue
                        if i < 0 and q.t_reply is not None and q.t_idle is None:
                            # iopub not subscribed yet: ask again (as wait_for_ready does)
                            if now() - q.t_reply > 0.01:
                                k.pending.pop(q.msg_id, None)
                                st[0] = k.send("shell", "kernel_info_request")
                            continue
                        if q.t_reply is not None and q.t_idle is None and now() - q.t_reply > 5:
                            RES.note("%s: 8x100: idle of a cell never came; counted at reply"
                                     % c.label)
                            q.t_idle = q.t_reply
                        if q.done(idle=True):
                            k.pending.pop(q.msg_id, None)
                            if i + 1 >= nc:
                                st[0] = None
                                left -= 1
                                continue
                            st[1] = i + 1
                            st[0] = k.execute("x = %d\nx" % (i + 1))
                            if t_first_cell is None:
                                t_first_cell = st[0].t_send
                t_end = now()
                RES.add("many_total", key, t_end - t0)
                RES.add("many_cps", key, nk * nc / (t_end - t0))
                RES.add("many_cps_cells", key, nk * nc / (t_end - t_first_cell))
            finally:
                for k in ks:
                    k.kill()
            settle(0.5)
    log("%d kernels x %d cells: %d rounds" % (nk, nc, args.rounds_many))


# ------------------------------------------------------------------ report

def header(cbspec, ipyspec):
    lines = []
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = "%.1f GiB" % (int(f.readline().split()[1]) / 1024.0 / 1024.0)
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    import jupyter_client
    import ipykernel
    vers = []
    for mod in ("numpy", "pandas", "matplotlib"):
        try:
            vers.append("%s %s" % (mod, __import__(mod).__version__))
        except Exception:
            vers.append("%s missing" % mod)
    lines.append("date        %s" % datetime.datetime.now().astimezone().isoformat(timespec="seconds"))
    lines.append("machine     %s, %d CPUs, %s RAM; Linux %s" % (cpu, os.cpu_count(), mem, platform.release()))
    lines.append("load avg    %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    lines.append("python      %s (%s); jupyter_client %s, ipykernel %s, pyzmq %s, libzmq %s" % (
        platform.python_version(), sys.executable, jupyter_client.__version__, ipykernel.__version__,
        zmq.__version__, zmq.zmq_version()))
    lines.append("libraries   %s" % ", ".join(vers))
    lines.append("cellblock   %s (git %s)" % (" ".join(cbspec.argv).replace(REPO, "<repo>"), commit))
    lines.append("ipykernel   %s" % " ".join(ipyspec.argv))
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("OPENBLAS", "OMP_", "MKL_", "PYTHON", "JUPYTER", "MPL"))
           or k in ("LANG", "LC_ALL")}
    lines.append("env         %s" % (" ".join("%s=%s" % kv for kv in sorted(env.items())).replace(REPO, "<repo>")
                                    or "(none set)"))
    if "OPENBLAS_CORETYPE" not in os.environ:
        lines.append("            (OPENBLAS_CORETYPE unset: numpy import cost depends on it; "
                     "both kernels inherit the same env)")
    return lines


ROWS = [
    # label, fig, unit, higher_is_better
    ("launch → kernel_info_reply", "launch_info", "s", False),
    ("launch → first `1+1` result", "launch_first", "s", False),
    ("`pass` send → reply", "rt_pass_reply", "s", False),
    ("`pass` send → idle", "rt_pass_idle", "s", False),
    ("`x = 1` send → reply", "rt_x1_reply", "s", False),
    ("`x = 1` send → idle", "rt_x1_idle", "s", False),
    ("stdout 20 MiB, 1 KiB lines: throughput", "stdout_mibs", "MiB/s", True),
    ("stdout 20 MiB: send → idle", "stdout_time", "s", False),
    ("stdout 20 MiB: send → first output", "stdout_first_byte", "s", False),
    ("stdout 20 MiB: CPU of the kernel's process tree", "stdout_cpu_tree", "s", False),
    ("stdout 20 MiB: CPU of this client (parse + check)", "stdout_cpu_client", "s", False),
    ("mixed stdout/stderr cell (%d lines)" % MIXED_N, "mixed_time", "s", False),
    ("matplotlib plot cell", "plot", "s", False),
    ("DataFrame cell", "df", "s", False),
    ("PSS of the tree, idle", "pss_idle", "KiB", False),
    ("PSS after `%s`" % HEAVY, "pss_heavy", "KiB", False),
    ("first cell `%s` at 3 s" % HEAVY, "heavy", "s", False),
    ("interrupt → KeyboardInterrupt reply", "interrupt_reply", "s", False),
    ("interrupt → idle", "interrupt_idle", "s", False),
    ("killed runner: kill cell → error reply", "killed_reply", "s", False),
    ("killed runner: error → next `1+1` result", "killed_next", "s", False),
    ("graceful shutdown_request → kernel process exit", "shutdown_exit", "s", False),
    ("restart_kernel() call", "restart_call", "s", False),
    ("restart_kernel() → first result", "restart_first", "s", False),
    ("restart_kernel(now=True) call", "restart_call_now", "s", False),
    ("restart_kernel(now=True) → first result", "restart_first_now", "s", False),
    ("8 kernels × 100 cells: total (launch incl.)", "many_total", "s", False),
    ("8 kernels × 100 cells: cells/s (launch incl.)", "many_cps", "/s", True),
    ("8 kernels × 100 cells: cells/s (cell phase)", "many_cps_cells", "/s", True),
]


def stat3(xs, unit):
    return "%s / %s / %s" % (fmt_num(median(xs), unit), fmt_num(pct(xs, 90), unit),
                             fmt_num(pct(xs, 99), unit))


def table(baseline=False):
    out = []
    out.append("| figure | n | cellblock med / p90 / p99 | ipykernel med / p90 / p99 "
               "| cb/ipy (median) | %s | cb/ipy p99 |"
               % ("cb/baseline" if baseline else "A/A cb/cb'"))
    out.append("|---|---|---|---|---|---|---|")
    for label, fig, unit, _ in ROWS:
        # heavy-import figures: cellblock runs with --preload (as the target says)
        a, a2 = ("cbp", "cbp2") if fig == "heavy" else ("cb", "cb2")
        if fig.startswith("pss"):
            a2 = "cbp"   # no A/A run of its own: show the --preload tree next to it
        xs, ys = RES.get(fig, a), RES.get(fig, "ipy")
        zs = RES.get(fig, a2)
        if not xs and not ys:
            continue
        lab = label + (" (cellblock --preload)" if a == "cbp" else "")
        aa = fmt_ratio(ratio(median(xs), median(zs)))
        if fig.startswith("pss"):
            aa = "(--preload: %s)" % fmt_num(median(zs), unit) if zs else "—"
        out.append("| %s | %d | %s | %s | %s | %s | %s |" % (
            lab, len(xs), stat3(xs, unit), stat3(ys, unit) if ys else "n/a",
            fmt_ratio(ratio(median(xs), median(ys))), aa,
            fmt_ratio(ratio(pct(xs, 99), pct(ys, 99)))))
    return out


def floor_table():
    out = ["| floor (figure 1) | n | median / p90 / p99 |", "|---|---|---|"]
    for label, fig in (("`python3 -I -S -c pass`", "floor_py"),
                       ("`unshare -Urpnmiu --fork true`", "floor_unshare"),
                       ("cellblock-launcher, full sandbox, program /bin/true", "floor_ns"),
                       ("cellblock-launcher, full sandbox, `python3 -I -u empty.py`", "floor_sandbox_py")):
        xs = RES.get(fig, "floor")
        if xs:
            out.append("| %s | %d | %s |" % (label, len(xs), stat3(xs, "s")))
    f = floor_value()
    if f:
        out.append("| **floor** = python -I -S + launcher(/bin/true) | | %s |" % fmt_num(f, "s"))
    return out


def floor_value():
    a, b = RES.get("floor_py", "floor"), RES.get("floor_ns", "floor")
    if not a or not b:
        b = RES.get("floor_unshare", "floor")
    if not a or not b:
        return None
    return median(a) + median(b)


def check_table():
    out = ["| stream check (all rounds) | cellblock | ipykernel | cellblock' |", "|---|---|---|---|"]
    for label, fig in (("20 MiB stdout: bytes lost", "stdout_lost"),
                       ("20 MiB stdout: lines reordered", "stdout_reordered"),
                       ("20 MiB stdout: bytes corrupted/duplicated", "stdout_corrupt"),
                       ("20 MiB stdout: stream msgs after idle", "stdout_late"),
                       ("20 MiB stdout: stream messages (median)", "stdout_msgs"),
                       ("mixed: bytes lost", "mixed_lost"),
                       ("mixed: lines reordered within a stream", "mixed_reordered"),
                       ("mixed: bytes corrupted/duplicated", "mixed_corrupt"),
                       ("mixed: stream msgs after idle", "mixed_late"),
                       ("mixed: lines behind a later line of the other stream (info)", "mixed_interleave"),
                       ("plot cell had image/png (rounds)", "plot_png"),
                       ("DataFrame cell had text/html (rounds)", "df_html"),
                       ("processes in the idle tree", "procs_idle")):
        cells = []
        for who in ("cb", "ipy", "cb2"):
            xs = RES.get(fig, who)
            if not xs:
                cells.append("—")
            elif fig in ("stdout_msgs", "procs_idle"):
                cells.append("%g" % median(xs))
            else:
                cells.append("%g" % sum(xs))
        if any(c != "—" for c in cells):
            out.append("| %s | %s |" % (label, " | ".join(cells)))
    return out


def overhead_table():
    out = ["| client overhead (raw pyzmq + Session) | n | median / p90 / p99 |", "|---|---|---|"]
    for label, fig in (("signed execute_request echo via C ROUTER proxy, loopback "
                        "(sign+send+recv+verify+parse)", "overhead_echo"),
                       ("Session.serialize (sign) of one execute_request", "overhead_sign"),
                       ("Session.deserialize (verify+parse) of one", "overhead_verify")):
        xs = RES.get(fig, "client")
        if xs:
            out.append("| %s | %d | %s |" % (label, len(xs), stat3(xs, "s")))
    return out


def targets():
    out = ["| figure | target | measured (medians) | |", "|---|---|---|---|"]

    def row(name, target, measured, ok):
        out.append("| %s | %s | %s | %s |" % (name, target, measured,
                                              "—" if ok is None else ("PASS" if ok else "MISS")))

    def r(fig, a="cb", q=50):
        f = median if q == 50 else (lambda xs: pct(xs, q))
        return ratio(f(RES.get(fig, a)), f(RES.get(fig, "ipy")))

    x = r("launch_info")
    row("launch → kernel_info_reply", "≤ 1/20 of ipykernel", "ratio %s" % fmt_ratio(x),
        None if x is None else x <= 1 / 20)
    x = r("launch_first")
    f = floor_value()
    cbm = RES.med("launch_first", "cb")
    ok = None if x is None else (x <= 1 / 10 and (f is not None and cbm <= 2 * f))
    row("launch → first result", "≤ 1/10 of ipykernel, ≤ 2× floor",
        "ratio %s; %s vs floor %s (%s×)" % (fmt_ratio(x), fmt_num(cbm, "s"), fmt_num(f, "s"),
                                           fmt_ratio(ratio(cbm, f))), ok)
    xr, xr99 = r("rt_pass_reply"), r("rt_pass_reply", q=99)
    xi, xi99 = r("rt_pass_idle"), r("rt_pass_idle", q=99)
    ok = None if xr is None else all(v is not None and v <= 1 / 3 for v in (xr, xr99, xi, xi99))
    row("`pass` round trip", "≤ 1/3 of ipykernel, p99 too",
        "reply %s (p99 %s); idle %s (p99 %s)" % tuple(fmt_ratio(v) for v in (xr, xr99, xi, xi99)), ok)
    x = r("stdout_mibs")
    lost = sum(RES.get("stdout_lost", "cb") + RES.get("mixed_lost", "cb") +
               RES.get("stdout_corrupt", "cb") + RES.get("mixed_corrupt", "cb") +
               RES.get("stdout_reordered", "cb") + RES.get("mixed_reordered", "cb"))
    row("stdout throughput", "≥ 3× ipykernel, zero bytes lost",
        "ratio %s; %d bytes lost/corrupt/reordered" % (fmt_ratio(x), lost),
        None if x is None else (x >= 3 and lost == 0))
    x = r("pss_idle")
    row("idle PSS of the tree", "≤ 1/3 of ipykernel", "ratio %s" % fmt_ratio(x),
        None if x is None else x <= 1 / 3)
    x = r("heavy", "cbp")
    x0 = r("heavy", "cb")
    row("first heavy-import cell after 3 s", "≤ 1/5 of ipykernel, preload on",
        "ratio %s (without --preload %s)" % (fmt_ratio(x), fmt_ratio(x0)),
        None if x is None else x <= 1 / 5)
    x = r("interrupt_reply")
    row("interrupt", "no slower than ipykernel", "ratio %s" % fmt_ratio(x),
        None if x is None else x <= 1.0)
    x = r("restart_first")
    row("restart → first result", "≤ 1/10 of ipykernel", "ratio %s" % fmt_ratio(x),
        None if x is None else x <= 1 / 10)
    x = r("many_cps")
    row("8 kernels × 100 cells", "≥ 2× ipykernel's cells/s", "ratio %s" % fmt_ratio(x),
        None if x is None else x >= 2)
    return out


def report(hdr, elapsed, baseline=None):
    out = ["```"] + hdr + ["elapsed     %.0f s; load avg at the end %s" % (
        elapsed, " ".join("%.2f" % x for x in os.getloadavg())), "```", ""]
    out += ["Ratios are cellblock/ipykernel of the medians (< 1 is faster or smaller for times "
            "and memory, > 1 is better for throughput and cells/s). A/A = cellblock/cellblock' "
            "(same build, separate kernels, same rounds): how far from 1.00 noise alone goes.", ""]
    if baseline:
        out += ["cb/baseline = this build / the kernel of %s (`--baseline`), same rounds."
                % baseline, ""]
    out += table(bool(baseline)) + [""] + floor_table() + [""] + check_table() + [""] + overhead_table()
    out += ["", "### Targets (issue 5)", ""] + targets()
    if RES.notes:
        out += ["", "Notes:", ""] + ["- " + n for n in RES.notes]
    return out


# ------------------------------------------------------------------ main

FIGS = ["overhead", "launch", "roundtrip", "streams", "rich", "heavy", "interrupt", "killed",
        "restart", "many"]


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds everywhere (about 3-4 minutes)")
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(FIGS))
    ap.add_argument("--skip", default="", help="comma-separated figures to skip")
    ap.add_argument("--write", metavar="FILE", help="also write the report (markdown) to FILE")
    ap.add_argument("--baseline", metavar="BUILD",
                    help="run another build's kernel as cellblock' (the A/A column becomes "
                         "this build / that one: before and after in one run)")
    ap.add_argument("--rounds-launch", type=int)
    ap.add_argument("--cells", type=int, help="round-trip cells of each kind per kernel")
    ap.add_argument("--rounds-stream", type=int)
    ap.add_argument("--rounds-rich", type=int)
    ap.add_argument("--rounds-heavy", type=int)
    ap.add_argument("--rounds-interrupt", type=int)
    ap.add_argument("--rounds-killed", type=int)
    ap.add_argument("--rounds-restart", type=int)
    ap.add_argument("--rounds-many", type=int)
    ap.add_argument("--many-kernels", type=int, default=8)
    ap.add_argument("--many-cells", type=int, default=100)
    a = ap.parse_args()
    full = dict(rounds_launch=10, cells=300, rounds_stream=3, rounds_rich=15, rounds_heavy=3,
                rounds_interrupt=8, rounds_killed=8, rounds_restart=5, rounds_many=2)
    quick = dict(rounds_launch=4, cells=100, rounds_stream=1, rounds_rich=6, rounds_heavy=2,
                 rounds_interrupt=4, rounds_killed=4, rounds_restart=2, rounds_many=1)
    for k, v in (quick if a.quick else full).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    a.figs = [f for f in (a.only.split(",") if a.only else FIGS) if f and f not in a.skip.split(",")]
    bad = [f for f in a.figs if f not in FIGS]
    if bad:
        ap.error("unknown figure(s): %s" % ",".join(bad))
    return a


def main():
    args = parse()
    t_start = now()
    C, cbspec, ipyspec = contenders(args.baseline)
    hdr = header(cbspec, ipyspec)
    for line in hdr:
        log(line)
    long_lived = {}
    failed = []
    for fig in args.figs:
        log("figure: %s" % fig)
        t0 = now()
        try:
            if fig == "overhead":
                fig_overhead(args)
            elif fig == "launch":
                fig_launch(args, C)
            elif fig == "heavy":
                fig_heavy(args, C)
            elif fig == "restart":
                fig_restart(args, C)
            elif fig == "many":
                fig_many(args, C)
            else:
                if not long_lived:
                    for key in ("cb", "ipy", "cb2"):
                        long_lived[key] = C[key].kernel().launch()
                    for k in long_lived.values():
                        k.wait_ready(timeout=60)
                        k.run("1+1", result=True)
                {"roundtrip": fig_roundtrip, "streams": fig_streams, "rich": fig_rich,
                 "interrupt": fig_interrupt, "killed": fig_killed}[fig](args, long_lived)
        except Exception as e:
            traceback.print_exc()
            failed.append(fig)
            RES.note("HARNESS ERROR in figure '%s': %s: %s (figure partial or missing)"
                     % (fig, type(e).__name__, e))
            for k in long_lived.values():
                k.shutdown(graceful=False)
            long_lived = {}
            kclient.cleanup_all()
        log("  %.1f s" % (now() - t0))
    for k in long_lived.values():
        k.shutdown(graceful=False)
    kclient.cleanup_all()
    rep = report(hdr, now() - t_start, args.baseline)
    print("\n".join(rep), flush=True)
    if args.write:
        if not os.path.exists(args.write):
            with open(args.write, "w") as f:
                f.write("# cellblock vs ipykernel: benchmark results\n\n")
        write_section(args.write, "main", "\n".join(rep))
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
