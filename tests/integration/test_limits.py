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


@pytest.mark.parametrize("clone3", [True, False], ids=["clone3", "no_clone3"])
def test_clone_into_cgroup(kernel_factory, tmp_path, clone3):
    """On cgroup v2 the sandbox is cloned into its cgroup (clone3 with
    CLONE_INTO_CGROUP: limited from its first instruction, no attach after),
    unless --no-clone-into-cgroup asks for the attach; v1 always attaches.
    The launcher says which at info level.  CB_EXPECT_LIMITS as for the
    banner (the test guest: "cgroup v2")."""
    import os
    flags = ["--log-level", "info"] + ([] if clone3 else ["--no-clone-into-cgroup"])
    log = tmp_path / "kernel.log"
    with open(log, "w") as f:
        k = spec_kernel(kernel_factory, tmp_path, *flags, stderr=f)
        assert k.execute("1").status == "ok"      # the sandbox is up: its lines are written
    text = log.read_text()
    said = [l.split("the sandbox's init ", 1)[1] for l in text.splitlines()
            if "the sandbox's init " in l]
    expect = os.environ.get("CB_EXPECT_LIMITS") or ("cgroup v" if os.geteuid() == 0 else "")
    if "DEGRADED limits" in text:
        assert not expect.startswith("cgroup"), text[-3000:]
        assert said == [], said                   # no cgroup: nothing to say
        return
    assert len(said) == 1, text[-3000:]
    if "isolation: cellblock sandbox" in text and "; cgroup v2 (" in text:
        want = ("started in its cgroup (clone3 CLONE_INTO_CGROUP)" if clone3 else
                "was moved into its cgroup after clone (--no-clone-into-cgroup)")
    else:
        assert "; cgroup v1 (" in text, text[-3000:]
        assert expect != "cgroup v2", text[-3000:]
        want = "was moved into its cgroup after clone (cgroup v1)"
    assert said[0].split(" ", 1)[1] == want, said


def test_banner_says_what_holds_the_limits(kernel_factory, tmp_path):
    """The banner names what enforces --memory/--pids/--cpus: a cgroup (v1 or
    v2) or, when none can be used, DEGRADED with the cause, in the same words
    on v1 and v2.  CB_EXPECT_LIMITS (the test guest sets it: "cgroup v2",
    "DEGRADED") says which this machine must show; without it, root on this
    build host has cgroup v1."""
    import os
    k = spec_kernel(kernel_factory, tmp_path, "--memory", "200M", "--pids", "64")
    assert k.execute("1").status == "ok"          # the sandbox is up: its line is in force
    k.kc.kernel_info()
    banner = k.kc.get_shell_msg(timeout=30)["content"]["banner"]
    expect = os.environ.get("CB_EXPECT_LIMITS") or ("cgroup v" if os.geteuid() == 0 else "")
    if "DEGRADED" in banner:
        # the cause, then what still holds
        assert "DEGRADED limits: no cgroup (cgroup v" in banner and "not" in banner, banner
        assert "rlimits only (address space 200 MiB, nproc 64" in banner, banner
    else:
        assert "memory 200 MiB no swap, pids 64" in banner, banner
    if expect:
        assert expect in banner, (expect, banner)
        if expect.startswith("cgroup"):
            assert "DEGRADED" not in banner, banner
