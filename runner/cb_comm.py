"""cellblock runner: Jupyter comms, and the kernel object widgets look for.

Comms are the Jupyter protocol's two-way channel between an object in the
kernel and its counterpart in the frontend: ipywidgets, tqdm.notebook,
bqplot and matplotlib's nbagg ride on them.  Under ipykernel they hang off
the kernel: ``get_ipython().kernel.comm_manager``, ``ipykernel.comm.Comm``,
published with ``kernel.session.send`` on iopub, the shell request being
handled (``kernel.get_parent()``) as parent.  cellblock's kernel speaks the
protocol outside the sandbox; in here this module gives the same API over
the runner's frames (docs/RUNNER_PROTOCOL.md: comm_open/comm_msg/comm_close
both ways, binary buffers as base64, each frame acked by the kernel like a
display so that it keeps its place among the cell's prints):

- ``Comm`` and ``CommManager``: ipykernel 6's classes (the ``comm``
  package's BaseComm behaves the same), in both shells.  A frontend's
  comm_open for a target nobody registered is answered with comm_close, as
  ipykernel does.
- ``Kernel``: what libraries reach through ``get_ipython().kernel``:
  ``comm_manager``, ``session.send`` (comm, display and stream messages),
  ``iopub_socket``, ``shell``, ``get_parent()``/``set_parent()`` and the
  older ``_parent_header`` (ipywidgets' Output widget captures output by
  the msg_id of the request in flight; the kernel puts the request's header
  in the execute and comm frames for it).
- ``ipykernel.comm`` (and ``ipykernel.comm.comm``/``.manager``) are this
  module's classes, served by cb_core's import finder whether or not
  ipykernel is installed; the ``comm`` package is pointed at them when it is
  imported (``comm.create_comm``, ``comm.get_comm_manager``), as
  ipykernel >= 6.18 does.

Handlers of the frontend's messages (targets, on_msg, on_close callbacks)
run with SIGINT enabled (the kernel's interrupt and time limit reach a
runaway callback), their output has the comm message as parent, and an
exception that escapes them is printed on stderr with its traceback, where
ipykernel would only log it in the kernel's own log.

Loaded on first use (a comm request, `import comm` or `ipykernel.comm`, or
the IPython shell's creation); imports nothing heavy itself.
"""

import sys

_runner = sys.modules["_cellblock_runner"]
_S = _runner._S

_COMM_TYPES = ("comm_open", "comm_msg", "comm_close")
# the kernel's bounds on comm frames (kernel/bounds.h): refused here with a
# reason rather than dropped there
_COMM_ID_MAX = 128       # CB_COMM_ID_MAX, bytes
_COMM_TARGET_MAX = 256   # CB_COMM_TARGET_MAX, bytes
_MAX_BUFFERS = 64        # CB_WIRE_MAX_BUFFERS


class _Socket:
    """Stands for one of the kernel's sockets (kernel.iopub_socket): the
    messages go out through the runner's frames, the kernel picks the
    socket."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "<cellblock %s channel>" % self.name


def _uuid_hex():
    import uuid
    return uuid.uuid4().hex


def _logger(name):
    import logging
    return logging.getLogger(name)


def _report(what):
    """An exception escaped a comm handler: its traceback on stderr."""
    ename, evalue, lines = _runner._format_error(*sys.exc_info())
    try:
        sys.stderr.write("cellblock: %s\n%s\n" % (what, "\n".join(lines)))
        sys.stderr.flush()
    except Exception:
        pass


def _clean(obj):
    """obj as ipykernel puts it on the wire (jupyter_client's packer) under
    the IPython shell; the frame encoder's own rules otherwise."""
    if _S.shell is not None:
        return _runner._mod("cb_shell").jsonable(obj)
    return obj


def _b64(buf, i):
    """One binary buffer as the frame carries it: base64 of its bytes.  Any
    object with the buffer protocol, contiguous, as jupyter_client's
    Session.send takes them (bytes, memoryview, numpy arrays)."""
    try:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
    except TypeError:
        raise TypeError("Buffer objects must support the buffer protocol.") from None
    if not view.contiguous:
        raise ValueError("Buffer %i (%r) is not contiguous" % (i, buf))
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes(order="A"))
    binascii = _runner._std("binascii")
    return binascii.b2a_base64(view, newline=False).decode("ascii")


def _frame(msg_type, comm_id, data, metadata, buffers, keys):
    """A comm frame for the kernel, checked against what the kernel accepts."""
    data = _clean({} if data is None else data)
    metadata = _clean({} if metadata is None else metadata)
    if not isinstance(data, dict):
        raise TypeError("comm data must be a dict, not %s" % type(data).__name__)
    if not isinstance(metadata, dict):
        raise TypeError("comm metadata must be a dict, not %s" % type(metadata).__name__)
    if not isinstance(comm_id, str) or not comm_id or len(comm_id.encode()) > _COMM_ID_MAX:
        raise ValueError("a comm_id is a non-empty str of at most %d bytes" % _COMM_ID_MAX)
    buffers = list(buffers or ())
    if len(buffers) > _MAX_BUFFERS:
        raise ValueError("a comm message carries at most %d buffers" % _MAX_BUFFERS)
    frame = {"type": msg_type, "comm_id": comm_id, "data": data, "metadata": metadata,
             "buffers": [_b64(b, i) for i, b in enumerate(buffers)]}
    if msg_type == "comm_open":
        target = keys.get("target_name")
        if not isinstance(target, str) or len(target.encode()) > _COMM_TARGET_MAX:
            raise ValueError("a comm target_name is a str of at most %d bytes" %
                             _COMM_TARGET_MAX)
        frame["target_name"] = target
        if isinstance(keys.get("target_module"), str):
            frame["target_module"] = keys["target_module"]
    return frame


# ---------------------------------------------------------------- Comm


class Comm:
    """Class for communicating between a Frontend and a Kernel

    ipykernel.comm.Comm: a primary comm (made here) opens its frontend
    counterpart at once; a secondary one (made for a frontend's comm_open)
    is open from the start.  Keyword arguments as ipykernel's traits:
    comm_id, primary, target_name, target_module, topic, kernel,
    _open_data, _close_data."""

    def __init__(self, target_name="", data=None, metadata=None, buffers=None, **kwargs):
        self.kernel = kwargs.pop("kernel") if "kernel" in kwargs else kernel()
        self.comm_id = kwargs.pop("comm_id", None) or _uuid_hex()
        self.primary = bool(kwargs.pop("primary", True))
        self.target_name = target_name or kwargs.pop("target_name", None) or "comm"
        kwargs.pop("target_name", None)
        self.target_module = kwargs.pop("target_module", None)
        topic = kwargs.pop("topic", None)
        self.topic = topic if topic else ("comm-%s" % self.comm_id).encode("ascii", "replace")
        self._open_data = kwargs.pop("_open_data", None) or {}
        self._close_data = kwargs.pop("_close_data", None) or {}
        self._msg_callback = None
        self._close_callback = None
        self._closed = True
        # traitlets' own keywords (parent, config, log) are accepted and unused
        if self.kernel:
            if self.primary:
                self.open(data=data, metadata=metadata, buffers=buffers)
            else:
                self._closed = False

    def __repr__(self):
        return "<Comm %s target=%r%s>" % (self.comm_id, self.target_name,
                                          " closed" if self._closed else "")

    @property
    def log(self):
        return _logger("Comm")

    def _publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        """Helper for sending a comm message on IOPub"""
        deleting = keys.pop("_deleting", False)
        frame = _frame(msg_type, self.comm_id, data, metadata, buffers, keys)
        if deleting:
            _runner._defer(frame)       # the collector may have run inside a frame's write
        else:
            _runner._send(frame)

    publish_msg = _publish_msg          # the name in `comm` and ipykernel >= 6.18

    def __del__(self):
        """trigger close on gc"""
        try:
            self.close(deleting=True)
        except Exception:
            pass

    # publishing messages

    def open(self, data=None, metadata=None, buffers=None):
        """Open the frontend-side version of this comm"""
        if data is None:
            data = self._open_data
        comm_manager = getattr(self.kernel, "comm_manager", None)
        if comm_manager is None:
            raise RuntimeError("Comms cannot be opened without a kernel "
                               "and a comm_manager attached to that kernel.")
        comm_manager.register_comm(self)
        try:
            self._publish_msg("comm_open", data=data, metadata=metadata, buffers=buffers,
                              target_name=self.target_name, target_module=self.target_module)
            self._closed = False
        except BaseException:
            comm_manager.unregister_comm(self)
            raise

    def close(self, data=None, metadata=None, buffers=None, deleting=False):
        """Close the frontend-side version of this comm"""
        if self._closed:
            return                      # only close once
        self._closed = True
        if not self.kernel:
            return
        if data is None:
            data = self._close_data
        self._publish_msg("comm_close", data=data, metadata=metadata, buffers=buffers,
                          _deleting=deleting)
        if not deleting:
            self.kernel.comm_manager.comms.pop(self.comm_id, None)

    def send(self, data=None, metadata=None, buffers=None):
        """Send a message to the frontend-side version of this comm"""
        self._publish_msg("comm_msg", data=data, metadata=metadata, buffers=buffers)

    # registering callbacks

    def on_close(self, callback):
        """Register a callback for comm_close

        Will be called with the `data` of the close message.

        Call `on_close(None)` to disable an existing callback.
        """
        self._close_callback = callback

    def on_msg(self, callback):
        """Register a callback for comm_msg

        Will be called with the `data` of any comm_msg messages.

        Call `on_msg(None)` to disable an existing callback.
        """
        self._msg_callback = callback

    # handling of incoming messages

    def handle_close(self, msg):
        """Handle a comm_close message"""
        if self._close_callback:
            self._close_callback(msg)

    def handle_msg(self, msg):
        """Handle a comm_msg message"""
        if self._msg_callback:
            shell = getattr(self.kernel, "shell", None)
            if shell:
                shell.events.trigger("pre_execute")
            self._msg_callback(msg)
            if shell:
                shell.events.trigger("post_execute")


# ---------------------------------------------------------------- CommManager


def _import_item(name):
    """traitlets' import_item: 'pkg.mod.attr' -> the object."""
    module, _, attr = name.rpartition(".")
    if not module:
        return __import__(name)
    return getattr(__import__(module, fromlist=[attr]), attr)


class CommManager:
    """Manager for Comms in the Kernel (ipykernel's, the `comm` package's)."""

    def __init__(self, kernel=None, **kwargs):
        self.kernel = kernel
        self.comms = {}
        self.targets = {}

    @property
    def log(self):
        return _logger("Comm")

    def register_target(self, target_name, f):
        """Register a callable f for a given target name

        f will be called with two arguments when a comm_open message is received with `target`:

        - the Comm instance
        - the `comm_open` message itself.

        f can be a Python callable or an import string for one.
        """
        if isinstance(f, str):
            f = _import_item(f)
        self.targets[target_name] = f

    def unregister_target(self, target_name, f):
        """Unregister a callable registered with register_target"""
        return self.targets.pop(target_name)

    def register_comm(self, comm):
        """Register a new comm"""
        comm_id = comm.comm_id
        comm.kernel = self.kernel
        self.comms[comm_id] = comm
        return comm_id

    def unregister_comm(self, comm):
        """Unregister a comm, and close its counterpart"""
        # unlike get_comm, this should raise a KeyError
        return self.comms.pop(comm.comm_id)

    def get_comm(self, comm_id):
        """Get a comm with a particular id

        Returns the comm if found, otherwise None.
        """
        return self.comms.get(comm_id)

    # Message handlers (the frontend's messages; stream and ident are unused)

    def comm_open(self, stream, ident, msg):
        """Handler for comm_open messages"""
        content = msg["content"]
        comm_id = content["comm_id"]
        target_name = content["target_name"]
        f = self.targets.get(target_name, None)
        comm = Comm(comm_id=comm_id, primary=False, target_name=target_name,
                    kernel=self.kernel)
        self.register_comm(comm)
        if f is not None:
            try:
                f(comm, msg)
                return
            except Exception:
                _report("exception opening comm %s with target %r" % (comm_id, target_name))
        # no such target (ipykernel logs it in its own log), or it failed
        try:
            comm.close()
        except Exception:
            _report("could not close comm %s" % comm_id)

    def comm_msg(self, stream, ident, msg):
        """Handler for comm_msg messages"""
        comm_id = msg["content"]["comm_id"]
        comm = self.get_comm(comm_id)
        if comm is None:
            return                      # no such comm (ipykernel logs a warning)
        try:
            comm.handle_msg(msg)
        except Exception:
            _report("exception in comm_msg for %s" % comm_id)

    def comm_close(self, stream, ident, msg):
        """Handler for comm_close messages"""
        comm_id = msg["content"]["comm_id"]
        comm = self.get_comm(comm_id)
        if comm is None:
            return
        comm._closed = True
        del self.comms[comm_id]
        try:
            comm.handle_close(msg)
        except Exception:
            _report("exception in comm_close for %s" % comm_id)


# ---------------------------------------------------------------- the kernel object


# session.send message types that travel as the runner's display frames
_DISPLAY_FRAMES = {"display_data": "display", "update_display_data": "update_display",
                   "execute_result": "execute_result"}


class Session:
    """kernel.session: send() of the messages the runner has frames for.

    The kernel outside the sandbox builds, signs and routes the real
    messages, with the request in flight as parent: `stream`, `parent`,
    `ident` and `track` are accepted and unused.  Comm messages, displays
    (display_data, update_display_data, execute_result, clear_output) and
    streams are sent; any other type is not (None is returned).  An
    execute_result keeps its transient display_id, so that a later
    update_display_data updates it (nbclient's update-display-id notebook);
    its execution_count is the kernel's."""

    def __init__(self):
        self.session = _uuid_hex()
        self.username = "cellblock"

    def msg(self, msg_type, content=None, parent=None, header=None, metadata=None):
        """A message dict, as jupyter_client's Session.msg builds it."""
        msg_id = _uuid_hex()
        h = header or {"msg_id": msg_id, "msg_type": msg_type, "session": self.session,
                       "username": self.username, "version": "5.3", "date": _now()}
        return {"header": h, "msg_id": h.get("msg_id", msg_id), "msg_type": msg_type,
                "parent_header": dict(parent.get("header", parent)) if parent else {},
                "content": {} if content is None else content,
                "metadata": {} if metadata is None else metadata}

    def send(self, stream, msg_or_type, content=None, parent=None, ident=None, buffers=None,
             track=False, header=None, metadata=None):
        if isinstance(msg_or_type, dict):
            msg = msg_or_type
            msg_type = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
            content = msg.get("content", {})
            metadata = msg.get("metadata", {})
            buffers = buffers if buffers is not None else msg.get("buffers")
        else:
            msg_type = msg_or_type
            msg = self.msg(msg_type, content, parent, header, metadata)
        content = {} if content is None else content
        if msg_type in _COMM_TYPES:
            keys = {k: content[k] for k in ("target_name", "target_module") if k in content}
            _runner._send(_frame(msg_type, content.get("comm_id"), content.get("data"),
                                 metadata, buffers, keys))
        elif msg_type in _DISPLAY_FRAMES:
            c = _clean(content)
            _runner._send({"type": _DISPLAY_FRAMES[msg_type], "data": c.get("data", {}),
                           "metadata": c.get("metadata", {}), "transient": c.get("transient", {})})
        elif msg_type == "clear_output":
            _runner._send({"type": "clear_output", "wait": bool(content.get("wait", False))})
        elif msg_type == "stream":
            out = sys.stderr if content.get("name") == "stderr" else sys.stdout
            out.write(str(content.get("text", "")))
            out.flush()
        else:
            return None
        return msg


def _now():
    import datetime
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _parent_message():
    """The request being handled as the Jupyter message it came as: header
    (the kernel's, when it sent one), content, metadata, buffers."""
    req = _S.request
    if not isinstance(req, dict):
        return {}
    kind = req.get("type")
    header = req.get("header")
    header = dict(header) if isinstance(header, dict) else {}
    header.setdefault("msg_id", "")
    header.setdefault("msg_type", "execute_request" if kind == "execute" else kind)
    if kind == "execute":
        content = {k: req[k] for k in ("code", "silent", "store_history", "user_expressions",
                                       "allow_stdin") if k in req}
        metadata, buffers = {}, []
    else:
        # data as the frontend sent it: a dict by the protocol, though
        # matplotlib's nbagg sends a JSON text
        content = {"comm_id": req.get("comm_id", ""), "data": req.get("data", {})}
        if kind == "comm_open":
            content["target_name"] = req.get("target_name", "")
            if "target_module" in req:
                content["target_module"] = req["target_module"]
        metadata = req.get("metadata") if isinstance(req.get("metadata"), dict) else {}
        binascii = _runner._std("binascii")
        buffers = []
        for b in req.get("buffers") or ():
            try:
                buffers.append(memoryview(binascii.a2b_base64(b)))
            except (TypeError, ValueError, binascii.Error):
                pass
    return {"header": header, "msg_id": header["msg_id"], "msg_type": header["msg_type"],
            "parent_header": {}, "metadata": metadata, "content": content, "buffers": buffers}


class Kernel:
    """What libraries reach through ``get_ipython().kernel`` under ipykernel,
    for the comm protocol and the request being handled."""

    implementation = "cellblock"

    def __init__(self):
        self.session = Session()
        self.iopub_socket = _Socket("iopub")
        self.shell = None                # the IPython shell, once there is one
        self.comm_manager = CommManager(kernel=self)
        self._set = {}                   # channel -> (request serial, parent) from set_parent
        self._cache = (None, None)       # (request serial, parent message)

    def get_parent(self, channel="shell"):
        """The parent request of a channel: the Jupyter message being handled."""
        if channel != "shell":
            return self._set.get(channel, (None, {}))[1]
        serial = _S.request_serial
        mine = self._set.get(channel)
        if mine is not None and mine[0] == serial:
            return mine[1]
        if self._cache[0] != serial:
            self._cache = (serial, _parent_message())
        return self._cache[1]

    def set_parent(self, ident, parent, channel="shell"):
        """Set the parent request (until the next request arrives)."""
        self._set[channel] = (_S.request_serial, parent)

    @property
    def _parent_header(self):
        import warnings
        warnings.warn("Kernel._parent_header is deprecated in ipykernel 6. Use .get_parent()",
                      DeprecationWarning, stacklevel=2)
        return self.get_parent(channel="shell")


_KERNEL = []


def kernel():
    """The runner's kernel object (one per sandbox)."""
    if not _KERNEL:
        _KERNEL.append(Kernel())
        _KERNEL[0].shell = _S.shell
    return _KERNEL[0]


# ---------------------------------------------------------------- requests


def handle(req):
    """A frontend's comm_open/comm_msg/comm_close (a request frame): run the
    comm manager's handler, then answer comm_done."""
    kind = req.get("type")
    k = kernel()
    msg = k.get_parent()
    _S.pending = False
    _S.sigmode = _runner._SIG_USER
    try:
        if isinstance(msg.get("content", {}).get("comm_id"), str) and msg["content"]["comm_id"]:
            getattr(k.comm_manager, kind)(k.iopub_socket, None, msg)
    except KeyboardInterrupt:
        _S.sigmode = _runner._SIG_IGNORE
        _report("%s handler interrupted" % kind)
    except BaseException:
        _S.sigmode = _runner._SIG_IGNORE
        _report("exception in the %s handler" % kind)
    finally:
        _S.sigmode = _runner._SIG_IGNORE
        _S.pending = False
    _runner._flush()
    _runner._send({"type": "comm_done"})


# ---------------------------------------------------------------- modules served as ipykernel's


def fill_ipykernel_comm(module):
    """ipykernel.comm, ipykernel.comm.comm, ipykernel.comm.manager."""
    module.Comm = Comm
    module.CommManager = CommManager
    module.__all__ = ["Comm", "CommManager"]
    module.__doc__ = "Comms of cellblock's sandbox (ipykernel.comm's API)."


def _create_comm(*args, **kwargs):
    """Create a Comm (the runner's: comm.create_comm)."""
    return Comm(*args, **kwargs)


def _get_comm_manager(*args, **kwargs):
    """The kernel's comm manager (the runner's: comm.get_comm_manager)."""
    return kernel().comm_manager


def patch_comm_package(m):
    m.create_comm = _create_comm
    m.get_comm_manager = _get_comm_manager
