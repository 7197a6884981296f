"""A cell that uses up the sandbox's memory ends with a MemoryError, and the
runner goes on (cb_memory).  Without a cgroup the launcher enforces --memory
as an address-space rlimit (RLIMIT_AS), which is what these runners get:
the cell's objects then hold the memory the runner needs to report the error,
read the next request and load its shell.  Before cb_memory the runner died
of it ("exited with code 1": the session's state and the next cell's result
lost, issue 19)."""

import pytest

from .rclient import Runner

MiB = 1 << 20
# room for the interpreter, IPython's shell and its first traceback (about
# 50 MiB of address space) and some for the cells: filled in well under a second
LIMIT = 160 * MiB
# fills the address space with small objects: nothing is left after the error
FILL_SMALL = "x = []\nwhile True:\n    x.append(str(len(x)) * 20)\n"
# 16 MiB at a time, as tests/integration/test_limits.py does
FILL_CHUNKS = "chunks = []\nfor i in range(64):\n    chunks.append(bytearray(16 << 20))\n"


@pytest.fixture
def limited(request, tmp_path):
    shell = request.param
    env = {"CELLBLOCK_SHELL": "minimal"} if shell == "minimal" else None
    r = Runner(cwd=str(tmp_path), env=env, address_space=LIMIT)
    if r.hello.get("shell") != shell:
        r.close()
        pytest.skip("the sandbox's Python has no IPython")
    yield r
    r.close()


def _result(r, code, **kw):
    frames, done, out, err = r.execute(code, **kw)
    results = [f["data"]["text/plain"] for f in frames if f["type"] == "execute_result"]
    return done, results, out, err


def _alive(r):
    assert r.proc.poll() is None, "the runner died: %r" % r.err[-2000:]


@pytest.mark.parametrize("limited", ["ipython", "minimal"], indirect=True)
@pytest.mark.parametrize("fill", [FILL_SMALL, FILL_CHUNKS], ids=["small", "chunks"])
@pytest.mark.parametrize("shell_first", [False, True], ids=["at_once", "shell_loaded"])
def test_cell_that_uses_up_memory_gets_memory_error(limited, fill, shell_first):
    r = limited
    if shell_first:
        # a cell the fast path leaves to the shell: it is loaded before the fill
        done, _, _, _ = _result(r, "%who" if r.shell == "ipython" else "pass")
        assert done["status"] == "ok", done
    done, _, out, err = _result(r, fill, execution_count=2, timeout=120)
    _alive(r)
    assert done["status"] == "error" and done["ename"] == "MemoryError", (done, err[-2000:])
    # the memory is still held, and the next cell's result arrives
    done, results, _, err = _result(r, "1 + 1", execution_count=3)
    assert done["status"] == "ok" and results == ["2"], (done, err[-2000:])
    # freed: the session goes on with its state and, under IPython, its shell
    done, _, _, err = _result(r, "x = chunks = None", execution_count=4)
    assert done["status"] == "ok", (done, err[-2000:])
    done, results, _, err = _result(r, "len(In) > 0", execution_count=5)
    assert done["status"] == "ok" and results == ["True"], (done, err[-2000:])
    if r.shell == "ipython":
        done, results, _, err = _result(r, "get_ipython() is not None", execution_count=6)
        assert results == ["True"], (done, err[-2000:])
    _alive(r)


@pytest.mark.parametrize("limited", ["ipython"], indirect=True)
def test_shell_loads_once_memory_is_freed(limited):
    """A cell that needs the IPython shell while the memory is used up, before
    the shell was loaded, is told why it cannot run; once freed the shell
    loads and takes the earlier cells over (In, Out, the history)."""
    r = limited
    done, _, _, _ = _result(r, FILL_CHUNKS, timeout=120)
    assert done["ename"] == "MemoryError", done
    done, _, _, _ = _result(r, "%who", execution_count=2)
    if done["status"] == "error":   # the shell did not fit beside the chunks
        assert done["ename"] == "MemoryError" and "--memory" in done["evalue"], done
    done, _, _, _ = _result(r, "del chunks", execution_count=3)
    assert done["status"] == "ok", done
    done, _, out, err = _result(r, "%who", execution_count=4)
    assert done["status"] == "ok", (done, err[-2000:])
    assert "i" in out.split(), out
    done, results, _, _ = _result(r, "In[1].startswith('chunks = []')", execution_count=5)
    assert results == ["True"], done
    _alive(r)
