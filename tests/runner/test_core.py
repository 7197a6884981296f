"""The runner's issue-2 features, frame by frame (fd 3) and byte by byte (fd 1/2)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from .rclient import PYTHON, RUNNER, Runner


def test_hello_and_startup_time(runner):
    h = runner.hello
    assert h["type"] == "hello" and h["version"] == 2
    assert h["python_version"].count(".") == 2
    assert h["implementation"] == "cpython"
    assert h["pid"] == runner.proc.pid
    times = []
    for _ in range(5):
        r = Runner()
        times.append(r.startup)
        r.close()
    print("\nrunner start-up to hello: best %.1f ms, median %.1f ms" % (
        min(times) * 1e3, sorted(times)[2] * 1e3))


def test_startup_imports_are_minimal():
    p = subprocess.run([PYTHON, "-I", "-X", "importtime", "-c",
                        "import runpy,sys; sys.argv=['x']"], capture_output=True, text=True)
    base = {l.split("|")[-1].strip() for l in p.stderr.splitlines() if "|" in l}
    # importtime of the runner itself: it sends hello, sees EOF on fd 3 and exits
    a, b = socket.socketpair()
    child = b.fileno()

    def pre():
        os.dup2(child, 3)

    proc = subprocess.Popen([PYTHON, "-I", "-X", "importtime", "-u", RUNNER],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=pre, close_fds=False,
                            env={"PATH": "/usr/bin:/bin"})
    b.close()
    a.recv(4096)          # hello
    a.close()             # EOF -> runner exits
    _, err = proc.communicate(timeout=20)
    mods = [l.split("|")[-1].strip() for l in err.decode().splitlines() if "|" in l]
    extra = set(mods) - base - {"imported package"}
    print("\nrunner's own imports beyond interpreter start-up:", sorted(extra))
    heavy = {"ast", "inspect", "traceback", "json", "re", "pkgutil", "rlcompleter",
             "asyncio", "subprocess", "IPython", "matplotlib", "pandas", "enum", "typing"}
    assert not (extra & heavy), extra


def test_print_and_result(runner):
    frames, done, out, err = runner.execute("print('hello')\n1 + 2")
    assert out == "hello\n" and err == ""
    assert frames == [{"type": "execute_result", "data": {"text/plain": "3"}, "metadata": {}}]
    assert done["status"] == "ok" and done["payload"] == [] and done["user_expressions"] == {}


def test_stderr_and_ordering(runner):
    code = ("import sys\nprint('a')\nprint('b', file=sys.stderr)\ndisplay('mid')\n"
            "print('c')\n'end'")
    frames, done, out, err = runner.execute(code)
    kinds = [(k, v if k != "frame" else v["type"]) for k, v in runner.last_events]
    # stdout 'a' and stderr 'b' arrive before the display frame, 'c' before the result
    i_disp = kinds.index(("frame", "display"))
    i_res = kinds.index(("frame", "execute_result"))
    before = b"".join(v for k, v in runner.last_events[:i_disp] if k != "frame")
    upto_res = b"".join(v for k, v in runner.last_events[:i_res] if k != "frame")
    assert b"a\n" in before and b"b\n" in before
    assert upto_res.endswith(b"c\n") or b"c\n" in upto_res
    assert out == "a\nc\n" and err == "b\n"


def test_semicolon_suppresses_result(runner):
    frames, done, _, _ = runner.execute("1 + 1;")
    assert frames == [] and done["status"] == "ok"
    frames, _, _, _ = runner.execute("x = 5\nx ;  # comment")
    assert frames == []
    frames, _, _, _ = runner.execute("'a;b'")
    assert frames[0]["data"]["text/plain"] == "'a;b'"


def test_none_and_statement_give_no_result(runner):
    assert runner.execute("None")[0] == []
    assert runner.execute("x = 1")[0] == []
    assert runner.execute("")[1]["status"] == "ok"


def test_persistent_globals_and_main(runner):
    runner.execute("a = 41\ndef f():\n    return a + 1")
    frames, _, _, _ = runner.execute("f(), __name__")
    assert frames[0]["data"]["text/plain"] == "(42, '__main__')"
    frames, _, _, _ = runner.execute("import sys; sys.modules['__main__'].a")
    assert frames[0]["data"]["text/plain"] == "41"
    frames, _, _, _ = runner.execute("sorted(k for k in globals() if not k.startswith('_') "
                                     "and k not in ('In', 'Out', 'a', 'f', 'sys'))")
    # IPython's user namespace also has exit, quit and get_ipython, as under ipykernel
    extra = "['exit', 'get_ipython', 'quit']" if runner.shell == "ipython" else "[]"
    assert frames[0]["data"]["text/plain"] == extra
    frames, _, _, _ = runner.execute("type(__builtins__).__name__")
    assert frames[0]["data"]["text/plain"] == "'module'"


def test_pickle_of_user_class(runner):
    frames, done, _, _ = runner.execute(
        "import pickle\nclass P:\n    x = 3\npickle.loads(pickle.dumps(P())).x")
    assert done["status"] == "ok", done
    assert frames[0]["data"]["text/plain"] == "3"


def test_history_variables(runner):
    runner.execute("10", execution_count=1)
    runner.execute("20", execution_count=2)
    frames, _, _, _ = runner.execute("(_, __, _1, Out[2], In[1], _i)", execution_count=3)
    assert frames[0]["data"]["text/plain"] == "(20, 10, 10, 20, '10', '20')"


def test_silent_sends_no_result(runner):
    frames, done, out, _ = runner.execute("print('x'); 5", silent=True, store_history=False)
    assert frames == [] and done["status"] == "ok" and out == "x\n"


def _plain(lines):
    """Traceback text without ANSI colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))


@pytest.mark.shell("ipython")
def test_ipython_traceback(runner):
    frames, done, out, err = runner.execute("def g():\n    return 1/0\n\ng()", execution_count=7)
    assert out == "" and err == ""
    assert len(frames) == 1 and frames[0]["type"] == "error"
    e = frames[0]
    assert e["ename"] == "ZeroDivisionError" and e["evalue"] == "division by zero"
    text = _plain(e["traceback"])
    assert "Traceback (most recent call last)" in text.splitlines()[1]
    assert "runner.py" not in text and "cb_" not in text
    assert "Cell In [7], line 4" in text and "----> 4 g()" in text
    assert "Cell In [7], line 2, in g()" in text and "----> 2     return 1/0" in text
    assert text.endswith("ZeroDivisionError: division by zero")
    assert done["status"] == "error"
    assert (done["ename"], done["evalue"], done["traceback"]) == (
        e["ename"], e["evalue"], e["traceback"])


@pytest.mark.shell("minimal")
def test_error_traceback_without_runner_frames(runner):
    frames, done, out, err = runner.execute("def g():\n    return 1/0\n\ng()")
    assert out == "" and err == ""
    assert len(frames) == 1 and frames[0]["type"] == "error"
    e = frames[0]
    assert e["ename"] == "ZeroDivisionError" and e["evalue"] == "division by zero"
    text = "\n".join(e["traceback"])
    assert text.startswith("Traceback (most recent call last):")
    assert "runner.py" not in text and "cb_" not in text
    assert 'line 4, in <module>' in text and "g()" in text
    assert 'line 2, in g' in text and "return 1/0" in text
    assert text.endswith("ZeroDivisionError: division by zero")
    assert done["status"] == "error"
    assert (done["ename"], done["evalue"], done["traceback"]) == (
        e["ename"], e["evalue"], e["traceback"])
    assert done["user_expressions"] == {}


def test_chained_exception(runner):
    code = "try:\n    1/0\nexcept Exception as e:\n    raise ValueError('v') from e"
    frames, done, _, _ = runner.execute(code)
    text = "\n".join(frames[0]["traceback"])
    assert "ZeroDivisionError" in text and "direct cause" in text
    assert frames[0]["ename"] == "ValueError" and "runner.py" not in text


def test_syntax_error(runner):
    frames, done, _, _ = runner.execute("x = 1\ny = (1,\n")
    e = frames[0]
    assert e["ename"] == "SyntaxError"
    # IPython compiles as codeop does, which says "incomplete input"
    assert ("never closed" if runner.shell == "minimal" else "incomplete input") in e["evalue"]
    text = _plain(e["traceback"])
    assert "line 2" in text and "y = (1," in text and "^" in text
    assert "Traceback" not in text and "runner.py" not in text
    frames, done, _, _ = runner.execute("for x in 1 2:\n  pass")
    assert frames[0]["ename"] == "SyntaxError" and done["status"] == "error"
    # nothing of the broken cell ran
    frames, _, _, _ = runner.execute("'x' in globals()")
    assert frames[0]["data"]["text/plain"] == "False"


def test_indentation_error(runner):
    frames, _, _, _ = runner.execute("if 1:\nprint(1)")
    assert frames[0]["ename"] == "IndentationError"


def test_system_exit_is_an_error(runner):
    frames, done, _, _ = runner.execute("import sys; sys.exit(3)")
    assert frames[0]["ename"] == "SystemExit" and done["status"] == "error"
    assert runner.execute("1")[0][0]["data"]["text/plain"] == "1"


def test_an_error_too_large_for_its_frames_still_ends_the_cell(runner):
    # the kernel drops a done frame over CB_FRAME_REPLY_MAX: without one
    # the cell would wait for the wall-time limit
    frames, done, _, err = runner.execute("raise ValueError('x' * 5_000_000)")
    assert done["status"] == "error" and done["ename"] == "ValueError"
    assert len(json.dumps(done).encode()) < 4 * 1024 * 1024
    assert done["evalue"].startswith("xxx") and "over the" in err


def test_replies_too_large_for_their_frames_are_cut(runner):
    # (the kernel would wait for its assist deadline, then answer with nothing)
    runner.execute("class A:\n    pass\nA.__doc__ = 'd' * 5_000_000\na = A()\n"
                   "d = {'k%07d' % i: 0 for i in range(400_000)}")
    rep = runner.request({"type": "inspect", "code": "a", "cursor_pos": 1, "detail_level": 0})
    assert rep["type"] == "inspect_reply" and rep["found"]
    assert "ddd" in rep["data"]["text/plain"]
    rep = runner.request({"type": "complete", "code": "d['k", "cursor_pos": 4})
    assert rep["type"] == "complete_reply" and 0 < len(rep["matches"]) <= 500


def test_user_expressions(runner):
    _, done, _, _ = runner.execute("a = 2", user_expressions={"ok": "a * 3", "bad": "1/0",
                                                               "nope": "zz"})
    ue = done["user_expressions"]
    assert ue["ok"] == {"status": "ok", "data": {"text/plain": "6"}, "metadata": {}}
    assert ue["bad"]["status"] == "error" and ue["bad"]["ename"] == "ZeroDivisionError"
    assert isinstance(ue["bad"]["traceback"], list) and ue["bad"]["evalue"]
    assert ue["nope"]["ename"] == "NameError"
    _, done, _, _ = runner.execute("1/0", user_expressions={"ok": "a"})
    assert done["user_expressions"] == {}


def test_top_level_await(runner):
    frames, done, _, _ = runner.execute("import asyncio\nawait asyncio.sleep(0)\n"
                                        "async def f():\n    return 7\nawait f()")
    assert done["status"] == "ok", done
    assert frames[0]["data"]["text/plain"] == "7"


def test_future_flags_persist(runner):
    runner.execute("from __future__ import annotations")
    frames, _, _, _ = runner.execute("def f(x: undefined_name): pass\nf.__annotations__")
    assert frames[0]["data"]["text/plain"] == "{'x': 'undefined_name'}"


def test_inspect_getsource_of_cell_function(runner):
    runner.execute("def hello():\n    return 'hi'\n", execution_count=5)
    frames, done, _, _ = runner.execute("import inspect; inspect.getsource(hello)")
    assert frames[0]["data"]["text/plain"] == repr("def hello():\n    return 'hi'\n")


# ------------------------------------------------------------------ interrupts


def _wait_started(runner, marker=b"started"):
    # the runner's `started` frame waits for its ack before user code runs
    f = runner._recv1(10)
    assert f["type"] == "started", f
    runner.started.append(runner.seqs[-1])
    deadline = time.monotonic() + 10
    while marker not in runner.out:
        runner._pump(0.1)
        assert time.monotonic() < deadline, runner.err


def test_keyboard_interrupt_busy_loop(runner):
    runner.send({"type": "execute", "code": "print('started')\nwhile True:\n    pass",
                 "silent": False, "store_history": True, "user_expressions": {},
                 "allow_stdin": False, "execution_count": 1})
    _wait_started(runner)
    time.sleep(0.2)
    os.kill(runner.proc.pid, signal.SIGINT)
    err = runner.recv(10)
    assert err["type"] == "error" and err["ename"] == "KeyboardInterrupt"
    text = _plain(err["traceback"])
    assert "runner.py" not in text and "cb_" not in text
    assert ("<module>" if runner.shell == "minimal" else "----> 2 while True:") in text
    done = runner.recv(10)
    assert done["type"] == "done" and done["status"] == "error"
    assert done["ename"] == "KeyboardInterrupt"
    # still alive and usable
    assert runner.execute("1 + 1")[0][0]["data"]["text/plain"] == "2"


def test_keyboard_interrupt_in_sleep(runner):
    runner.send({"type": "execute", "code": "import time\nprint('started')\ntime.sleep(60)",
                 "silent": False, "store_history": True, "user_expressions": {},
                 "allow_stdin": False, "execution_count": 1})
    _wait_started(runner)
    os.kill(runner.proc.pid, signal.SIGINT)
    assert runner.recv(10)["ename"] == "KeyboardInterrupt"
    assert runner.recv(10)["type"] == "done"


def test_sigint_when_idle_is_ignored(runner):
    for _ in range(3):
        os.kill(runner.proc.pid, signal.SIGINT)
        time.sleep(0.05)
    time.sleep(0.2)
    assert runner.proc.poll() is None
    frames, done, _, _ = runner.execute("3")
    assert done["status"] == "ok" and frames[0]["data"]["text/plain"] == "3"


def test_interrupt_storm_keeps_frames_intact(runner):
    """Many SIGINTs while the cell sends many frames: the stream stays parseable."""
    code = ("print('started')\nimport time\nt = time.time()\n"
            "while time.time() - t < 1.5:\n    display({'k': 'x' * 20000})\n")
    runner.send({"type": "execute", "code": code, "silent": False, "store_history": True,
                 "user_expressions": {}, "allow_stdin": False, "execution_count": 1})
    _wait_started(runner)
    for _ in range(20):
        os.kill(runner.proc.pid, signal.SIGINT)
        time.sleep(0.01)
    while True:
        f = runner.recv(20)
        if f["type"] == "done":
            break
        assert f["type"] in ("display", "error")
    assert runner.execute("'alive'")[0][0]["data"]["text/plain"] == "'alive'"


# ------------------------------------------------------------------ stdin


def _start_input_cell(runner, code):
    runner.send({"type": "execute", "code": code, "silent": False, "store_history": True,
                 "user_expressions": {}, "allow_stdin": True, "execution_count": 1})
    f = runner.recv(10)
    assert f["type"] == "input_request", f
    return f


def _finish(runner):
    frames = []
    while True:
        f = runner.recv(10)
        if f["type"] == "done":
            return frames, f
        frames.append(f)


def test_input_roundtrip(runner):
    f = _start_input_cell(runner, "print('before')\nname = input('Name: ')\nname.upper()")
    assert f == {"type": "input_request", "prompt": "Name: ", "password": False}
    assert runner.out == b"before\n"     # flushed before the request
    runner.send({"type": "input_reply", "value": "bob"})
    frames, done = _finish(runner)
    assert done["status"] == "ok"
    assert frames[0]["data"]["text/plain"] == "'BOB'"


def test_input_eof(runner):
    _start_input_cell(runner, "input()")
    runner.send({"type": "input_reply", "value": "\x04"})
    frames, done = _finish(runner)
    assert frames[0]["ename"] == "EOFError" and done["status"] == "error"


def test_input_error_reply(runner):
    _start_input_cell(runner, "input()")
    runner.send({"type": "input_reply", "error": "no client"})
    frames, done = _finish(runner)
    assert frames[0]["ename"] == "EOFError"


def test_getpass_is_password(runner):
    f = _start_input_cell(runner, "import getpass\np = getpass.getpass()\nlen(p)")
    assert f["password"] is True and f["prompt"] == "Password: "
    runner.send({"type": "input_reply", "value": "secret"})
    frames, done = _finish(runner)
    assert frames[0]["data"]["text/plain"] == "6"


def test_from_getpass_import(runner):
    f = _start_input_cell(runner, "from getpass import getpass\ngetpass('pw?')")
    assert f["password"] is True and f["prompt"] == "pw?"
    runner.send({"type": "input_reply", "value": "x"})
    frames, done = _finish(runner)
    assert done["status"] == "ok"


def test_stdin_readline_bridge(runner):
    _start_input_cell(runner, "import sys\nline = sys.stdin.readline()\nline")
    runner.send({"type": "input_reply", "value": "abc"})
    frames, done = _finish(runner)
    assert frames[0]["data"]["text/plain"] == repr("abc\n")


def test_stdin_readline_without_stdin_is_eof(runner):
    frames, done, _, _ = runner.execute("import sys; sys.stdin.readline()")
    assert frames[0]["data"]["text/plain"] == "''"


def test_input_not_allowed(runner):
    frames, done, _, _ = runner.execute("input('x')", allow_stdin=False)
    e = frames[0]
    assert e["ename"] == "StdinNotImplementedError"
    assert e["evalue"] == ("raw_input was called, but this frontend does not support "
                           "input requests.")
    assert done["status"] == "error"


def test_interrupt_during_input(runner):
    _start_input_cell(runner, "input('wait: ')")
    time.sleep(0.1)
    os.kill(runner.proc.pid, signal.SIGINT)
    frames, done = _finish(runner)
    assert frames[0]["ename"] == "KeyboardInterrupt"
    assert "runner.py" not in "\n".join(frames[0]["traceback"])
    assert done["status"] == "error"
    assert runner.execute("2")[0][0]["data"]["text/plain"] == "2"


def test_interrupt_that_lands_in_runner_code_during_input(runner):
    """A SIGINT that arrives while the input wait is in the runner's own code
    (reading the socket, between two selects) is only noted there; the wait
    must raise it, not wait on for a reply that never comes (seen in CI,
    under load).  The note is set by hand, as the handler would."""
    runner.send({"type": "execute", "code": "import sys\n"
                 "sys.modules['_cellblock_runner']._S.pending = True\n"
                 "input('wait: ')", "silent": False, "store_history": True,
                 "user_expressions": {}, "allow_stdin": True, "execution_count": 1})
    frames, done = _finish(runner)
    frames = [f for f in frames if f["type"] != "input_request"]
    assert frames[0]["ename"] == "KeyboardInterrupt", frames
    tb = "\n".join(frames[0]["traceback"])
    assert not re.search(r"cb_\w+\.py", tb), tb     # none of the runner's own files
    assert done["status"] == "error"
    assert runner.execute("2")[0][0]["data"]["text/plain"] == "2"


def test_two_inputs(runner):
    _start_input_cell(runner, "a = input('a')\nb = input('b')\na + b")
    runner.send({"type": "input_reply", "value": "x"})
    f = runner.recv(10)
    assert f["type"] == "input_request" and f["prompt"] == "b"
    runner.send({"type": "input_reply", "value": "y"})
    frames, done = _finish(runner)
    assert frames[0]["data"]["text/plain"] == "'xy'"


# ------------------------------------------------------------------ complete / inspect


def _complete(runner, code, pos=None):
    r = runner.request({"type": "complete", "code": code,
                        "cursor_pos": len(code) if pos is None else pos})
    assert r["type"] == "complete_reply"
    return r


def test_complete_globals_builtins_keywords(runner):
    runner.execute("my_variable = 1\nmy_function = len")
    r = _complete(runner, "my_")
    assert r["matches"] == ["my_function", "my_variable"]
    assert (r["cursor_start"], r["cursor_end"]) == (0, 3)
    assert "print" in _complete(runner, "pri")["matches"]
    assert "while" in _complete(runner, "whi")["matches"]
    r = _complete(runner, "x = my_v + 1", pos=8)
    assert r["matches"] == ["my_variable"] and (r["cursor_start"], r["cursor_end"]) == (4, 8)


@pytest.mark.shell("ipython")
def test_complete_attributes_ipython(runner):
    """IPython's completer (jedi, as under ipykernel): the match replaces the
    attribute only, and its types come in the metadata."""
    runner.execute("import os\nclass C:\n    alpha = 1\n    def beta(self): pass\nc = C()")
    r = _complete(runner, "c.")
    assert r["matches"] == ["alpha", "beta"] and (r["cursor_start"], r["cursor_end"]) == (2, 2)
    types = r["metadata"]["_jupyter_types_experimental"]
    assert [(t["text"], t["type"]) for t in types] == [("alpha", "instance"), ("beta", "function")]
    r = _complete(runner, "os.path.jo")
    assert r["matches"] == ["join"] and r["cursor_start"] == len("os.path.")


@pytest.mark.shell("minimal")
def test_complete_attributes(runner):
    runner.execute("import os\nclass C:\n    alpha = 1\n    def beta(self): pass\nc = C()")
    r = _complete(runner, "c.")
    assert r["matches"] == ["c.alpha", "c.beta"] and r["cursor_start"] == 0
    r = _complete(runner, "os.path.jo")
    assert r["matches"] == ["os.path.join"]
    assert _complete(runner, "c._")["matches"]  # private only when asked
    # never calls anything: a call in the chain is not followed
    runner.execute("def boom():\n    raise SystemExit\n")
    assert _complete(runner, "boom().x")["matches"] == []


@pytest.mark.shell("minimal")
def test_complete_no_side_effects(runner):
    runner.execute("class P:\n    @property\n    def p(self):\n        print('RAN')\n        return 1\n"
                   "o = P()")
    n = len(runner.out)
    _complete(runner, "o.p.re")
    runner.execute("pass")
    # getattr of a property runs it (as IPython's does); no call syntax is evaluated
    assert _complete(runner, "print('x').")["matches"] == []


@pytest.mark.shell("minimal")
def test_complete_unicode_positions(runner):
    runner.execute("d\u00e9j\u00e0 = 1\n\U0001F600x = 2" if False else "d\u00e9j\u00e0_vu = 1")
    code = "s = '\U0001F600\U0001F600'; d\u00e9j"
    r = _complete(runner, code)
    assert r["matches"] == ["d\u00e9j\u00e0_vu"]
    # code points: the emoji count one each
    assert r["cursor_end"] == len(code) and r["cursor_start"] == len(code) - 3


@pytest.mark.shell("minimal")
def test_complete_imports(runner):
    r = _complete(runner, "import jso")
    assert "json" in r["matches"] and r["cursor_start"] == 7
    r = _complete(runner, "from os import pa")
    assert "path" in r["matches"]
    r = _complete(runner, "import xml.etree.Ele")
    assert "xml.etree.ElementTree" in r["matches"]
    r = _complete(runner, "from xml.etree import Ele")
    assert "ElementTree" in r["matches"]
    r = _complete(runner, "from jso")
    assert "json" in r["matches"]


@pytest.mark.shell("minimal")
def test_complete_dict_keys(runner):
    runner.execute("dd = {'apple': 1, 'apricot': 2, 3: 4}")
    r = _complete(runner, "dd['ap")
    assert r["matches"] == ["apple", "apricot"] and r["cursor_start"] == 4


def test_inspect(runner):
    runner.execute("def func(a, b=2):\n    '''Adds things.'''\n    return a + b\n")
    r = runner.request({"type": "inspect", "code": "func", "cursor_pos": 2, "detail_level": 0})
    assert r["type"] == "inspect_reply" and r["found"] is True
    text = _plain([r["data"]["text/plain"]])
    assert "func(a, b=2)" in text and "Adds things." in text
    r = runner.request({"type": "inspect", "code": "func", "cursor_pos": 4, "detail_level": 1})
    assert "return a + b" in _plain([r["data"]["text/plain"]])
    r = runner.request({"type": "inspect", "code": "func(1, ", "cursor_pos": 8,
                        "detail_level": 0})
    assert r["found"] and "func(a, b=2)" in _plain([r["data"]["text/plain"]])
    r = runner.request({"type": "inspect", "code": "nothing_here", "cursor_pos": 3,
                        "detail_level": 0})
    assert r == {"type": "inspect_reply", "found": False, "data": {}, "metadata": {}}


def test_frames_carry_the_request_seq(runner):
    """Every frame names the request it answers (a done for another one is
    refused by the kernel), and a frame the runner cannot read is answered."""
    runner.execute("print(1); display(2); 3", execution_count=1)
    assert runner.seqs and set(runner.seqs[-3:]) == {runner.seq}
    assert runner.started[-1] == runner.seq, "an execute begins with `started`"
    # a request the runner's JSON parser cannot read: answered, never dropped
    deep = "[" * 5000 + "]" * 5000
    body = ('{"type":"execute","seq":99,"code":"1","user_expressions":{"x":%s}}' % deep)
    data = body.encode()
    runner.sock.sendall(len(data).to_bytes(4, "big") + data)
    f = runner.recv(30)
    assert f["type"] == "bad_request" and "RecursionError" in f["error"]
    # and the runner still works
    frames, done, out, err = runner.execute("print('alive')")
    assert done["status"] == "ok" and out == "alive\n"


def test_is_complete(runner):
    def ic(code):
        return runner.request({"type": "is_complete", "code": code})

    assert ic("x = 1") == {"type": "is_complete_reply", "status": "complete"}
    r = ic("for i in x:")
    assert r["status"] == "incomplete" and r["indent"] == "    "
    r = ic("def f():\n    if x:")
    assert r["status"] == "incomplete" and r["indent"] == "        "
    assert ic("x = (1,")["status"] == "incomplete"
    assert ic("1 +* 2")["status"] == "invalid"
    assert ic("for i in x:\n    pass\n\n")["status"] == "complete"
    assert ic("!ls")["status"] == "complete"
    assert ic("%time x")["status"] == "complete"
    # a continuation line inside brackets is not an open block (jupyter_kernel_test's sample)
    assert ic("x = [1,\n 2]")["status"] == "complete"
    assert ic("if x:\n    y = [1,\n        2]")["status"] == "incomplete"


# ------------------------------------------------------------------ help


@pytest.mark.parametrize("code", ["zip?", "?zip", "zip??"])
def test_help_page(runner, code):
    frames, done, out, _ = runner.execute(code)
    assert frames == [] and done["status"] == "ok" and out == ""
    assert len(done["payload"]) == 1
    p = done["payload"][0]
    assert p["source"] == "page" and p["start"] == 0
    assert "zip" in p["data"]["text/plain"] and "Docstring" in p["data"]["text/plain"]


def test_help_page_source(runner):
    runner.execute("def mine():\n    return 123\n")
    p = runner.execute("mine??")[1]["payload"][0]
    assert "return 123" in _plain([p["data"]["text/plain"]])
    p = runner.execute("mine?")[1]["payload"][0]
    assert "Signature: mine()" in _plain([p["data"]["text/plain"]])


def test_help_not_found(runner):
    _, done, out, _ = runner.execute("no_such_thing?")
    if runner.shell == "ipython":      # IPython prints it; there is no page
        assert done["payload"] == [] and out == "Object `no_such_thing` not found.\n"
    else:
        assert "not found" in done["payload"][0]["data"]["text/plain"]


def test_runner_death_on_eof(runner):
    runner.sock.close()
    assert runner.proc.wait(5) == 0
