"""Sandbox()'s own start (issue 21): ready from the kernel_info reply and a
status on iopub, the working directory from the banner, no first execute."""

import time

from cellblock import Sandbox

import cellblock.sandbox as sandbox_mod

from .conftest import KSPEC_DIR


def _no_probe(monkeypatch):
    """Fails the test if Sandbox() runs code before the caller does."""
    def probe(self):
        raise AssertionError("Sandbox() ran a first execute to learn the working directory")
    monkeypatch.setattr(sandbox_mod.Filesystem, "_workdir", probe)


def test_start_needs_no_first_execute(monkeypatch):
    _no_probe(monkeypatch)
    with Sandbox(kernelspec_path=KSPEC_DIR) as sb:
        assert sb.workdir == "/home/user"
        assert "Sandbox: cellblock sandbox:" in sb.kernel_info["banner"]
        ex = sb.run_code("import os; os.getcwd()")
        assert ex.error is None and ex.text == repr(sb.workdir)
        assert ex.execution_count == 1


def test_workdir_from_the_banner_without_a_sandbox(monkeypatch):
    _no_probe(monkeypatch)
    with Sandbox(kernelspec_path=KSPEC_DIR, extra_args=["--sandbox", "none"]) as sb:
        assert sb.workdir.startswith("/tmp/cellblock-"), sb.workdir
        ex = sb.run_code("import os; os.getcwd()")
        assert ex.text == repr(sb.workdir)


def test_output_of_the_first_cell_is_not_lost():
    """iopub is subscribed before Sandbox() returns: the first cell's stream
    output, sent at once, arrives whole."""
    for _ in range(3):
        with Sandbox(kernelspec_path=KSPEC_DIR) as sb:
            ex = sb.run_code("print('first'); 'done'")
            assert "".join(ex.logs.stdout) == "first\n" and ex.text == "'done'"


def test_restart_waits_the_same_way(monkeypatch):
    with Sandbox(kernelspec_path=KSPEC_DIR) as sb:
        sb.run_code("x = 1")
        _no_probe(monkeypatch)
        t0 = time.monotonic()
        sb.restart()
        assert time.monotonic() - t0 < 30
        ex = sb.run_code("'x' in dir()")
        assert ex.text == "False"
