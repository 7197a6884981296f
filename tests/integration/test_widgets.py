"""Issue 12: comms and widgets through jupyter_client, as a frontend sees them.

Comms both ways with binary buffers (a target registered in the sandbox, a
frontend's comm_open/comm_msg/comm_close, a comm the kernel side opens),
comm_info_request and its target_name filter, comm traffic during a running
cell and from a thread while the kernel is idle, close from either side,
comms after a restart, and ipywidgets' Output, Button and sliders driven by
the frontend's messages.

Every test not marked cellblock_only is also run against the stock
ipykernel (`CB_TEST_KERNEL=python3`) as the reference for what these
expectations should be; test_widgets_compare.py puts the two kernels' message
sequences side by side.  cellblock_only: the `comm` package's API (Debian's
ipykernel 6.17 does not wire it), which ipykernel is served in the sandbox,
the bounds on comm traffic, interrupting a runaway handler.
"""

import queue
import time
import uuid

import pytest

from .helpers import Result, collect_iopub, execute, is_cellblock, request

pytestmark = pytest.mark.timeout(180)

ECHO_TARGET = r'''
import json as _json
from IPython import get_ipython as _gi

seen = []

def _target(comm, msg):
    seen.append(("open", msg["content"]["data"], [bytes(b) for b in msg["buffers"]],
                 type(msg["buffers"][0]).__name__ if msg["buffers"] else None,
                 sorted(msg), msg["header"]["msg_type"], msg["header"]["msg_id"]))
    print("opened", _json.dumps(msg["content"]["data"], sort_keys=True))
    comm.send({"echo": msg["content"]["data"]}, metadata={"opened": True},
              buffers=[bytes(b)[::-1] for b in msg["buffers"]])

    @comm.on_msg
    def _msg(m):
        seen.append(("msg", m["content"]["data"], [bytes(b) for b in m["buffers"]]))
        print("got", _json.dumps(m["content"]["data"], sort_keys=True))
        comm.send({"echo": m["content"]["data"]}, metadata={"k": 1},
                  buffers=[bytes(b)[::-1] for b in m["buffers"]])

    @comm.on_close
    def _close(m):
        seen.append(("close", m["content"]["data"]))
        print("closed", _json.dumps(m["content"]["data"], sort_keys=True))

_gi().kernel.comm_manager.register_target("cb.echo", _target)
'''


def send_comm(kc, msg_type, content, buffers=(), timeout=30):
    """A frontend's comm message (with binary buffers) on shell; -> its iopub
    messages up to idle (comm messages have no reply)."""
    msg = kc.session.msg(msg_type, content)
    kc.session.send(kc.shell_channel.socket, msg, buffers=list(buffers))
    mid = msg["header"]["msg_id"]
    return Result(mid, None, collect_iopub(kc, mid, timeout))


def comm_info(kc, target=None):
    content = {} if target is None else {"target_name": target}
    r = request(kc, "comm_info_request", content)
    assert r.content["status"] == "ok"
    return r.content["comms"]


def ok(kc, code, timeout=60):
    r = execute(kc, code, timeout=timeout)
    assert r.status == "ok", r.error_text()
    return r


def value(kc, expr):
    r = ok(kc, "print(repr(%s))" % expr)
    return r.stream().strip()


def comm_msgs(result, msg_type="comm_msg"):
    return [m for m in result.iopub if m["msg_type"] == msg_type]


def late_iopub(kc, want, timeout=30):
    """iopub messages (any parent) until `want(messages)` holds."""
    out = []
    deadline = time.monotonic() + timeout
    while not want(out):
        assert time.monotonic() < deadline, "timed out; got %r" % [m["msg_type"] for m in out]
        try:
            out.append(kc.get_iopub_msg(timeout=0.5))
        except queue.Empty:
            pass
    return out


# ---------------------------------------------------------------- frontend -> kernel


def test_frontend_comm_round_trip_with_buffers(kernel):
    kc = kernel.kc
    ok(kc, ECHO_TARGET)
    cid = uuid.uuid4().hex
    blob = bytes(range(256)) * 64                    # 16 KiB, every byte value
    r = send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.echo",
                                    "data": {"a": 1}}, buffers=[blob, b"\x00"])
    # the handler's output and messages have the comm_open as parent
    assert r.stream() == 'opened {"a": 1}\n'
    (echo,) = comm_msgs(r)
    assert echo["content"] == {"comm_id": cid, "data": {"echo": {"a": 1}}}
    assert echo["metadata"] == {"opened": True}
    assert [bytes(b) for b in echo["buffers"]] == [blob[::-1], b"\x00"]
    assert r.types()[0] == "status" and r.types()[-1] == "status"

    r = send_comm(kc, "comm_msg", {"comm_id": cid, "data": {"b": [2, 3]}},
                  buffers=[b"hello", b"", b"\xff" * 3])
    assert r.stream() == 'got {"b": [2, 3]}\n'
    (echo,) = comm_msgs(r)
    assert echo["content"]["data"] == {"echo": {"b": [2, 3]}}
    assert echo["metadata"] == {"k": 1}
    assert [bytes(b) for b in echo["buffers"]] == [b"olleh", b"", b"\xff" * 3]

    # what the handlers saw: ipykernel's message dicts, buffers as memoryviews
    seen = value(kc, "seen[:2]")
    assert "'open', {'a': 1}" in seen and "'memoryview'" in seen
    assert ("['buffers', 'content', 'header', 'metadata', 'msg_id', 'msg_type', "
            "'parent_header'], 'comm_open'") in seen
    assert repr(blob[:8])[:-1] in seen
    assert "('msg', {'b': [2, 3]}, [b'hello', b'', b'\\xff\\xff\\xff'])" in seen

    assert comm_info(kc) == {cid: {"target_name": "cb.echo"}}
    r = send_comm(kc, "comm_close", {"comm_id": cid, "data": {"bye": True}})
    assert r.stream() == 'closed {"bye": true}\n'
    assert not comm_msgs(r, "comm_close"), "a comm the frontend closed is not closed back"
    assert comm_info(kc) == {}
    # the comm is gone on the kernel side too: a message to it does nothing
    r = send_comm(kc, "comm_msg", {"comm_id": cid, "data": {"late": 1}})
    assert r.types() == ["status", "status"]


def test_a_comm_open_for_an_unknown_target_is_closed(kernel):
    kc = kernel.kc
    cid = uuid.uuid4().hex
    r = send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "nobody.home", "data": {}})
    (close,) = comm_msgs(r, "comm_close")
    assert close["content"] == {"comm_id": cid, "data": {}}
    assert r.stream("stderr") == "", "ipykernel logs this in its own log, not on iopub"
    assert comm_info(kc) == {}
    # a target that raises: the comm is closed too
    ok(kc, "def _bad(comm, msg):\n    raise ValueError('no thanks')\n"
           "get_ipython().kernel.comm_manager.register_target('cb.bad', _bad)")
    r = send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.bad", "data": {}})
    assert comm_msgs(r, "comm_close")[0]["content"]["comm_id"] == cid
    assert comm_info(kc) == {}


# ---------------------------------------------------------------- kernel -> frontend


def test_kernel_comm_to_frontend_with_buffers(kernel):
    kc = kernel.kc
    r = ok(kc, "import numpy as np\n"
               "from ipykernel.comm import Comm\n"
               "c = Comm(target_name='cb.plot', data={'kind': 'open'}, metadata={'v': '1'},\n"
               "         buffers=[b'head'])\n"
               "arr = np.arange(6, dtype='<i4').reshape(2, 3)\n"
               "c.send({'shape': [2, 3]}, buffers=[arr, bytearray(b'ba'), memoryview(b'mv'),\n"
               "       np.zeros(0, dtype='u1')])\n"
               "print(c.comm_id)")
    cid = r.stream().strip()
    (op,) = comm_msgs(r, "comm_open")
    assert op["content"]["comm_id"] == cid and op["content"]["target_name"] == "cb.plot"
    assert op["content"]["data"] == {"kind": "open"}
    assert op["metadata"] == {"v": "1"}
    assert [bytes(b) for b in op["buffers"]] == [b"head"]
    (m,) = comm_msgs(r)
    assert m["content"] == {"comm_id": cid, "data": {"shape": [2, 3]}}
    import numpy as np
    assert [bytes(b) for b in m["buffers"]] == [
        np.arange(6, dtype="<i4").tobytes(), b"ba", b"mv", b""]
    assert all(x["parent_header"]["msg_id"] == r.msg_id for x in (op, m))
    # the frontend's side of it is listed by comm_info until the kernel closes it
    assert comm_info(kc, "cb.plot") == {cid: {"target_name": "cb.plot"}}
    r = ok(kc, "c.close(data={'reason': 'done'})\nc.send({'after': 'close'})")
    (cl,) = comm_msgs(r, "comm_close")
    assert cl["content"] == {"comm_id": cid, "data": {"reason": "done"}}
    assert comm_info(kc) == {}


def test_comm_info_filters_by_target_name(kernel):
    kc = kernel.kc
    ok(kc, ECHO_TARGET)
    ok(kc, "from ipykernel.comm import Comm\n"
           "mine = [Comm(target_name='cb.a'), Comm(target_name='cb.a'), Comm(target_name='cb.b')]")
    ids = value(kc, "[c.comm_id for c in mine]")
    a1, a2, b = eval(ids)
    cid = uuid.uuid4().hex
    send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.echo", "data": {}})
    assert comm_info(kc) == {a1: {"target_name": "cb.a"}, a2: {"target_name": "cb.a"},
                             b: {"target_name": "cb.b"}, cid: {"target_name": "cb.echo"}}
    assert comm_info(kc, "cb.a") == {a1: {"target_name": "cb.a"}, a2: {"target_name": "cb.a"}}
    assert comm_info(kc, "cb.echo") == {cid: {"target_name": "cb.echo"}}
    assert comm_info(kc, "jupyter.widget") == {}
    ok(kc, "mine[0].close()")
    assert set(comm_info(kc)) == {a2, b, cid}


# ---------------------------------------------------------------- while a cell runs, while idle


def test_comm_traffic_during_a_running_cell(kernel):
    """A cell's comm messages come as it runs, in order with its prints; a
    frontend's comm_msg sent meanwhile is handled once the cell is done (the
    shell channel takes one request at a time, as in ipykernel)."""
    kc = kernel.kc
    ok(kc, ECHO_TARGET)
    cid = uuid.uuid4().hex
    send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.echo", "data": {}})
    mid = kc.execute("import sys, time\n"
                     "from ipykernel.comm import Comm\n"
                     "c = Comm(target_name='cb.ticks')\n"
                     "for i in range(6):\n"
                     "    print('tick', i)\n"
                     "    sys.stdout.flush()\n"
                     "    c.send({'i': i}, buffers=[bytes([i]) * (i + 1)])\n"
                     "    time.sleep(0.3)\n"
                     "print('end')")
    first = late_iopub(kc, lambda ms: any(m["msg_type"] == "comm_msg" for m in ms))
    assert all(m["parent_header"].get("msg_id") == mid for m in first
               if m["msg_type"] == "comm_msg")
    msg = kc.session.msg("comm_msg", {"comm_id": cid, "data": {"during": 1}})
    kc.shell_channel.send(msg)
    rest = collect_iopub(kc, mid, 60)
    cell = [m for m in first if m["parent_header"].get("msg_id") == mid] + rest
    seq = [(m["msg_type"], m["content"].get("text", m["content"].get("data")))
           for m in cell if m["msg_type"] in ("stream", "comm_msg")]
    want = []
    for i in range(6):
        want += [("stream", "tick %d\n" % i), ("comm_msg", {"i": i})]
    assert seq == want + [("stream", "end\n")], seq
    bufs = [[bytes(b) for b in m["buffers"]] for m in cell if m["msg_type"] == "comm_msg"]
    assert bufs == [[bytes([i]) * (i + 1)] for i in range(6)]
    # the frontend's message, after the cell
    handled = collect_iopub(kc, msg["header"]["msg_id"], 30)
    assert [m for m in handled if m["msg_type"] == "stream"][0]["content"]["text"] == \
        'got {"during": 1}\n'
    echo = [m for m in handled if m["msg_type"] == "comm_msg"]
    assert echo and echo[0]["content"]["data"] == {"echo": {"during": 1}}


def test_a_tight_loop_of_widget_updates(kernel):
    """Thousands of comm messages as fast as a loop sends them (a progress
    bar set every iteration): all arrive, in order, and the cell ends.  (The
    kernel paces the sandbox's frames; its refill once woke nothing and the
    cell hung until its time limit.)"""
    kc = kernel.kc
    r = ok(kc, "from ipykernel.comm import Comm\n"
               "c = Comm(target_name='cb.fast')\n"
               "for i in range(4000):\n"
               "    c.send({'i': i})\n"
               "print('done')", timeout=50)
    assert [m["content"]["data"]["i"] for m in comm_msgs(r)] == list(range(4000))
    assert r.stream() == "done\n"


def test_comm_messages_from_a_thread_while_idle(kernel):
    """Widgets updated by a background thread after their cell ended: the
    messages reach the frontend (with their buffers) while the kernel is
    idle, and the kernel goes on answering requests meanwhile and after."""
    kc = kernel.kc
    r = ok(kc, "import threading, time\n"
               "from ipykernel.comm import Comm\n"
               "bg = Comm(target_name='cb.bg')\n"
               "def work():\n"
               "    time.sleep(0.5)\n"
               "    for i in range(40):\n"
               "        bg.send({'n': i}, buffers=[i.to_bytes(2, 'big') * 100])\n"
               "        time.sleep(0.01 if i % 10 else 0.2)\n"
               "    bg.close(data={'n': 'end'})\n"
               "t = threading.Thread(target=work)\n"
               "t.start()")
    got = late_iopub(kc, lambda ms: any(m["msg_type"] == "comm_close" for m in ms), timeout=60)
    got = r.iopub + got                 # on a loaded machine the thread may start early
    n = [m["content"]["data"]["n"] for m in got if m["msg_type"] == "comm_msg"]
    assert n == list(range(40))
    for m in got:
        if m["msg_type"] == "comm_msg":
            i = m["content"]["data"]["n"]
            assert [bytes(b) for b in m["buffers"]] == [i.to_bytes(2, "big") * 100]
    assert value(kc, "t.is_alive()") == "False"


def test_frontend_and_thread_traffic_at_once(kernel):
    """A thread keeps sending while the frontend's comm messages come and go:
    nothing is lost, nothing hangs."""
    kc = kernel.kc
    ok(kc, ECHO_TARGET)
    ok(kc, "import threading, time\n"
           "from ipykernel.comm import Comm\n"
           "bg = Comm(target_name='cb.bg')\n"
           "stop = threading.Event()\n"
           "def work():\n"
           "    i = 0\n"
           "    while not stop.is_set():\n"
           "        bg.send({'n': i}, buffers=[b'x' * 512])\n"
           "        i += 1\n"
           "        time.sleep(0.005)\n"
           "    bg.close(data={'total': i})\n"
           "t = threading.Thread(target=work)\n"
           "t.start()")
    cid = uuid.uuid4().hex
    send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.echo", "data": {}})
    for k in range(15):
        r = send_comm(kc, "comm_msg", {"comm_id": cid, "data": {"k": k}}, buffers=[b"ab"])
        echo = [m for m in comm_msgs(r) if m["content"]["comm_id"] == cid]
        assert echo and echo[0]["content"]["data"] == {"echo": {"k": k}}
        assert [bytes(b) for b in echo[0]["buffers"]] == [b"ba"]
    total = int(value(kc, "stop.set() or t.join(10) or bg._closed and 1"))
    assert total == 1


# ---------------------------------------------------------------- close, restart


def test_close_from_either_side(kernel):
    kc = kernel.kc
    ok(kc, ECHO_TARGET)
    ok(kc, "from ipykernel.comm import Comm\n"
           "closed = []\n"
           "k = Comm(target_name='cb.k')\n"
           "k.on_close(lambda m: closed.append(m['content']['data']))")
    kid = value(kc, "k.comm_id").strip("'")
    cid = uuid.uuid4().hex
    send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.echo", "data": {}})
    assert set(comm_info(kc)) == {kid, cid}
    # the frontend closes the kernel's comm: its on_close runs with the data
    r = send_comm(kc, "comm_close", {"comm_id": kid, "data": {"from": "frontend"}})
    assert not comm_msgs(r, "comm_close")
    assert value(kc, "closed") == "[{'from': 'frontend'}]"
    assert value(kc, "k._closed") == "True"
    assert set(comm_info(kc)) == {cid}
    # the kernel closes the frontend's comm
    r = ok(kc, "c = get_ipython().kernel.comm_manager.get_comm(%r)\n"
               "c.close(data={'from': 'kernel'})" % cid)
    (cl,) = comm_msgs(r, "comm_close")
    assert cl["content"] == {"comm_id": cid, "data": {"from": "kernel"}}
    assert comm_info(kc) == {}
    assert value(kc, "sorted(get_ipython().kernel.comm_manager.comms)") == "[]"


def test_a_comm_collected_by_the_garbage_collector_is_closed(kernel):
    kc = kernel.kc
    r = ok(kc, "import gc\n"
               "from ipykernel.comm import Comm\n"
               "c = Comm(target_name='cb.gc')\n"
               "cid = c.comm_id\n"
               "get_ipython().kernel.comm_manager.unregister_comm(c)\n"
               "del c\n"
               "gc.collect()\n"
               "print(cid)")
    cid = r.stream().strip()
    closes = comm_msgs(r, "comm_close")
    if not closes:      # a collector's close may come after the cell's last frame
        got = late_iopub(kc, lambda ms: any(m["msg_type"] == "comm_close" for m in ms))
        closes = [m for m in got if m["msg_type"] == "comm_close"]
    assert closes[0]["content"]["comm_id"] == cid
    assert comm_info(kc) == {}


def test_comms_are_gone_after_a_restart(kernel):
    kc = kernel.kc
    ok(kc, ECHO_TARGET)
    ok(kc, "from ipykernel.comm import Comm\nk = Comm(target_name='cb.k')")
    cid = uuid.uuid4().hex
    send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.echo", "data": {}})
    assert len(comm_info(kc)) == 2
    kernel.km.restart_kernel(now=False)
    kernel.pid = kernel.km.provisioner.process.pid
    kc.wait_for_ready(timeout=60)
    assert comm_info(kc) == {}
    # the old comm and the old target are gone
    r = send_comm(kc, "comm_msg", {"comm_id": cid, "data": {"x": 1}})
    assert r.stream() == "" and not comm_msgs(r)
    r = send_comm(kc, "comm_open", {"comm_id": uuid.uuid4().hex, "target_name": "cb.echo",
                                    "data": {}})
    assert comm_msgs(r, "comm_close"), "the target registered before the restart answered"
    assert comm_info(kc) == {}


# ---------------------------------------------------------------- ipywidgets


def _ipywidgets(kc):
    r = execute(kc, "import ipywidgets")
    if r.status != "ok":
        pytest.skip("ipywidgets is not installed for the sandbox's Python (python3-ipywidgets)")


def test_parent_header_is_the_request_being_handled(kernel):
    """What ipywidgets' Output widget captures by: the kernel's parent
    request is the execute_request or the frontend's comm message."""
    kc = kernel.kc
    r = ok(kc, "print(get_ipython().kernel.get_parent()['header']['msg_id'])")
    assert r.stream().strip() == r.msg_id
    assert value(kc, "get_ipython().kernel.get_parent()['header']['msg_type']") == \
        "'execute_request'"
    ok(kc, "def _t(comm, msg):\n"
           "    p = get_ipython().kernel.get_parent()\n"
           "    print(p['header']['msg_id'], p['header']['msg_type'], p['content']['comm_id'])\n"
           "get_ipython().kernel.comm_manager.register_target('cb.parent', _t)")
    cid = uuid.uuid4().hex
    r = send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.parent", "data": {}})
    assert r.stream().split() == [r.msg_id, "comm_open", cid]


def test_output_widget_captures_a_slider_observer(kernel):
    """Moving a slider (the frontend's backbone sync) runs an observer whose
    print goes into an Output widget: the Output's msg_id is the comm
    message's while it prints, and the print has that message as parent."""
    kc = kernel.kc
    _ipywidgets(kc)
    r = ok(kc, "import ipywidgets as w\n"
               "s = w.IntSlider(value=3, min=0, max=10)\n"
               "out = w.Output()\n"
               "def obs(change):\n"
               "    with out:\n"
               "        print('value is now', change['new'])\n"
               "s.observe(obs, 'value')\n"
               "display(s, out)\n"
               "print(s.model_id, out.model_id)")
    sid, oid = r.stream().split()
    views = [m["content"]["data"] for m in r.of_type("display_data")]
    assert {"application/vnd.jupyter.widget-view+json": {"model_id": sid}} in views
    assert {"application/vnd.jupyter.widget-view+json": {"model_id": oid}} in views
    r = send_comm(kc, "comm_msg", {"comm_id": sid, "data": {
        "method": "backbone", "sync_data": {"value": 7}}})
    seq = [(m["msg_type"], m["content"].get("comm_id"),
            m["content"].get("data", {}).get("state") if m["msg_type"] == "comm_msg"
            else m["content"].get("text")) for m in r.outputs()]
    assert seq == [("comm_msg", oid, {"msg_id": r.msg_id}),
                   ("stream", None, "value is now 7\n"),
                   ("comm_msg", oid, {"msg_id": ""})], seq
    assert value(kc, "s.value") == "7"
    # set from Python: the frontend is told (and the observer runs in the cell)
    r = ok(kc, "s.value = 9")
    ups = [m["content"]["data"] for m in comm_msgs(r) if m["content"]["comm_id"] == sid]
    assert ups == [{"method": "update", "state": {"value": 9}, "buffers": []}]
    assert r.stream() == "value is now 9\n"


def test_button_click_runs_its_callback(kernel):
    kc = kernel.kc
    _ipywidgets(kc)
    r = ok(kc, "import ipywidgets as w\n"
               "b = w.Button(description='go')\n"
               "clicks = []\n"
               "b.on_click(lambda btn: (clicks.append(1), print('clicked', len(clicks))))\n"
               "print(b.model_id)")
    bid = r.stream().strip()
    for n in (1, 2):
        r = send_comm(kc, "comm_msg", {"comm_id": bid, "data": {
            "method": "custom", "content": {"event": "click"}}})
        assert r.stream() == "clicked %d\n" % n
    assert value(kc, "len(clicks)") == "2"


def test_interact_renders_again_on_change(kernel):
    kc = kernel.kc
    _ipywidgets(kc)
    r = ok(kc, "from ipywidgets import interact\n"
               "@interact(x=(0, 10))\n"
               "def f(x=5):\n"
               "    print('x is', x)\n"
               "    return x * 2\n"
               "box = f.widget\n"
               "print(box.children[0].model_id)")
    assert "x is 5\n" in r.stream()
    sid = r.stream().split()[-1]
    r = send_comm(kc, "comm_msg", {"comm_id": sid, "data": {
        "method": "backbone", "sync_data": {"value": 8}}})
    types = [m["msg_type"] for m in r.outputs()]
    assert "clear_output" in types and r.stream() == "x is 8\n"
    shown = [m["content"]["data"] for m in r.of_type("display_data")]
    assert shown == [{"text/plain": "16"}]


def test_widget_closed_in_python_is_closed_for_the_frontend(kernel):
    kc = kernel.kc
    _ipywidgets(kc)
    r = ok(kc, "import ipywidgets as w\ns = w.IntSlider()\nprint(s.model_id)")
    sid = r.stream().strip()
    assert sid in comm_info(kc, "jupyter.widget")
    r = ok(kc, "s.close()")
    assert [m["content"]["comm_id"] for m in comm_msgs(r, "comm_close")] == [sid]
    assert sid not in comm_info(kc, "jupyter.widget")


# ---------------------------------------------------------------- cellblock's own


@pytest.mark.cellblock_only
def test_the_comm_package_api(kernel):
    """comm.create_comm / comm.get_comm_manager are the kernel's (what
    ipykernel >= 6.18 does; Debian's 6.17 leaves them unimplemented)."""
    kc = kernel.kc
    r = execute(kc, "import comm")
    if r.status != "ok":
        pytest.skip("the comm package is not installed (python3-comm)")
    r = ok(kc, "import comm\n"
               "m = comm.get_comm_manager()\n"
               "print(m is get_ipython().kernel.comm_manager)\n"
               "def t(c, msg):\n"
               "    c.send({'hi': msg['content']['data']}, buffers=[b'\\x01\\x02'])\n"
               "m.register_target('cb.pkg', t)\n"
               "c = comm.create_comm(target_name='cb.made', data={'x': 1})\n"
               "c.send({'y': 2})\n"
               "print(c.comm_id)")
    same, cid = r.stream().split()
    assert same == "True"
    assert [m["content"]["data"] for m in r.iopub if m["msg_type"].startswith("comm")] == \
        [{"x": 1}, {"y": 2}]
    assert comm_info(kc, "cb.made") == {cid: {"target_name": "cb.made"}}
    r = send_comm(kc, "comm_open", {"comm_id": "f" * 32, "target_name": "cb.pkg",
                                    "data": {"z": 3}})
    (m,) = comm_msgs(r)
    assert m["content"]["data"] == {"hi": {"z": 3}}
    assert [bytes(b) for b in m["buffers"]] == [b"\x01\x02"]


@pytest.mark.cellblock_only
def test_the_runner_serves_ipykernel_comm(kernel):
    """ipykernel.comm is the runner's, also where Debian's ipykernel is
    installed: importing it brings no ZMQ, no kernel app."""
    r = ok(kernel.kc, "import sys, ipykernel, ipykernel.comm\n"
                      "from ipykernel.comm import Comm, CommManager\n"
                      "import ipykernel.comm.comm, ipykernel.comm.manager\n"
                      "print(Comm.__module__, isinstance(get_ipython().kernel.comm_manager,"
                      " CommManager))\n"
                      "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                      "('zmq', 'tornado', 'jupyter_client') or m == 'ipykernel.kernelbase'))\n"
                      "print(getattr(ipykernel, '__version__', 'none'))")
    lines = r.stream().splitlines()
    assert lines[0] == "_cellblock_cb_comm True"
    assert lines[1] == "[]"
    try:
        import ipykernel
        assert lines[2] == ipykernel.__version__
    except ImportError:
        assert lines[2] == "none"


@pytest.mark.cellblock_only
def test_a_comm_flood_is_bounded_like_any_output(kernel_factory, tmp_path):
    from .test_artifacts import spec_kernel
    k = spec_kernel(kernel_factory, tmp_path, "--max-output", "1")
    r = execute(k.kc, "from ipykernel.comm import Comm\n"
                      "c = Comm(target_name='cb.flood')\n"
                      "for i in range(64):\n"
                      "    c.send({'p': 'x' * 65536}, buffers=[b'y' * 1024])\n"
                      "print('sent')", timeout=120)
    assert r.status == "ok"
    n = len(comm_msgs(r))
    assert 0 < n < 20, "%d comm messages of 64 KiB passed a 1 MiB budget" % n
    assert "output limit" in r.stream("stderr")


@pytest.mark.cellblock_only
def test_large_buffers_and_the_frame_limit(kernel):
    kc = kernel.kc
    r = ok(kc, "from ipykernel.comm import Comm\n"
               "c = Comm(target_name='cb.big')\n"
               "c.send({'n': 1}, buffers=[bytes(range(256)) * 16384])\n"       # 4 MiB: passes
               "c.send({'n': 2}, buffers=[b'z' * (7 * 1024 * 1024)])\n"        # too big a frame
               "c.send({'n': 3})", timeout=120)
    got = {m["content"]["data"]["n"]: m for m in comm_msgs(r)}
    assert sorted(got) == [1, 3]
    assert bytes(got[1]["buffers"][0]) == bytes(range(256)) * 16384
    assert "over the" in r.stream("stderr") and "limit" in r.stream("stderr")


@pytest.mark.cellblock_only
def test_frontend_buffers_over_the_frame_limit(kernel):
    """A frontend's comm message whose buffers would make a runner frame over
    8 MiB (base64) is not handed to the sandbox: busy/idle, no hang; one
    under the limit arrives intact."""
    kc = kernel.kc
    ok(kc, ECHO_TARGET)
    cid = uuid.uuid4().hex
    send_comm(kc, "comm_open", {"comm_id": cid, "target_name": "cb.echo", "data": {}})
    big = bytes(range(256)) * (20 * 1024)                      # 5 MiB: 6.7 MiB as base64
    r = send_comm(kc, "comm_msg", {"comm_id": cid, "data": {"n": 1}}, buffers=[big], timeout=60)
    assert r.stream() == 'got {"n": 1}\n'
    assert value(kc, "(len(seen[-1][2][0]), seen[-1][2][0] == bytes(range(256)) * 20480)") == \
        "(5242880, True)"
    r = send_comm(kc, "comm_msg", {"comm_id": cid, "data": {"n": 2}},
                  buffers=[b"x" * (7 * 1024 * 1024)], timeout=60)
    assert r.types() == ["status", "status"]
    assert value(kc, "seen[-1][1]") == "{'n': 1}"


@pytest.mark.cellblock_only
def test_bad_comm_arguments_raise_in_the_sandbox(kernel):
    kc = kernel.kc
    r = execute(kc, "from ipykernel.comm import Comm\nComm(target_name='t').send([1, 2])")
    assert r.status == "error" and "comm data must be a dict" in r.error_text()
    r = execute(kc, "Comm(target_name='t', comm_id='x' * 200)")
    assert r.status == "error" and "comm_id" in r.error_text()
    r = execute(kc, "Comm(target_name='t').send({}, buffers=[object()])")
    assert r.status == "error" and "buffer protocol" in r.error_text()


@pytest.mark.cellblock_only
def test_a_runaway_comm_handler_can_be_interrupted(kernel):
    kc = kernel.kc
    ok(kc, "def _spin(comm, msg):\n"
           "    print('spinning', flush=True)\n"
           "    while True:\n"
           "        pass\n"
           "get_ipython().kernel.comm_manager.register_target('cb.spin', _spin)")
    msg = kc.session.msg("comm_open", {"comm_id": uuid.uuid4().hex, "target_name": "cb.spin",
                                       "data": {}})
    kc.shell_channel.send(msg)
    late_iopub(kc, lambda ms: any(m["msg_type"] == "stream" for m in ms))
    time.sleep(0.3)
    request(kc, "interrupt_request", {}, channel="control")
    r = collect_iopub(kc, msg["header"]["msg_id"], 30)
    err = "".join(m["content"]["text"] for m in r if m["msg_type"] == "stream"
                  and m["content"]["name"] == "stderr")
    assert "KeyboardInterrupt" in err and "comm_open handler interrupted" in err
    assert value(kc, "6 * 7") == "42"


@pytest.mark.cellblock_only
def test_the_time_limit_applies_to_a_comm_handler(kernel_factory, tmp_path):
    from .test_artifacts import spec_kernel
    k = spec_kernel(kernel_factory, tmp_path, "--timeout", "2")
    kc = k.kc
    ok(kc, "def _spin(comm, msg):\n"
           "    while True:\n"
           "        pass\n"
           "get_ipython().kernel.comm_manager.register_target('cb.spin', _spin)")
    r = send_comm(kc, "comm_open", {"comm_id": uuid.uuid4().hex, "target_name": "cb.spin",
                                    "data": {}}, timeout=60)
    assert "KeyboardInterrupt" in r.stream("stderr")
    assert value(kc, "6 * 7") == "42"
    assert value(kc, "'cb.spin' in get_ipython().kernel.comm_manager.targets") == "True", \
        "the sandbox was replaced: the interrupt did not end the handler"


def test_a_silent_cell_still_publishes_its_comm_messages(kernel):
    """Widgets' comm traffic of a silent execute is published: it is not
    output of the cell."""
    kc = kernel.kc
    msg_id = kc.execute("from ipykernel.comm import Comm\n"
                        "c = Comm(target_name='cb.silent')\nprint('quiet')", silent=True)
    msgs = collect_iopub(kc, msg_id)
    types = [m["msg_type"] for m in msgs]
    assert "comm_open" in types
    assert comm_info(kc, "cb.silent")
    if is_cellblock():      # (ipykernel publishes a silent cell's prints, cellblock does not)
        assert "stream" not in types
