"""What upstream suites check and cellblock differed in (issue 18, finding 7):
ipykernel's own test_sys_path, and nbclient's update-display-id notebook,
whose execute_result goes out through `get_ipython().kernel.session.send`
with a display_id that a later update_display_data updates.

Both run against the kernel under test: `CB_TEST_KERNEL=python3` runs them
on the stock ipykernel, which is what they describe.
"""

import ast

import nbformat
import pytest
from nbclient import NotebookClient

from .helpers import kernel_name

pytestmark = pytest.mark.timeout(180)


def test_sys_path_like_ipykernel(shared_kernel):
    """ipykernel's test_sys_path ('' is on sys.path), and where: after the
    standard library, before site-/dist-packages (IPython's init_path), with
    the working directory first as ipykernel's launcher leaves it."""
    r = shared_kernel.execute("import sys, os\nprint(repr((sys.path, os.getcwd(), "
                       "os.path.dirname(os.__file__))))")
    assert r.status == "ok", r.error_text()
    path, cwd, stdlib = ast.literal_eval(r.stream().strip())
    assert "" in path, path
    assert path[0] == cwd, path
    blank = path.index("")
    assert path.index(stdlib) < blank, path
    packages = [i for i, p in enumerate(path) if p.endswith(("site-packages", "dist-packages"))]
    assert not packages or blank < packages[0], path


def test_blank_entry_follows_the_working_directory(shared_kernel):
    """'' is the working directory of the moment: a module in a directory
    the cell moved to is importable, as under ipykernel."""
    r = shared_kernel.execute(
        "import os, importlib, sys, shutil, tempfile\nbase = os.getcwd()\n"
        "sub = tempfile.mkdtemp(prefix='cb-moved-')\n"
        "open(os.path.join(sub, 'cb_moved_mod.py'), 'w').write('VALUE = 42\\n')\nos.chdir(sub)\n"
        "importlib.invalidate_caches()\ntry:\n    import cb_moved_mod\n"
        "    print('imported', cb_moved_mod.VALUE)\nfinally:\n    os.chdir(base)\n"
        "    sys.modules.pop('cb_moved_mod', None)\n    shutil.rmtree(sub)")
    assert r.status == "ok", r.error_text()
    assert r.stream() == "imported 42\n"


DISPLAY_WITH_ID = '''\
ip = get_ipython()
from IPython.display import display

def display_with_id(obj, display_id, update=False, execute_result=False):
    iopub = ip.kernel.iopub_socket
    session = get_ipython().kernel.session
    data, md = ip.display_formatter.format(obj)
    content = {'data': data, 'metadata': md, 'transient': {'display_id': str(display_id)}}
    if execute_result:
        msg_type = 'execute_result'
        content['execution_count'] = ip.execution_count
    else:
        msg_type = 'update_display_data' if update else 'display_data'
    session.send(iopub, msg_type, content, parent=ip.parent_header)
'''

CELLS = [
    DISPLAY_WITH_ID,
    "display('above')\ndisplay_with_id(1, 'here')\ndisplay('below')",
    "display_with_id(2, 'here')\ndisplay_with_id(3, 'there')\ndisplay_with_id(4, 'here')",
    "display_with_id(5, 'there')\ndisplay_with_id(6, 'there', update=True)",
    "display_with_id(7, 'here')\ndisplay_with_id(8, 'here', update=True)\n"
    "display_with_id(9, 'result', execute_result=True)",
    "display_with_id(10, 'result', update=True)",
]
# nbclient's stored outputs of its update-display-id.ipynb: every output with
# a display_id shows the last update of that id, the execute_result included
EXPECTED = [
    [],
    [("display_data", "'above'"), ("display_data", "8"), ("display_data", "'below'")],
    [("display_data", "8"), ("display_data", "6"), ("display_data", "8")],
    [("display_data", "6")],
    [("display_data", "8"), ("execute_result", "10")],
    [],
]


def test_update_display_id_notebook(tmp_path):
    """nbclient's update-display-id notebook, executed by nbclient."""
    pytest.importorskip("IPython")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    NotebookClient(nb, kernel_name=kernel_name(), timeout=60, startup_timeout=60,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    got = [[(o["output_type"], o.get("data", {}).get("text/plain")) for o in c.outputs
            if o["output_type"] != "stream"] for c in nb.cells]
    assert got == EXPECTED, got
    result = nb.cells[4].outputs[-1]
    assert result["execution_count"] == nb.cells[4].execution_count == 5
