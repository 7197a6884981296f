"""Real work inside the full sandbox: the seccomp allowlist, Landlock and the
mount layout must not break what analysis code does every day.  Each cell
prints a result computed the hard way, and the test checks the value."""
import textwrap

import pytest

WORKLOADS = {
    "numpy": ("""
        import numpy as np
        a = np.arange(1, 10, dtype=float).reshape(3, 3) + np.eye(3)
        print(round(float(np.linalg.det(a)), 6), int((a @ a).sum()))
    """, "-2.0 822"),
    "pandas": ("""
        import pandas as pd
        df = pd.DataFrame({"k": list("abab"), "v": [1, 2, 3, 4]})
        print(df.groupby("k").v.sum().to_dict())
    """, "{'a': 4, 'b': 6}"),
    "matplotlib": ("""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig = plt.figure(); plt.plot([1, 2, 3]); fig.savefig("w.png"); plt.close(fig)
        print(open("w.png", "rb").read(8) == b"\\x89PNG\\r\\n\\x1a\\n")
    """, "True"),
    "sqlite3": ("""
        import sqlite3
        for target in (":memory:", "w.db"):
            db = sqlite3.connect(target)
            db.execute("create table t (x integer)")
            db.executemany("insert into t values (?)", [(i,) for i in range(100)])
            db.commit()
            print(db.execute("select sum(x) from t").fetchone()[0], end=" ")
            db.close()
        print()
    """, "4950 4950"),
    "threading": ("""
        import threading
        total = []
        lock = threading.Lock()
        def work(n):
            with lock:
                total.append(sum(range(n)))
        ts = [threading.Thread(target=work, args=(1000,)) for _ in range(16)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(len(total), sum(total))
    """, "16 7992000"),
    "multiprocessing": ("""
        import math, multiprocessing as mp
        def sq(x):
            return x * x
        out = []
        with mp.get_context("fork").Pool(2) as pool:      # a function of the cell: fork only
            out.append(sum(pool.map(sq, range(10))))
        with mp.get_context("spawn").Pool(2) as pool:     # spawn re-imports: an importable one
            out.append(sum(pool.map(math.factorial, range(6))))
        q = mp.get_context("fork").Queue()
        p = mp.get_context("fork").Process(target=q.put, args=("via-queue",))
        p.start(); p.join()
        print(out, q.get(timeout=10), mp.Lock().acquire(timeout=1))
    """, "[285, 154] via-queue True"),
    "subprocess": ("""
        import subprocess
        r = subprocess.run("printf 'b\\\\na\\\\n' | sort | tr -d '\\\\n'", shell=True,
                           capture_output=True, text=True, check=True)
        print(r.stdout, subprocess.run(["true"]).returncode)
    """, "ab 0"),
    "tempfile": ("""
        import os, tempfile
        with tempfile.NamedTemporaryFile("w+", delete=True) as f:
            f.write("data"); f.flush(); f.seek(0); got = f.read()
        d = tempfile.mkdtemp()
        print(got, os.path.isdir(d), tempfile.gettempdir())
    """, "data True /tmp"),
    "ssl": ("""
        import ssl
        ctx = ssl.create_default_context()
        print(ctx.verify_mode == ssl.CERT_REQUIRED, len(ctx.get_ca_certs()) > 10)
    """, "True True"),
    "asyncio-loopback": ("""
        import asyncio
        async def main():
            async def handle(r, w):
                w.write((await r.readline()).upper()); await w.drain(); w.close()
            srv = await asyncio.start_server(handle, "127.0.0.1", 0)
            port = srv.sockets[0].getsockname()[1]
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"ping\\n"); await w.drain()
            line = await r.readline()
            srv.close(); await srv.wait_closed()
            return line.decode().strip()
        print(asyncio.run(main()))
    """, "PING"),
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_runs_in_the_sandbox(shared_kernel, name):
    code, want = WORKLOADS[name]
    r = shared_kernel.execute(textwrap.dedent(code), timeout=120)
    assert r.status == "ok", r.error_text()
    assert r.stream("stdout").strip() == want, (r.stream("stdout"), r.stream("stderr"))
