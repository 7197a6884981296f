"""iopub with subscribers that stop reading (issue 18, finding 6).

Subscribing to iopub needs no key: anyone who reaches the port can connect a
SUB socket and never read.  Such a subscriber must lose only its own
messages: a client that reads gets every byte, and the kernel's memory stays
bounded.  The stuck subscribers here live in a process of their own that the
test stops with SIGSTOP once they are subscribed, so their ZMQ I/O threads
stop too and the kernel's queue to them fills, as with a hung frontend.

Runs against ipykernel as well (CB_TEST_KERNEL=python3): a PUB socket drops
per subscriber there, and the reading client gets everything (its memory is
not bounded the same way: the RSS check is cellblock's).
"""

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from .helpers import collect_iopub, get_reply, is_cellblock

MIB = 1024 * 1024
STUCK = 3                 # subscribers that never read
LINES = 60 * 1024         # 60 MiB in 1 KiB numbered lines
RSS_GROWTH_MAX = 96 * MIB  # the kernel process's peak RSS above its idle RSS

# Connects STUCK SUB sockets, waits until each has received a message (so the
# kernel has their subscriptions), says so, then sleeps until it is killed.
_SUBSCRIBERS = r"""
import sys, zmq
ctx = zmq.Context()
subs = []
for _ in range(%d):
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.SUBSCRIBE, b"")
    s.connect(sys.argv[1])
    subs.append(s)
print("connected", flush=True)
for s in subs:
    if not s.poll(30000):
        sys.exit("no message reached a subscriber")
    s.recv_multipart()
print("subscribed", flush=True)
sys.stdin.read()
""" % STUCK

CELL = r"""
import sys
w = sys.stdout.write
for i in range(%d):
    w("%%08d" %% i + "x" * 1015 + "\n")
""" % LINES


def _expected():
    return "".join("%08d" % i + "x" * 1015 + "\n" for i in range(LINES))


def _status_bytes(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak(pid):
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def _stuck_subscribers(kernel, url):
    """The subscribers' process, subscribed and then stopped (the caller kills it)."""
    subs = subprocess.Popen([sys.executable, "-c", _SUBSCRIBERS, url],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert subs.stdout.readline().strip() == "connected"
        # iopub traffic until every subscriber has seen a message
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            kernel.kc.kernel_info()
            if _line_ready(subs.stdout, 0.2):
                break
        assert subs.stdout.readline().strip() == "subscribed"
        os.kill(subs.pid, signal.SIGSTOP)
    except BaseException:
        subs.kill()
        subs.wait()
        raise
    return subs


@contextlib.contextmanager
def _beside_stuck_subscribers(kernel):
    """STUCK stopped subscribers on the kernel's iopub for the block; yields
    the kernel's RSS before them (its peak is reset)."""
    info = kernel.connection_info()
    url = "%s://%s:%d" % (info["transport"], info["ip"], info["iopub_port"])
    kernel.execute("1")
    base = _status_bytes(kernel.pid, "VmRSS")
    _reset_peak(kernel.pid)
    subs = _stuck_subscribers(kernel, url)
    try:
        yield base
    finally:
        subs.kill()
        subs.wait()


def _run_read(kernel, cell, base):
    """Runs cell, reading every iopub message: (messages, reply, seconds, the
    kernel's peak RSS growth over base)."""
    t0 = time.monotonic()
    msg_id = kernel.kc.execute(cell)
    msgs = collect_iopub(kernel.kc, msg_id, timeout=240)
    reply = get_reply(kernel.kc, msg_id, timeout=30)
    return msgs, reply, time.monotonic() - t0, _status_bytes(kernel.pid, "VmHWM") - base


@pytest.mark.timeout(300)
def test_stuck_subscribers_cost_only_themselves(kernel):
    with _beside_stuck_subscribers(kernel) as base:
        msgs, reply, dt, peak = _run_read(kernel, CELL, base)
        got = "".join(m["content"]["text"] for m in msgs
                      if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
        print("\n%d stuck subscribers: %.1f of %.1f MiB in %.1f s, kernel peak RSS +%.1f MiB"
              % (STUCK, len(got) / MIB, LINES * 1024 / MIB, dt, peak / MIB))
        assert reply["content"]["status"] == "ok", reply["content"]
        exp = _expected()
        assert len(got) == len(exp), "the reading client got %d of %d bytes" % (len(got), len(exp))
        assert got == exp, "the reading client's stdout differs from what the cell printed"
        # ipykernel keeps up to 1000 messages for each stuck subscriber (its
        # peak here: +180 MiB); cellblock bounds what it holds (docs/SECURITY.md)
        if is_cellblock():
            assert peak < RSS_GROWTH_MAX, "kernel peak RSS grew by %.1f MiB" % (peak / MIB)
        # and the kernel still serves
        assert kernel.execute("print('after')").stream() == "after\n"


BIG = 9                   # displays of BIG_MIB each (54 MiB: within --max-output)
BIG_MIB = 6
BIG_CELL = r"""
from IPython.display import display
for i in range(%d):
    display({"text/plain": "%%04d" %% i + "y" * (%d * 1024 * 1024 - 4)}, raw=True)
""" % (BIG, BIG_MIB)


@pytest.mark.timeout(300)
def test_stuck_subscribers_and_large_displays_hold_the_memory_bound(kernel):
    """Displays of 6 MiB, of which each stopped subscriber's queue can hold
    64: the queues share the messages, the kernel's memory stays within its
    cap, and the reading client gets every display."""
    with _beside_stuck_subscribers(kernel) as base:
        msgs, reply, dt, peak = _run_read(kernel, BIG_CELL, base)
        got = [m["content"]["data"]["text/plain"] for m in msgs if m["msg_type"] == "display_data"]
        print("\n%d stuck subscribers: %d of %d displays of %d MiB in %.1f s, kernel peak RSS "
              "+%.1f MiB" % (STUCK, len(got), BIG, BIG_MIB, dt, peak / MIB))
        assert reply["content"]["status"] == "ok", reply["content"]
        assert [g[:4] for g in got] == ["%04d" % i for i in range(BIG)]
        assert all(len(g) == BIG_MIB * MIB for g in got)
        if is_cellblock():
            assert peak < RSS_GROWTH_MAX, "kernel peak RSS grew by %.1f MiB" % (peak / MIB)


def _line_ready(f, timeout):
    return bool(select.select([f], [], [], timeout)[0])
