"""cellblock.Sandbox.run_code against the built kernel: results, logs,
errors, execution_count, streaming callbacks, timeouts, artifacts."""

import hashlib
import re
import time

import pytest

from cellblock import Execution, ExecutionError, OutputMessage, Result


def test_result_logs_and_count(sb):
    first = sb.run_code("1")
    ex = sb.run_code("import sys\nprint('out')\nprint('err', file=sys.stderr)\nx = 6 * 7\nx")
    assert isinstance(ex, Execution)
    assert ex.error is None
    assert ex.text == "42"
    assert ex.execution_count == first.execution_count + 1
    assert "".join(ex.logs.stdout) == "out\n"
    assert "".join(ex.logs.stderr) == "err\n"
    [main] = ex.results
    assert isinstance(main, Result) and main.is_main_result
    assert main.text == "42" and main.formats() == ["text"]
    # no value: no main result
    ex2 = sb.run_code("y = 1")
    assert ex2.results == [] and ex2.text is None
    assert ex2.execution_count == ex.execution_count + 1


def test_error(sb):
    ex = sb.run_code("def f():\n    raise ValueError('bad value')\nf()")
    assert isinstance(ex.error, ExecutionError)
    assert ex.error.name == "ValueError"
    assert ex.error.value == "bad value"
    assert isinstance(ex.error.traceback, str)
    # IPython's traceback (coloured, "Cell In [N]") or the minimal runner's ("<cell-N>")
    tb = re.sub(r"\x1b\[[0-9;]*m", "", ex.error.traceback)
    assert "ValueError: bad value" in tb and ("Cell In [" in tb or "<cell-" in tb), tb
    assert isinstance(ex.execution_count, int)
    # the kernel keeps going, state kept
    assert sb.run_code("f.__name__").text == "'f'"
    ex = sb.run_code("def (")
    assert ex.error.name == "SyntaxError"


def test_rich_results(sb):
    ex = sb.run_code(
        "class R:\n"
        "    def _repr_html_(self): return '<b>hi</b>'\n"
        "    def _repr_markdown_(self): return '**hi**'\n"
        "    def _repr_svg_(self): return '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n"
        "    def _repr_json_(self): return {'a': [1, 2]}\n"
        "    def _repr_latex_(self): return '$x$'\n"
        "    def __repr__(self): return 'R()'\n"
        "display(R())\n"
        "R()\n")
    assert ex.error is None, ex.error and ex.error.traceback
    assert len(ex.results) == 2
    shown, main = ex.results
    assert not shown.is_main_result and main.is_main_result
    for r in ex.results:
        assert r.text == "R()"
        assert r.html == "<b>hi</b>"
        assert r.markdown == "**hi**"
        assert r.svg.startswith("<svg")
        assert r.json == {"a": [1, 2]}
        assert r.latex == "$x$"
        assert set(r.formats()) >= {"text", "html", "markdown", "svg", "json", "latex"}
        assert r.data["text/html"] == r.html
        assert r.artifact is None and r.file_name is None
    assert ex.text == "R()"


def test_streaming_callbacks_in_order(sb):
    seen = []
    t0 = time.monotonic()
    code = ("import sys, time\n"
            "print('one', flush=True); time.sleep(0.3)\n"
            "print('two', file=sys.stderr, flush=True); time.sleep(0.3)\n"
            "print('three', flush=True); time.sleep(0.3)\n"
            "display(1)\n"
            "raise KeyError('k')\n")
    ex = sb.run_code(code,
                     on_stdout=lambda m: seen.append(("out", str(m), time.monotonic() - t0, m)),
                     on_stderr=lambda m: seen.append(("err", str(m), time.monotonic() - t0, m)),
                     on_result=lambda r: seen.append(("result", r.text, time.monotonic() - t0, r)),
                     on_error=lambda e: seen.append(("error", e.name, time.monotonic() - t0, e)))
    done = time.monotonic() - t0
    assert [(k, v) for k, v, _, _ in seen] == [
        ("out", "one\n"), ("err", "two\n"), ("out", "three\n"), ("result", "1"), ("error", "KeyError")]
    # streamed as they happened, not at the end
    assert seen[0][2] < done - 0.6
    assert seen[1][2] < done - 0.3
    msg = seen[0][3]
    assert isinstance(msg, OutputMessage) and msg.line == "one\n" and not msg.error
    assert seen[1][3].error and isinstance(seen[1][3].timestamp, int)
    assert ex.logs.stdout == ["one\n", "three\n"] and ex.logs.stderr == ["two\n"]


def test_timeout_interrupts(sb):
    sb.run_code("kept = 'still here'")
    t0 = time.monotonic()
    ex = sb.run_code("import time\nprint('start', flush=True)\nwhile True: time.sleep(0.05)", timeout=1)
    took = time.monotonic() - t0
    assert took < 6, took
    assert ex.timed_out
    assert ex.error is not None and ex.error.name == "TimeoutError"
    assert "timeout" in ex.error.value and "interrupted" in ex.error.value
    assert "KeyboardInterrupt" in ex.error.traceback
    assert ex.logs.stdout == ["start\n"]
    # interrupted, not restarted: the state survives
    assert sb.run_code("kept").text == "'still here'"


def test_kernel_side_timeout(sandbox_factory):
    s = sandbox_factory(timeout=1)
    t0 = time.monotonic()
    ex = s.run_code("import time\ntime.sleep(30)")
    assert time.monotonic() - t0 < 10
    assert ex.timed_out and ex.error.name == "TimeoutError"
    assert "time limit of 1 s" in ex.error.value
    assert s.run_code("2 + 2").text == "4"


def test_envs_for_one_run(sb):
    ex = sb.run_code("import os\nos.environ.get('CB_TEST_VAR')", envs={"CB_TEST_VAR": "v1"})
    assert ex.text == "'v1'"
    assert sb.run_code("repr(os.environ.get('CB_TEST_VAR'))").text == "'None'"


def test_only_python(sb):
    with pytest.raises(ValueError):
        sb.run_code("console.log(1)", language="js")


PNG_CELL = r'''
import hashlib, os, struct, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
raw = b"".join(b"\x00" + b"".join(bytes([x * 8, y * 8, 128]) for x in range(32)) for y in range(32))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32, 32, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
os.makedirs("out/plots", exist_ok=True)
open("out/plots/grad.png", "wb").write(png)
open("table.csv", "w").write("name,value\nä,1\nb,2\n")
open("notes.txt", "w").write("line one\nline two\n")
open("data.json", "w").write('{\n  "k":   [1, 2, 3]\n}\n')
{n: hashlib.sha256(open(n, "rb").read()).hexdigest()
 for n in ["out/plots/grad.png", "table.csv", "notes.txt", "data.json"]}
'''


def test_artifacts_names_and_bytes(sb, tmp_path):
    ex = sb.run_code(PNG_CELL)
    assert ex.error is None, ex.error and ex.error.traceback
    import ast
    want = ast.literal_eval(ex.text)
    arts = {r.file_name: r for r in ex.artifacts}
    assert set(arts) == set(want)
    for name, r in arts.items():
        assert r.artifact["sha256"] == want[name]
        assert not r.is_main_result
        data = r.content_bytes()
        assert hashlib.sha256(data).hexdigest() == want[name]
        assert r.artifact["size"] == len(data)
        saved = r.save(str(tmp_path))
        assert saved == str(tmp_path / name)
        assert hashlib.sha256(open(saved, "rb").read()).hexdigest() == want[name]
    png = arts["out/plots/grad.png"]
    assert png.mime == "image/png" and png.png and "png" in png.formats()
    assert png.content_bytes().startswith(b"\x89PNG")
    assert arts["table.csv"].mime == "text/csv"
    assert arts["table.csv"].extra["text/csv"] == "name,value\nä,1\nb,2\n"
    assert arts["notes.txt"].text == "line one\nline two\n"
    assert arts["data.json"].json == {"k": [1, 2, 3]}     # exact bytes came from files.read
    # the reply lists them too
    listed = {a["path"] for a in ex.reply_metadata["cellblock"]["artifacts"]}
    assert listed == set(want)
    # unchanged files are not sent again
    assert sb.run_code("1").artifacts == []
    # save() to a file path
    p = tmp_path / "copy.png"
    png.save(str(p))
    assert p.read_bytes() == png.content_bytes()
