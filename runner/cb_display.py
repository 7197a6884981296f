"""cellblock runner: rich output (mimebundles, display(), IPython, matplotlib).

Loaded by runner.py on the first result that is not a plain scalar, on the
first display()/clear_output() call, or when user code imports
IPython.display or matplotlib.pyplot (post-import hooks in runner.py).
"""

import sys
import os

_runner = sys.modules["_cellblock_runner"]

# _repr_*_ method -> mime type, in IPython's formatter order
_REPR_METHODS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_pdf_", "application/pdf"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
    ("_repr_javascript_", "application/javascript"),
)
_BINARY = {"image/png", "image/jpeg", "application/pdf"}
_SIMPLE_CONTAINERS = (list, tuple, dict, set, frozenset)


def _b64(data):
    import binascii
    if isinstance(data, str):
        return data
    return binascii.b2a_base64(bytes(data), newline=False).decode("ascii")


def _method(obj, name):
    """A real _repr_*_ method of obj (IPython's get_real_method rules)."""
    if isinstance(obj, type):
        return None
    try:
        if hasattr(obj, "_ipython_canary_method_should_not_exist_"):
            return None
        m = getattr(obj, name, None)
    except Exception:
        return None
    return m if callable(m) else None


def _plain(obj):
    r = repr(obj)
    if type(obj) in _SIMPLE_CONTAINERS and len(r) > 79:
        try:
            import pprint
            r = pprint.pformat(obj, width=79, sort_dicts=False)
        except Exception:
            pass
    return r


def _is_mpl_figure(obj):
    t = type(obj)
    return t.__name__ == "Figure" and t.__module__ == "matplotlib.figure"


def format(obj, include=None, exclude=None):
    """obj -> (mimebundle, metadata), like IPython's DisplayFormatter.format."""
    data, md = {}, {}
    m = _method(obj, "_repr_mimebundle_")
    if m is not None:
        try:
            r = m(include=include, exclude=exclude)
        except TypeError:
            r = m()
        if isinstance(r, tuple) and len(r) == 2:
            r, rmd = r
            if isinstance(rmd, dict):
                md.update(rmd)
        if isinstance(r, dict):
            data.update(r)
    if _is_mpl_figure(obj) and "image/png" not in data:
        fig = figure_png(obj)
        if fig is not None:
            data["image/png"], md["image/png"] = fig
    for name, mime in _REPR_METHODS:
        if mime in data:
            continue
        m = _method(obj, name)
        if m is None:
            continue
        r = m()
        if isinstance(r, tuple) and len(r) == 2:
            r, rmd = r
            if rmd:
                md[mime] = rmd
        if r is None:
            continue
        if mime in _BINARY:
            r = _b64(r)
        elif mime == "application/json" and isinstance(r, str):
            import json
            try:
                r = json.loads(r)
            except ValueError:
                pass
        data[mime] = r
    for mime in list(data):
        if mime in _BINARY and isinstance(data[mime], (bytes, bytearray)):
            data[mime] = _b64(data[mime])
    if "text/plain" not in data:
        data["text/plain"] = _plain(obj)
    if include:
        data = {k: v for k, v in data.items() if k in include}
    if exclude:
        data = {k: v for k, v in data.items() if k not in exclude}
    return data, md


# ------------------------------------------------------------------ display


def _new_id():
    return os.urandom(16).hex()


class DisplayHandle:
    """Handle on an output shown with display(..., display_id=...)."""

    def __init__(self, display_id=None):
        if display_id is None:
            display_id = _new_id()
        self.display_id = display_id

    def __repr__(self):
        return "<%s display_id=%s>" % (type(self).__name__, self.display_id)

    def display(self, obj, **kwargs):
        display(obj, display_id=self.display_id, **kwargs)

    def update(self, obj, **kwargs):
        kwargs["update"] = True
        display(obj, display_id=self.display_id, **kwargs)


def publish_display_data(data, metadata=None, source=None, *, transient=None, update=False,
                         **kwargs):
    """Send a mimebundle as it is (IPython.display.publish_display_data)."""
    msg = {"type": "update_display" if update else "display", "data": data,
           "metadata": metadata or {}}
    if transient:
        msg["transient"] = transient
    _runner._send(msg)
    _runner._check_pending()


def display(*objs, include=None, exclude=None, metadata=None, transient=None,
            display_id=None, raw=False, clear=False, update=False, **kwargs):
    """Display objects as rich output (IPython.display.display)."""
    if transient is None:
        transient = {}
    if metadata is None:
        metadata = {}
    if display_id:
        if display_id is True:
            display_id = _new_id()
        transient["display_id"] = display_id
    if kwargs.get("source") is not None:
        kwargs.pop("source")
    if update and not display_id:
        raise TypeError("display_id required for update_display")
    if clear:
        clear_output(wait=True)
    for obj in objs:
        if raw:
            publish_display_data(obj, metadata, transient=transient, update=update)
            continue
        data, md = format(obj, include=include, exclude=exclude)
        if not data:
            continue
        if metadata:
            md = dict(md)
            md.update(metadata)
        publish_display_data(data, md, transient=transient, update=update)
    if display_id and not update:
        return DisplayHandle(display_id)
    return None


def update_display(obj, *, display_id, **kwargs):
    """Update an existing display by id (IPython.display.update_display)."""
    kwargs["update"] = True
    display(obj, display_id=display_id, **kwargs)


def clear_output(wait=False):
    """Clear the output area (IPython.display.clear_output)."""
    _runner._send({"type": "clear_output", "wait": bool(wait)})
    _runner._check_pending()


# ------------------------------------------------------------------ IPython


def patch_ipython(m):
    """Point IPython's display functions at ours (module just executed)."""
    for name, fn in (("display", display), ("clear_output", clear_output),
                     ("update_display", update_display),
                     ("publish_display_data", publish_display_data)):
        if name in m.__dict__:
            m.__dict__[name] = fn
    for other in ("IPython.core.display_functions", "IPython.core.display", "IPython.display",
                  "IPython"):
        o = sys.modules.get(other)
        if o is not None and o is not m:
            for name, fn in (("display", display), ("clear_output", clear_output),
                             ("update_display", update_display),
                             ("publish_display_data", publish_display_data)):
                if name in o.__dict__:
                    o.__dict__[name] = fn


# ------------------------------------------------------------------ matplotlib


def _png_size(data):
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return None


def figure_png(fig):
    """-> (base64 png, metadata) or None for an empty figure (like IPython)."""
    import io
    if not fig.axes and not fig.lines:
        return None
    buf = io.BytesIO()
    canvas = fig.canvas
    if canvas is None:
        from matplotlib.backend_bases import FigureCanvasBase
        canvas = FigureCanvasBase(fig)
    fig.canvas.print_figure(buf, format="png", dpi=fig.dpi, bbox_inches="tight",
                            facecolor=fig.get_facecolor(), edgecolor=fig.get_edgecolor())
    data = buf.getvalue()
    md = {}
    size = _png_size(data)
    if size is not None:
        # IPython's inline backend shows the PNG at its pixel size (CSS px)
        md = {"width": size[0], "height": size[1]}
    return _b64(data), md


def _show_all(plt, close=True):
    from matplotlib._pylab_helpers import Gcf
    managers = Gcf.get_all_fig_managers()
    for mgr in managers:
        fig = mgr.canvas.figure
        r = figure_png(fig)
        if r is not None:
            data, md = r
            publish_display_data({"text/plain": repr(fig), "image/png": data},
                                 {"image/png": md})
    if close and managers:
        plt.close("all")


def patch_pyplot(plt):
    """plt.show() sends every open figure as display_data and closes them."""
    if getattr(plt.show, "_cellblock", False):
        return

    def show(*args, block=None, **kwargs):
        """Show all open figures (cellblock: as image/png outputs)."""
        _show_all(plt)

    show._cellblock = True
    plt.show = show


def flush_figures():
    """After a cell: send the figures left open (created or changed) and close them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    _show_all(plt)
