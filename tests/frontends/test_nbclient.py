"""Notebooks executed by nbclient and by `jupyter nbconvert --execute` on the
cellblock kernel: the examples in examples/ must produce their outputs
(stream text, a PNG chart, an HTML table, the CSV written by to_csv returned
as an artifact, byte for byte)."""

import base64
import hashlib
import json
import os

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from .conftest import EXAMPLES, SYS_PYTHON, run

DEMO = os.path.join(EXAMPLES, "demo.ipynb")
ANALYSIS = os.path.join(EXAMPLES, "analysis.ipynb")
DEMO_CSV = ",units,revenue\nsum,965.0,8612.5\nmean,160.83,1435.42\n"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def streams(cell, name="stdout"):
    return "".join(o["text"] for o in cell.outputs
                   if o["output_type"] == "stream" and o["name"] == name)


def artifacts(cell):
    out = {}
    for o in cell.outputs:
        art = (o.get("metadata", {}).get("cellblock") or {}).get("artifact")
        if o["output_type"] == "display_data" and art:
            out[art["path"]] = (art, o["data"])
    return out


def check_artifact(art, data, expect_mime):
    """The artifact's content matches its declared size and sha256."""
    assert art["mime"] == expect_mime
    value = data[expect_mime]
    raw = base64.b64decode(value) if expect_mime.startswith("image/") else value.encode()
    assert len(raw) == art["size"], (len(raw), art)
    assert hashlib.sha256(raw).hexdigest() == art["sha256"]
    assert "text/plain" in data
    return raw


def check_demo(nb):
    cells = code_cells(nb)
    assert [c.execution_count for c in cells] == [1, 2, 3, 4]
    for c in cells:
        assert not [o for o in c.outputs if o["output_type"] == "error"], c.outputs

    # 1: print
    assert "pandas 1." in streams(cells[0]) or "pandas " in streams(cells[0])
    assert streams(cells[0]).startswith("python 3.")

    # 2: DataFrame -> execute_result with text/html table and text/plain
    res = [o for o in cells[1].outputs if o["output_type"] == "execute_result"]
    assert len(res) == 1
    html, plain = res[0]["data"]["text/html"], res[0]["data"]["text/plain"]
    assert "<table" in html and "revenue" in html and "1785.0" in html
    assert "Jun" in plain and "revenue" in plain
    assert res[0]["execution_count"] == 2

    # 3: matplotlib chart -> one display_data image/png
    imgs = [o for o in cells[2].outputs
            if o["output_type"] == "display_data" and "image/png" in o["data"]]
    assert len(imgs) == 1, cells[2].outputs
    png = base64.b64decode(imgs[0]["data"]["image/png"])
    assert png.startswith(PNG_MAGIC) and len(png) > 2000

    # 4: print + the CSV written by to_csv, returned as an artifact
    assert streams(cells[3]) == "total revenue 8612.5, best month Jun\n"
    arts = artifacts(cells[3])
    assert list(arts) == ["summary.csv"], cells[3].outputs
    art, data = arts["summary.csv"]
    raw = check_artifact(art, data, "text/csv")
    assert raw.decode() == DEMO_CSV
    # the stream comes before the artifact (artifacts are sent when the cell is done)
    kinds = [o["output_type"] for o in cells[3].outputs]
    assert kinds == ["stream", "display_data"], kinds


def check_analysis(nb):
    cells = code_cells(nb)
    assert [c.execution_count for c in cells] == [1, 2, 3, 4]
    assert streams(cells[0]) == "180 rows\n"
    res = [o for o in cells[1].outputs if o["output_type"] == "execute_result"]
    assert "<table" in res[0]["data"]["text/html"]
    for city in ("Oslo", "Lisbon", "Cairo"):
        assert city in res[0]["data"]["text/html"]
    assert streams(cells[2]) == "saved temperatures.png and city_stats.csv\n"
    arts = artifacts(cells[2])
    assert sorted(arts) == ["city_stats.csv", "temperatures.png"], cells[2].outputs
    png = check_artifact(*arts["temperatures.png"], "image/png")
    assert png.startswith(PNG_MAGIC)
    assert arts["temperatures.png"][1].get("image/png")  # base64 text present
    csv = check_artifact(*arts["city_stats.csv"], "text/csv").decode()
    assert csv.splitlines()[0] == "city,min,mean,max"
    assert sorted(line.split(",")[0] for line in csv.splitlines()[1:]) == \
        ["Cairo", "Lisbon", "Oslo"]
    res = [o for o in cells[3].outputs if o["output_type"] == "execute_result"]
    assert res[0]["data"]["text/plain"] == "180.0"


def execute(path, tmp_path, **kw):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=60, startup_timeout=60, kernel_name="cellblock",
                            resources={"metadata": {"path": str(tmp_path)}}, **kw)
    client.execute()
    return nb


@pytest.mark.timeout(60)
def test_nbclient_demo(tracker, tmp_path, monkeypatch):
    monkeypatch.setenv("CB_FE_TAG", tracker.tag)  # the kernel inherits it
    nb = execute(DEMO, tmp_path, on_cell_executed=lambda **kw: tracker.sample())
    # the tracker saw the kernel and its sandbox (so the leak check means something)
    comms = {v[1] for v in tracker.seen.values()}
    assert {"cellblock-kerne", "cellblock-launc"} <= comms, comms
    check_demo(nb)
    assert nb.metadata.kernelspec.name == "cellblock"
    nbformat.validate(nb)


@pytest.mark.timeout(60)
def test_nbclient_analysis(tracker, tmp_path, monkeypatch):
    monkeypatch.setenv("CB_FE_TAG", tracker.tag)
    check_analysis(execute(ANALYSIS, tmp_path))


@pytest.mark.timeout(60)
def test_nbclient_error_stops_the_run(tracker, tmp_path, monkeypatch):
    """allow_errors=False: the failing cell raises CellExecutionError naming
    the exception; later cells are not run."""
    monkeypatch.setenv("CB_FE_TAG", tracker.tag)
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "cellblock",
                                                           "display_name": "cellblock",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("x = 1\nprint('before')"),
                nbformat.v4.new_code_cell("{}['missing']"),
                nbformat.v4.new_code_cell("print('never')")]
    path = tmp_path / "err.ipynb"
    nbformat.write(nb, str(path))
    with pytest.raises(CellExecutionError) as ei:
        execute(str(path), tmp_path)
    assert "KeyError" in str(ei.value) and "missing" in str(ei.value)


@pytest.mark.timeout(90)
def test_nbconvert_execute(frontend_env, tmp_path):
    """`jupyter nbconvert --to notebook --execute` (a subprocess, as a user runs it)."""
    outdir = tmp_path / "out"
    r = run([SYS_PYTHON, "-m", "nbconvert", "--to", "notebook", "--execute",
             "--ExecutePreprocessor.timeout=60", "--output-dir", str(outdir),
             DEMO, ANALYSIS], timeout=80, env=frontend_env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    check_demo(nbformat.read(str(outdir / "demo.ipynb"), as_version=4))
    check_analysis(nbformat.read(str(outdir / "analysis.ipynb"), as_version=4))


@pytest.mark.timeout(60)
def test_make_demo_script(frontend_env, tmp_path):
    """examples/demo.py (what `make demo` runs): executed notebook, artifacts
    decoded to files, a one-line-per-output summary."""
    out = tmp_path / "demo"
    r = run([SYS_PYTHON, os.path.join(EXAMPLES, "demo.py"), "--out", str(out)],
            timeout=50, env=frontend_env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "artifacts" / "summary.csv").read_text() == DEMO_CSV
    check_demo(nbformat.read(str(out / "demo.executed.ipynb"), as_version=4))
    text = r.stdout
    assert "stdout: total revenue 8612.5, best month Jun" in text
    assert "artifact: summary.csv (text/csv, 52 bytes)" in text
    assert "display: image/png" in text
    assert "result: text/html" in text
    assert str(out / "artifacts" / "summary.csv") in text

    # binary artifacts are base64-decoded
    out2 = tmp_path / "analysis"
    r = run([SYS_PYTHON, os.path.join(EXAMPLES, "demo.py"), ANALYSIS, "--out", str(out2)],
            timeout=50, env=frontend_env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out2 / "artifacts" / "temperatures.png").read_bytes().startswith(PNG_MAGIC)
    executed = json.loads((out2 / "analysis.executed.ipynb").read_text())
    assert executed["cells"][3]["outputs"]
