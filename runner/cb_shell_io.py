"""cellblock runner, IPython shell: what the shell displays, as frames.

The display publisher and displayhook of cb_shell's InteractiveShell write
display/execute_result frames (docs/RUNNER_PROTOCOL.md) instead of ZMQ
messages, with the content made JSON-safe the way ipykernel's json_clean
makes it; the compiler names each cell's code after its cell file.  Loaded
by cb_shell.
"""

import sys

_runner = sys.modules["_cellblock_runner"]

from IPython.core.compilerop import CachingCompiler  # noqa: E402
from IPython.core.displayhook import DisplayHook  # noqa: E402
from IPython.core.displaypub import DisplayPublisher  # noqa: E402


class _NotStrict(Exception):
    pass


def _strict(obj):
    """obj with what json.dumps(default=jupyter_client's json_default,
    allow_nan=False) would do to it; _NotStrict where that raises."""
    t = type(obj)
    if t is str or obj is None or t is bool or t is int:
        return obj
    if t is float:
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise _NotStrict
        return obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str):
                pass
            elif isinstance(k, bool):
                k = "true" if k else "false"
            elif k is None:
                k = "null"
            elif isinstance(k, (int, float)):
                k = _runner._dumps(k)
            else:
                raise _NotStrict
            out[k] = _strict(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return _strict(_json_default(obj))


def _json_default(obj):
    import numbers
    from collections.abc import Iterable
    from datetime import datetime, timezone
    if isinstance(obj, datetime):
        if obj.tzinfo is None:
            obj = obj.replace(tzinfo=timezone.utc)
        return obj.isoformat().replace("+00:00", "Z")
    if isinstance(obj, bytes):
        import binascii
        return binascii.b2a_base64(obj).decode("ascii")
    if isinstance(obj, Iterable):
        return list(obj)
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        return float(obj)
    raise _NotStrict


def _json_clean(obj):
    """jupyter_client's json_clean: the fallback when strict encoding fails."""
    import math
    import numbers
    import types
    from datetime import datetime
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        if math.isnan(obj) or math.isinf(obj):
            return repr(obj)
        return float(obj)
    if isinstance(obj, (str, type(None))):
        return obj
    if isinstance(obj, bytes):
        import binascii
        return binascii.b2a_base64(obj).decode("ascii")
    if isinstance(obj, (tuple, set, types.GeneratorType)) or (
            hasattr(obj, "__iter__") and hasattr(obj, "__next__")):
        obj = list(obj)
    if isinstance(obj, list):
        return [_json_clean(x) for x in obj]
    if isinstance(obj, dict):
        if len(obj) != len(set(map(str, obj))):
            raise ValueError("dict cannot be safely converted to JSON: "
                             "key collision would lead to dropped values")
        return {str(k): _json_clean(v) for k, v in obj.items()}
    if isinstance(obj, datetime):
        return obj.strftime("%Y-%m-%dT%H:%M:%S.%f")
    raise ValueError("Can't clean for JSON: %r" % (obj,))


def jsonable(obj):
    """obj as ipykernel (jupyter_client >= 7's json_packer) puts it on the wire."""
    try:
        return _strict(obj)
    except (_NotStrict, ValueError, TypeError, RecursionError):
        return _strict(_json_clean(obj))


class FramePublisher(DisplayPublisher):
    """display() and friends become `display`/`update_display`/`clear_output` frames."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        import threading
        self._local = threading.local()

    @property
    def _hooks(self):
        hooks = getattr(self._local, "hooks", None)
        if hooks is None:
            hooks = self._local.hooks = []
        return hooks

    def register_hook(self, hook):
        """As ipykernel's: hook(msg) -> msg to send, or None to swallow it (widgets)."""
        self._hooks.append(hook)

    def unregister_hook(self, hook):
        try:
            self._hooks.remove(hook)
            return True
        except ValueError:
            return False

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                **kwargs):
        __tracebackhide__ = True
        self._validate_data(data, metadata)
        content = {"data": data, "metadata": metadata if metadata is not None else {},
                   "transient": transient if transient is not None else {}}
        msg_type = "update_display_data" if update else "display_data"
        if self._hooks:
            msg = {"msg_type": msg_type, "header": {"msg_type": msg_type},
                   "parent_header": {}, "metadata": {}, "content": content}
            for hook in list(self._hooks):
                msg = hook(msg)
                if msg is None:
                    return
            content = msg.get("content", content)
        _runner._send({"type": "update_display" if update else "display",
                       "data": jsonable(content.get("data", {})),
                       "metadata": jsonable(content.get("metadata", {})),
                       "transient": jsonable(content.get("transient", {}))})
        _runner._check_pending()

    def clear_output(self, wait=False):
        __tracebackhide__ = True
        _runner._send({"type": "clear_output", "wait": bool(wait)})
        _runner._check_pending()


class FrameDisplayHook(DisplayHook):
    """The value of a cell's last expression becomes an `execute_result` frame."""

    def start_displayhook(self):
        self._data = None
        self._md = None

    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        self._data = format_dict
        self._md = md_dict

    def finish_displayhook(self):
        __tracebackhide__ = True
        data, md = self._data, self._md
        self._data = self._md = None
        if data:
            _runner._send({"type": "execute_result", "data": jsonable(data),
                           "metadata": jsonable(md if md is not None else {})})
        else:
            _runner._flush()


class CellCompiler(CachingCompiler):
    """Cells are named as ipykernel names them, after the hash of their raw
    text (cb_exec._cell_filename: the fast path and the minimal shell must
    agree, and the debugger's frontends compute the same names); tracebacks
    show them as IPython does, 'Cell In [N], line L'."""

    def get_code_name(self, raw_code, transformed_code, number):
        return _runner._cell_filename(raw_code)
