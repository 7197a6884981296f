"""The client's snapshots (docs/SNAPSHOTS.md): checkpoint/rollback/
checkpoints/forget in any tier, pause/resume/fork in the gvisor tier and
(--pausable, by CRIU) the namespaces tier, and
the kernel's reasons as SnapshotError."""

import os
import shutil
import tempfile

import pytest

from cellblock import Checkpoint, SnapshotError

from .conftest import KSPEC_DIR


def test_checkpoint_and_rollback(sandbox_factory):
    sb = sandbox_factory()
    sb.run_code("x = 1")
    sb.files.write("data.txt", "before")
    c = sb.checkpoint("before")
    assert isinstance(c, Checkpoint) and c.name == "before" and c.execution_count >= 1
    sb.run_code("x = 2")
    sb.files.write("data.txt", "after")
    r = sb.rollback("before")
    assert r.execution_count == c.execution_count and r.processes_ended == 0
    assert any("threads" in s for s in r.lost)
    assert sb.run_code("x").text == "1"
    assert sb.files.read("data.txt", format="text") == "before"
    assert [k.name for k in sb.checkpoints()] == ["before"]
    sb.forget("before")
    assert sb.checkpoints() == []
    with pytest.raises(SnapshotError, match="no checkpoint named 'before'"):
        sb.rollback("before")


def test_pause_outside_gvisor_names_the_cause(sandbox_factory):
    sb = sandbox_factory()
    with pytest.raises(SnapshotError, match="CRIU"):
        sb.pause()
    assert sb.run_code("1 + 1").text == "2"  # the session goes on


def _needs_gvisor():
    if shutil.which("runsc", path="/usr/sbin:/usr/bin:/sbin:/bin") is None or os.geteuid() != 0:
        pytest.skip("the gvisor tier needs runsc and root")


def _needs_criu():
    """A criu that dumps on this kernel, as the launcher takes it: Debian's,
    or the one scripts/criu.sh put beside it."""
    import subprocess
    if os.geteuid() != 0:
        pytest.skip("--pausable needs root")
    for criu in ("/usr/sbin/criu", "/usr/local/sbin/criu"):
        if os.access(criu, os.X_OK) and subprocess.run(
                [criu, "check"], capture_output=True, timeout=120).returncode == 0:
            return
    pytest.skip("no criu dumps on this kernel (sh scripts/criu.sh)")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("tier", ["gvisor", "namespaces"])
def test_pause_resume_fork(sandbox_factory, tier):
    """An agent's pause, resume and fork: the gvisor tier, and the
    namespaces tier by CRIU (--pausable)."""
    if tier == "gvisor":
        _needs_gvisor()
        kw = {"isolation": "gvisor"}
    else:
        _needs_criu()
        kw = {"isolation": "namespaces"}
    extra = ["--image-dir"] if tier == "gvisor" else ["--pausable", "--image-dir"]
    store = tempfile.mkdtemp(prefix="cb-client-images-")
    try:
        sb = sandbox_factory(extra_args=extra + [store], **kw)
        sb.run_code("import random\ncount = 10")
        clones = sb.fork(2)
        try:
            for i, c in enumerate(clones):
                c.run_code("count += %d" % (i + 1))
            assert [c.run_code("count").text for c in clones] == ["11", "12"]
            assert sb.run_code("count").text == "10"
            draws = {c.run_code("random.random()").text for c in clones}
            assert len(draws) == 2
            image = clones[0].pause()
            assert not clones[0].is_running()
            from cellblock import Sandbox
            back = Sandbox.resume(image, kernelspec_path=KSPEC_DIR,
                                  extra_args=extra + [store])
            try:
                assert back.run_code("count").text == "11"
            finally:
                back.kill()
        finally:
            for c in clones:
                c.kill()
    finally:
        shutil.rmtree(store, ignore_errors=True)


def _fork_asks(sb, monkeypatch, n, **kwargs):
    """The keyword arguments sb.fork(n, **kwargs) starts each clone with
    (the pause stubbed out: its image is "IMAGE"; no clone is started)."""
    from cellblock import Sandbox
    asked = []

    class Clone(Sandbox):
        def __init__(self, **kw):
            asked.append(kw)

    monkeypatch.setattr(Sandbox, "pause", lambda self, keep_kernel=False: "IMAGE")
    sb.__class__ = Clone
    try:
        sb.fork(n, **kwargs)
    finally:
        sb.__class__ = Sandbox
    return asked


def test_fork_gives_the_clones_the_values_of_envs(sandbox_factory, monkeypatch):
    """The clones' kernels get --env NAME (and --secret) in their flags and
    need the values in their environment too, as the original's had them."""
    sb = sandbox_factory(envs={"CB_FORK_ENV": "from-envs"})
    kw = _fork_asks(sb, monkeypatch, 1)[0]
    assert kw["extra_args"][-2:] == ["--resume", "IMAGE"]
    # started as fork starts a clone, less the image to resume
    clone = sandbox_factory(**dict(kw, extra_args=kw["extra_args"][:-2]))
    assert clone.run_code("import os\nos.environ.get('CB_FORK_ENV')").text == "'from-envs'"


def test_fork_with_extra_args_still_resumes_the_image(sandbox_factory, monkeypatch):
    """extra_args given to fork replace the session's flags; the clones still
    start from the image (they got a fresh kernel before: --resume dropped)."""
    asked = _fork_asks(sandbox_factory(), monkeypatch, 2, extra_args=["--timeout", "9"])
    assert [kw["extra_args"] for kw in asked] == [["--timeout", "9", "--resume", "IMAGE"]] * 2
