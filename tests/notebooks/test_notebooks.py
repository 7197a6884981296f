"""Notebooks written the way real ones are (a pandas/numpy/matplotlib
tutorial with magics in its first cell, helper modules written with
%%writefile and re-read by autoreload, scripts run with %run) executed by
nbclient -- as nbconvert and papermill do -- on cellblock and on the stock
ipykernel, their outputs compared cell by cell.

Compared modulo what must differ (tests/integration/ipython_compare.py):
working directories, cell file names, addresses, timings; and minus the
files a cell wrote, which cellblock also returns as artifacts.
"""

import copy
import glob
import os
import shutil

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient
from nbclient.util import run_sync

from integration import ipython_compare as ic

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOKS = sorted(glob.glob(os.path.join(HERE, "*.ipynb")))
KERNELS = ("cellblock", ic.REFERENCE)
CELL_TIMEOUT = 120

pytestmark = pytest.mark.timeout(600)


def _need(name):
    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        pytest.skip("no %s kernelspec" % name)


def execute(path, kernel, workdir):
    """Run the notebook; -> (executed notebook, the kernel's cwd and HOME)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name=kernel, timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": workdir}})
    with client.setup_kernel():
        text = []
        run_sync(client.kc.execute_interactive)(
            "import os\nprint(os.getcwd())\nprint(os.path.expanduser('~'))",
            store_history=False, timeout=60,
            output_hook=lambda m: text.append(m["content"]["text"])
            if m["msg_type"] == "stream" else None)
        cwd, home = "".join(text).split("\n")[:2]
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    return nb, cwd, home


def normalised_outputs(cell, cwd, home):
    outs = []
    for o in copy.deepcopy(cell.get("outputs", [])):
        if isinstance(o.get("metadata"), dict) and "cellblock" in o["metadata"]:
            continue                                   # an artifact (cellblock only)
        if o["output_type"] == "stream" and outs and outs[-1]["output_type"] == "stream" \
                and outs[-1]["name"] == o["name"]:
            outs[-1]["text"] += o["text"]
            continue
        outs.append(dict(o))
    msgs = [["out", o["output_type"], o] for o in outs]
    msgs = ic._norm(msgs, cwd, home)
    if "%%time" in cell.source or "%time " in cell.source:
        msgs = ic.blur_timings([[ch, "stream" if o.get("output_type") == "stream" else t, o]
                                for ch, t, o in msgs])
    return msgs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_same_outputs_as_ipykernel(path, tmp_path, monkeypatch):
    for k in KERNELS:
        _need(k)
    # ipykernel keeps %store and history in its IPYTHONDIR: a fresh one, as
    # every sandbox has (cellblock's kernel passes no environment inside)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipythondir"))
    runs = {}
    for k in KERNELS:
        workdir = tmp_path / k
        workdir.mkdir()
        shutil.copy(path, workdir)
        runs[k] = execute(path, k, str(workdir))
    (mine, mcwd, mhome), (theirs, tcwd, thome) = runs["cellblock"], runs[ic.REFERENCE]
    assert len(mine.cells) == len(theirs.cells)
    compared = 0
    for i, (a, b) in enumerate(zip(mine.cells, theirs.cells)):
        if a.cell_type != "code":
            continue
        assert a.get("execution_count") == b.get("execution_count"), i
        na, nb_ = normalised_outputs(a, mcwd, mhome), normalised_outputs(b, tcwd, thome)
        assert na == nb_, "cell %d %r differs from ipykernel:\n%s" % (
            i, a.source[:80], ic.describe(na, nb_))
        compared += 1
    assert compared >= 10
    # and the notebooks do what tutorials do: figures, tables, files
    kinds = {o.get("output_type") for c in mine.cells for o in c.get("outputs", [])}
    assert "display_data" in kinds or "execute_result" in kinds
