"""The runner's comms frame by frame (issue 12), in both shells: the
frontend's comm requests (started, the handlers' frames, comm_done), comm
frames the sandbox sends with base64 buffers, the request's header as
kernel.get_parent(), and the ack hand-over between a background thread's
frame and the main thread's requests."""

import base64
import json
import time

import pytest

from .rclient import ACKED


def comm_request(runner, kind, timeout=30, **members):
    """Send a frontend's comm message as the kernel does; -> the frames up
    to comm_done (started excluded), acking the ordered ones."""
    runner.seq += 1
    runner.send(dict(members, type=kind, seq=runner.seq))
    frames = []
    while True:
        f = runner.recv(timeout)
        if f["type"] == "comm_done":
            assert runner.seqs[-1] == runner.seq
            return frames
        frames.append(f)


def raw_frame(runner, timeout=10):
    """The next frame, read without acking it (the test plays a slow kernel)."""
    deadline = time.monotonic() + timeout
    while not runner._pump(max(0.0, deadline - time.monotonic())):
        assert time.monotonic() < deadline, "no frame; stderr=%r" % runner.err
    n = int.from_bytes(runner._read_exact(4), "big")
    return json.loads(runner._read_exact(n))


def b64(data):
    return base64.b64encode(data).decode()


TARGET = r'''
from ipykernel.comm import Comm
got = []
def target(comm, msg):
    got.append(msg)
    print('open', msg['content']['data'], [bytes(b) for b in msg['buffers']])
    comm.send({'echo': msg['content']['data']}, metadata={'m': 1},
              buffers=[bytes(b)[::-1] for b in msg['buffers']])
    comm.on_msg(lambda m: comm.send({'again': m['content']['data']},
                                    buffers=[bytes(b) * 2 for b in m['buffers']]))
    comm.on_close(lambda m: print('closed', m['content']['data']))
import sys
kernel = sys.modules['_cellblock_cb_comm'].kernel()
kernel.comm_manager.register_target('t', target)
'''


def test_a_frontend_comm_round_trip(runner):
    frames, done, out, err = runner.execute(TARGET)
    assert done["status"] == "ok", err
    header = {"msg_id": "abc-123", "msg_type": "comm_open", "session": "s", "username": "u",
              "date": "2024-01-01T00:00:00Z", "version": "5.3"}
    n_started, n_ev = len(runner.started), len(runner.events)
    frames = comm_request(runner, "comm_open", comm_id="c1", target_name="t",
                          data={"x": 1}, metadata={"md": True}, buffers=[b64(b"\x00\x01xyz")],
                          header=header)
    assert len(runner.started) == n_started + 1 and runner.started[-1] == runner.seq
    assert frames == [{"type": "comm_msg", "comm_id": "c1", "data": {"echo": {"x": 1}},
                       "metadata": {"m": 1}, "buffers": [b64(b"zyx\x01\x00")]}]
    # the handler's output comes before its frame (flushed first)
    ev = [(e[0], e[1] if e[0] != "frame" else e[1]["type"]) for e in runner.events[n_ev:]]
    merged = []                                  # -u: a print may come in pieces
    for e in ev:
        if e[1] == "started":
            continue
        if merged and e[0] == "stdout" and merged[-1][0] == "stdout":
            merged[-1] = ("stdout", merged[-1][1] + e[1])
        else:
            merged.append(e)
    ev = merged
    assert ev == [("stdout", b"open {'x': 1} [b'\\x00\\x01xyz']\n"), ("frame", "comm_msg"),
                  ("frame", "comm_done")], ev
    frames, done, out, err = runner.execute(
        "m = got[0]\nprint(m['header']['msg_id'], m['msg_id'], m['msg_type'], m['metadata'],"
        " type(m['buffers'][0]).__name__, sorted(m['content']))")
    assert out == "abc-123 abc-123 comm_open {'md': True} memoryview " \
                  "['comm_id', 'data', 'target_name']\n", err
    frames = comm_request(runner, "comm_msg", comm_id="c1", data={"y": 2},
                          buffers=[b64(b"ab"), b64(b"")])
    assert frames == [{"type": "comm_msg", "comm_id": "c1", "data": {"again": {"y": 2}},
                       "metadata": {}, "buffers": [b64(b"abab"), ""]}]
    assert comm_request(runner, "comm_close", comm_id="c1", data={"z": 3}) == []
    assert runner.out.decode().endswith("closed {'z': 3}\n")
    # unknown target and unknown comm
    assert comm_request(runner, "comm_open", comm_id="c2", target_name="nope", data={}) == [
        {"type": "comm_close", "comm_id": "c2", "data": {}, "metadata": {}, "buffers": []}]
    assert comm_request(runner, "comm_msg", comm_id="c2", data={}) == []
    assert comm_request(runner, "comm_msg", comm_id="", data={}) == []


def test_comm_frames_of_a_cell(runner):
    frames, done, out, err = runner.execute(
        "from ipykernel.comm import Comm\n"
        "c = Comm(target_name='plot', data={'a': 1}, metadata={'v': 2}, buffers=[b'\\xff'])\n"
        "print('between')\n"
        "c.send({'b': (1, 2)}, buffers=[bytearray(b'12'), memoryview(b'34')])\n"
        "c.close({'bye': 1})\n"
        "c.send({'after': 'close'})\n")
    assert done["status"] == "ok", err
    cid = frames[0]["comm_id"]
    assert frames == [
        {"type": "comm_open", "comm_id": cid, "target_name": "plot", "data": {"a": 1},
         "metadata": {"v": 2}, "buffers": [b64(b"\xff")]},
        {"type": "comm_msg", "comm_id": cid, "data": {"b": [1, 2]}, "metadata": {},
         "buffers": [b64(b"12"), b64(b"34")]},
        {"type": "comm_close", "comm_id": cid, "data": {"bye": 1}, "metadata": {},
         "buffers": []},
        # sent after the close, as ipykernel does; the kernel drops it (not open)
        {"type": "comm_msg", "comm_id": cid, "data": {"after": "close"}, "metadata": {},
         "buffers": []},
    ]
    kinds = [e[0] if e[0] != "frame" else e[1]["type"] for e in runner.last_events]
    assert kinds.index("stdout") == kinds.index("comm_open") + 1, kinds


def test_the_comm_package(runner):
    frames, done, out, err = runner.execute("import comm")
    if done["status"] != "ok":
        pytest.skip("the comm package is not installed (python3-comm)")
    frames, done, out, err = runner.execute(
        "import comm\n"
        "c = comm.create_comm(target_name='pkg', data={'k': 1})\n"
        "comm.get_comm_manager().register_target('back', lambda cm, msg: cm.send({'ok': 1}))\n"
        "print(type(c).__name__, c.comm_id in comm.get_comm_manager().comms)")
    assert done["status"] == "ok", err
    assert out == "Comm True\n"
    assert frames[0]["type"] == "comm_open" and frames[0]["target_name"] == "pkg"
    frames = comm_request(runner, "comm_open", comm_id="f1", target_name="back", data={})
    assert [f["data"] for f in frames] == [{"ok": 1}]


def test_get_parent_is_the_execute_request(runner):
    frames, done, out, err = runner.execute(
        "import sys, ipykernel.comm\nk = sys.modules['_cellblock_cb_comm'].kernel()\n"
        "p = k.get_parent()\nprint(p['header']['msg_id'], p['msg_type'], p['content']['code'][:6])",
        header={"msg_id": "exec-7", "msg_type": "execute_request"})
    assert out == "exec-7 execute_request import\n", err


def test_a_thread_frame_whose_ack_comes_after_a_request(runner):
    """A background thread's comm frame waits for its ack while the kernel
    sends the next request first: the main thread reads the request and
    hands the ack over to the thread; nothing is lost, nothing hangs."""
    frames, done, out, err = runner.execute(
        "import threading, time\n"
        "from ipykernel.comm import Comm\n"
        "c = Comm(target_name='bg')\n"
        "def work():\n"
        "    time.sleep(0.3)\n"
        "    for i in range(3):\n"
        "        c.send({'n': i})\n"
        "threading.Thread(target=work).start()")
    assert done["status"] == "ok", err
    f = raw_frame(runner)                       # the thread's first frame, not acked yet
    assert f["type"] == "comm_msg" and f["data"] == {"n": 0}
    runner.seq += 1
    runner.send({"type": "execute", "code": "print('main')", "silent": False,
                 "store_history": True, "user_expressions": {}, "allow_stdin": False,
                 "execution_count": 2, "seq": runner.seq})
    time.sleep(0.3)                             # the main thread has the request by now
    runner.send({"type": "ack"})
    seen = []
    while "done" not in seen or seen.count("comm_msg") < 2:
        f = raw_frame(runner)
        seen.append(f["type"])
        if f["type"] == "comm_msg":
            assert f["data"]["n"] == seen.count("comm_msg")
        if f["type"] in ACKED:
            runner.send({"type": "ack"})
    assert seen.count("started") == 1
    runner._drain_pipes()
    assert runner.out.decode().endswith("main\n")
    assert runner.execute("6 * 7")[0][0]["data"]["text/plain"] == "42"


def test_an_input_reply_that_says_ack(runner):
    """Acks are recognised by their type, not by a substring."""
    runner.send({"type": "execute", "code": "v = input()\nprint(v)", "silent": False,
                 "store_history": True, "user_expressions": {}, "allow_stdin": True,
                 "execution_count": 1})
    f = runner.recv(10)
    assert f["type"] == "input_request"
    runner.send({"type": "input_reply", "value": "ack"})
    while runner.recv(10)["type"] != "done":
        pass
    assert runner.out.decode().endswith("ack\n")


def test_a_collected_comm_is_closed_at_the_next_frame(runner):
    frames, done, out, err = runner.execute(
        "import gc, sys\n"
        "from ipykernel.comm import Comm\n"
        "c = Comm(target_name='gc')\n"
        "sys.modules['_cellblock_cb_comm'].kernel().comm_manager.unregister_comm(c)\n"
        "del c\n"
        "n = gc.collect()\n")
    assert done["status"] == "ok", err
    assert [f["type"] for f in frames] == ["comm_open", "comm_close"]
    assert frames[0]["comm_id"] == frames[1]["comm_id"]


def test_an_input_reply_read_by_a_thread_waiting_for_its_ack(runner):
    """The cell waits for input while a thread's comm frame waits for its
    ack; the kernel sends the input reply first: the thread reads it (and
    keeps it) on its way to the ack, and input() still gets it."""
    runner.send({"type": "execute", "allow_stdin": True, "silent": False, "store_history": True,
                 "user_expressions": {}, "execution_count": 1,
                 "code": "import threading, time\n"
                         "from ipykernel.comm import Comm\n"
                         "c = Comm(target_name='bg')\n"
                         "def work():\n"
                         "    time.sleep(0.3)\n"
                         "    c.send({'n': 1})\n"
                         "threading.Thread(target=work).start()\n"
                         "print('got', input('? '))"})
    seen = []
    while True:
        f = raw_frame(runner)
        seen.append(f["type"])
        if f["type"] == "input_request":
            break
        runner.send({"type": "ack"})
    f = raw_frame(runner)                       # the thread's frame: not acked yet
    assert f["type"] == "comm_msg" and f["data"] == {"n": 1}
    runner.send({"type": "input_reply", "value": "yes"})
    time.sleep(0.3)
    runner.send({"type": "ack"})
    while raw_frame(runner)["type"] != "done":
        pass
    runner._drain_pipes()
    assert runner.out.decode().endswith("got yes\n")
