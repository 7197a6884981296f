"""cellblock runner: the warm-start template (issue 21) and the runner it forks.

A template is this runner, started by launcher/warm_tpl.c exactly as a cold
runner is (same interpreter, flags, environment and paths, in a file system
built from the sandbox's own plan), that does everything a runner does
before its first request -- ``_setup``, IPython's shell, the ``--preload``
modules -- and then, instead of serving a kernel, serves launchers:

- it freezes what it has built (``gc.freeze()``: the collector never writes
  to those pages again, so they stay shared with every fork);
- it keeps ``spares`` forks waiting in ``accept()`` on the socket the
  supervisor made; the template itself never reads a request, so no
  sandbox's data (its --env values, say) ever enters the memory the next
  sandboxes are forked from;
- it polls every directory it imported from (stat, each second): a package that is
  installed, upgraded or removed makes it stale, and it ends (the next
  launcher starts cold and builds a new one); so do an idle period and a
  maximum age.

A spare that takes a request answers the launcher, then calls
libcellblock-warm.so (isolate/warm_enter.c), which returns twice: in the
spare (which exits) and in the runner, confined as a cold runner is.  The
runner then does the per-sandbox part of start-up here (fresh random state,
the files the template's start-up wrote in its home and /tmp, the start of
its history session; its environment is the sandbox's already: the launcher
started the template with the runner's, and the key covers every entry),
sends the hello frame and enters cb_core's request loop.  Anything failing on the way is reported on the launcher's
error pipe, which then starts the sandbox cold.
"""

import sys
import os
import gc
import errno
import select
import struct
import time

_REPLY = struct.Struct("=Iii240s")      # cb_warm_reply_t (isolate/warm_proto.h)
_MAGIC = 0x63627731                     # CB_WARM_MAGIC
_REQ_MAX = 1 << 16                      # > CB_WARM_REQ_MAX
_FDS_MAX = 32                           # > CB_WARM_FDS_MAX
_WHY_MAX = 240                          # CB_WARM_REASON_MAX
_REQUEST_S = 30.0                       # a spare waits this long for the request it accepted
_FD_CONFIG, _FD_LISTEN, _FD_SO, _FD_READY = 3, 4, 5, 6   # launcher/warm_limits.h
_PR_SET_PDEATHSIG = 1
_EXIT_STALE = 75                        # CB_WARM_EXIT_STALE: the supervisor says "stale"
_POLL_S = 1.0                           # the imported-from directories are checked this often
_SKELETON_ROOTS = ("/home/user", "/tmp")
_SKELETON_FILES_MAX = 512
_SKELETON_BYTES_MAX = 8 << 20


def _log(msg):
    try:
        sys.__stderr__.write("cellblock template: %s\n" % msg)
        sys.__stderr__.flush()
    except Exception:
        pass


def _read_config(fd):
    data = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    cfg = {}
    for line in data.decode("ascii").splitlines():
        name, _, value = line.partition("=")
        cfg[name] = value
    return cfg


# ---------------------------------------------------------------- what a fork must recreate

def _snapshot():
    """The files the template's start-up wrote in its home and /tmp (IPython's
    profile, matplotlib's caches): a fork's home and /tmp are the sandbox's
    own, empty tmpfs."""
    out, total = [], 0
    for root in _SKELETON_ROOTS:
        for top, dirs, files in os.walk(root):
            st = os.lstat(top)
            out.append((top, st.st_mode & 0o7777, st.st_mtime_ns, None))
            for name in files:
                path = os.path.join(top, name)
                st = os.lstat(path)
                if not (st.st_mode & 0o170000) == 0o100000:
                    continue
                total += st.st_size
                if len(out) >= _SKELETON_FILES_MAX or total > _SKELETON_BYTES_MAX:
                    raise RuntimeError("the template's start-up wrote too much in %s" % root)
                with open(path, "rb") as f:
                    out.append((path, st.st_mode & 0o7777, st.st_mtime_ns, f.read()))
    return out


def _recreate(skeleton):
    for path, mode, mtime, data in skeleton:
        if data is None:
            if path not in _SKELETON_ROOTS:
                os.mkdir(path, mode)
        else:
            with open(path, "xb") as f:
                f.write(data)
            os.chmod(path, mode)
            os.utime(path, ns=(mtime, mtime))
    for path, mode, mtime, data in reversed(skeleton):
        if data is None and path not in _SKELETON_ROOTS:
            os.utime(path, ns=(mtime, mtime))


# ---------------------------------------------------------------- what first requests set up

# Runner modules a request loads on first use; what cb_lazy kept out of
# IPython's import (loaded there by the first traceback, help() or a
# top-level await); IPython's bundled extensions.
_RUNNER_MODULES = ("cb_fast", "cb_shell_fast", "cb_comm", "cb_display")
_DEFERRED = ("asyncio", "pydoc", "stack_data", "urllib.request")
_EXTENSIONS = ("IPython.extensions.autoreload", "IPython.extensions.storemagic")


def _warm_up(core, shell):
    """What a kernel's first requests would load or build lazily, done once
    here -- without running a cell: modules, jedi for the completer (the
    first completion request would enable it), IPython's display formatters
    (a lazy default: its first result would create them) and its input
    transformers' first use.  None of this touches the history, the count or
    the user's namespace."""
    for name in _RUNNER_MODULES:
        core._mod(name)
    lazy = core._mod("cb_lazy")
    for name in _DEFERRED:
        try:
            lazy._real(name)
        except ImportError:
            pass
    for name in _EXTENSIONS:
        try:
            core._std("importlib").import_module(name)
        except ImportError:
            pass
    core._mod("cb_shell").enable_jedi()
    shell.display_formatter.formatters                      # noqa: B018 (a lazy default)
    for cell in ("x = 1\n", "%who\n", "x?\n"):
        shell.transform_cell(cell)
    # a first traceback's lexer, style and source reading, with a formatter
    # of its own (the shell's keeps the last traceback it showed: %debug)
    from IPython.core import ultratb
    try:
        _raise_for_warm_up()
    except ValueError:
        ultratb.VerboseTB(color_scheme=shell.colors).structured_traceback(*sys.exc_info())
    # the runner's files whose frames head a cell's traceback: stack_data
    # reads and parses each once (executing's cache)
    try:
        import executing
        for name in ("cb_fast", "cb_shell", "cb_shell_fast"):
            executing.Source.for_filename(core._mod(name).__file__)
    except Exception:
        pass


def _raise_for_warm_up():
    raise ValueError("a traceback to format while the template warms up")


# ---------------------------------------------------------------- staleness

def _watch_dirs():
    dirs = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if isinstance(f, str) and f.startswith("/") and not f.startswith(_SKELETON_ROOTS):
            dirs.add(os.path.dirname(f))
    for p in sys.path:
        if p.startswith("/") and not p.startswith(_SKELETON_ROOTS) and os.path.isdir(p):
            dirs.add(p)
    return sorted(dirs)


def _dir_states():
    """(mtime, ctime, inode) of every directory the template imported from.
    Polled, not watched with inotify: the sandbox's read-only binds are
    overlays (isolate/mount.c), and an overlay reports no event for a change
    made in its lower directory on the host, while stat() reads the lower
    directory itself."""
    out = {}
    for d in _watch_dirs():
        try:
            st = os.stat(d)
        except OSError:
            continue
        out[d] = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return out


def _stale(states):
    """The first directory whose entries changed since states, else None (a
    first __pycache__ made on the host counts too: one rebuild)."""
    for d, was in states.items():
        try:
            st = os.stat(d)
        except OSError:
            return d
        if (st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != was:
            return d
    return None


# ---------------------------------------------------------------- the template

class _Template:
    def __init__(self, entry, shell, version, cfg):
        import ctypes
        import socket
        self.ctypes, self.socket = ctypes, socket
        self.entry, self.shell, self.version = entry, shell, version
        self.key = cfg["key"].encode()
        self.idle = float(cfg.get("idle", "600"))
        self.max_age = float(cfg.get("max_age", "3600"))
        self.n_spares = max(1, int(cfg.get("spares", "1")))
        self.preload = [m for m in cfg.get("preload", "").replace(" ", ",").split(",") if m]
        self.libc = ctypes.CDLL(None, use_errno=True)
        # by its fd: /proc/PID/maps then names a memfd, not where the build lives
        self.lib = ctypes.PyDLL("/proc/self/fd/%d" % _FD_SO)
        os.close(_FD_SO)
        self.lib.cb_warm_check.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                                           ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.cb_warm_enter.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                           ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                           ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        self.lib.cb_warm_report.argtypes = [ctypes.c_int, ctypes.c_int]
        self.lib.cb_warm_attach.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                            ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        self.lib.cb_warm_attach.restype = None
        self.listen = socket.socket(fileno=_FD_LISTEN)
        self.core = None
        self.skeleton = []
        self.spares = {}                # pid -> its pipe's read end (closed once it took one)
        self.started = self.last = time.monotonic()

    def build(self):
        """What a cold runner does before its first request, and the preload."""
        core = self.core = self.entry._load_core()
        core._setup(self.shell)
        if self.shell == "ipython":
            core._ensure_shell()
        if core._S.shell is not None:
            _warm_up(core, core._S.shell)
        for name in self.preload:
            try:
                core._std("importlib").import_module(name)
            except BaseException as e:
                _log("--preload %s: %s: %s" % (name, type(e).__name__, e))
        self.skeleton = _snapshot()
        gc.collect()
        gc.freeze()

    def serve(self):
        """Keeps spares waiting until the template ends.  Returns in a fork
        that has become a runner (self.err, self.conn set)."""
        states = _dir_states()
        polled = time.monotonic()
        os.write(_FD_READY, b"r")
        os.close(_FD_READY)
        while True:
            while len([p for p, r in self.spares.items() if r is not None]) < self.n_spares:
                if self._spare():
                    return                          # this is a runner now
            now = time.monotonic()
            deadline = min(self.last + self.idle, self.started + self.max_age)
            if now >= deadline:
                return self._end("idle" if now >= self.last + self.idle else "max age reached")
            fds = [r for r in self.spares.values() if r is not None]
            ready = select.select(fds, [], [], min(deadline - now, _POLL_S))[0]
            if time.monotonic() - polled >= _POLL_S:
                what = _stale(states)
                if what is not None:
                    return self._end("stale: %s changed" % what, _EXIT_STALE)
                polled = time.monotonic()
            for pid, r in list(self.spares.items()):
                if r in ready:
                    os.close(r)
                    self.spares[pid] = None         # it serves a request (or died)
                    self.last = time.monotonic()
            self._reap()

    def _reap(self):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            r = self.spares.pop(pid, None)
            if r is not None:
                os.close(r)

    def _end(self, why, code=0):
        _log("ending (%s)" % why)
        for pid in list(self.spares):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        os._exit(code)

    def _spare(self):
        """Forks a spare.  True in a spare that has become a runner."""
        import threading
        if threading.active_count() != 1:
            self._end("a thread was started: forks would copy it half-way", 1)
        r, w = os.pipe()
        self.pid = os.getpid()
        pid = os.fork()
        if pid:
            os.close(w)
            self.spares[pid] = r
            return False
        try:
            os.close(r)
            for fd in self.spares.values():
                if fd is not None:
                    os.close(fd)
            self.libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
            if os.getppid() != self.pid:
                os._exit(0)                         # the template is gone already
            return self._take(w)
        except BaseException as e:
            _log("spare: %s: %s" % (type(e).__name__, e))
            os._exit(1)

    def _take(self, notify):
        socket, ctypes = self.socket, self.ctypes
        conn, _ = self.listen.accept()
        os.write(notify, b"t")
        os.close(notify)
        self.listen.close()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.geteuid():
            os._exit(0)
        conn.settimeout(_REQUEST_S)     # a launcher that connected and never asks
        msg, anc, _, _ = conn.recvmsg(_REQ_MAX, socket.CMSG_SPACE(_FDS_MAX * 4))
        conn.settimeout(None)
        fds = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(struct.unpack("%di" % (len(data) // 4), data[:len(data) // 4 * 4]))
        why = ctypes.create_string_buffer(_WHY_MAX)
        ok = self.lib.cb_warm_check(msg, len(msg), len(fds), self.key, why, _WHY_MAX) == 0
        arr = (ctypes.c_int * len(fds))(*fds)
        if ok:   # the sandbox's init and this fork into the cgroup: answered once done
            self.lib.cb_warm_attach(msg, len(msg), arr, len(fds))
        conn.sendall(_REPLY.pack(_MAGIC, int(ok), os.getpid(), why.value))
        if not ok:
            os._exit(0)
        err = ctypes.c_int(-1)
        if self.lib.cb_warm_enter(msg, len(msg), arr, len(fds), conn.fileno(),
                                  ctypes.byref(err)) != 0:
            os._exit(0)                             # the spare: the runner is on its way
        # the runner: every layer is in force; the fds above were closed
        self.listen.detach()
        conn.detach()
        self.err = err.value
        return True

    def become_runner(self):
        """The per-sandbox part of start-up, in the runner."""
        core = self.core
        try:
            # the environment is the sandbox's already: the launcher started
            # the template with the runner's (the key covers every entry), and
            # _setup changed it as a cold runner's does
            import random
            import threading
            # os.fork()'s own hooks ran (threading, random, ...); Python 3.11's
            # threading leaves the main thread's native id the template's
            main = threading.main_thread()
            if hasattr(main, "_set_native_id"):
                main._set_native_id()
            random.seed()
            np = sys.modules.get("numpy")
            if np is not None:
                np.random.seed()
            sys.path_importer_cache.pop(core._S.cwd_path, None)
            _recreate(self.skeleton)
            shell = core._S.shell
            if shell is not None:                   # its history session starts now
                import datetime
                hm = shell.history_manager
                with hm.db:
                    hm.db.execute("UPDATE sessions SET start=? WHERE session=?",
                                  (datetime.datetime.now(), hm.session_number))
        except BaseException as e:
            _log("runner: %s: %s" % (type(e).__name__, e))
            self.lib.cb_warm_report(self.err, getattr(e, "errno", None) or errno.EPROTO)
            os._exit(127)
        os.close(self.err)
        # the cells' file prefix is this sandbox's own; fd 4 is the debugger's
        # channel when the launcher had one (a runner fd slot of the request)
        prefix, channel, debugpy = self.entry.debug_info()
        try:
            self.entry._hello(self.shell, self.version, prefix, channel and debugpy)
        except OSError:
            os._exit(0)
        # what a restored runner says again (cb_snap), as runner.py records it
        core = sys.modules["_cellblock_runner"]
        core._S.shell_version = self.version
        core._S.hello_debugger = channel and debugpy
        return prefix, channel


def template_main(entry, shell, version):
    """runner.py's main in a template: builds, serves; in a fork that has
    become a runner, the request loop."""
    try:
        cfg = _read_config(_FD_CONFIG)
        os.close(_FD_CONFIG)
        t = _Template(entry, shell, version, cfg)
        t.build()
    except BaseException as e:
        _log("could not start: %s: %s" % (type(e).__name__, e))
        os._exit(1)
    t.serve()
    prefix, channel = t.become_runner()
    del t
    sys.modules["_cellblock_runner"]._loop(prefix, channel)
