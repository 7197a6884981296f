"""Status messages, headers and execute_request semantics (PROTOCOL.md 3.0,
3.1; section 6 items 3-6, 10): busy/idle around every request, reply before
idle, session id, execution_count, silent, stop_on_error, user_expressions,
output order and streaming, output written by subprocesses and C code.

Expectations checked against ipykernel 6.17 (CB_TEST_KERNEL=python3).
"""

import json
import re
import time
import uuid

import pytest

from .helpers import (collect_iopub, collect_iopub_many, execute, for_parent, get_reply,
                      is_cellblock, request)

EXEC = {"silent": False, "store_history": True, "user_expressions": {},
        "allow_stdin": False, "stop_on_error": True}


@pytest.fixture
def raw(shared_kernel):
    with shared_kernel.raw() as r:
        r.wait_ready()
        yield r


# (channel, msg_type, content, reply type or None)
REQUESTS = [
    ("shell", "kernel_info_request", {}, "kernel_info_reply"),
    ("control", "kernel_info_request", {}, "kernel_info_reply"),
    ("shell", "execute_request", dict(EXEC, code="cb_status = 1"), "execute_reply"),
    ("shell", "execute_request", dict(EXEC, code="1/0"), "execute_reply"),
    ("shell", "execute_request", dict(EXEC, code="", store_history=False), "execute_reply"),
    ("shell", "complete_request", {"code": "pri", "cursor_pos": 3}, "complete_reply"),
    ("shell", "inspect_request", {"code": "print", "cursor_pos": 5, "detail_level": 0},
     "inspect_reply"),
    ("shell", "is_complete_request", {"code": "for i in x:"}, "is_complete_reply"),
    ("shell", "history_request", {"output": False, "raw": True, "hist_access_type": "tail",
                                  "n": 3}, "history_reply"),
    ("shell", "comm_info_request", {}, "comm_info_reply"),
    ("shell", "comm_info_request", {"target_name": "jupyter.widget"}, "comm_info_reply"),
    ("shell", "comm_msg", {"comm_id": "no-such-comm", "data": {}}, None),
    ("shell", "comm_close", {"comm_id": "no-such-comm", "data": {}}, None),
    ("control", "interrupt_request", {}, "interrupt_reply"),
]


@pytest.mark.parametrize("channel,msg_type,content,reply_type", REQUESTS,
                         ids=[f"{c}-{t}-{i}" for i, (c, t, _, _) in enumerate(REQUESTS)])
def test_busy_idle_around_every_request(raw, channel, msg_type, content, reply_type):
    m, ev = raw.request(channel, msg_type, content, expect_reply=reply_type is not None)
    mid = m["header"]["msg_id"]
    mine = for_parent(ev, mid)
    iopub = [e for e in mine if e.channel == "iopub"]
    replies = [e for e in mine if e.channel != "iopub"]
    # busy first, idle last, exactly one of each
    states = [e.content["execution_state"] for e in iopub if e.msg_type == "status"]
    assert states == ["busy", "idle"], iopub
    assert iopub[0].msg_type == "status" and iopub[0].content["execution_state"] == "busy"
    assert iopub[-1].msg_type == "status" and iopub[-1].content["execution_state"] == "idle"
    # parent header copied verbatim
    sent = json.loads(raw.session.pack(m["header"]))
    for e in mine:
        assert e.parent_json == sent, f"{e}: parent_header differs from the request header"
    if reply_type is None:
        assert replies == [], f"no reply expected for {msg_type}: {replies}"
        return
    assert [(e.channel, e.msg_type) for e in replies] == [(channel, reply_type)]
    reply = replies[0]
    # Idle strictly after the reply.  The two travel on different sockets, so
    # arrival order is only evidence: an idle that arrives first is accepted
    # only if the reply follows within 0.25 s (cross-socket jitter).
    idle = iopub[-1]
    if ev.index(idle) < ev.index(reply):
        assert reply.time - idle.time < 0.25, "idle published well before the reply"
    # nothing of this request after its idle
    assert ev.index(idle) > max(ev.index(e) for e in iopub[:-1])
    if msg_type == "is_complete_request":
        assert reply.content["status"] == "incomplete"  # its status is the answer
    elif is_cellblock() or msg_type != "interrupt_request":
        # ipykernel 6.17 echoes the request content ({}) in interrupt_reply;
        # the spec says {"status": "ok"}, which cellblock sends.
        assert reply.content.get("status") in ("ok", "error"), reply.content


def test_headers_session_constant_msg_ids_unique(shared_kernel, raw):
    """One session id for every message of every channel; msg_id unique;
    header complete (jupyter_kernel_test's schema: six keys)."""
    events = []
    for channel, msg_type, content, rt in REQUESTS[:6]:
        _, ev = raw.request(channel, msg_type, content, expect_reply=rt is not None)
        events += ev
    headers = [e.header_json for e in events]
    assert len(headers) >= 20
    sessions = {h["session"] for h in headers}
    assert len(sessions) == 1, sessions
    ids = [h["msg_id"] for h in headers]
    assert len(ids) == len(set(ids)), "duplicate msg_id"
    for h in headers:
        for key in ("msg_id", "username", "session", "date", "msg_type", "version"):
            assert isinstance(h.get(key), str) and (h[key] or key == "username"), (key, h)
        assert re.match(r"^5\.\d+$", h["version"]), h["version"]
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", h["date"]), h["date"]
    # same session on the blocking client's channels (stdin excluded here)
    r = execute(shared_kernel.kc, "1")
    assert {m["header"]["session"] for m in r.iopub + [r.reply]} == sessions


def test_execution_count_rules(kernel):
    kc = kernel.kc
    r1 = execute(kc, "10")
    assert r1.content["execution_count"] == 1
    assert r1.of_type("execute_input")[0]["content"]["execution_count"] == 1
    assert r1.of_type("execute_result")[0]["content"]["execution_count"] == 1

    # store_history=False: counter not incremented.  ipykernel shows the next
    # number (2) on execute_input and replies with the current one (1).
    r2 = execute(kc, "20", store_history=False)
    assert r2.status == "ok"
    assert r2.content["execution_count"] == 1
    assert r2.of_type("execute_input")[0]["content"]["execution_count"] == 2
    assert r2.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "20"

    # silent: no execute_input, no execute_result, counter unchanged
    r3 = execute(kc, "cb_silent = 30\ncb_silent", silent=True)
    assert r3.status == "ok"
    assert r3.content["execution_count"] == 1
    assert r3.of_type("execute_input") == []
    assert r3.of_type("execute_result") == []
    assert r3.types() == ["status", "status"]

    # the silent cell did run
    r4 = execute(kc, "cb_silent + 1")
    assert r4.content["execution_count"] == 2
    assert r4.of_type("execute_input")[0]["content"]["execution_count"] == 2
    res = r4.of_type("execute_result")[0]["content"]
    assert res["execution_count"] == 2 and res["data"]["text/plain"] == "31"

    # errors count too
    r5 = execute(kc, "1/0")
    assert r5.status == "error" and r5.content["execution_count"] == 3
    r6 = execute(kc, "None")
    assert r6.content["execution_count"] == 4
    assert r6.of_type("execute_result") == []


def test_execute_input_code_verbatim(shared_kernel):
    code = "x_cb = '\u00e9\U0001F600'  # caf\u00e9\r\n\tpass_ = 1\n\n"
    r = execute(shared_kernel.kc, code)
    assert r.of_type("execute_input")[0]["content"]["code"] == code


def test_error_reply_and_output(shared_kernel):
    r = execute(shared_kernel.kc, "def cb_f():\n    raise ValueError('cb boom')\ncb_f()")
    assert r.status == "error"
    c = r.content
    assert c["ename"] == "ValueError" and c["evalue"] == "cb boom"
    assert isinstance(c["traceback"], list) and all(isinstance(t, str) for t in c["traceback"])
    assert isinstance(c["execution_count"], int)
    errs = r.of_type("error")
    assert len(errs) == 1
    e = errs[0]["content"]
    assert e["ename"] == "ValueError" and e["evalue"] == "cb boom"
    assert any("cb_f" in t for t in e["traceback"])
    # the traceback is the error output, not also printed on stderr
    assert r.stream("stderr") == ""


def test_syntax_error(shared_kernel):
    r = execute(shared_kernel.kc, "def (:\n  pass")
    assert r.status == "error"
    assert r.content["ename"] == "SyntaxError"
    assert [m["msg_type"] for m in r.outputs()] == ["error"]


def _send_exec(kc, code, **kw):
    kw.setdefault("allow_stdin", False)
    return kc.execute(code, **kw)


def test_stop_on_error_aborts_queued(shared_kernel):
    kc = shared_kernel.kc
    tag = uuid.uuid4().hex[:8]
    ids = [_send_exec(kc, "import time; time.sleep(1); 1/0"),
           _send_exec(kc, f"cb_ran2_{tag} = True"),
           _send_exec(kc, f"cb_ran3_{tag} = True")]
    results = []
    for mid in ids:
        results.append((get_reply(kc, mid), collect_iopub(kc, mid)))
    (r1, io1), (r2, io2), (r3, io3) = results
    assert r1["content"]["status"] == "error"
    for reply, io in ((r2, io2), (r3, io3)):
        # ipykernel sends {"status": "aborted"}; so does cellblock (PROTOCOL.md 3.1.4)
        assert reply["content"]["status"] == "aborted", reply["content"]
        assert [m["msg_type"] for m in io] == ["status", "status"], \
            "an aborted request has busy/idle only (no execute_input, no output)"
        assert [m["content"]["execution_state"] for m in io] == ["busy", "idle"]
    r = execute(kc, f"print('cb_ran2_{tag}' in globals(), 'cb_ran3_{tag}' in globals())")
    assert r.stream() == "False False\n"
    # recovery: the counter did not move for the aborted ones
    assert r.content["execution_count"] == r1["content"]["execution_count"] + 1


def test_stop_on_error_false_does_not_abort(shared_kernel):
    kc = shared_kernel.kc
    tag = uuid.uuid4().hex[:8]
    ids = [_send_exec(kc, "import time; time.sleep(1); 1/0", stop_on_error=False),
           _send_exec(kc, f"cb_ok2_{tag} = 2"),
           _send_exec(kc, f"cb_ok2_{tag} + 1")]
    replies = [get_reply(kc, mid) for mid in ids]
    assert [r["content"]["status"] for r in replies] == ["error", "ok", "ok"]
    io = collect_iopub(kc, ids[2])
    res = [m for m in io if m["msg_type"] == "execute_result"]
    assert res[0]["content"]["data"]["text/plain"] == "3"


def test_silent_error_does_not_abort(shared_kernel):
    """Only a non-silent failure aborts the queue (ipykernel: `not silent`)."""
    kc = shared_kernel.kc
    ids = [_send_exec(kc, "import time; time.sleep(1); 1/0", silent=True),
           _send_exec(kc, "'still runs'")]
    replies = [get_reply(kc, mid) for mid in ids]
    assert [r["content"]["status"] for r in replies] == ["error", "ok"]


def test_queued_non_execute_requests_not_aborted(shared_kernel):
    kc = shared_kernel.kc
    tag = uuid.uuid4().hex[:8]
    e1 = _send_exec(kc, "import time; time.sleep(1); 1/0")
    c = kc.complete("pri", 3)
    i = kc.inspect("print", 5)
    k = kc.kernel_info()
    e2 = _send_exec(kc, f"cb_ran_{tag} = 1")
    assert get_reply(kc, e1)["content"]["status"] == "error"
    rc = get_reply(kc, c)
    assert rc["msg_type"] == "complete_reply" and rc["content"]["status"] == "ok"
    assert "print" in rc["content"]["matches"]
    ri = get_reply(kc, i)
    assert ri["msg_type"] == "inspect_reply" and ri["content"]["status"] == "ok"
    assert ri["content"]["found"] is True
    rk = get_reply(kc, k)
    assert rk["msg_type"] == "kernel_info_reply" and rk["content"]["status"] == "ok"
    assert get_reply(kc, e2)["content"]["status"] == "aborted"
    # after the abort window, execution works again
    r = execute(kc, f"'cb_ran_{tag}' in globals()")
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "False"


def test_user_expressions(shared_kernel):
    kc = shared_kernel.kc
    r = execute(kc, "cb_ue = 6", user_expressions={
        "ok": "cb_ue * 7", "zero": "1/0", "name": "cb_undefined_name", "text": "'a' + 'b'"})
    assert r.status == "ok"
    ue = r.content["user_expressions"]
    assert set(ue) == {"ok", "zero", "name", "text"}
    assert ue["ok"]["status"] == "ok"
    assert ue["ok"]["data"]["text/plain"] == "42"
    assert ue["ok"]["metadata"] == {}
    assert ue["text"]["data"]["text/plain"] == "'ab'"
    assert ue["zero"]["status"] == "error" and ue["zero"]["ename"] == "ZeroDivisionError"
    assert isinstance(ue["zero"]["evalue"], str) and isinstance(ue["zero"]["traceback"], list)
    assert ue["name"]["status"] == "error" and ue["name"]["ename"] == "NameError"
    # no output for the expressions themselves
    assert r.outputs() == []

    # failed code: user_expressions is {} (ipykernel observed)
    r = execute(kc, "1/0", user_expressions={"ok": "cb_ue"})
    assert r.status == "error"
    assert r.content.get("user_expressions", {}) == {}


def test_output_order(shared_kernel):
    code = ("print('a')\n"
            "display({'text/plain': 'x-display'}, raw=True)\n"
            "print('b')\n"
            "raise RuntimeError('end')")
    r = execute(shared_kernel.kc, code)
    assert r.status == "error"
    seq = []
    for m in r.outputs():
        t, c = m["msg_type"], m["content"]
        if t == "stream":
            # stream chunks may be split anywhere; merge consecutive ones
            if seq and seq[-1][0] == "stream:" + c["name"]:
                seq[-1] = (seq[-1][0], seq[-1][1] + c["text"])
            else:
                seq.append(("stream:" + c["name"], c["text"]))
        elif t == "display_data":
            seq.append((t, c["data"]["text/plain"]))
        elif t == "error":
            seq.append((t, c["ename"]))
        else:
            seq.append((t, None))
    assert seq == [("stream:stdout", "a\n"), ("display_data", "x-display"),
                   ("stream:stdout", "b\n"), ("error", "RuntimeError")]
    # (stdout vs stderr interleaving is not ordered by the protocol: two pipes)


def test_streaming_output_arrives_while_cell_runs(raw):
    code = "import time\nprint('first')\ntime.sleep(1.5)\nprint('second')"
    m = raw.send("shell", "execute_request", dict(EXEC, code=code))
    mid = m["header"]["msg_id"]
    ev = raw.collect(mid, timeout=30)
    streams = [e for e in for_parent(ev, mid, "iopub") if e.msg_type == "stream"]
    reply = [e for e in for_parent(ev, mid, "shell")][0]
    first = [e for e in streams if "first" in e.content["text"]]
    assert first, streams
    assert "second" not in first[0].content["text"], "output was buffered until the end"
    assert first[0].time < reply.time - 0.5, "first line did not arrive while the cell ran"
    assert "".join(e.content["text"] for e in streams) == "first\nsecond\n"


def test_output_from_subprocess_and_fd_level(shared_kernel):
    code = ("import subprocess, os, sys\n"
            "subprocess.run(['echo', 'hi-from-child'])\n"
            "os.write(1, b'fd1-bytes\\n')\n"
            "os.write(2, b'fd2-bytes\\n')\n"
            "subprocess.run(['sh', '-c', 'echo child-err >&2'])\n")
    r = execute(shared_kernel.kc, code)
    assert r.status == "ok"
    out, err = r.stream("stdout"), r.stream("stderr")
    # Must arrive before idle, with this request as parent (cellblock drains
    # the pipes before the reply; ipykernel's fd watcher thread does too).
    assert "hi-from-child\n" in out and "fd1-bytes\n" in out, out
    assert "fd2-bytes\n" in err and "child-err\n" in err, err


def test_display_id_update_and_clear_output(shared_kernel):
    code = ("from IPython.display import display, update_display, clear_output\n"
            "h = display({'text/plain': 'v1'}, raw=True, display_id='cb-disp')\n"
            "update_display({'text/plain': 'v2'}, raw=True, display_id='cb-disp')\n"
            "clear_output(wait=True)\n"
            "print('after')")
    r = execute(shared_kernel.kc, code)
    assert r.status == "ok", r.error_text()
    outs = r.outputs()
    types = [m["msg_type"] for m in outs]
    assert types[:3] == ["display_data", "update_display_data", "clear_output"], types
    d, u, c = (m["content"] for m in outs[:3])
    assert d["data"]["text/plain"] == "v1" and d["transient"]["display_id"] == "cb-disp"
    assert u["data"]["text/plain"] == "v2" and u["transient"]["display_id"] == "cb-disp"
    assert c == {"wait": True}
    assert r.stream() == "after\n"


def test_execute_result_mimebundle(shared_kernel):
    code = ("class CbRich:\n"
            "    def _repr_html_(self): return '<b>rich</b>'\n"
            "    def __repr__(self): return 'CbRich()'\n"
            "CbRich()")
    r = execute(shared_kernel.kc, code)
    res = r.of_type("execute_result")
    assert len(res) == 1
    data = res[0]["content"]["data"]
    assert data["text/plain"] == "CbRich()" and data["text/html"] == "<b>rich</b>"
    # a trailing semicolon suppresses the result, as in IPython
    r = execute(shared_kernel.kc, "1 + 1;")
    assert r.of_type("execute_result") == []


def test_two_clients_outputs_carry_right_parent(kernel):
    kc1, kc2 = kernel.kc, kernel.new_client()
    m1 = _send_exec(kc1, "import time; time.sleep(0.5); print('one')")
    m2 = _send_exec(kc2, "print('two')")
    # iopub is broadcast: kc1 sees kc2's cell too
    got = collect_iopub_many(kc1, [m1, m2])
    io1, io2 = got[m1], got[m2]
    assert get_reply(kc1, m1)["content"]["status"] == "ok"
    assert get_reply(kc2, m2)["content"]["status"] == "ok"
    s1 = "".join(m["content"]["text"] for m in io1 if m["msg_type"] == "stream")
    s2 = "".join(m["content"]["text"] for m in io2 if m["msg_type"] == "stream")
    assert (s1, s2) == ("one\n", "two\n")
    # the other client's iopub sees both as well
    io2b = collect_iopub(kc2, m2)
    assert any(m["msg_type"] == "stream" for m in io2b)
    # replies go only to the requester: kc2's shell got nothing for m1
    r = request(kc2, "kernel_info_request", {})
    assert r.reply["parent_header"]["msg_id"] == r.msg_id


@pytest.mark.cellblock_only
def test_silent_broadcasts_nothing_on_iopub(shared_kernel):
    """The spec: silent=True does not broadcast output on IOPub — stream
    output included (stock ipykernel still publishes streams; we do not).
    The reply still carries an error, and the cell did run."""
    kc = shared_kernel.kc
    r = execute(kc, "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n"
                    "display('shown')\nopen('silent_file.csv', 'w').write('a\\n1\\n')\n"
                    "cb_silent_ran = True\n1/0", silent=True)
    assert r.status == "error" and r.content["ename"] == "ZeroDivisionError"
    assert r.types() == ["status", "status"], r.types()
    assert execute(kc, "cb_silent_ran").of_type("execute_result")[0]["content"]["data"][
        "text/plain"] == "True"
