"""The runner's IPython shell (cb_shell) and its fast path (cb_fast), frame by frame.

What these check that the side-by-side tests against ipykernel
(tests/integration/test_ipython*.py) cannot: when the shell is loaded, that
a plain cell gives the same frames whether the shell was there or not,
undecodable kernel frames, the fallback when IPython cannot be loaded.
"""

import os
import re
import shutil
import signal
import time

import pytest

from .rclient import RUNNER, Runner

pytestmark = pytest.mark.shell("ipython")

# plain cells the fast path takes (results of built-in scalars, errors,
# output, the _ variables) and, last, one whose result needs the shell
PLAIN_CELLS = [
    "1+1",
    "x = 5",
    "x * 2",
    "print('hi')",
    "import sys\nprint('err', file=sys.stderr)",
    "import math\nmath.sqrt(2)",
    "'text'",
    "b'bytes\\x00'",
    "\n\n1 + 2",
    "x;",
    "None",
    "1/0",
    "def f(a):\n    return a / 0\n\nf(1)",
    "_",
    "(3 + 4j)",
    "for _ in range(3):\n    pass",
    "7",
    "_",
    "import warnings\nwarnings.warn('old', DeprecationWarning)",
    "raise KeyError('k')",
    "10**5000",
    "[1, 2, 3]",
]
HISTORY_CELL = "In, sorted(Out), _i2, _3, _ih[-2], __, ___, _oh[3]"


def _plain(lines):
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))


def _shell_loaded(r):
    """Whether IPython is imported in the runner (sqlite3's extension module,
    which IPython's history imports, is mapped), seen from outside."""
    with open("/proc/%d/maps" % r.proc.pid) as f:
        return "_sqlite3" in f.read()


def _run_all(r, cells, first_count=1):
    """Each cell's (code, frames, done, stdout, stderr), the runner's cell
    file prefix (one per sandbox) replaced by a fixed one."""
    import json
    prefix = r.hello["cell_prefix"]

    def same(v):
        return json.loads(json.dumps(v).replace(prefix, "/tmp/CELLS/"))

    out = []
    for i, code in enumerate(cells):
        frames, done, o, e = r.execute(code, execution_count=first_count + i)
        out.append((code, same(frames), same(done), same(o), same(e)))
    return out


def test_hello_names_the_shell_and_its_version(runner):
    import IPython
    assert runner.hello["shell"] == "ipython"
    assert runner.hello["shell_version"] == IPython.__version__
    r = Runner(env={"CELLBLOCK_SHELL": "minimal"})
    try:
        assert (r.hello["shell"], r.hello["shell_version"]) == ("minimal", "")
    finally:
        r.close()


def test_fast_path_gives_what_the_shell_gives(tmp_path):
    """The same cells, once on the fast path (the shell loaded only when a
    cell needs it) and once with the shell loaded first: the same frames,
    output, errors and history, byte for byte."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fast = Runner(cwd=str(tmp_path / "a"), env={"CELLBLOCK_SHELL": "ipython-on-demand"})
    shell = Runner(cwd=str(tmp_path / "b"), env={"CELLBLOCK_SHELL": "ipython-on-demand"})
    try:
        # a request that needs the shell, without touching history or counts
        assert shell.request({"type": "is_complete", "code": "x = 1"})["status"] == "complete"
        assert _shell_loaded(shell)
        a = _run_all(fast, PLAIN_CELLS)
        # the fast path ran everything but the last cell without IPython
        b = _run_all(shell, PLAIN_CELLS)
        for (code, fa, da, oa, ea), (_, fb, db, ob, eb) in zip(a, b):
            assert (fa, da, oa, ea) == (fb, db, ob, eb), code
        ha = fast.execute(HISTORY_CELL, execution_count=len(PLAIN_CELLS) + 1)
        hb = shell.execute(HISTORY_CELL, execution_count=len(PLAIN_CELLS) + 1)
        assert ha[:2] == hb[:2]
        assert "'x = 5'" in ha[0][0]["data"]["text/plain"]
        ha = fast.execute("%history -n", execution_count=len(PLAIN_CELLS) + 2)
        hb = shell.execute("%history -n", execution_count=len(PLAIN_CELLS) + 2)
        n = PLAIN_CELLS.index("1/0") + 1
        assert ha == hb and "  %d: 1/0" % n in ha[2]
    finally:
        fast.close()
        shell.close()
    # the error cells carried IPython's tracebacks
    tb = _plain([f for f in a[n - 1][1] if f["type"] == "error"][0]["traceback"])
    assert "Cell In [%d], line 1" % n in tb and "----> 1 1/0" in tb


def test_plain_first_cell_does_not_wait_for_ipython():
    r = Runner(env={"CELLBLOCK_SHELL": "ipython-on-demand"})
    try:
        frames, done, _, _ = r.execute("1+1")
        assert frames[0]["data"]["text/plain"] == "2"
        assert not _shell_loaded(r)
        # a third-party import in a plain cell has the shell loaded first
        # (libraries look for IPython when imported)
        frames, done, _, _ = r.execute("import numpy as np\nnp.float64(2) + 1",
                                       execution_count=2)
        assert done["status"] == "ok" and frames[0]["data"]["text/plain"] == "3.0"
        assert _shell_loaded(r)
        frames, _, _, _ = r.execute("get_ipython().execution_count, _1, _2, Out",
                                    execution_count=3)
        assert frames[0]["data"]["text/plain"] == "(3, 2, 3.0, {1: 2, 2: 3.0})"
    finally:
        r.close()


def test_blank_cell_on_the_fast_path_takes_no_number():
    """As IPython: a cell of white space runs nothing and is not in the
    history (the kernel gives it no number: the next cell has the same)."""
    r = Runner(env={"CELLBLOCK_SHELL": "ipython-on-demand"})
    try:
        _, done, _, _ = r.execute("  \n", execution_count=1)
        assert done["status"] == "ok"
        r.execute("x = 1", execution_count=1)
        frames, _, _, _ = r.execute("get_ipython().execution_count, In", execution_count=2)
        assert frames[0]["data"]["text/plain"] == \
            "(2, ['', 'x = 1', 'get_ipython().execution_count, In'])"
    finally:
        r.close()


def test_shell_loads_while_idle():
    r = Runner()
    try:
        deadline = time.monotonic() + 60
        while not _shell_loaded(r):
            assert time.monotonic() < deadline, "IPython not loaded after 60 s idle"
            time.sleep(0.05)
        # and the first cell then is the shell's
        frames, done, _, _ = r.execute("%who_ls")
        assert frames[0]["data"]["text/plain"] == "[]"
    finally:
        r.close()


def test_heavy_modules_wait_until_needed(runner):
    frames, _, _, _ = runner.execute(
        "import sys\n[m for m in ('jedi', 'parso', 'prompt_toolkit') if m in sys.modules]")
    assert frames[0]["data"]["text/plain"] == "[]"
    r = runner.request({"type": "complete", "code": "import sys\nsys.vers", "cursor_pos": 19})
    assert "version" in r["matches"]
    frames, _, _, _ = runner.execute("'jedi' in sys.modules, 'parso' in sys.modules")
    assert frames[0]["data"]["text/plain"] == "(True, True)"
    frames, done, _, _ = runner.execute(
        "from IPython.terminal.embed import InteractiveShellEmbed\n"
        "import IPython.terminal.embed as e\n"
        "InteractiveShellEmbed.__name__, type(e).__name__, 'prompt_toolkit' in sys.modules")
    assert done["status"] == "ok", done
    assert frames[0]["data"]["text/plain"] == "('InteractiveShellEmbed', 'module', True)"


@pytest.mark.shell("ipython", "minimal")
def test_working_directory_on_sys_path(runner, tmp_path):
    frames, done, _, _ = runner.execute(
        "with open('helper_mod.py', 'w') as f:\n    f.write('def hi():\\n    return 41\\n')\n"
        "import helper_mod\nhelper_mod.hi() + 1")
    assert done["status"] == "ok", done
    assert frames[0]["data"]["text/plain"] == "42"
    frames, _, _, _ = runner.execute(
        "import sys, os\n(sys.path[0] == os.getcwd(), sys.flags.isolated, sys.flags.no_user_site,"
        " sys.flags.ignore_environment)")
    assert frames[0]["data"]["text/plain"] == "(True, 1, 1, 1)"
    # the runner's own imports do not see the user's files
    (tmp_path / "select.py").write_text("raise ImportError('shadowed')\n")
    runner.request({"type": "is_complete", "code": "x"})
    assert runner.execute("'still' + ' fine'")[0][0]["data"]["text/plain"] == "'still fine'"


@pytest.mark.shell("ipython", "minimal")
def test_blank_path_entry_does_not_shadow_the_runner(runner, tmp_path):
    """'' is on sys.path as under ipykernel (the directory of the moment):
    a cell that moves to a directory holding select.py and json.py still
    gets its own modules from there, and the runner keeps its own."""
    frames, done, _, _ = runner.execute("import sys\n'' in sys.path")
    assert done["status"] == "ok" and frames[0]["data"]["text/plain"] == "True", (frames, done)
    sub = tmp_path / "moved"
    sub.mkdir()
    (sub / "select.py").write_text("raise ImportError('shadowed select')\n")
    (sub / "json.py").write_text("raise ImportError('shadowed json')\n")
    (sub / "cb_here.py").write_text("WHERE = 'moved'\n")
    frames, done, _, _ = runner.execute("import os\nos.chdir(%r)\nimport cb_here\ncb_here.WHERE"
                                        % str(sub))
    assert done["status"] == "ok", done
    assert frames[0]["data"]["text/plain"] == "'moved'"
    runner.request({"type": "is_complete", "code": "x"})
    assert runner.execute("'still' + ' fine'")[0][0]["data"]["text/plain"] == "'still fine'"


def test_writefile_then_import(runner):
    frames, done, out, _ = runner.execute("%%writefile helper.py\ndef hi():\n    return 'hi'")
    assert out == "Writing helper.py\n"
    frames, done, _, _ = runner.execute("import helper; helper.hi()")
    assert frames[0]["data"]["text/plain"] == "'hi'"


def _raw_frame(r, payload):
    r.sock.sendall(len(payload).to_bytes(4, "big") + payload)


@pytest.mark.shell("ipython", "minimal")
@pytest.mark.parametrize("payload,why", [
    (b"{not json", "not valid JSON"),
    (b"[" * 200000 + b"]" * 200000, "nested too deeply"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"code": "1"}', "no string member 'type'"),
    (b'{"type": "no_such_request"}', "unknown request type 'no_such_request'"),
])
def test_bad_request_is_answered(runner, payload, why):
    _raw_frame(runner, payload)
    f = runner.recv(10)
    assert f["type"] == "bad_request" and why in f["error"], f
    # the runner goes on
    assert runner.execute("6 * 7")[0][0]["data"]["text/plain"] == "42"


@pytest.mark.shell("ipython", "minimal")
def test_bad_length_ends_the_runner(runner):
    runner.sock.sendall((0).to_bytes(4, "big"))
    f = runner.recv(10)
    assert f["type"] == "bad_request" and "outside" in f["error"]
    assert runner.proc.wait(10) == 0


def test_stray_frames_are_dropped_silently(runner):
    runner.send({"type": "ack"})
    runner.send({"type": "input_reply", "value": "x"})
    frames, done, _, _ = runner.execute("1")
    assert frames == [{"type": "execute_result", "data": {"text/plain": "1"}, "metadata": {}}]


def _start(runner, code, **kw):
    req = {"type": "execute", "code": code, "silent": False, "store_history": True,
           "user_expressions": {}, "allow_stdin": False, "execution_count": 1}
    req.update(kw)
    runner.send(req)
    # the runner's `started` waits for its ack before the cell runs
    f = runner._recv1(10)
    assert f["type"] == "started", f
    runner.started.append(runner.seqs[-1])


def _wait_out(runner, marker):
    deadline = time.monotonic() + 20
    while marker not in runner.out:
        runner._pump(0.1)
        assert time.monotonic() < deadline, runner.err


def _finish(runner):
    frames = []
    while True:
        f = runner.recv(20)
        if f["type"] == "done":
            runner._drain_pipes()
            return frames, f
        frames.append(f)


def test_interrupt_in_the_shell(runner):
    runner.execute("%who")                      # the shell runs the cells from here on
    _start(runner, "print('started')\nx = 0\nwhile True:\n    x += 1")
    _wait_out(runner, b"started")
    time.sleep(0.2)
    os.kill(runner.proc.pid, signal.SIGINT)
    frames, done = _finish(runner)
    assert done["status"] == "error" and done["ename"] == "KeyboardInterrupt"
    text = _plain(frames[0]["traceback"])
    assert "----> 4     x += 1" in text or "----> 3 while True:" in text, text
    assert "cb_" not in text and "runner.py" not in text
    assert runner.execute("x > 0")[0][0]["data"]["text/plain"] == "True"


def test_interrupt_of_a_shell_command_ends_the_command(runner):
    """As with ipykernel's pexpect: ^C goes to the command, the cell goes on."""
    _start(runner, "!echo started; sleep 30\nprint('after', _exit_code)")
    _wait_out(runner, b"started")
    time.sleep(0.3)
    t = time.monotonic()
    os.kill(runner.proc.pid, signal.SIGINT)
    frames, done = _finish(runner)
    assert time.monotonic() - t < 10
    assert done["status"] == "ok", done
    assert runner.out.endswith(b"after -2\n")


def test_sigint_while_idle_with_shell_is_ignored(runner):
    runner.execute("%who")
    for _ in range(3):
        os.kill(runner.proc.pid, signal.SIGINT)
        time.sleep(0.05)
    assert runner.execute("5")[0][0]["data"]["text/plain"] == "5"


def test_payloads(runner, tmp_path):
    (tmp_path / "snippet.py").write_text("a = 1\n")
    _, done, _, _ = runner.execute("%load snippet.py")
    assert done["payload"] == [{"source": "set_next_input",
                                "text": "# %load snippet.py\na = 1\n", "replace": True}]
    _, done, _, _ = runner.execute("exit()")
    assert done["payload"] == [{"source": "ask_exit", "keepkernel": False}]
    _, done, _, _ = runner.execute("quit(keep_kernel=True)")
    assert done["payload"] == [{"source": "ask_exit", "keepkernel": True}]
    # obj? anywhere in a cell: the rest runs, the help is a page
    frames, done, _, _ = runner.execute("y = 1\ny?\nz = y + 1\nz")
    assert frames[0]["data"]["text/plain"] == "2"
    assert [p["source"] for p in done["payload"]] == ["page"]
    assert "Type:" in _plain([done["payload"][0]["data"]["text/plain"]])


def test_input_and_its_exception_class(runner):
    frames, done, _, _ = runner.execute(
        "from IPython.core.error import StdinNotImplementedError\n"
        "try:\n    input('x')\nexcept StdinNotImplementedError as e:\n    r = str(e)\nr")
    assert frames[0]["data"]["text/plain"] == (
        "'raw_input was called, but this frontend does not support input requests.'")
    _start(runner, "name = input('Name: ')\nname.upper()", allow_stdin=True)
    f = runner.recv(10)
    assert f == {"type": "input_request", "prompt": "Name: ", "password": False}
    runner.send({"type": "input_reply", "value": "bob"})
    frames, done = _finish(runner)
    assert frames[0]["data"]["text/plain"] == "'BOB'"


def test_debug_through_stdin(runner):
    runner.execute("def f(n):\n    return n / 0\nf(1)", execution_count=1)
    _start(runner, "%debug", allow_stdin=True, execution_count=2)
    f = runner.recv(10)
    assert f["type"] == "input_request" and f["prompt"] == "ipdb> "
    runner.send({"type": "input_reply", "value": "p n + 41"})
    f = runner.recv(10)
    assert f["type"] == "input_request"
    runner.send({"type": "input_reply", "value": "q"})
    frames, done = _finish(runner)
    assert done["status"] == "ok"
    out = _plain([runner.out.decode()])
    assert "----> 2     return n / 0" in out and "\n42\n" in out


def test_fallback_when_ipython_does_not_load(tmp_path):
    """hello said ipython, the shell then fails to load: one note on stderr,
    and the minimal runner serves the cells."""
    here = os.path.dirname(RUNNER)
    copy = tmp_path / "runner"
    shutil.copytree(here, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "cb_shell.py").write_text("raise ImportError('no shell today')\n")
    r = Runner(cwd=str(tmp_path), path=str(copy / "runner.py"))
    try:
        assert r.hello["shell"] == "ipython"
        frames, done, out, err = r.execute("%who")
        assert "the IPython shell could not be loaded (ImportError: no shell today)" in err
        assert frames[0]["ename"] == "UsageError"        # the minimal runner's magics
        frames, done, _, _ = r.execute("1+1; get_ipython() is None")
        assert frames[0]["data"]["text/plain"] == "True"
        frames, done, _, _ = r.execute("%time 6*7")
        assert frames[0]["data"]["text/plain"] == "42"
    finally:
        r.close()


@pytest.mark.shell("ipython", "minimal")
def test_undecodable_input_reply_fails_the_input(runner):
    _start(runner, "try:\n    input('x')\nexcept EOFError as e:\n    print('EOF:', e)",
           allow_stdin=True)
    assert runner.recv(10)["type"] == "input_request"
    _raw_frame(runner, b"{broken")
    frames, done = _finish(runner)
    assert done["status"] == "ok"
    assert b"EOF: the kernel's reply could not be read: frame is not valid JSON" in runner.out
