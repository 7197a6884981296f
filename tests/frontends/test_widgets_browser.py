"""Issue 12 in the real browser: ipywidgets in the classic Notebook with
Debian's jupyter-js-widgets nbextension, in headless Chromium.

The nbextension is enabled for this test's Notebook server only (its private
JUPYTER_CONFIG_DIR, nbconfig/notebook.json), never system-wide.  The
notebook (widgets_notebook.py) is run cell by cell by widgets_drive.mjs: an
IntSlider renders; moving it with the arrow keys runs a Python observer
whose print lands in an Output widget (not in the cell's output area);
`interact` renders again on change; a Button click runs its callback (a
Label's value changes); a tqdm.notebook loop draws and completes its bar;
a cell sees the slider's value and the clicks; a `%matplotlib notebook`
figure is painted on its canvas from the PNG frames the kernel sends over
its comm, and moving the mouse over it brings the coordinates back from the
kernel.  The same run on the
stock ipykernel (`python3` kernelspec) is the reference.  Screenshots go to
build/test-artifacts/widgets-<kernel>*.png.

Then the same notebook through `jupyter nbconvert --execute` and nbclient,
for the widget state nbclient stores in the notebook's metadata.
"""

import copy
import json
import os
import re
import subprocess

import nbformat
import pytest

from .conftest import ARTIFACT_DIR, SYS_PYTHON, run, skip_or_fail
from .test_browser import CHROMIUM, drive, notebook_server, playwright  # noqa: F401 (fixtures)
from .widgets_notebook import CELLS, notebook

WIDGET_NBEXTENSION = "jupyter-js-widgets/extension"
_UUID = re.compile(r"[0-9a-f]{32}")


def _has_kernelspec(name):
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    try:
        KernelSpecManager().get_kernel_spec(name)
        return True
    except NoSuchKernel:
        return False


def _need_ipywidgets():
    r = subprocess.run([SYS_PYTHON, "-c", "import ipywidgets, tqdm"], capture_output=True,
                       timeout=60)
    if r.returncode:
        skip_or_fail("ipywidgets/tqdm not installed for /usr/bin/python3 "
                     "(apt-get install python3-ipywidgets python3-tqdm)")


@pytest.fixture
def widgets_nbconfig(frontend_env):
    """Enable the widget nbextension in this test's private config dir."""
    _need_ipywidgets()
    found = [d for d in ("/usr/share/jupyter/nbextensions", "/usr/local/share/jupyter/nbextensions",
                         os.path.join(os.path.dirname(os.path.dirname(SYS_PYTHON)), "share",
                                      "jupyter", "nbextensions"))
             if os.path.exists(os.path.join(d, "jupyter-js-widgets", "extension.js"))]
    if not found:
        skip_or_fail("the jupyter-js-widgets nbextension is not installed "
                     "(apt-get install jupyter-nbextension-jupyter-js-widgets)")
    d = os.path.join(frontend_env["JUPYTER_CONFIG_DIR"], "nbconfig")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "notebook.json"), "w") as f:
        json.dump({"load_extensions": {WIDGET_NBEXTENSION: True}}, f)
    return found[0]


@pytest.fixture
def widget_server(widgets_nbconfig, notebook_server):  # noqa: F811
    return notebook_server


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kernel", ["cellblock", "python3"])
def test_widgets_in_the_classic_notebook(kernel, playwright, widget_server,  # noqa: F811
                                         tracker, frontend_env, tmp_path):
    if kernel != "cellblock" and not _has_kernelspec(kernel):
        pytest.skip("no stock ipykernel (python3 kernelspec) to compare with")
    srv = widget_server
    name = "widgets-%s.ipynb" % kernel
    srv.api("PUT", f"/api/contents/{name}",
            {"type": "notebook", "format": "json", "content": notebook(kernel)})
    os.makedirs(ARTIFACT_DIR, exist_ok=True)
    prefix = "widgets-" + kernel
    for f in os.listdir(ARTIFACT_DIR):
        if f.startswith(prefix + "-") or f == prefix + ".png":
            os.unlink(os.path.join(ARTIFACT_DIR, f))
    cfg = {"url": srv.url, "token": srv.token, "notebook": name, "kernel": kernel,
           "shots": ARTIFACT_DIR, "prefix": prefix, "profile": str(tmp_path / "chromium-profile"),
           "chromium": CHROMIUM, "step_ms": 30000}
    result = drive(playwright, "widgets_drive.mjs", cfg, frontend_env, 220, prefix + "-steps.json")
    kernels = srv.api("GET", "/api/kernels")
    failed = [s for s in result["steps"] if not s["ok"]]
    assert not failed, (
        "browser steps failed:\n" + json.dumps(failed, indent=1)
        + "\nbrowser log:\n" + "\n".join(result.get("log", []))
        + "\nkernel messages seen by the page: " + json.dumps(result.get("messages"))
        + "\nserver log:\n" + srv.log_tail())
    assert [s["name"] for s in result["steps"]][-1] == "screenshots"
    assert result["kernel"]["name"] == kernel
    assert [k["name"] for k in kernels] == [kernel], kernels
    seen = result["messages"]
    assert seen.get("iopub:comm_open", 0) >= 10 and seen.get("iopub:comm_msg", 0) >= 10, seen
    for path in result["shots"]:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", path
    if kernel == "cellblock":
        comms = {v[1] for v in tracker.seen.values()}
        assert "cellblock-kerne" in comms and "cellblock-launc" in comms, comms


# ---------------------------------------------------------------- nbconvert / nbclient

# what nbconvert runs: the notebook without the cells that need a page
# (moving the slider and clicking happen in a browser only)
BATCH_CELLS = CELLS[:5] + ["slider.value = 8\nprint('slider', slider.value)"]


def _write(path, kernel):
    nb = nbformat.from_dict(notebook(kernel, cells=BATCH_CELLS))
    nbformat.write(nb, str(path))


def _nbconvert(kernel, tmp_path, frontend_env):
    src = tmp_path / ("w-%s.ipynb" % kernel)
    _write(src, kernel)
    r = run([SYS_PYTHON, "-m", "nbconvert", "--to", "notebook", "--execute",
             "--ExecutePreprocessor.timeout=90", "--output", "w-%s.out" % kernel, str(src)],
            timeout=150, env=frontend_env, cwd=str(tmp_path))
    out = tmp_path / ("w-%s.out.ipynb" % kernel)
    return r, (nbformat.read(str(out), as_version=4) if out.exists() else None)


def _failure(r):
    """The exception nbconvert ended with (its last traceback line), or None."""
    if r.returncode == 0:
        return None
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "exit %d" % r.returncode


@pytest.mark.timeout(400)
def test_nbconvert_execute_widget_notebook_like_ipykernel(frontend_env, tmp_path):
    """`jupyter nbconvert --execute` of the widget notebook ends the same way
    on cellblock as on ipykernel, and when it succeeds the widget state in
    the notebook's metadata is the same (model ids aside).  On Debian 12
    nbclient 0.7 reads widget state the ipywidgets >= 7 way (comm_open data
    with a "state" member) while ipywidgets 6 sends its state as the data
    itself: nbclient then raises KeyError: 'state' on the first widget, on
    any kernel."""
    _need_ipywidgets()
    if not _has_kernelspec("python3"):
        skip_or_fail("no stock ipykernel (python3 kernelspec) to compare with")
    r_cb, nb_cb = _nbconvert("cellblock", tmp_path, frontend_env)
    r_ref, nb_ref = _nbconvert("python3", tmp_path, frontend_env)
    print("nbconvert --execute: cellblock %s, ipykernel %s" % (_failure(r_cb) or "ok",
                                                             _failure(r_ref) or "ok"))
    assert _failure(r_cb) == _failure(r_ref), (
        "cellblock: %s\nipykernel: %s\n%s" % (_failure(r_cb), _failure(r_ref),
                                              r_cb.stderr[-3000:]))
    if r_ref.returncode == 0:
        assert _widget_state(nb_cb) == _widget_state(nb_ref)
        assert _widget_state(nb_cb), "no widget state stored"


def _widget_state(nb):
    """The notebook's widget state with model ids numbered in the order the
    widgets were made (nbclient keeps them in that order)."""
    state = (nb.metadata.get("widgets") or {}).get("application/vnd.jupyter.widget-state+json")
    if not state:
        return None
    text = json.dumps(state)
    ids = {}
    text = _UUID.sub(lambda m: ids.setdefault(m.group(0), "<ID %d>" % len(ids)), text)
    # tqdm's times and rate differ from run to run: "[00:00<00:00, 130.35it/s]"
    text = re.sub(r"\[[^\[\]]*(?:it/s|s/it)\]", "[<T>]", text)
    return json.loads(text)


def _protocol1_client():
    """nbclient's NotebookClient that also reads ipywidgets 6's comm_open
    (the state is the data itself; ipywidgets >= 7 puts it under "state"),
    so that the widget state it stores can be compared between kernels."""
    from nbclient import NotebookClient

    class Client(NotebookClient):
        def handle_comm_msg(self, outs, msg, cell_index):
            content = msg["content"]
            data = content.get("data", {})
            if (msg["msg_type"] == "comm_open" and "state" not in data
                    and content.get("target_name") == "jupyter.widget"):
                msg = copy.deepcopy(msg)
                msg["content"]["data"] = {"state": data, "buffer_paths": []}
            return super().handle_comm_msg(outs, msg, cell_index)

    return Client


@pytest.mark.timeout(300)
def test_nbclient_stores_the_same_widget_state_as_with_ipykernel(tracker, tmp_path,
                                                                 monkeypatch):
    _need_ipywidgets()
    if not _has_kernelspec("python3"):
        skip_or_fail("no stock ipykernel (python3 kernelspec) to compare with")
    monkeypatch.setenv("CB_FE_TAG", tracker.tag)
    Client = _protocol1_client()
    states = {}
    for kernel in ("cellblock", "python3"):
        nb = nbformat.from_dict(notebook(kernel, cells=BATCH_CELLS))
        Client(nb, timeout=90, startup_timeout=60, kernel_name=kernel,
               resources={"metadata": {"path": str(tmp_path)}}).execute()
        nbformat.validate(nb)
        states[kernel] = _widget_state(nb)
        # (nbclient has no stand-in for ipywidgets 6's Output widget: the
        # observer's print lands in the cell, on both kernels)
        out = "".join(o["text"] for o in nb.cells[-1].outputs if o["output_type"] == "stream")
        assert out == "slider moved to 8\nslider 8\n", nb.cells[-1].outputs
    cb = states["cellblock"]
    assert cb == states["python3"]
    models = cb["state"].values()
    sliders = [m for m in models if m["model_name"] == "IntSliderModel"]
    assert {s["state"]["value"] for s in sliders} == {8, 4}      # ours, and interact's
    progress = [m for m in models if m["model_name"] == "ProgressModel"]
    assert progress and progress[0]["state"]["value"] == 40
    assert progress[0]["state"]["bar_style"] == "success"
