"""Data types returned by :class:`cellblock.Sandbox` (shaped like E2B's
code-interpreter SDK: ``Execution``, ``Result``, ``Logs``, ``ExecutionError``)."""

import base64
import errno
import hashlib
import json
import os
import secrets
import time

from . import names

__all__ = ["Execution", "Result", "Logs", "ExecutionError", "OutputMessage", "EntryInfo"]

# mime type -> Result attribute (E2B's names)
MIME_ATTRS = (
    ("text/plain", "text"),
    ("text/html", "html"),
    ("text/markdown", "markdown"),
    ("image/svg+xml", "svg"),
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("application/pdf", "pdf"),
    ("text/latex", "latex"),
    ("application/json", "json"),
    ("application/javascript", "javascript"),
)
BINARY_MIMES = {"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf",
                "application/octet-stream"}
# what save() writes when a bundle has several representations
SAVE_ORDER = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml",
              "application/pdf", "text/csv", "text/tab-separated-values", "text/html",
              "text/markdown", "text/latex", "application/json", "application/javascript",
              "application/octet-stream", "text/plain")


class OutputMessage(str):
    """One chunk of stdout/stderr as it streamed.  It *is* the text (a str), and
    also has E2B's attributes: ``line``, ``timestamp`` (ns), ``error``."""

    def __new__(cls, text, error=False, timestamp=None):
        self = super().__new__(cls, text)
        self.error = bool(error)
        self.timestamp = timestamp if timestamp is not None else time.time_ns()
        return self

    @property
    def line(self):
        return str(self)


class Logs:
    """stdout and stderr of one execution, as lists of the chunks received."""

    def __init__(self, stdout=None, stderr=None):
        self.stdout = list(stdout or [])
        self.stderr = list(stderr or [])

    def to_json(self):
        return {"stdout": [str(s) for s in self.stdout], "stderr": [str(s) for s in self.stderr]}

    def __repr__(self):
        return "Logs(stdout=%r, stderr=%r)" % ([str(s) for s in self.stdout],
                                             [str(s) for s in self.stderr])


class ExecutionError:
    """The error a cell raised: ``name`` (exception class), ``value`` (its
    message) and ``traceback`` (one string, lines joined with newlines)."""

    def __init__(self, name, value, traceback):
        self.name = name
        self.value = value
        if isinstance(traceback, (list, tuple)):
            traceback = "\n".join(str(t) for t in traceback)
        self.traceback = traceback or ""

    def to_json(self):
        return {"name": self.name, "value": self.value, "traceback": self.traceback}

    def __repr__(self):
        return "ExecutionError(name=%r, value=%r)" % (self.name, self.value)


class Result:
    """One rich output of a cell: the value of its last expression
    (``is_main_result``), something it displayed, or a file it wrote in the
    working directory (``artifact`` / ``file_name`` set)."""

    def __init__(self, data, metadata=None, is_main_result=False, sandbox=None):
        self.data = dict(data or {})
        self.metadata = dict(metadata or {})
        self.is_main_result = bool(is_main_result)
        for mime, attr in MIME_ATTRS:
            setattr(self, attr, self.data.get(mime))
        cb = self.metadata.get("cellblock") if isinstance(self.metadata.get("cellblock"), dict) else {}
        art = cb.get("artifact")
        self.artifact = dict(art) if isinstance(art, dict) else None
        notice = cb.get("artifact_notice")
        self.artifact_notice = dict(notice) if isinstance(notice, dict) else None
        self.file_name = self.artifact.get("path") if self.artifact else None
        # everything that has no attribute of its own (text/csv, image/gif, ...)
        known = {m for m, _ in MIME_ATTRS}
        self.extra = {k: v for k, v in self.data.items() if k not in known}
        self._sandbox = sandbox

    def demote_artifact(self):
        """Not a file the kernel returned: keep the bundle, drop the claim."""
        self.artifact = None
        self.file_name = None

    # -- E2B-compatible helpers
    def formats(self):
        """Names of the representations present (E2B style: 'text', 'png', ...;
        mime types for the others)."""
        out = [attr for mime, attr in MIME_ATTRS if mime in self.data]
        out += [k for k in self.data if k not in {m for m, _ in MIME_ATTRS}]
        return out

    @property
    def mime(self):
        """The artifact's mime type, or the richest mime type of the bundle."""
        if self.artifact and self.artifact.get("mime"):
            return self.artifact["mime"]
        for m in SAVE_ORDER:
            if m in self.data:
                return m
        return next(iter(self.data), None)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.data

    def __getitem__(self, key):
        return getattr(self, key)

    def __str__(self):
        return self.text or ""

    def __repr__(self):
        if self.artifact:
            return "Result(artifact=%r, size=%s, mime=%r)" % (self.file_name, self.artifact.get("size"),
                                                              self.mime)
        return "Result(%s%s)" % (", ".join(self.formats()), ", main" if self.is_main_result else "")

    def to_json(self):
        return {"data": self.data, "metadata": self.metadata, "is_main_result": self.is_main_result,
                "file_name": self.file_name}

    # -- content
    def content_bytes(self, mime=None):
        """The bytes of one representation (base64 decoded for binary types,
        UTF-8 for text, JSON dumped for application/json).  For an artifact
        with no mime given: the file's exact bytes, checked against its
        sha256; when the bundle cannot reproduce them exactly (a JSON file's
        formatting), they are read back from the sandbox and checked."""
        exact = mime is None and self.artifact is not None
        if mime is None:
            mime = self.mime
            if self.artifact and mime not in self.data:
                mime = "text/plain"
        raw = self._bytes_of(mime) if mime else None
        if exact and self.artifact.get("sha256"):
            want = self.artifact["sha256"]
            if raw is None or hashlib.sha256(raw).hexdigest() != want:
                if self._sandbox is None:
                    raise ValueError("%s: the output does not hold the file's exact bytes and no "
                                     "sandbox is attached to read them" % names.escape(self.file_name))
                raw = self._sandbox.files.read(self.file_name)
                if hashlib.sha256(raw).hexdigest() != want:
                    raise ValueError("%s changed in the sandbox since it was returned"
                                     % names.escape(self.file_name))
        if raw is None:
            raise ValueError("no content to save")
        return raw

    def _bytes_of(self, mime):
        v = self.data.get(mime)
        if v is None:
            return None
        if mime in BINARY_MIMES or (mime.startswith("image/") and mime != "image/svg+xml"):
            if isinstance(v, list):
                v = "".join(v)
            return base64.b64decode(v)
        if mime == "application/json" or not isinstance(v, (str, list)):
            return json.dumps(v, indent=2).encode()
        if isinstance(v, list):                # multiline strings in notebook files
            v = "".join(v)
        return v.encode("utf-8")

    def save(self, path, mime=None, overwrite=False):
        """Write this result to ``path``: a file path, or a directory (then
        the artifact's file name is used, its directories created).  Returns
        the path written.

        The artifact's name was chosen in the sandbox, so it must pass the
        host's name policy (:mod:`cellblock.names`: no control, C1 or bidi
        character, valid UTF-8, no '..', hidden or absolute part) or
        :class:`~cellblock.names.NameRefused` says why.  Nothing is ever
        written through a symbolic link: every directory below ``path`` is
        opened without following links, and the file is created exclusively.
        An existing file is kept (``FileExistsError``) unless ``overwrite``
        is true; then it is replaced atomically by a rename, which replaces
        a link at that name rather than writing where it points."""
        data = self.content_bytes(mime)
        dfd, parts, saved = self._open_target(os.fspath(path))
        try:
            for d in parts[:-1]:
                try:
                    os.mkdir(d, 0o777, dir_fd=dfd)
                except FileExistsError:
                    pass
                try:
                    nfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                  dir_fd=dfd)
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    raise NotADirectoryError(e.errno, "%s: %s is not a directory (a link or a file); "
                                             "save() follows no links" % (saved, names.escape(d))) from None
                os.close(dfd)
                dfd = nfd
            _create_at(dfd, parts[-1], data, overwrite, saved)
        finally:
            os.close(dfd)
        return saved

    def _open_target(self, path):
        """(directory fd, names to create beneath it, the path they make)."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            dfd = os.open(path, flags)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                raise
            if os.path.islink(path) and os.path.isdir(path):
                raise IsADirectoryError(errno.ELOOP, "%s is a symbolic link to a directory; save() "
                                        "follows no links: give the directory itself" % path) from None
            dfd = None                      # no directory there (a link is never written through)
        if dfd is None:                     # a file path the caller chose
            parent, base = os.path.split(path)
            if not base:
                raise ValueError("%s: no file name to save under" % path)
            return os.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), [base], path
        try:                                # a directory: the artifact's own name beneath it
            if not self.file_name:
                raise ValueError("not an artifact: give a file path, not a directory")
            if self.artifact and self.artifact.get("path_escaped"):
                raise names.NameRefused(self.file_name, "utf8")   # the real name is not UTF-8
            names.check_path(self.file_name)
        except BaseException:
            os.close(dfd)
            raise
        parts = self.file_name.split("/")
        return dfd, parts, os.path.join(path, *parts)


def _create_at(dfd, name, data, overwrite, shown):
    """Creates name in the directory dfd with data: exclusively, or (overwrite)
    through a temporary name renamed over it.  Never follows a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    if not overwrite:
        try:
            fd = os.open(name, flags, 0o666, dir_fd=dfd)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "%s exists; pass overwrite=True to replace it"
                                  % names.escape(shown)) from None
        try:
            _write_all(fd, data)
        except BaseException:
            os.unlink(name, dir_fd=dfd)     # ours: created just now, exclusively
            raise
        return
    tmp = ".cellblock-save-" + secrets.token_hex(8)
    fd = os.open(tmp, flags, 0o666, dir_fd=dfd)
    try:
        _write_all(fd, data)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise


def _write_all(fd, data):
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


class Execution:
    """What one ``run_code`` produced."""

    def __init__(self):
        self.results = []
        self.logs = Logs()
        self.error = None
        self.execution_count = None
        self.timed_out = False
        self.reply_metadata = {}

    @property
    def text(self):
        """The text of the main result (the value of the cell's last expression)."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @property
    def artifacts(self):
        """The results that are files the cell wrote."""
        return [r for r in self.results if r.artifact]

    @property
    def costs(self):
        """What the cell cost, as the kernel counted it (docs/ARCHITECTURE.md
        "What a cell cost"): wall_s, cpu_s, memory_peak_bytes, stdout_bytes,
        stderr_bytes, display_bytes, files_written, files_bytes and, with an
        allowlist, network: {"host:port": {connections, bytes_up, bytes_down,
        refused}}.  None from a kernel that does not report them."""
        c = (self.reply_metadata.get("cellblock") or {}).get("costs")
        return dict(c) if isinstance(c, dict) else None

    @property
    def network(self):
        """The network policy the cell ran under: {"mode", "allow", "generation"}."""
        n = (self.reply_metadata.get("cellblock") or {}).get("network")
        return dict(n) if isinstance(n, dict) else None

    def to_json(self):
        return json.dumps({"results": [r.to_json() for r in self.results],
                           "logs": self.logs.to_json(),
                           "error": self.error.to_json() if self.error else None,
                           "costs": self.costs,
                           "execution_count": self.execution_count})

    def __repr__(self):
        return "Execution(results=%r, logs=%r, error=%r, execution_count=%r)" % (
            self.results, self.logs, self.error, self.execution_count)


class EntryInfo:
    """One entry of ``files.list()``."""

    def __init__(self, name, type, path, size):
        self.name = name
        self.type = type            # "file" | "dir" | "other"
        self.path = path
        self.size = size

    def __repr__(self):
        return "EntryInfo(name=%r, type=%r, path=%r, size=%r)" % (self.name, self.type, self.path,
                                                                  self.size)
