"""Issue 11: code written for IPython runs unchanged.  Each test runs the same
cells through cellblock and through the stock ipykernel (the `python3`
kernelspec) side by side, through jupyter_client, and asserts the same
messages modulo ids, dates, timings, addresses, working directories and
cell file names (tests/integration/ipython_compare.py).

Skipped when the sandbox's Python has no IPython (then the minimal runner,
docs/MAGICS.md, is what runs), or when there is no ipykernel to compare with.
"""

import json
import re

import pytest

from . import ipython_compare as ic

pytestmark = [pytest.mark.cellblock_only, pytest.mark.timeout(240)]


@pytest.fixture
def pair(tmp_path):
    yield from ic.started_pair(tmp_path)


def same(pair, *cells, **kw):
    return [ic.assert_same(pair, c, **kw) for c in cells]


def test_first_cell_magics_and_autoreload(pair):
    same(pair,
         "%load_ext autoreload\n%autoreload 2\n%matplotlib inline\n"
         "%config InlineBackend.figure_format = 'retina'",
         "%%writefile mod_ar.py\ndef version():\n    return 1",
         "import mod_ar\nmod_ar.version()",
         # a different size: the .pyc of version 1 checks the source's mtime
         # in whole seconds and its size, so a same-size rewrite within the
         # second would load the stale bytecode (ipykernel showed 1 at times)
         "%%writefile mod_ar.py\ndef version():\n    return 2  # two",
         "mod_ar.version()",
         "%autoreload 0\n%aimport")


def test_capture_who_whos_reset_history(pair):
    same(pair,
         "%%capture cap\nprint('captured out')\nimport sys\nprint('captured err', file=sys.stderr)"
         "\ndisplay('captured display')",
         "cap.stdout, cap.stderr, len(cap.outputs)",
         "cap.show()",
         "a = 1\nb = 'two'\nc = [3]\ndef fn(): pass",
         "%who",
         "%whos",
         "%who_ls",
         "%who int str",
         "%history -n -l 4",
         "%history -n 2-3",
         "%reset -f",
         "%who",
         "_i, _ii",
         "%reset -f in",
         "%history -l 2")


def test_display_cell_magics(pair):
    same(pair,
         "%%html\n<b>bold</b> <i>it</i>",
         "%%javascript\nconsole.log('js')",
         "%%js\nvar x = 1;",
         "%%latex\n\\begin{equation}x^2\\end{equation}",
         "%%markdown\n# Title\n\n*emphasis*",
         "%%svg\n<svg xmlns='http://www.w3.org/2000/svg' width='4' height='4'></svg>")


def test_precision_and_pretty_printing(pair):
    same(pair,
         "list(range(60))",
         "{i: str(i) * i for i in range(12)}",
         "set(range(40))",
         "frozenset({1, 2, 3})",
         "[{'a': [1, (2, 3), {4, 5}]}, [[[]]], {'k': {'k2': list(range(30))}}]",
         "l = [1]\nl.append(l)\nl",
         "from collections import OrderedDict, Counter, defaultdict, deque, namedtuple\n"
         "P = namedtuple('P', 'x y')\n"
         "(OrderedDict(a=1), Counter('aab'), defaultdict(list, a=[1]), deque(range(3)), P(1, 2))",
         "import numpy as np\nnp.float64(1.5), np.int32(3), np.bool_(True), np.float32(0.1)",
         "np.arange(40).reshape(4, 10)",
         "'line one\\nline two' * 3",
         "print",
         "class K:\n    pass\nK, K()",
         "%precision 3",
         "3.14159265, [2.718281828]",
         "np.pi",
         "%precision %.1e",
         "12345.678",
         "%precision",
         "1/3")


def test_formatter_errors(pair):
    same(pair,
         "class HtmlBoom:\n    def _repr_html_(self):\n        raise ValueError('boom')\n"
         "    def __repr__(self):\n        return 'HtmlBoom()'\nHtmlBoom()",
         "display(HtmlBoom())",
         "class ReprBoom:\n    def __repr__(self):\n        raise RuntimeError('no repr')\n"
         "ReprBoom()",
         "class BundleBoom:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n"
         "        raise KeyError('b')\nBundleBoom()",
         "class WrongType:\n    def _repr_html_(self):\n        return 42\nWrongType()",
         "print('still fine')")


def test_tracebacks_and_xmode(pair):
    cells = [
        "def outer(n):\n    return inner(n)\n\ndef inner(n):\n    return 10 / n\n",
        "outer(0)",
        "try:\n    outer(0)\nexcept ZeroDivisionError as e:\n    raise ValueError('wrapped') from e",
        "undefined_name",
        "x = (1,\n",
        "if True:\nprint(1)",
        "import json\njson.loads('{bad')",
        "raise SystemExit(3)",
    ]
    same(pair, *cells)
    for mode in ("Plain", "Verbose", "Minimal", "Context"):
        same(pair, "%xmode " + mode, cells[1], cells[2])


def test_time_timeit_prun(pair):
    same(pair,
         "%time sum(range(1000))",
         "%%time\ntotal = 0\nfor i in range(100):\n    total += i\ntotal",
         "%timeit -n 20 -r 3 sum(range(100))",
         "%%timeit -n 5 -r 2 data = list(range(100))\nsorted(data)",
         "def work():\n    return sum(i * i for i in range(2000))",
         "%prun -s cumulative -l 3 work()",
         blur=ic.blur_timings)


def test_debug_through_stdin(pair):
    same(pair, "def broken(n):\n    m = n + 1\n    return m / 0\nbroken(1)")
    same(pair, "%debug", answers=["p m", "up", "p n", "q"])


def test_files_run_load_store(pair):
    same(pair,
         "%%file script_a.py\nimport sys\nprint('argv', sys.argv[1:])\nresult = 6 * 7",
         "%%writefile -a script_a.py\nprint('appended')",
         "%run script_a.py one two",
         "result",
         "%run -i script_a.py",
         "%load script_a.py",
         "%load -r 1-2 script_a.py",
         "kept = {'k': [1, 2]}\n%store kept",
         "del kept\n%store -r kept\nkept",
         "%store",
         "%store -z")


def test_writefile_then_import(pair):
    same(pair,
         "%%writefile helper.py\nimport math\n\ndef area(r):\n    '''Area of a circle.'''\n"
         "    return math.pi * r ** 2\n",
         "import helper\nhelper.area(2)",
         "from helper import area\narea?")


def test_shell_escapes_and_expansion(pair):
    same(pair,
         "name = 'world'\nn = 3\n!echo hello $name {n + 1} $$NOPE",
         "files = !printf 'b\\na\\n'\nfiles, files.s, sorted(files)",
         "for i in range(2):\n    !echo loop {i}",
         "!exit 3\n_exit_code",
         "!echo out; echo err >&2",
         "%sx echo sx",
         "out = %sx echo assigned\nout",
         "%env CB_TEST_VAR=value\n%env CB_TEST_VAR",
         "%%bash\necho from bash\necho to stderr >&2",
         "%%sh\nexit 1")


def test_help_anywhere_and_inspect(pair):
    same(pair,
         "class Documented:\n    '''A documented class.\n\n    With a second paragraph.'''\n"
         "    def method(self, a, b=2):\n        '''Adds a and b.'''\n        return a + b\n"
         "obj = Documented()",
         "x = 1\nobj?\ny = 2",
         "obj.method??",
         "?len",
         "%pinfo obj",
         "%pdoc Documented",
         "%psource Documented.method",
         "%page [1, 2, 3]",
         "%page -r y",
         "y, x")
    for code, pos, level in (("obj", 3, 0), ("obj", 3, 1), ("obj.method(", 11, 0),
                             ("Documented", 4, 1), ("no_such_name", 3, 0)):
        r = pair.request("inspect_request", {"code": code, "cursor_pos": pos,
                                             "detail_level": level})
        assert r["cellblock"] == r[ic.REFERENCE], (code, ic.describe(r["cellblock"],
                                                                     r[ic.REFERENCE]))


def test_complete_and_is_complete(pair):
    same(pair, "import os\ndata = {'alpha': 1, 'beta': 2}\nclass C:\n    value = 1\n"
               "    def method(self): pass\nc = C()")
    for code in ("c.", "c.va", "data['al", "os.path.jo", "import jso", "%ti", "%%wr",
                 "pri", "from collections import Ord"):
        r = pair.request("complete_request", {"code": code, "cursor_pos": len(code)})
        assert r["cellblock"] == r[ic.REFERENCE], (code, ic.describe(r["cellblock"],
                                                                     r[ic.REFERENCE]))
    for code in ("x = 1", "for i in range(3):", "def f():\n    return (1,", "%time x",
                 "%%timeit\nx", "!ls", "1 +* 2", "x?"):
        r = pair.request("is_complete_request", {"code": code})
        assert r["cellblock"] == r[ic.REFERENCE], (code, r)


def test_get_ipython_and_libraries(pair):
    same(pair,
         "ip = get_ipython()\n"
         "type(ip).__name__, 'IPKernelApp' in ip.config, ip is __import__('IPython').get_ipython()",
         "ip.run_line_magic('who_ls', '')",
         "ip.run_cell_magic('capture', 'c2', 'print(1)')\nc2.stdout",
         "ip.user_ns is globals(), ip.execution_count",
         "from IPython.display import display, HTML, Markdown, JSON, update_display, "
         "clear_output\nh = display(HTML('<p>one</p>'), display_id='d1')\n"
         "update_display(Markdown('two'), display_id='d1')\nclear_output(wait=True)\n"
         "JSON({'k': [1, 2]})")
    # a library that asks for the shell: tqdm's notebook detection (with
    # ipywidgets installed, its bar is a widget: test_widgets_compare.py)
    same(pair,
         "import tqdm.auto\ntqdm.auto.tqdm.__module__",
         "from tqdm.auto import tqdm\nfor i in tqdm(range(3), mininterval=0):\n    pass",
         blur=lambda msgs: _blur_rates(msgs))


def _blur_rates(msgs):
    out = []
    ids = {}
    for ch, t, c in msgs:
        if t == "stream":
            text = re.sub(r"[\d.]+(?:it/s|s/it)", "<RATE>", c["text"])
            c = dict(c, text=re.sub(r" +\r", "\r", text))   # padding over a longer rate
        # widget ids
        c = json.loads(re.sub(r"[0-9a-f]{32}", lambda m: ids.setdefault(
            m.group(0), "<ID %d>" % len(ids)), json.dumps(c)))
        out.append([ch, t, c])
    # ipykernel publishes a cell's buffered prints after the comm messages
    # sent meanwhile; cellblock in the order they were written
    for i in range(len(out) - 1, 0, -1):
        if out[i - 1][1] == "stream" and out[i][1].startswith("comm_"):
            j = i
            while j < len(out) and out[j][1].startswith("comm_"):
                j += 1
            out.insert(j - 1, out.pop(i - 1))
    return out


def test_matplotlib_inline(pair):
    same(pair,
         "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nprint('after plot')",
         "fig, ax = plt.subplots(figsize=(3, 2))\nax.bar([1, 2], [3, 4])\nplt.show()\n"
         "print('after show')",
         "fig = plt.figure()\nplt.plot([1])\nfig2 = plt.figure()\nplt.plot([2])",
         "fig, ax = plt.subplots()\nax.plot([0, 1])\nfig",
         "plt.figure()",
         "%config InlineBackend.figure_format = 'retina'",
         "plt.plot([5, 4]);",
         "plt.close('all')\nlen(plt.get_fignums())")


def test_exit_keep_kernel_and_set_next_input(pair):
    same(pair,
         "exit(keep_kernel=True)",
         "quit(keep_kernel=True)",
         "get_ipython().set_next_input('next cell', replace=False)",
         "1 + 1")


def test_pip_keeps_its_sandbox_messages(pair):
    r = pair.run("%pip --version")
    assert r["cellblock"] == r[ic.REFERENCE], ic.describe(r["cellblock"], r[ic.REFERENCE])
    r = pair.run("%pip install --no-index cellblock-no-such-package-xyz", timeout=120)
    mine, theirs = ic.strip_ansi(r["cellblock"]), ic.strip_ansi(r[ic.REFERENCE])
    # the same pip output and the same note, and cellblock says why on stderr
    note = [c["text"] for ch, t, c in mine if t == "stream" and c["name"] == "stderr"]
    assert any("cellblock: pip" in n for n in note), mine
    stripped = []
    for ch, t, c in mine:
        if t == "stream" and c["name"] == "stderr":
            text = re.sub(r"\ncellblock: pip .*\n", "", c["text"], flags=re.S)
            if not text:
                continue
            c = dict(c, text=text)
        stripped.append([ch, t, c])
    assert stripped == theirs, ic.describe(stripped, theirs)


def test_blank_cells_take_no_number(pair):
    """As IPython: a cell of only white space is not counted (execute_input
    shows the number the next cell will take; the reply the last one)."""
    same(pair, "1", "   \n\t\n", "", "2")


def test_kernel_info_names_ipython_when_the_shell_is_ipython(pair):
    from .helpers import request
    ref = request(pair.kernels[ic.REFERENCE].kc, "kernel_info_request", {}).content
    ours = request(pair.kernels["cellblock"].kc, "kernel_info_request", {}).content
    assert ours["implementation"] == ref["implementation"] == "ipython"
    assert ours["implementation_version"] == ref["implementation_version"]
    assert "cellblock" in ours["banner"] and ours["cellblock_version"]


def test_exit_shuts_the_kernel_down_after_its_reply(tmp_path):
    """exit() in a cell: the reply (with the ask_exit payload) and idle, then
    the kernel process ends, as ipykernel's does."""
    from .helpers import Kernel, execute, wait_gone
    for name in ("cellblock", ic.REFERENCE):
        k = Kernel(kernel_name=name).start()
        try:
            r = execute(k.kc, "exit()")
            assert r.status == "ok", (name, r.content)
            assert any(p.get("source") == "ask_exit" for p in r.content["payload"]), name
            assert not wait_gone({k.pid}, 20), "%s: the kernel did not exit" % name
        finally:
            k.stop(check=False)
