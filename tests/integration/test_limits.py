"""Per-cell limits enforced by the kernel, seen as a frontend sees them:
--timeout (interrupt, then kill after a grace period), --memory (the cell's
error names the limit), --max-output (a notice, the rest dropped).  After
each, the kernel keeps serving.  All allocations are bounded so a failing
limit could not hurt the machine."""
import pytest

from .test_artifacts import spec_kernel

pytestmark = pytest.mark.cellblock_only


def test_timeout_interrupts_and_state_survives(kernel_factory, tmp_path):
    k = spec_kernel(kernel_factory, tmp_path, "--timeout", "2")
    assert k.execute("kept = 41").status == "ok"
    r = k.execute("while True: pass", timeout=30)
    assert r.status == "error"
    assert r.content["ename"] == "KeyboardInterrupt", r.content
    assert "time limit of 2 s" in r.stream("stderr"), r.stream("stderr")
    # the interrupt was enough: the sandbox and its state are still there
    r = k.execute("kept + 1")
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "42"


def test_timeout_kills_a_cell_that_ignores_interrupts(kernel_factory, tmp_path):
    k = spec_kernel(kernel_factory, tmp_path, "--timeout", "1")
    assert k.execute("kept = 1").status == "ok"
    code = ("import time\n"
            "while True:\n"
            "    try:\n"
            "        time.sleep(0.05)\n"
            "    except KeyboardInterrupt:\n"
            "        pass\n")
    r = k.execute(code, timeout=30)
    assert r.status == "error"
    assert r.content["ename"] == "TimeoutError", r.content
    assert "time limit of 1 s" in r.content["evalue"] and "lost" in r.content["evalue"]
    errs = r.of_type("error")
    assert len(errs) == 1 and errs[0]["content"]["ename"] == "TimeoutError"
    # a fresh sandbox serves the next cell; the old state is gone, as the error said
    r = k.execute("'kept' in globals()")
    assert r.status == "ok"
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "False"


def test_memory_limit_names_the_cause(kernel_factory, tmp_path):
    k = spec_kernel(kernel_factory, tmp_path, "--memory", "128M")
    # 512 MiB in 16 MiB steps: far past the limit, harmless if it did not hold
    code = ("chunks = []\n"
            "for i in range(32):\n"
            "    chunks.append(bytearray(16 << 20))\n"
            "print('allocated everything')\n")
    r = k.execute(code, timeout=60)
    assert r.status == "error"
    assert "allocated everything" not in r.stream("stdout")
    ename = r.content["ename"]
    # either Python saw it (MemoryError) or the OOM killer did, and the kernel says so
    assert ename == "MemoryError", r.content
    if r.content.get("evalue"):  # the kernel's own message when the OOM killer struck
        assert "memory" in r.content["evalue"].lower(), r.content
    r = k.execute("1 + 1")
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "2"


def test_max_output_caps_a_cell(kernel_factory, tmp_path):
    k = spec_kernel(kernel_factory, tmp_path, "--max-output", "1M")
    r = k.execute("import sys\nfor i in range(3 * 1024):\n    sys.stdout.write('y' * 1023 + '\\n')\n"
                  "print('done-marker')", timeout=60)
    assert r.status == "ok"
    out = r.stream("stdout")
    assert len(out.encode()) <= 1 << 20, len(out)
    assert "done-marker" not in out
    assert "output limit of 1 MiB" in r.stream("stderr"), r.stream("stderr")[-300:]
    # the limit is per cell: the next one prints normally
    r = k.execute("print('next cell')")
    assert r.stream("stdout") == "next cell\n"
