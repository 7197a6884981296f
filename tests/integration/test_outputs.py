"""Rich outputs through the built kernel (issue 4, "Rich outputs"): every
`_repr_*_` kind as execute_result, pandas, matplotlib figures with and
without show() and their order relative to prints, display()/display_id/
clear_output, IPython.display objects, and the IPython-syntax subset
(docs/MAGICS.md).

Everything goes through jupyter_client, as a frontend would.  Expectations
were written from IPython/ipykernel behaviour; the few cellblock-only points
(IPython not imported at start-up, %pip's message) are marked.
"""

import ast
import base64
import functools
import json
import subprocess
import re
import struct
import textwrap
import zlib

import pytest

from .helpers import is_cellblock


@functools.lru_cache(maxsize=None)
def minimal_runner():
    """True when cellblock runs its minimal runner (the sandbox's Python has no
    IPython): then the docs/MAGICS.md subset and cellblock's own display
    builtins apply.  With IPython, cells run through IPython's shell and
    behave as under ipykernel."""
    if not is_cellblock():
        return False
    from .conftest import KSPEC_FILE
    with open(KSPEC_FILE) as f:
        argv = json.load(f)["argv"]
    python = argv[argv.index("--python") + 1] if "--python" in argv else "/usr/bin/python3"
    probe = subprocess.run([python, "-I", "-c", "import importlib.util, sys; "
                            "sys.exit(importlib.util.find_spec('IPython') is None)"])
    return probe.returncode != 0

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _png(width, height):
    """A valid RGB PNG of the given size (pure Python, no PIL)."""
    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes([200, 30, 30]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


PNG = _png(3, 2)
# Not a decodable picture, but starts like a JFIF file: kernels pass bytes through.
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4">'
       '<rect width="4" height="4"/></svg>')


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def run(k, code, status="ok", timeout=30, pre="", **kw):
    r = k.execute(pre + textwrap.dedent(code), timeout=timeout, **kw)
    assert r.status == status, f"expected {status}, got {r.status}: {r.error_text()}\n{r.outputs()}"
    return r


def results(r):
    return [m["content"] for m in r.of_type("execute_result")]


def result(r):
    res = results(r)
    assert len(res) == 1, f"expected one execute_result, got {r.types()}"
    return res[0]


def displays(r, msg_type="display_data"):
    return [m["content"] for m in r.of_type(msg_type)]


def images(r):
    return [c for c in displays(r) if "image/png" in c["data"]]


def kinds(r):
    """Output messages as (type, detail) for order checks."""
    out = []
    for m in r.outputs():
        t, c = m["msg_type"], m["content"]
        if t == "stream":
            out.append(("stream", c["text"]))
        elif t in ("display_data", "execute_result", "update_display_data"):
            out.append((t, tuple(sorted(c["data"]))))
        else:
            out.append((t, None))
    return out


# --------------------------------------------------------------------------
# _repr_*_ methods as execute_result
# --------------------------------------------------------------------------

# (method, return expression, mime, expected value in the message)
REPRS = [
    ("_repr_html_", "'<b>bold</b>'", "text/html", "<b>bold</b>"),
    ("_repr_markdown_", "'**md** text'", "text/markdown", "**md** text"),
    ("_repr_latex_", "r'$\\alpha^2$'", "text/latex", "$\\alpha^2$"),
    ("_repr_json_", "{'a': [1, 2, {'b': None}], 'c': 'd'}", "application/json",
     {"a": [1, 2, {"b": None}], "c": "d"}),
    ("_repr_png_", f"{PNG!r}", "image/png", base64.b64encode(PNG).decode()),
    ("_repr_jpeg_", f"{JPEG!r}", "image/jpeg", base64.b64encode(JPEG).decode()),
    ("_repr_svg_", f"{SVG!r}", "image/svg+xml", SVG),
    ("_repr_pdf_", f"{PDF!r}", "application/pdf", base64.b64encode(PDF).decode()),
    ("_repr_javascript_", "'console.log(\"cb\")'", "application/javascript", 'console.log("cb")'),
]


@pytest.mark.parametrize("method,ret,mime,expected", REPRS, ids=[x[2] for x in REPRS])
def test_repr_kind_as_execute_result(shared_kernel, method, ret, mime, expected):
    code = f"""
    class Rich:
        def {method}(self):
            return {ret}
        def __repr__(self):
            return 'Rich-plain'
    Rich()
    """
    r = run(shared_kernel, code)
    res = result(r)
    data = res["data"]
    assert mime in data, f"{mime} missing from {sorted(data)}"
    got = data[mime]
    if mime in ("image/png", "image/jpeg", "application/pdf"):
        assert isinstance(got, str), f"{mime} must be base64 text, got {type(got)}"
        assert base64.b64decode(got.replace("\n", "")) == base64.b64decode(expected)
    else:
        assert got == expected, f"{mime}: {got!r} != {expected!r}"
    if mime == "application/json":
        assert isinstance(got, dict), "application/json must be a JSON object, not a string"
    assert data.get("text/plain") == "Rich-plain", data
    assert res["execution_count"] == r.content["execution_count"]


def test_repr_with_metadata_tuple(shared_kernel):
    """A _repr_*_ may return (data, metadata): the metadata lands under the mime key."""
    r = run(shared_kernel, f"""
    class Sized:
        def _repr_png_(self):
            return {PNG!r}, {{'width': 30, 'height': 20}}
        def _repr_html_(self):
            return '<p>x</p>', {{'isolated': True}}
    Sized()
    """)
    res = result(r)
    assert base64.b64decode(res["data"]["image/png"]) == PNG
    assert res["data"]["text/html"] == "<p>x</p>"
    assert "text/plain" in res["data"]
    assert res["metadata"].get("image/png") == {"width": 30, "height": 20}, res["metadata"]
    assert res["metadata"].get("text/html") == {"isolated": True}, res["metadata"]


MIMEBUNDLE_CLASS = """
class Multi:
    calls = []
    def _repr_mimebundle_(self, include=None, exclude=None):
        Multi.calls.append((include, exclude))
        data = {'text/html': '<i>multi</i>', 'text/markdown': '*multi*',
                'application/vnd.cellblock.test+json': {'k': 1}}
        md = {'text/html': {'isolated': True}}
        return data, md
    def __repr__(self):
        return 'Multi-plain'
"""


def test_repr_mimebundle(shared_kernel):
    r = run(shared_kernel, MIMEBUNDLE_CLASS + "Multi()\n")
    res = result(r)
    data = res["data"]
    assert data.get("text/html") == "<i>multi</i>"
    assert data.get("text/markdown") == "*multi*"
    assert data.get("application/vnd.cellblock.test+json") == {"k": 1}
    assert data.get("text/plain") == "Multi-plain", data
    assert res["metadata"].get("text/html") == {"isolated": True}, res["metadata"]


def test_repr_mimebundle_dict_only(shared_kernel):
    r = run(shared_kernel, """
    class DictOnly:
        def _repr_mimebundle_(self, include=None, exclude=None):
            return {'text/html': '<b>d</b>', 'application/json': {'n': 1}}
    DictOnly()
    """)
    data = result(r)["data"]
    assert data.get("text/html") == "<b>d</b>" and data.get("application/json") == {"n": 1}, data
    assert "text/plain" in data, data


def test_repr_mimebundle_include_exclude(shared_kernel):
    run(shared_kernel, MIMEBUNDLE_CLASS)
    r = run(shared_kernel, "Multi.calls.clear()\n"
                           "display(Multi(), exclude=['text/markdown'])\n"
                           "display(Multi(), include=['text/html', 'text/plain'])\n")
    d = displays(r)
    assert len(d) == 2, r.types()
    # exclude: everything but text/markdown, still with text/plain
    assert "text/markdown" not in d[0]["data"], d[0]["data"]
    assert d[0]["data"].get("text/html") == "<i>multi</i>"
    assert d[0]["data"].get("text/plain") == "Multi-plain"
    # include: only what was asked for
    assert set(d[1]["data"]) == {"text/html", "text/plain"}, d[1]["data"]
    # the method was told what to include/exclude
    calls = run(shared_kernel, "print(repr(Multi.calls))").stream()
    assert "['text/markdown']" in calls and "['text/html', 'text/plain']" in calls, calls


def test_plain_repr_always_present(shared_kernel):
    r = run(shared_kernel, """
    class OnlyHtml:
        def _repr_html_(self):
            return '<u>u</u>'
    OnlyHtml()
    """)
    data = result(r)["data"]
    assert data["text/html"] == "<u>u</u>"
    # Python's repr, or IPython's pretty form "<__main__.OnlyHtml at 0x...>"
    plain = data.get("text/plain", "")
    assert re.match(r"<__main__\.OnlyHtml (object )?at 0x[0-9a-f]+>$", plain), data


def test_repr_returning_none_is_skipped(shared_kernel):
    r = run(shared_kernel, """
    class Maybe:
        def _repr_html_(self):
            return None
        def __repr__(self):
            return 'maybe'
    Maybe()
    """)
    assert result(r)["data"] == {"text/plain": "maybe"}


@pytest.mark.parametrize("code", [
    "1 + 1;",
    "class Q:\n    def _repr_html_(self): return '<b>q</b>'\nQ();",
    "x_semicolon = 3\nx_semicolon;",
    "x_semicolon ;  # comment after the semicolon",
])
def test_trailing_semicolon_suppresses_result(shared_kernel, code):
    r = run(shared_kernel, code)
    assert results(r) == [], r.types()
    assert displays(r) == [], r.types()


def test_no_semicolon_control(shared_kernel):
    """The same cells without ';' do give a result (so the test above can fail)."""
    r = run(shared_kernel, "x_semicolon = 3\nx_semicolon")
    assert result(r)["data"]["text/plain"] == "3"


# --------------------------------------------------------------------------
# pandas
# --------------------------------------------------------------------------

def test_dataframe_html_and_plain(shared_kernel):
    r = run(shared_kernel, """
    import pandas as pd
    pd.DataFrame({'alpha': [1, 2], 'beta': ['x', 'y']})
    """, timeout=60)
    data = result(r)["data"]
    assert "text/html" in data, sorted(data)
    assert "<table" in data["text/html"] and "alpha" in data["text/html"]
    assert "<td>x</td>" in data["text/html"]
    assert "text/plain" in data
    assert re.search(r"alpha\s+beta", data["text/plain"]), data["text/plain"]


def test_series_plain(shared_kernel):
    r = run(shared_kernel, "import pandas as pd\npd.Series([10, 20], name='s')", timeout=60)
    data = result(r)["data"]
    assert "text/plain" in data
    assert "Name: s, dtype: int64" in data["text/plain"], data["text/plain"]


def test_dataframe_display(shared_kernel):
    r = run(shared_kernel, "import pandas as pd\ndisplay(pd.DataFrame({'q': [1]}))\n", timeout=60)
    d = displays(r)
    assert len(d) == 1 and "<table" in d[0]["data"].get("text/html", ""), d


# --------------------------------------------------------------------------
# matplotlib
# --------------------------------------------------------------------------

MPL = "import matplotlib.pyplot as plt\n"


def mpl(code):
    return MPL + textwrap.dedent(code)


def _check_png_display(c):
    data = base64.b64decode(c["data"]["image/png"])
    w, h = png_size(data)
    md = c["metadata"].get("image/png")
    if not minimal_runner() and md is None:
        return data  # IPython's inline backend only sets it for retina figures
    assert isinstance(md, dict), f"image/png metadata missing: {c['metadata']}"
    assert md.get("width") and md.get("height"), md
    # width/height are the displayed size: the pixel size, or half of it for
    # a retina image (ipykernel's convention)
    assert (md["width"], md["height"]) in ((w, h), (w // 2, h // 2)), (md, (w, h))
    assert "text/plain" in c["data"]
    return data


def test_figure_without_show_sent_at_cell_end(shared_kernel):
    run(shared_kernel, MPL + "plt.close('all')", timeout=60)
    r = run(shared_kernel, mpl("""
    print('before')
    fig = plt.figure(figsize=(4, 3))
    plt.plot([1, 3, 2])
    print('after')
    """))
    imgs = images(r)
    assert len(imgs) == 1, r.types()
    _check_png_display(imgs[0])
    assert r.stream() == "before\nafter\n"
    k = kinds(r)
    # the figure comes after everything the cell printed
    img_pos = [i for i, x in enumerate(k) if x[0] == "display_data"][0]
    assert all(i < img_pos for i, x in enumerate(k) if x[0] == "stream"), k


def test_show_sends_in_order(shared_kernel):
    r = run(shared_kernel, mpl("""
    print('one')
    plt.plot([1, 2])
    plt.show()
    print('two')
    """))
    k = []
    for x in kinds(r):  # adjacent stream messages read as one, as a frontend shows them
        if x[0] == "stream" and k and k[-1][0] == "stream":  # (a loaded host may split one)
            k[-1] = ("stream", k[-1][1] + x[1])
        elif x[0] in ("stream", "display_data"):
            k.append(x)
    assert k == [("stream", "one\n"), ("display_data", ("image/png", "text/plain")),
                 ("stream", "two\n")], k
    _check_png_display(images(r)[0])


def test_two_figures_two_images(shared_kernel):
    r = run(shared_kernel, mpl("""
    f1 = plt.figure(figsize=(2, 2)); plt.plot([1, 2])
    f2 = plt.figure(figsize=(3, 2)); plt.plot([2, 1])
    """))
    imgs = images(r)
    assert len(imgs) == 2, r.types()
    a, b = (_check_png_display(c) for c in imgs)
    assert a != b
    assert png_size(a) != png_size(b)


def test_shown_figure_not_sent_again(shared_kernel):
    r = run(shared_kernel, MPL + "plt.plot([5, 6]); plt.show()")
    assert len(images(r)) == 1, r.types()
    r2 = run(shared_kernel, "1 + 1")
    assert images(r2) == [], r2.types()
    # a figure sent at the end of a cell is not sent again either
    r3 = run(shared_kernel, MPL + "plt.plot([7, 8]);")
    assert len(images(r3)) == 1, r3.types()
    r4 = run(shared_kernel, "print('next')")
    assert images(r4) == [], r4.types()
    assert displays(r4) == [], r4.types()


def test_matplotlib_inline_magic(shared_kernel):
    r = run(shared_kernel, "%matplotlib inline\n" + MPL + "plt.plot([1, 4]);")
    assert "Error" not in r.stream("stderr"), r.stream("stderr")
    assert len(images(r)) == 1, r.types()


def test_figure_and_execute_result(shared_kernel):
    """A cell ending in a matplotlib call: its value and the figure both arrive."""
    r = run(shared_kernel, MPL + "plt.figure(); plt.plot([1, 2])")
    assert len(images(r)) == 1, r.types()
    assert result(r)["data"]["text/plain"].startswith("[<matplotlib.lines.Line2D")


# --------------------------------------------------------------------------
# display(), display_id, clear_output
# --------------------------------------------------------------------------

def test_display_without_import(shared_kernel):
    r = run(shared_kernel, "display('a', 2)\ndisplay({'k': 1})\nprint('p')")
    d = displays(r)
    assert [c["data"]["text/plain"] for c in d] == ["'a'", "2", "{'k': 1}"], d
    assert kinds(r)[-1] == ("stream", "p\n")


def builtins():
    """display/update_display/clear_output are builtins in cellblock's minimal
    runner; IPython (ipykernel) has only display() without import."""
    return "" if minimal_runner() else "from IPython.display import update_display, clear_output\n"


def test_display_id_updates(shared_kernel):
    r = run(shared_kernel, """
    h = display('first', display_id='cb-disp-1')
    update_display('second', display_id='cb-disp-1')
    """, pre=builtins())
    d = displays(r)
    assert len(d) == 1 and d[0]["data"]["text/plain"] == "'first'", d
    assert d[0]["transient"].get("display_id") == "cb-disp-1", d[0]
    u = displays(r, "update_display_data")
    assert len(u) == 1, r.types()
    assert u[0]["data"]["text/plain"] == "'second'"
    assert u[0]["transient"] == {"display_id": "cb-disp-1"}, u[0]
    # order: display before its update
    t = r.types()
    assert t.index("display_data") < t.index("update_display_data")
    # the handle updates from a later cell
    r2 = run(shared_kernel, "h.update('third')")
    u2 = displays(r2, "update_display_data")
    assert len(u2) == 1 and u2[0]["data"]["text/plain"] == "'third'", r2.types()
    assert u2[0]["transient"]["display_id"] == "cb-disp-1"
    assert r2.of_type("update_display_data")[0]["parent_header"]["msg_id"] == r2.msg_id


def test_display_handle_auto_id(shared_kernel):
    r = run(shared_kernel, """
    h2 = display('x', display_id=True)
    print(type(h2).__name__, h2.display_id)
    h2.update('y')
    """)
    d = displays(r)
    assert len(d) == 1
    did = d[0]["transient"].get("display_id")
    assert isinstance(did, str) and did, d[0]
    assert did in r.stream()
    assert "DisplayHandle" in r.stream()
    u = displays(r, "update_display_data")
    assert len(u) == 1 and u[0]["transient"]["display_id"] == did
    assert u[0]["data"]["text/plain"] == "'y'"
    r2 = run(shared_kernel, "h2.display('z')")
    d2 = displays(r2)
    assert len(d2) == 1 and d2[0]["transient"].get("display_id") == did, d2


def test_clear_output_wait(shared_kernel):
    r = run(shared_kernel, builtins() + "print('old')\nclear_output(wait=True)\nprint('new')")
    k = kinds(r)
    assert k == [("stream", "old\n"), ("clear_output", None), ("stream", "new\n")], k
    c = r.of_type("clear_output")[0]["content"]
    assert c == {"wait": True}, c
    r2 = run(shared_kernel, "clear_output()")
    assert [m["content"] for m in r2.of_type("clear_output")] == [{"wait": False}]


# --------------------------------------------------------------------------
# IPython.display objects
# --------------------------------------------------------------------------

# That the minimal shell imports neither IPython nor the plotting stack at
# start is tests/runner/test_rich.py's (the runner under both shells); here
# the sandbox's Python has IPython, which loads it while idle.


IPD = "from IPython.display import display, HTML, Markdown, Image, SVG, JSON, Javascript, Latex\n"

# (constructor, mime, expected)
IPD_OBJECTS = [
    ("HTML('<em>h</em>')", "text/html", "<em>h</em>"),
    ("Markdown('# Title')", "text/markdown", "# Title"),
    (f"Image(data={PNG!r})", "image/png", base64.b64encode(PNG).decode()),
    (f"SVG({SVG!r})", "image/svg+xml", SVG),
    ("JSON({'j': [1, 2]})", "application/json", {"j": [1, 2]}),
    ("Javascript('var cb = 1;')", "application/javascript", "var cb = 1;"),
    ("Latex(r'$\\beta$')", "text/latex", "$\\beta$"),
]


@pytest.mark.parametrize("ctor,mime,expected", IPD_OBJECTS, ids=[x[1] for x in IPD_OBJECTS])
def test_ipython_display_objects(shared_kernel, ctor, mime, expected):
    r = run(shared_kernel, IPD + f"display({ctor})\n{ctor}\n", timeout=60)
    d = displays(r)
    assert len(d) == 1, r.types()
    res = result(r)
    for c in (d[0], res):
        data = c["data"]
        assert mime in data, f"{mime} missing: {sorted(data)}"
        if mime == "image/png":
            assert base64.b64decode(data[mime]) == PNG
        elif mime == "image/svg+xml":
            assert "<svg" in data[mime] and 'width="4"' in data[mime], data[mime]
        else:
            assert data[mime] == expected, (data[mime], expected)
        assert "text/plain" in data


def test_ipython_display_raw(shared_kernel):
    r = run(shared_kernel, IPD + textwrap.dedent("""
    display({'text/html': '<b>raw</b>', 'text/plain': 'raw plain'}, raw=True)
    display({'text/plain': 'with md'}, raw=True, metadata={'x': 1})
    """), timeout=60)
    d = displays(r)
    assert len(d) == 2, r.types()
    assert d[0]["data"] == {"text/html": "<b>raw</b>", "text/plain": "raw plain"}
    assert d[1]["data"] == {"text/plain": "with md"}
    assert d[1]["metadata"].get("x") == 1, d[1]


def test_ipython_display_functions_are_cellblocks(shared_kernel):
    """IPython.display's clear_output/update_display/display_id reach the frontend."""
    r = run(shared_kernel, """
    from IPython.display import display, clear_output, update_display, HTML
    h = display(HTML('<p>1</p>'), display_id='cb-ipd')
    update_display(HTML('<p>2</p>'), display_id='cb-ipd')
    clear_output(wait=True)
    """, timeout=60)
    d = displays(r)
    assert len(d) == 1 and d[0]["data"]["text/html"] == "<p>1</p>"
    assert d[0]["transient"] == {"display_id": "cb-ipd"}
    u = displays(r, "update_display_data")
    assert len(u) == 1 and u[0]["data"]["text/html"] == "<p>2</p>"
    assert [m["content"] for m in r.of_type("clear_output")] == [{"wait": True}]


# --------------------------------------------------------------------------
# magics
# --------------------------------------------------------------------------

def test_shell_escape_streams(shared_kernel):
    r = run(shared_kernel, "!echo hi\n!echo err 1>&2\nprint('py')")
    out = r.stream("stdout").replace("\r\n", "\n")  # IPython runs ! in a pty
    if minimal_runner():
        assert out == "hi\npy\n", out
        assert r.stream("stderr") == "err\n"
    else:  # IPython merges stderr into stdout
        assert out == "hi\nerr\npy\n", out


def test_shell_escape_indented_and_assigned(shared_kernel):
    r = run(shared_kernel, "for i in range(2):\n    !echo loop\nout = !echo a; echo b\nout")
    assert r.stream("stdout").replace("\r\n", "\n") == "loop\nloop\n"
    assert result(r)["data"]["text/plain"] == "['a', 'b']"


def test_pwd_and_cd(shared_kernel):
    r = run(shared_kernel, "import os\nos.getcwd()")
    start = ast.literal_eval(result(r)["data"]["text/plain"])
    r = run(shared_kernel, "%pwd")
    assert result(r)["data"]["text/plain"] == repr(start)
    r = run(shared_kernel, "%cd /tmp")
    assert r.stream().strip() == "/tmp", r.stream()
    r = run(shared_kernel, "%pwd")
    assert result(r)["data"]["text/plain"] == "'/tmp'"
    r = run(shared_kernel, f"%cd {start}\nimport os\nos.getcwd()")
    assert result(r)["data"]["text/plain"] == repr(start)
    # IPython prints the error; cellblock raises UsageError: either way it says why
    r = shared_kernel.execute("%cd /no/such/dir")
    said = r.error_text() + r.stream("stdout") + r.stream("stderr")
    assert "No such file" in said or "no such" in said.lower(), said
    assert result(run(shared_kernel, "%pwd"))["data"]["text/plain"] == repr(start)


def test_time_magic(shared_kernel):
    r = run(shared_kernel, "%time 6 * 7")
    out = r.stream()
    assert re.search(r"CPU times: user .+, sys: .+, total: .+", out), out
    assert "Wall time:" in out
    assert result(r)["data"]["text/plain"] == "42"
    r = run(shared_kernel, "%time t_val = sum(range(10))\nt_val")
    assert "Wall time:" in r.stream()
    assert result(r)["data"]["text/plain"] == "45"


@pytest.mark.parametrize("opts", ["-n1 -r1", "-n 1 -r 1"])
def test_timeit_magic(shared_kernel, opts):
    """IPython accepts both forms (getopt: "-n1" and "-n 1")."""
    r = run(shared_kernel, f"%timeit {opts} pass")
    out = r.stream()
    assert re.search(r"per loop \(mean ± std\. dev\. of 1 run, 1 loop each\)", out), out
    assert results(r) == []


def test_unknown_magic_clear_error(shared_kernel):
    r = run(shared_kernel, "%nosuchmagic arg", status="error")
    assert r.content["ename"] == "UsageError", r.content
    assert "Line magic function `%nosuchmagic` not found" in r.content["evalue"], r.content
    r = run(shared_kernel, "%%nosuchcell\nx = 1", status="error")
    assert r.content["ename"] == "UsageError"
    assert "Cell magic `%%nosuchcell` not found" in r.content["evalue"], r.content
    # not a magic: string formatting and modulo stay Python
    r = run(shared_kernel, "a = 7\nb = ('%d' % a,\n     a\n% 4)\nb")
    assert result(r)["data"]["text/plain"] == "('7', 3)"


@pytest.mark.cellblock_only
@pytest.mark.timeout(100)
@pytest.mark.parametrize("cmd", [
    # what users type (on Debian's Python, pip may refuse before any download)
    "install cellblock-no-such-package-zz9",
    # goes to the index for sure: the no-network path itself
    "download --no-deps -d /tmp/cb-dl cellblock-no-such-package-zz9",
])
def test_pip_without_network_is_clear_and_bounded(shared_kernel, cmd):
    r = shared_kernel.execute(f"%pip {cmd}\nprint('after pip')", timeout=45)
    err = r.stream("stderr")
    assert "no network access" in err, f"stderr: {err[-2000:]!r}"
    assert "after pip" in r.stream("stdout")
    # the kernel keeps serving
    assert result(run(shared_kernel, "1 + 1"))["data"]["text/plain"] == "2"


@pytest.mark.cellblock_only
def test_pip_success_has_no_network_message(shared_kernel):
    r = run(shared_kernel, "%pip --version", timeout=45)
    assert re.search(r"pip \d+\.\d+", r.stream()), r.stream()
    assert "no network" not in r.stream("stderr")


@pytest.mark.timeout(240)
def test_clear_output_in_a_first_cell_while_the_shell_loads():
    """A first cell calling IPython.display.clear_output() sends
    clear_output, as ipykernel does, whenever it arrives: also while the
    IPython shell is still loading in a cold sandbox (IPython.display
    already imported by the loading, the shell not yet made), where IPython's
    own function prints escape codes to stdout instead (jupyter_kernel_test's
    test_clear_output failed about 1 run in 6 that way).  Fresh kernels, the
    cell sent at staggered moments after the kernel is ready."""
    import time
    from .helpers import Kernel
    extra = ["--warm", "off"] if is_cellblock() else []
    code = "from IPython.display import clear_output; clear_output()"
    for delay in (0.0, 0.01, 0.02, 0.04, 0.06, 0.08, 0.12, 0.2):
        k = Kernel()
        k.start(extra_arguments=extra)
        try:
            time.sleep(delay)
            r = k.execute(code)
            assert r.status == "ok", r
            types = [m["msg_type"] for m in r.outputs()]
            assert "clear_output" in types, (delay, r.outputs())
            assert "stream" not in types, (delay, r.outputs())
        finally:
            k.stop()
