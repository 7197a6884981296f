#!/usr/bin/env python3
"""An agent-style loop on a cellblock sandbox, with no model: the "model" is
a scripted list of cells.  One of them fails (a wrong column name), and the
"agent" reads the error and sends the corrected cell, as an LLM agent would.
Outputs, errors and artifacts (a chart PNG and a CSV the code wrote) come
back; the artifacts are saved to a directory.

    make
    /usr/bin/python3 examples/agent_loop.py [--out DIR]

The only cellblock-specific lines are the import and the Sandbox(...) call;
the rest is the E2B code-interpreter API (run_code, results, logs, error).
"""

import argparse
import hashlib
import os
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    from cellblock import Sandbox
except ImportError:          # running from a source tree: use client/ next to examples/
    sys.path.insert(0, os.path.join(HERE, "..", "client"))
    from cellblock import Sandbox

# A small CSV the agent uploads into the sandbox (files.write: no host path
# is shared with the sandbox).
SALES_CSV = "month,region,units,price\n" + "".join(
    "%d,%s,%d,%.2f\n" % (m, r, 10 + (m * 7 + i * 13) % 23, 9.5 + i)
    for m in range(1, 13) for i, r in enumerate(["north", "south", "east", "west"]))

# The scripted "model": each step is (what the agent says it does, the cell).
STEPS = [
    ("Look at the uploaded data.",
     """
     import pandas as pd
     df = pd.read_csv("sales.csv")
     print(df.shape[0], "rows;", "columns:", ", ".join(df.columns))
     df.head(3)
     """),
    ("Revenue per region.",
     """
     df["revenue"] = df["units"] * df["price"]
     by_region = df.groupby("Region")["revenue"].sum()   # wrong column name
     by_region
     """),
    ("Plot monthly revenue per region; save the chart and a summary CSV.",
     """
     import matplotlib
     matplotlib.use("Agg")
     import matplotlib.pyplot as plt
     monthly = df.pivot_table(index="month", columns="region", values="revenue", aggfunc="sum")
     ax = monthly.plot(figsize=(6, 3.5), marker="o", title="Monthly revenue by region")
     ax.set_ylabel("revenue")
     plt.tight_layout()
     plt.savefig("chart.png", dpi=80)
     plt.close()
     by_region.sort_values(ascending=False).to_csv("summary.csv")
     print("best region:", by_region.idxmax())
     """),
    ("Check what the sandbox wrote.",
     """
     import hashlib, os
     names = sorted(n for n in os.listdir(".") if not n.startswith("."))
     {n: hashlib.sha256(open(n, "rb").read()).hexdigest()[:16] for n in names}
     """),
]

# What the "model" answers when it sees an error: here, a fixed correction.
CORRECTIONS = {
    "KeyError": """
     df["revenue"] = df["units"] * df["price"]
     by_region = df.groupby("region")["revenue"].sum().round(2)   # the column is 'region'
     by_region
     """,
}


def show(label, text, width=100):
    lines = text.rstrip("\n").splitlines() or [""]
    for i, line in enumerate(lines[:20]):
        print("%-8s %s" % (label if i == 0 else "", line[:width]))
    if len(lines) > 20:
        print("%-8s ... (%d more lines)" % ("", len(lines) - 20))


def run_step(sb, code, out_dir, saved):
    code = textwrap.dedent(code).strip("\n")
    ex = sb.run_code(code, timeout=60)
    n = ex.execution_count
    show("In [%s]:" % n, code)
    if ex.logs.stdout:
        show("stdout:", "".join(ex.logs.stdout))
    if ex.logs.stderr:
        show("stderr:", "".join(ex.logs.stderr))
    for r in ex.results:
        if r.artifact:
            # exact bytes, under the file's name; out_dir is this run's own, so a file a
            # later step changes replaces its earlier copy (without overwrite=True an
            # existing name is refused)
            path = r.save(out_dir, overwrite=True)
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            ok = "sha256 ok" if digest == r.artifact["sha256"] else "SHA256 MISMATCH"
            show("file:", "%s (%d bytes, %s) [%s] saved as %s" % (r.file_name, r.artifact["size"],
                                                                  r.mime, ok, path), width=400)
            saved.append(path)
        elif r.is_main_result:
            show("Out[%s]:" % n, r.text or "")
            if r.html:
                show("", "(+ text/html, %d chars)" % len(r.html))
        else:
            show("display:", "%s %s" % (", ".join(r.formats()), r.text or ""))
    if ex.error:
        show("error:", "%s: %s" % (ex.error.name, ex.error.value))
        frames = [l for l in ex.error.traceback.splitlines() if l.strip().startswith('File "<cell')]
        if frames:
            show("", "(in the cell: %s)" % frames[-1].strip().split("\n")[0])
    print()
    return ex


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="directory for the artifacts (default: a new temporary one)")
    args = ap.parse_args()
    out_dir = args.out or tempfile.mkdtemp(prefix="cellblock-agent-")
    os.makedirs(out_dir, exist_ok=True)
    saved = []
    errors = corrected = 0

    with Sandbox(memory=1024, timeout=120, network=False) as sb:
        banner = sb.kernel_info.get("banner", "").splitlines()
        print("== sandbox started in %.2f s" % sb.start_seconds)
        for line in banner:
            if line.startswith("Sandbox:"):
                show("", textwrap.shorten(line, 100))
        sb.files.write("sales.csv", SALES_CSV)
        print("== uploaded sales.csv (%d bytes) with files.write\n" % len(SALES_CSV))

        for i, (intent, code) in enumerate(STEPS, 1):
            print("== step %d: %s" % (i, intent))
            ex = run_step(sb, code, out_dir, saved)
            if ex.error:
                errors += 1
                fix = CORRECTIONS.get(ex.error.name)
                if fix is None:
                    print("== agent: no correction for %s; stopping" % ex.error.name)
                    return 1
                print("== agent: %s in step %d; sending a corrected cell" % (ex.error.name, i))
                ex = run_step(sb, fix, out_dir, saved)
                if ex.error:
                    print("== agent: the correction failed too; stopping")
                    return 1
                corrected += 1

        data = sb.files.read("summary.csv")
        print("== read back summary.csv with files.read: %d bytes, first line %r"
              % (len(data), data.decode().splitlines()[0]))

    print("== done: %d steps, %d error(s), %d corrected, %d artifact(s) saved in %s"
          % (len(STEPS), errors, corrected, len(saved), out_dir))
    for p in saved:
        print("   " + os.path.relpath(p, out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
