"""Real clients driving the kernel: nbclient executing a notebook (what
papermill and `jupyter nbconvert --execute` do).  `jupyter console` is
covered elsewhere.
"""

import os
import time

import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell, new_notebook

from .helpers import descendants, kernel_name, wait_gone


def _notebook(*sources):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": kernel_name(), "display_name": kernel_name(),
                                 "language": "python"}
    return nb


def _merged(outputs):
    """Consecutive stream outputs of one name merged (nbconvert's
    coalesce_streams): the protocol lets a kernel split a stream anywhere."""
    out = []
    for o in outputs:
        if (o.output_type == "stream" and out and out[-1]["output_type"] == "stream"
                and out[-1]["name"] == o.name):
            out[-1]["text"] += o.text
        else:
            out.append(dict(o))
    return out


def _run(nb, **kw):
    """Execute with nbclient owning the kernel; afterwards no process started
    for it may survive."""
    before = descendants(os.getpid())
    client = NotebookClient(nb, kernel_name=kernel_name(), timeout=60, startup_timeout=60,
                            iopub_timeout=10, **kw)
    t0 = time.monotonic()
    try:
        client.execute()
    finally:
        left = wait_gone(descendants(os.getpid()) - before, 10)
        assert not left, f"nbclient left kernel processes behind: {sorted(left)}"
    return nb, time.monotonic() - t0


def test_nbclient_executes_notebook():
    nb = _notebook("print('hello from nb')",
                   "x = 40\nx + 2",
                   "from IPython.display import HTML, display\ndisplay(HTML('<b>nb</b>'))",
                   "import sys\nprint('to err', file=sys.stderr)",
                   "raise ValueError('nb boom')",
                   "x")
    nb, elapsed = _run(nb, allow_errors=True)
    c = nb.cells
    assert _merged(c[0].outputs) == [
        {"output_type": "stream", "name": "stdout", "text": "hello from nb\n"}]
    assert c[0].execution_count == 1
    assert len(c[1].outputs) == 1 and c[1].outputs[0].output_type == "execute_result"
    assert c[1].outputs[0].data["text/plain"] == "42"
    assert c[1].outputs[0].execution_count == c[1].execution_count == 2
    assert c[2].outputs[0].output_type == "display_data"
    assert c[2].outputs[0].data["text/html"] == "<b>nb</b>"
    assert _merged(c[3].outputs) == [
        {"output_type": "stream", "name": "stderr", "text": "to err\n"}]
    assert len(c[4].outputs) == 1 and c[4].outputs[0].output_type == "error"
    assert c[4].outputs[0].ename == "ValueError" and c[4].outputs[0].evalue == "nb boom"
    # allow_errors: execution went on, state kept
    assert c[5].outputs[0].data["text/plain"] == "40"
    # language_info copied from kernel_info_reply
    li = nb.metadata["language_info"]
    assert li["name"] == "python" and li["file_extension"] == ".py"
    # no 4-s iopub timeouts per cell (a missing idle would cost 6 x 10 s here)
    assert elapsed < 45, f"notebook took {elapsed:.0f} s"


def test_nbclient_stops_at_error():
    nb = _notebook("print(1)", "1/0", "print('never')")
    with pytest.raises(CellExecutionError) as exc:
        _run(nb)
    assert "ZeroDivisionError" in str(exc.value)
    assert nb.cells[2].outputs == []


def test_nbclient_input_fails_fast():
    """nbclient sends allow_stdin=False: input() must raise, not hang."""
    nb = _notebook("input('never answered: ')", "print('next')")
    nb, elapsed = _run(nb, allow_errors=True)
    assert nb.cells[0].outputs[0].output_type == "error"
    assert _merged(nb.cells[1].outputs)[0]["text"] == "next\n"
    assert elapsed < 45
