#!/usr/bin/python3
"""Launch -> first result in the test guest (cgroup v2, Debian's 6.1 kernel,
QEMU), cellblock with and without clone3(CLONE_INTO_CGROUP), beside the
guest's own ipykernel (issue 19).

    make bench-guest                 # boots the guest, writes the guest section
    /usr/bin/python3 bench/guest.py [--rounds N] [--write bench/RESULTS.md]

Three contenders take turns in rotating order, in one guest boot, as root:
  cellblock      the built kernelspec: the sandbox is cloned into its cgroup
  cellblock -a   the same with --no-clone-into-cgroup: clone, then the
                 launcher writes the sandbox's pid to cgroup.procs
  ipykernel      the stock python3 kernelspec in the same guest
Figures are medians; the ratios matter (the guest is emulated by TCG here,
so absolute times are many times the host's).  The kernel's own log line
"runner ready after N ms" (launcher spawn -> runner hello) is the part the
cgroup placement acts on, and is reported too.

A benchmark, not a test: it never asserts on timings.  It kills every
process it started, by pid (inside the guest), and the guest itself.
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
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "guest"))

from stats import median, ratio, fmt_num, fmt_ratio, write_section  # noqa: E402

KEYS = ("cb", "cba", "ipy")
LABELS = {"cb": "cellblock (clone3 into the cgroup)",
          "cba": "cellblock --no-clone-into-cgroup",
          "ipy": "ipykernel"}
READY_RE = re.compile(rb"runner ready after (\d+) ms")
ISOLATION_RE = re.compile(rb"isolation: ([^\n]*)")


def in_guest(rounds, out):
    """Runs inside the guest: the rounds, then the raw figures as JSON."""
    import kclient
    cb, ipy = kclient.built_kernelspecs()
    argv = {"cb": list(cb.argv) + ["--log-level", "info"],
            "cba": list(cb.argv) + ["--log-level", "info", "--no-clone-into-cgroup"],
            "ipy": list(ipy.argv)}
    mode = {"cb": cb.interrupt_mode or "signal", "cba": cb.interrupt_mode or "signal",
            "ipy": ipy.interrupt_mode or "signal"}
    res = {k: {"first": [], "info": [], "ready_ms": []} for k in KEYS}
    banner = ""
    for r in range(rounds):
        for key in KEYS[r % 3:] + KEYS[:r % 3]:
            k = kclient.Kernel(LABELS[key], argv[key], mode[key]).launch()
            try:
                info = k.wait_ready(timeout=300)
                req = k.execute("1+1")
                k.wait(req, timeout=300, idle=True, result=False)
                t_first = max(t for t in (req.t_result, req.t_reply) if t) - k.t_launch
                res[key]["first"].append(t_first)
                res[key]["info"].append(info.t_reply - k.t_launch)
            finally:
                k.kill()
            if key != "ipy":
                with open(k.log_path, "rb") as f:
                    log = f.read()
                m = READY_RE.search(log)
                if m:
                    res[key]["ready_ms"].append(int(m.group(1)))
                m = ISOLATION_RE.search(log)
                if key == "cb" and m and not banner:
                    banner = m.group(1).decode(errors="replace")
            time.sleep(0.3)
        print("# round %d of %d" % (r + 1, rounds), file=sys.stderr, flush=True)
    kclient.cleanup_all()
    with open(out, "w") as f:
        json.dump({"res": res, "banner": banner, "uname": os.uname().release}, f)


def report(data, boot, accel, rounds):
    res = data["res"]
    med = {k: {f: median(v) if v else None for f, v in res[k].items()} for k in KEYS}
    buf = io.StringIO()
    w = buf.write
    w("## Launch in the test guest: cgroup v2, clone3(CLONE_INTO_CGROUP) on and off\n\n")
    w("`make bench-guest` (bench/guest.py), %s: guest kernel %s under QEMU `-accel %s`, "
      "2 vCPUs, booted in %.0f s; %d interleaved rounds, medians.  Emulated, so only the "
      "ratios carry over to real hardware.\n\n"
      % (time.strftime("%Y-%m-%d"), data["uname"], accel.split(",")[0], boot, rounds))
    w("| figure | %s |\n|---|%s\n" % (" | ".join(LABELS[k] for k in KEYS), "---|" * len(KEYS)))
    for f, name in (("first", "launch -> first `1+1` result"),
                    ("info", "launch -> kernel_info reply"),
                    ("ready_ms", "launcher spawn -> runner hello (kernel log)")):
        cells = []
        for k in KEYS:
            v = med[k][f]
            if v is None:
                cells.append("–")
            else:
                cells.append(fmt_num(v / 1e3 if f == "ready_ms" else v, "s"))
        w("| %s | %s |\n" % (name, " | ".join(cells)))
    w("\n")
    for f, name in (("first", "first result"), ("ready_ms", "runner hello")):
        a, b = med["cb"][f], med["cba"][f]
        if a and b:
            w("- %s: clone3 into the cgroup / attach after clone = %s\n"
              % (name, fmt_ratio(ratio(a, b))))
    if med["cb"]["first"] and med["ipy"]["first"]:
        w("- first result: cellblock / ipykernel = %s; cellblock --no-clone-into-cgroup / "
          "ipykernel = %s\n" % (fmt_ratio(ratio(med["cb"]["first"], med["ipy"]["first"])),
                                fmt_ratio(ratio(med["cba"]["first"], med["ipy"]["first"]))))
    w("\nThe sandbox's limits line in the guest: `%s`\n"
      % (re.search(r"cgroup v2 \([^)]*\)", data["banner"]) or [data["banner"][:160]])[0])
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--write", metavar="FILE", help="also put the report in FILE (its guest section)")
    ap.add_argument("--in-guest", metavar="OUT", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.in_guest:
        in_guest(a.rounds, a.in_guest)
        return 0
    import guestvm
    ok, why = guestvm.available()
    if not ok:
        print("bench/guest.py: cannot boot the test guest: %s" % why, file=sys.stderr)
        return 0
    env = {"CELLBLOCK_BUILD": os.path.abspath(guestvm.BUILD)}
    step = guestvm.Step(["/usr/bin/python3", os.path.abspath(__file__), "--rounds", str(a.rounds),
                         "--in-guest", "/mnt/cbout/bench.json"], env=env, cwd="/",
                        timeout=300 + 120 * a.rounds)
    res = guestvm.Guest().run([step])
    raw = res.files.get("bench.json")
    if not raw:
        print("bench/guest.py: the guest produced no figures (rc %s):\n%s\n%s"
              % (res.steps[0].rc, res.steps[0].output[-3000:], res.error), file=sys.stderr)
        return 1
    text = report(json.loads(raw), res.boot_seconds, res.accel, a.rounds)
    print(text)
    if a.write:
        write_section(a.write, "guest", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
