"""Issue 4, runner side: mimebundles, display(), IPython.display, pandas, matplotlib.

Under the IPython shell these are IPython's formatters and matplotlib's
inline backend; under the minimal runner, cb_display's imitation of them."""

import base64

import pytest

RICH_CLASS = '''
class Rich:
    def _repr_html_(self): return "<b>rich</b>"
    def _repr_markdown_(self): return "**rich**"
    def _repr_latex_(self): return "$r$"
    def _repr_json_(self): return {"a": [1, 2]}
    def _repr_png_(self): return b"\\x89PNG fake"
    def _repr_jpeg_(self): return b"\\xff\\xd8 fake"
    def _repr_svg_(self): return "<svg></svg>"
    def _repr_pdf_(self): return b"%PDF fake"
    def _repr_javascript_(self): return "console.log(1)"
    def __repr__(self): return "Rich()"
'''


def test_full_mimebundle(runner):
    runner.execute(RICH_CLASS)
    frames, done, _, _ = runner.execute("Rich()")
    assert done["status"] == "ok"
    d = frames[0]["data"]
    assert frames[0]["type"] == "execute_result"
    assert d["text/plain"] == "Rich()"
    assert d["text/html"] == "<b>rich</b>"
    assert d["text/markdown"] == "**rich**"
    assert d["text/latex"] == "$r$"
    assert d["application/json"] == {"a": [1, 2]}
    assert base64.b64decode(d["image/png"]) == b"\x89PNG fake"
    assert base64.b64decode(d["image/jpeg"]) == b"\xff\xd8 fake"
    assert base64.b64decode(d["application/pdf"]) == b"%PDF fake"
    assert d["image/svg+xml"] == "<svg></svg>"
    assert d["application/javascript"] == "console.log(1)"


def test_repr_with_metadata_and_mimebundle(runner):
    runner.execute(
        "class M:\n"
        "    def _repr_png_(self): return (b'png', {'width': 10})\n"
        "class B:\n"
        "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
        "        return {'text/html': '<i>b</i>', 'application/x-thing': 'x'}, {'k': 1}\n"
        "    def _repr_html_(self): return 'ignored'\n"
        "    def _repr_markdown_(self): return 'md'\n")
    f = runner.execute("M()")[0][0]
    assert base64.b64decode(f["data"]["image/png"]) == b"png"
    assert f["metadata"] == {"image/png": {"width": 10}}
    f = runner.execute("B()")[0][0]
    assert f["data"]["text/html"] == "<i>b</i>"
    assert f["data"]["application/x-thing"] == "x"
    assert f["data"]["text/markdown"] == "md"
    # IPython's pretty printer says "<__main__.B at 0x...>", repr() "<__main__.B object at ...>"
    assert f["data"]["text/plain"].startswith(
        "<__main__.B at" if runner.shell == "ipython" else "<__main__.B object")
    assert f["metadata"] == {"k": 1}


def test_class_objects_and_broken_getattr(runner):
    runner.execute(RICH_CLASS + "class Any:\n    def __getattr__(self, n): return lambda *a, **k: 'x'\n"
                   "    def __repr__(self): return 'Any()'\n")
    f = runner.execute("Rich")[0][0]
    assert list(f["data"]) == ["text/plain"]
    f = runner.execute("Any()")[0][0]
    assert f["data"] == {"text/plain": "Any()"}


def test_repr_error_is_reported(runner):
    runner.execute("class Bad:\n    def __repr__(self): raise ValueError('nope')\n")
    frames, done, _, _ = runner.execute("Bad()")
    assert frames[-1]["type"] == "error" and frames[-1]["ename"] == "ValueError"
    # IPython reports a failing formatter and carries on, as under ipykernel
    assert done["status"] == ("ok" if runner.shell == "ipython" else "error")


def test_long_list_is_pretty(runner):
    f = runner.execute("list(range(40))")[0][0]
    assert f["data"]["text/plain"].startswith("[0,\n 1,\n")


def test_display_builtin(runner):
    frames, done, out, _ = runner.execute(
        RICH_CLASS + "print('p1')\ndisplay(1, 'two')\nprint('p2')\ndisplay(Rich(), include=['text/html'])")
    assert [f["type"] for f in frames] == ["display", "display", "display"]
    assert frames[0]["data"] == {"text/plain": "1"} and frames[0]["metadata"] == {}
    # ipykernel sends an empty transient with every display_data
    assert frames[0].get("transient", {}) == {}
    assert frames[1]["data"] == {"text/plain": "'two'"}
    assert frames[2]["data"] == {"text/html": "<b>rich</b>"}
    assert out == "p1\np2\n"
    ev = [(k, v["type"] if k == "frame" else v) for k, v in runner.last_events]
    first = ev.index(("frame", "display"))
    assert b"p1\n" in b"".join(v for k, v in runner.last_events[:first] if k == "stdout")


def test_display_raw_metadata_and_handle(runner):
    frames, done, _, _ = runner.execute(
        # builtins in the minimal runner; imported as with ipykernel
        "from IPython.display import update_display\n"
        "display({'text/plain': 'raw', 'text/html': '<p>raw</p>'}, raw=True)\n"
        "display('m', metadata={'isolated': True})\n"
        "h = display('a', display_id='myid')\n"
        "h.update('b')\n"
        "h.display('c')\n"
        "update_display('d', display_id='myid')\n"
        "h2 = display('e', display_id=True)\n"
        "type(h).__name__, h.display_id, len(h2.display_id)")
    assert done["status"] == "ok", done
    types = [f["type"] for f in frames]
    assert types == ["display", "display", "display", "update_display", "display",
                     "update_display", "display", "execute_result"]
    assert frames[0]["data"] == {"text/plain": "raw", "text/html": "<p>raw</p>"}
    assert frames[1]["metadata"] == {"isolated": True}
    for f in frames[2:6]:
        assert f["transient"] == {"display_id": "myid"}
    assert frames[3]["data"] == {"text/plain": "'b'"}
    assert frames[5]["data"] == {"text/plain": "'d'"}
    assert len(frames[6]["transient"]["display_id"]) == 32
    assert frames[7]["data"]["text/plain"] == "('DisplayHandle', 'myid', 32)"


def test_clear_output(runner):
    frames, _, _, _ = runner.execute("from IPython.display import clear_output\n"
                                     "clear_output()\nclear_output(wait=True)")
    assert frames == [{"type": "clear_output", "wait": False},
                      {"type": "clear_output", "wait": True}]


@pytest.mark.shell("ipython")
def test_get_ipython_is_the_shell(runner):
    f = runner.execute("ip = get_ipython()\nimport IPython\n"
                       "type(ip).__name__, ip is IPython.get_ipython(), 'IPKernelApp' in ip.config")
    assert f[0][0]["data"]["text/plain"] == "('ZMQInteractiveShell', True, True)"


@pytest.mark.shell("minimal")
def test_get_ipython_is_none(runner):
    f = runner.execute("get_ipython() is None")[0][0]
    assert f["data"]["text/plain"] == "True"


@pytest.mark.shell("minimal")
def test_ipython_not_imported_at_start(runner):
    f = runner.execute("import sys; [m for m in ('IPython', 'matplotlib', 'pandas', 'numpy') "
                       "if m in sys.modules]")[0][0]
    assert f["data"]["text/plain"] == "[]"


def test_ipython_display(runner):
    frames, done, _, _ = runner.execute(
        "from IPython.display import display, HTML, Markdown, Latex, JSON, SVG, Javascript, Math\n"
        "display(HTML('<b>h</b>'))\n"
        "display(Markdown('# m'))\n"
        "display(Math(r'\\frac{1}{2}'))\n"
        "display(JSON({'a': 1}))\n"
        "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>'))\n"
        "Latex('$x$')")
    assert done["status"] == "ok", done
    assert frames[0]["data"]["text/html"] == "<b>h</b>"
    assert "text/plain" in frames[0]["data"]
    assert frames[1]["data"]["text/markdown"] == "# m"
    assert "frac{1}{2}" in frames[2]["data"]["text/latex"]
    assert frames[3]["data"]["application/json"] == {"a": 1}
    assert "<svg" in frames[4]["data"]["image/svg+xml"]
    assert frames[5]["type"] == "execute_result" and frames[5]["data"]["text/latex"] == "$x$"


def test_ipython_display_handles_and_clear(runner):
    frames, done, _, _ = runner.execute(
        "import IPython.display as ipd\n"
        "h = ipd.display('x', display_id=True)\n"
        "h.update('y')\n"
        "ipd.update_display('z', display_id=h.display_id)\n"
        "ipd.clear_output(wait=True)\n"
        "ipd.publish_display_data({'text/plain': 'pub'})\n"
        "dh = ipd.DisplayHandle()\n"
        "dh.display('w')\n")
    assert done["status"] == "ok", done
    assert [f["type"] for f in frames] == ["display", "update_display", "update_display",
                                           "clear_output", "display", "display"]
    assert frames[4]["data"] == {"text/plain": "pub"}
    assert frames[5]["transient"]["display_id"]


def test_ipython_image(runner, tmp_path):
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
    (tmp_path / "dot.png").write_bytes(png)
    frames, done, _, _ = runner.execute(
        "from IPython.display import Image\nImage(filename='dot.png', width=5)")
    assert done["status"] == "ok", done
    f = frames[0]
    assert base64.b64decode(f["data"]["image/png"]) == png
    assert f["metadata"]["image/png"]["width"] == 5


def test_pandas(runner):
    frames, done, _, _ = runner.execute(
        "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\ndf")
    assert done["status"] == "ok", done
    d = frames[0]["data"]
    assert "<table" in d["text/html"] and "text/plain" in d
    assert d["text/plain"].split("\n")[0].split() == ["a", "b"]
    d = runner.execute("df.a")[0][0]["data"]
    assert list(d) == ["text/plain"]         # like IPython: Series has only text/plain


def _png_size(b64):
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def test_matplotlib_show_and_flush(runner):
    frames, done, out, _ = runner.execute(
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3])\n"
        "print('before show')\n"
        "plt.show()\n"
        "import time; time.sleep(0.3)\n"
        "print('after show')\n"
        "fig1 = plt.figure(); plt.plot([3, 1])\n"
        "fig2 = plt.figure(); plt.bar([1], [2])\n"
        "print('end');")
    assert done["status"] == "ok", done
    assert [f["type"] for f in frames] == ["display", "display", "display"]
    for f in frames:
        w, h = _png_size(f["data"]["image/png"])
        # the minimal runner gives the size; the inline backend only for retina
        md = {} if runner.shell == "ipython" else {"image/png": {"width": w, "height": h}}
        assert f["metadata"] == md
        assert f["data"]["text/plain"].startswith("<Figure size")
    ev = [(k, v["type"] if k == "frame" else v) for k, v in runner.last_events]
    first_disp = ev.index(("frame", "display"))
    before = b"".join(v for k, v in runner.last_events[:first_disp] if k == "stdout")
    assert before == b"before show\n"
    assert out == "before show\nafter show\nend\n"
    # everything was closed: the next cell sends nothing
    frames, done, _, _ = runner.execute("len(plt.get_fignums())")
    assert [f["type"] for f in frames] == ["execute_result"]
    assert frames[0]["data"]["text/plain"] == "0"


def test_matplotlib_inline_magic_and_result_order(runner):
    frames, done, _, _ = runner.execute(
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])")
    assert done["status"] == "ok", done
    assert [f["type"] for f in frames] == ["execute_result", "display"]
    assert "Line2D" in frames[0]["data"]["text/plain"]
    assert "image/png" in frames[1]["data"]


def test_matplotlib_empty_figure_not_sent(runner):
    frames, done, _, _ = runner.execute("import matplotlib.pyplot as plt\nf = plt.figure()")
    if runner.shell == "ipython":   # the inline backend shows its text, no image
        assert [(f["type"], list(f["data"])) for f in frames] == [("display", ["text/plain"])]
    else:
        assert frames == []


def test_matplotlib_figure_as_result(runner):
    frames, done, _, _ = runner.execute(
        "import matplotlib\nfrom matplotlib.figure import Figure\n"
        "fig = Figure()\nax = fig.subplots()\nax.plot([1, 2])\nfig")
    assert frames[0]["type"] == "execute_result"
    if runner.shell == "ipython":
        # no pyplot, so the inline backend is not set up yet: IPython gives text,
        # as it does under ipykernel
        assert list(frames[0]["data"]) == ["text/plain"]
    else:
        assert "image/png" in frames[0]["data"]


def test_big_output_is_not_fatal(runner):
    frames, done, out, err = runner.execute("display({'text/plain': 'x' * (50 * 1024 * 1024)}, raw=True)\n1")
    assert done["status"] == "ok"
    assert "over the" in err
    assert frames[-1]["data"]["text/plain"] == "1"
