"""sb.files: files in the sandbox's working directory, moved through the
kernel's own channel (never through the host filesystem).

Every operation is one *silent* execute_request (store_history false, so
In[n], _, the history and execution_count do not move) whose code defines a
throw-away function; a user expression pops the function from the globals and
calls it, so no name is left behind.  It returns one JSON string.  Writes
carry the bytes base64-encoded in the code and go to a hidden temporary file
(a leading '.': the artifact scan never looks at it) that is renamed over
the target by the last chunk, so a reader never sees half a file.  Reads come
back base64-encoded in the user expression's value, in chunks.
"""

import ast
import base64
import builtins
import json
import os
import secrets

from .models import EntryInfo

__all__ = ["Filesystem", "CHUNK"]

CHUNK = 2 << 20          # raw bytes per request (base64: 2.7 MiB, well under the 48 MiB frame)
OP_TIMEOUT = 60.0

_OP = "__cellblock_files_op__"
_ERRORS = {n: getattr(builtins, n) for n in (
    "FileNotFoundError", "FileExistsError", "IsADirectoryError", "NotADirectoryError",
    "PermissionError", "OSError", "ValueError")}


def _indent(src):
    return "".join("    " + line + "\n" for line in src.strip("\n").splitlines())


class Filesystem:
    """Files of one Sandbox, relative to its working directory (HOME)."""

    def __init__(self, sandbox):
        self._sb = sandbox

    # ---------------------------------------------------------------- plumbing
    def _call(self, body, **args):
        """Run body (the inside of a function that returns a JSON-able value)
        in the sandbox with args bound as locals; return the value."""
        binds = "".join("%s = %r\n" % (k, v) for k, v in args.items())
        code = "def %s():\n%s" % (_OP, _indent("import os, json, base64\n" + binds + body))
        expr = "__import__('json').dumps(globals().pop(%r)())" % _OP
        sb = self._sb
        with sb._lock:
            sb._check_open()
            ex, reply = sb._execute(code, silent=True, store_history=False,
                                    user_expressions={"r": expr}, timeout=OP_TIMEOUT, want_reply=True)
        if ex.error is not None and not reply.get("user_expressions"):
            raise RuntimeError("file operation failed in the sandbox: %s: %s" % (ex.error.name,
                                                                                 ex.error.value))
        r = (reply.get("user_expressions") or {}).get("r") or {}
        if r.get("status") != "ok":
            ename, evalue = r.get("ename", "Error"), r.get("evalue", "")
            raise _ERRORS.get(ename, RuntimeError)("%s (in the sandbox: %s)" % (evalue, ename))
        text = (r.get("data") or {}).get("text/plain")
        try:
            return json.loads(ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError):
            raise RuntimeError("malformed answer from the sandbox") from None

    def _rel(self, path, allow_root=False):
        """Validate a sandbox path; returns it relative to the working dir."""
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError("path must be a str")
        if "\x00" in path:
            raise ValueError("path contains a NUL byte")
        if path.startswith("/"):
            wd = self._sb.workdir or "/home/user"
            if path.rstrip("/") == wd:
                path = ""
            elif path.startswith(wd.rstrip("/") + "/"):
                path = path[len(wd.rstrip("/")) + 1:]
            else:
                raise ValueError("%r is outside the sandbox's working directory %s" % (path, wd))
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise ValueError("%r: '..' is not allowed" % path)
        if not parts and not allow_root:
            raise ValueError("a file path is needed, got %r" % path)
        if len(path.encode("utf-8", "surrogatepass")) > 4000:
            raise ValueError("path too long")
        return "/".join(parts) or "."

    def _workdir(self):
        return self._call("return os.getcwd()")

    def _setenv(self, envs):
        """Set (value str) or unset (value None) variables; returns the old values."""
        envs = {str(k): (None if v is None else str(v)) for k, v in envs.items()}
        return self._call("""
old = {k: os.environ.get(k) for k in ENVS}
for k, v in ENVS.items():
    if v is None:
        os.environ.pop(k, None)
    else:
        os.environ[k] = v
return old
""", ENVS=envs)

    # ---------------------------------------------------------------- API
    def write(self, path, data):
        """Write bytes (or str, as UTF-8) to path, creating its directories.
        Returns an EntryInfo of the written file."""
        rel = self._rel(path)
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        elif not isinstance(data, bytes):
            raise TypeError("data must be bytes or str")
        token = secrets.token_hex(8)
        n = len(data)
        offsets = list(range(0, n, CHUNK)) or [0]
        try:
            for i, off in enumerate(offsets):
                res = self._call("""
p = os.path.join(os.getcwd() if WD is None else WD, REL)
d = os.path.dirname(p)
if os.path.isdir(p) and not os.path.islink(p):
    raise IsADirectoryError("is a directory: %r" % REL)
os.makedirs(d, exist_ok=True)
tmp = os.path.join(d, "." + os.path.basename(p) + ".cellblock-upload-" + TOKEN)
with open(tmp, "wb" if FIRST else "ab") as f:
    f.write(base64.b64decode(DATA))
size = os.path.getsize(tmp)
if LAST:
    os.replace(tmp, p)
return {"size": size}
""", WD=self._sb.workdir, REL=rel, TOKEN=token, FIRST=(i == 0), LAST=(i == len(offsets) - 1),
                                 DATA=base64.b64encode(data[off:off + CHUNK]).decode("ascii"))
        except BaseException:
            try:
                self._call("""
p = os.path.join(os.getcwd() if WD is None else WD, REL)
tmp = os.path.join(os.path.dirname(p), "." + os.path.basename(p) + ".cellblock-upload-" + TOKEN)
if os.path.lexists(tmp):
    os.unlink(tmp)
return None
""", WD=self._sb.workdir, REL=rel, TOKEN=token)
            except Exception:
                pass
            raise
        if res["size"] != n:
            raise OSError("short write in the sandbox: %d of %d bytes" % (res["size"], n))
        return EntryInfo(os.path.basename(rel), "file", self._abs(rel), n)

    def read(self, path, format="bytes"):
        """The content of path: bytes (format='bytes', the default) or str
        (format='text', UTF-8)."""
        rel = self._rel(path)
        chunks = []
        off = 0
        while True:
            res = self._call("""
p = os.path.join(os.getcwd() if WD is None else WD, REL)
if os.path.isdir(p):
    raise IsADirectoryError("is a directory: %r" % REL)
with open(p, "rb") as f:
    size = os.fstat(f.fileno()).st_size
    f.seek(OFF)
    b = f.read(N)
return {"size": size, "data": base64.b64encode(b).decode("ascii")}
""", WD=self._sb.workdir, REL=rel, OFF=off, N=CHUNK)
            b = base64.b64decode(res["data"], validate=True)
            chunks.append(b)
            off += len(b)
            if len(b) < CHUNK or off >= res["size"]:
                break
        data = b"".join(chunks)
        if format == "text":
            return data.decode("utf-8")
        if format != "bytes":
            raise ValueError("format must be 'bytes' or 'text'")
        return data

    def list(self, path="."):
        """Entries of a directory (hidden ones included), sorted by name."""
        rel = self._rel(path, allow_root=True)
        res = self._call("""
p = os.path.join(os.getcwd() if WD is None else WD, REL)
out = []
with os.scandir(p) as it:
    for e in it:
        st = e.stat(follow_symlinks=False)
        kind = "dir" if e.is_dir(follow_symlinks=False) else "file" if e.is_file(follow_symlinks=False) else "other"
        out.append([e.name, kind, st.st_size])
return sorted(out)
""", WD=self._sb.workdir, REL=rel)
        base = "" if rel == "." else rel + "/"
        return [EntryInfo(n, k, self._abs(base + n), s) for n, k, s in res]

    def exists(self, path):
        rel = self._rel(path, allow_root=True)
        return self._call("return os.path.lexists(os.path.join(os.getcwd() if WD is None else WD, REL))",
                          WD=self._sb.workdir, REL=rel)

    def remove(self, path):
        """Remove a file or an empty directory."""
        rel = self._rel(path)
        self._call("""
p = os.path.join(os.getcwd() if WD is None else WD, REL)
if os.path.isdir(p) and not os.path.islink(p):
    os.rmdir(p)
else:
    os.unlink(p)
return None
""", WD=self._sb.workdir, REL=rel)

    def _abs(self, rel):
        wd = (self._sb.workdir or "/home/user").rstrip("/")
        return wd if rel == "." else wd + "/" + rel
