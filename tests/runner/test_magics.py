"""IPython syntax: IPython's own under the IPython shell, the minimal
runner's subset (cb_magics) otherwise."""

import os
import re

import pytest


def _plain(lines):
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))


def test_shell_command(runner):
    frames, done, out, err = runner.execute("print('a')\n!echo hi; echo oops >&2\nprint('b')")
    assert done["status"] == "ok", done
    if runner.shell == "ipython":
        # as through ipykernel's pty: one stream, CR LF line ends
        assert out == "a\nhi\r\noops\r\nb\n" and err == ""
    else:
        assert out == "a\nhi\nb\n" and err == "oops\n"


def test_shell_indented_and_getoutput(runner):
    frames, done, out, _ = runner.execute(
        "for i in range(2):\n    !echo loop\nfiles = !printf 'x\\ny\\n'\nfiles")
    assert out == ("loop\r\nloop\r\n" if runner.shell == "ipython" else "loop\nloop\n")
    assert frames[0]["data"]["text/plain"] == "['x', 'y']"


def test_strings_and_continuations_untouched(runner):
    code = ('s = """\n!not a command\n%not a magic\n"""\n'
            "t = (5\n%2)\n"
            "u = '!x %y'\n"
            "v = 7 \\\n% 4\n"
            "s, t, u, v")
    frames, done, out, _ = runner.execute(code)
    assert done["status"] == "ok", done
    assert frames[0]["data"]["text/plain"] == (
        "('\\n!not a command\\n%not a magic\\n', 1, '!x %y', 3)")
    assert out == ""


def test_line_numbers_preserved(runner):
    frames, done, _, _ = runner.execute("%pwd\n!true\nx = 1\n1/0")
    text = _plain(frames[0]["traceback"])
    assert "line 4" in text and "1/0" in text


@pytest.mark.shell("minimal")
def test_magic_line_shown_in_traceback(runner):
    frames, done, _, _ = runner.execute("%time 1/0")
    assert frames[-1]["ename"] == "ZeroDivisionError"
    assert "%time 1/0" in "\n".join(frames[-1]["traceback"]) or "1/0" in "\n".join(
        frames[-1]["traceback"])


def test_time(runner):
    frames, done, out, _ = runner.execute("%time sum(range(100))")
    assert frames[0]["data"]["text/plain"] == "4950"
    assert re.match(r"CPU times: user .+, sys: .+, total: .+\nWall time: .+\n$", out), out


def test_cell_time(runner):
    frames, done, out, _ = runner.execute("%%time\nx = 6\nx * 7")
    assert done["status"] == "ok", done
    assert frames[0]["data"]["text/plain"] == "42"
    assert "Wall time" in out
    frames, done, out, _ = runner.execute("x")
    assert frames[0]["data"]["text/plain"] == "6"


@pytest.mark.shell("minimal")
def test_cell_time_error_line(runner):
    frames, done, _, _ = runner.execute("%%time\nx = 1\nraise ValueError('in cell')")
    text = "\n".join(frames[0]["traceback"])
    assert "line 3" in text and "ValueError: in cell" in text


def test_timeit(runner):
    frames, done, out, _ = runner.execute("%timeit -n 10 -r 3 sum(range(10))")
    assert done["status"] == "ok", done
    assert re.match(
        r"^[\d.]+ (ns|\xb5s|ms|s) \xb1 [\d.]+ (ns|\xb5s|ms|s) per loop "
        r"\(mean \xb1 std\. dev\. of 3 runs, 10 loops each\)\n$", out), out
    frames, done, out, _ = runner.execute("y = 3\n%timeit y + 1")
    assert re.search(r"per loop \(mean \xb1 std\. dev\. of 7 runs, [\d,]+ loops each\)", out), out


@pytest.mark.shell("minimal")
def test_pwd_cd(runner, tmp_path):
    frames, _, _, _ = runner.execute("%pwd")
    assert frames[0]["data"]["text/plain"] == repr(str(tmp_path))
    (tmp_path / "sub").mkdir()
    frames, done, out, _ = runner.execute("%cd sub\nimport os; os.getcwd()")
    assert out == str(tmp_path / "sub") + "\n"
    assert frames[0]["data"]["text/plain"] == repr(str(tmp_path / "sub"))
    frames, done, _, _ = runner.execute("%cd /no/such/dir")
    assert frames[0]["ename"] == "UsageError"


def test_env(runner):
    frames, done, out, _ = runner.execute("%env FOO=bar\n%env FOO")
    assert out == "env: FOO=bar\n"
    assert frames[0]["data"]["text/plain"] == "'bar'"


def test_pip(runner):
    frames, done, out, err = runner.execute("%pip --version", timeout=120)
    assert done["status"] == "ok"
    assert "pip" in out


def test_pip_failure_mentions_network(runner):
    frames, done, out, err = runner.execute(
        "%pip install --no-index cellblock-no-such-package-xyz", timeout=120)
    assert "network" in err


@pytest.mark.shell("ipython")
def test_unknown_magic_ipython(runner):
    """As IPython (and ipykernel) have it: the UsageError on stderr, no error output."""
    frames, done, out, err = runner.execute("print('x')\n%foo bar")
    assert frames == [] and out == "x\n"
    assert err == "UsageError: Line magic function `%foo` not found.\n"
    assert (done["status"], done["ename"], done["traceback"]) == ("error", "UsageError", [])


@pytest.mark.shell("minimal")
def test_unknown_magic(runner):
    frames, done, out, _ = runner.execute("print('x')\n%foo bar")
    assert frames[0]["ename"] == "UsageError"
    assert frames[0]["evalue"] == "Line magic function `%foo` not found."
    assert frames[0]["traceback"] == ["UsageError: Line magic function `%foo` not found."]
    frames, done, out, _ = runner.execute("%%nope\nx")
    assert frames[0]["ename"] == "UsageError" and "%%nope" in frames[0]["evalue"]


def test_writefile_and_sh(runner, tmp_path):
    frames, done, out, _ = runner.execute("%%writefile hello.txt\nline one\nline two")
    assert out == "Writing hello.txt\n"
    assert (tmp_path / "hello.txt").read_text() == "line one\nline two\n"
    frames, done, out, _ = runner.execute("%%sh\necho from sh\ncat hello.txt")
    assert out == "from sh\nline one\nline two\n"


def test_magic_assignment(runner):
    frames, done, _, _ = runner.execute("here = %pwd\nhere == __import__('os').getcwd()")
    assert frames[0]["data"]["text/plain"] == "True"
