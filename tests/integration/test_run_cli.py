"""`cellblock run`: a script in a fresh sandbox from a shell or CI job.

Exit statuses, streaming, --out (artifacts with their names, displays),
--json (one Execution object), stdin input, and bad usage."""
import hashlib
import json
import os
import re
import select
import subprocess
import time

import pytest

pytestmark = pytest.mark.cellblock_only

BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
CELLBLOCK = os.path.join(BUILD, "bin", "cellblock")


def run(args, code=None, timeout=60):
    return subprocess.run([CELLBLOCK, "run", *args], input=code.encode() if code else None,
                          capture_output=True, timeout=timeout)


def test_ok_streams_and_saves_files(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import hashlib, os, pandas as pd, matplotlib.pyplot as plt\n"
        "df = pd.DataFrame({'x': [1, 2, 3], 'y': [1, 4, 9]})\n"
        "os.makedirs('plots')\n"
        "df.to_csv('squares.csv'); df.plot(x='x', y='y'); plt.savefig('plots/sq.png')\n"
        "print(df.y.sum())\n"
        "print('sha', hashlib.sha256(open('plots/sq.png', 'rb').read()).hexdigest())\n")
    out = tmp_path / "out"
    p = run(["--out", str(out), str(script)])
    assert p.returncode == 0, p.stderr.decode()
    stdout = p.stdout.decode()
    assert stdout.startswith("14\n"), stdout
    sha = stdout.split("sha ", 1)[1].split()[0]
    png = (out / "plots" / "sq.png").read_bytes()
    assert hashlib.sha256(png).hexdigest() == sha          # byte-exact, with its name
    assert (out / "squares.csv").read_text().startswith(",x,y\n0,1,1\n")
    assert (out / "display-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the open figure
    assert b"saved" in p.stderr


def test_exit_status_on_python_error():
    p = run(["-"], "print('before')\n1/0\n")
    assert p.returncode == 1
    assert p.stdout.decode() == "before\n"
    # IPython's traceback, in colour unless the runner is asked for NoColor
    assert b"ZeroDivisionError: division by zero" in re.sub(rb"\x1b\[[0-9;]*m", b"", p.stderr)


def test_exit_status_on_timeout():
    t = time.monotonic()
    p = run(["--timeout", "1", "-"],
            "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
            "    except KeyboardInterrupt:\n        pass\n", timeout=60)
    assert p.returncode == 124, (p.returncode, p.stderr.decode())
    assert b"time limit of 1 s" in p.stderr
    assert time.monotonic() - t < 30


def test_exit_status_on_memory_limit():
    # 512 MiB in steps: far past --memory 128M, harmless if the limit failed
    p = run(["--memory", "128M", "-"],
            "chunks = [bytearray(16 << 20) for _ in range(32)]\nprint('allocated')\n")
    assert p.returncode in (1, 125), (p.returncode, p.stderr.decode())
    assert b"allocated" not in p.stdout
    if p.returncode == 1:
        assert b"MemoryError" in p.stderr


def test_bad_usage():
    p = run(["--memory", "lots", "-"], "print(1)")
    assert p.returncode == 2 and b"--memory" in p.stderr
    p = run([])
    assert p.returncode == 2 and b"usage" in p.stderr
    p = run(["/nonexistent/script.py"])
    assert p.returncode == 2 and b"/nonexistent/script.py" in p.stderr


def test_json_execution_object():
    p = run(["--json", "-"], "import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
                              "display({'text/plain': 'shown'}, raw=True)\n6 * 7\n")
    assert p.returncode == 0, p.stderr.decode()
    ex = json.loads(p.stdout)
    assert "".join(ex["logs"]["stdout"]) == "out\n"
    assert "".join(ex["logs"]["stderr"]) == "err\n"
    assert ex["error"] is None and ex["exit_code"] == 0 and ex["execution_count"] == 1
    mains = [r for r in ex["results"] if r["is_main_result"]]
    assert [r["data"]["text/plain"] for r in mains] == ["42"]
    assert any(r["data"].get("text/plain") == "shown" for r in ex["results"])
    p = run(["--json", "-"], "raise ValueError('nope')\n")
    ex = json.loads(p.stdout)
    assert p.returncode == 1 and ex["exit_code"] == 1
    assert ex["error"]["name"] == "ValueError" and ex["error"]["value"] == "nope"


def test_json_keeps_characters_split_across_reads():
    """A UTF-8 character split between two reads of the pipe used to turn
    every non-ASCII character of that read into '?' (a copy of the stream
    code that the kernel's relay did not share)."""
    p = run(["--json", "-"], "import sys\nsys.stdout.write('a' + '\u00e9' * 100000)\n"
                              "sys.stdout.flush()\nprint('\\n' + '\u20ac' * 50001)\n")
    assert p.returncode == 0, p.stderr.decode()
    out = "".join(json.loads(p.stdout)["logs"]["stdout"])
    assert out == "a" + "\u00e9" * 100000 + "\n" + "\u20ac" * 50001 + "\n"
    assert "?" not in out and "\ufffd" not in out


def test_output_streams_while_running():
    proc = subprocess.Popen([CELLBLOCK, "run", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"import time\nprint('first', flush=True)\ntime.sleep(3)\nprint('second')\n")
        proc.stdin.close()
        r, _, _ = select.select([proc.stdout], [], [], 2.5)
        assert r, "no output before the script ended"
        assert proc.stdout.readline() == b"first\n"
        assert proc.poll() is None                 # still running: it was streamed
        assert proc.wait(timeout=30) == 0
        assert proc.stdout.read() == b"second\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_help_is_the_readme_options_block():
    """`cellblock-kernel --help` is generated from the one flag table; the
    README's Options block is that text, so the two cannot drift apart."""
    p = subprocess.run([os.path.join(BUILD, "bin", "cellblock-kernel"), "--help"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    text = p.stdout + p.stderr
    for flag in ("--memory SIZE", "--isolation namespaces|gvisor|microvm", "--network none|host|allow",
                 "--workdir-source DIR|cwd", "--env NAME[=VALUE]", "--timeout SECONDS"):
        assert flag in text, flag
    assert all(len(line) <= 100 for line in text.splitlines()), "help lines wrap at 100 columns"
    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "README.md")
    with open(readme) as f:
        md = f.read()
    block = md.split("`cellblock-kernel --help` (a kernelspec's `argv` fixes them):\n\n```\n", 1)[1]
    block = block.split("```\n", 1)[0]
    assert block == text, "README's Options block differs from --help: regenerate it"
