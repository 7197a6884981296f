"""cellblock.Sandbox: a cellblock kernel started through jupyter_client, with
an API shaped like E2B's code-interpreter SDK.

    from cellblock import Sandbox
    with Sandbox(memory=512, timeout=30) as sb:
        ex = sb.run_code("x = 21 * 2\nx")
        print(ex.text)            # '42'
"""

import atexit
import math
import os
import queue
import re
import threading
import time
import weakref

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import KernelManager

from .files import Filesystem
from .models import Execution, ExecutionError, OutputMessage, Result
from .snapshots import Snapshots

__all__ = ["Sandbox", "SandboxError"]

# Seconds a cell gets to stop after the client's timeout interrupted it
# (the kernel's own grace before it kills the sandbox is 2 s).
INTERRUPT_GRACE = 10.0
_TIMEOUT_NOTE = "[cellblock] the cell exceeded its time limit"

_live = weakref.WeakSet()


@atexit.register
def _close_all():
    for sb in list(_live):
        try:
            sb.kill()
        except Exception:
            pass


class SandboxError(RuntimeError):
    """The sandbox (kernel) could not be started or stopped answering."""


# What the kernel's banner says until the launcher has reported the sandbox
# it built, after a failed build, and where the code runs.
_SETTING_UP = "Sandbox: being set up"
_FAILURE = "Last sandbox failure:"
_WORKDIR = re.compile(r"working directory (/[^\s;,)]+)")
_SETUP_POLL = 0.002            # s between kernel_info requests while it builds
_RESEND = 0.02                 # s before another kernel_info while iopub connects


def _handshake(kc, km, deadline, iopub=True):
    """kernel_info until its reply has come and (iopub) a status message of
    one of our requests has come on iopub: messages published from then on
    reach us.  Returns the reply's content.  Replies and statuses of the
    other requests are left for the readers, which match by msg_id."""
    import zmq
    ids, reply, seen, resend = set(), None, not iopub, 0.0
    poller = zmq.Poller()
    poller.register(kc.shell_channel.socket, zmq.POLLIN)
    if iopub:
        poller.register(kc.iopub_channel.socket, zmq.POLLIN)
    while reply is None or not seen:
        now = time.monotonic()
        if now > deadline:
            raise SandboxError("the kernel did not answer kernel_info in time")
        if now >= resend and (reply is None or not seen):
            ids.add(kc.kernel_info())
            resend = now + _RESEND
        ready = dict(poller.poll(max(1, int(1000 * min(resend, deadline) - 1000 * now))))
        if kc.shell_channel.socket in ready:
            m = kc.get_shell_msg(timeout=0)
            if m["msg_type"] == "kernel_info_reply" and m["parent_header"].get("msg_id") in ids:
                reply = m["content"]
        if iopub and kc.iopub_channel.socket in ready:
            m = kc.get_iopub_msg(timeout=0)
            seen = seen or m["parent_header"].get("msg_id") in ids
        if not ready and not km.is_alive():
            raise SandboxError("the kernel process died before it answered")
    return reply


def _size_arg(v):
    """512 -> '512' (MiB); '512M', '2G' pass through."""
    if isinstance(v, bool):
        raise TypeError("a size must be a number of MiB or a string like '512M'")
    if isinstance(v, (int, float)):
        return str(int(math.ceil(v)))
    return str(v)


_HOST_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:[]*")


def _network_arg(network):
    """True/'host', False/'none', 'allow:HOST[:PORT],...', or a list of
    'HOST[:PORT]' (the allowlist: the sandbox reaches only these hosts,
    through the kernel's egress proxy) -> the value of --network."""
    if network is True or network == "host":
        return "host"
    if network is False or network == "none":
        return "none"
    if isinstance(network, str) and network.startswith("allow:"):
        return network
    if isinstance(network, (list, tuple)) and network and all(
            isinstance(h, str) and h and set(h) <= _HOST_CHARS for h in network):
        return "allow:" + ",".join(network)
    raise ValueError("network must be True/'host', False/'none', or a list of 'HOST[:PORT]' "
                     "to allow (e.g. ['pypi.org', 'files.pythonhosted.org'])")


def _secret_args(secrets, args):
    """Appends --secret NAME@HOSTS to args; returns {NAME: value} for the
    values given here (the others come from this process's environment)."""
    values = {}
    for name, spec in dict(secrets or {}).items():
        if not isinstance(name, str) or not name or "=" in name or "@" in name or "\0" in name:
            raise ValueError("not a variable name: %r" % (name,))
        if isinstance(spec, dict):
            hosts, value = spec.get("hosts"), spec.get("value")
            if value is not None:
                values[name] = str(value)
        else:
            hosts = spec
        if isinstance(hosts, str):
            hosts = [hosts]
        if not hosts or not all(isinstance(h, str) and h and set(h) <= _HOST_CHARS for h in hosts):
            raise ValueError("secrets[%r]: a list of host names it is for" % name)
        args += ["--secret", "%s@%s" % (name, ",".join(hosts))]
    return values


ISOLATIONS = ("namespaces", "gvisor", "microvm")


def _limit_args(memory=None, timeout=None, network=None, cpus=None, pids=None, disk=None,
                artifacts=None, isolation=None):
    args = []
    if isolation is not None:
        if isolation not in ISOLATIONS:
            raise ValueError("isolation must be one of %s" % ", ".join(ISOLATIONS))
        args += ["--isolation", isolation]
    if memory is not None:
        args += ["--memory", _size_arg(memory)]
    if timeout is not None:
        args += ["--timeout", str(int(math.ceil(timeout)))]
    if network is not None:
        args += ["--network", _network_arg(network)]
    if cpus is not None:
        args += ["--cpus", str(cpus)]
    if pids is not None:
        args += ["--pids", str(int(pids))]
    if disk is not None:
        args += ["--disk", _size_arg(disk)]
    if artifacts is not None:
        args += ["--artifacts", str(artifacts)]
    return args


def _spec_manager(kernel_name, kernelspec_path):
    """A KernelSpecManager that finds kernel_name (or the kernelspec directory
    kernelspec_path).  For "cellblock" not installed anywhere Jupyter looks,
    falls back to $CELLBLOCK_BUILD and to the build/ of the source tree this
    package sits in, so it works right after `make`."""
    if kernelspec_path:
        path = os.path.abspath(kernelspec_path)
        if os.path.isfile(path):          # kernel.json given
            path = os.path.dirname(path)
        if not os.path.isfile(os.path.join(path, "kernel.json")):
            raise SandboxError("no kernel.json in %s" % path)
        return KernelSpecManager(kernel_dirs=[os.path.dirname(path)]), os.path.basename(path)
    ksm = KernelSpecManager()
    try:
        ksm.get_kernel_spec(kernel_name)
        return ksm, kernel_name
    except NoSuchKernel:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    builds = [os.environ.get("CELLBLOCK_BUILD"), os.path.join(here, "..", "..", "build")]
    for b in builds:
        if b and os.path.isfile(os.path.join(b, "share", "jupyter", "kernels", kernel_name, "kernel.json")):
            kdir = os.path.abspath(os.path.join(b, "share", "jupyter", "kernels"))
            return KernelSpecManager(kernel_dirs=[kdir]), kernel_name
    raise SandboxError("kernelspec %r not found: install it (make install / cellblock-kernel install) "
                       "or set JUPYTER_PATH=<build>/share/jupyter, or pass kernelspec_path=" % kernel_name)


class Sandbox(Snapshots):
    """A sandboxed Python kernel (checkpoint/rollback/pause/resume/fork:
    snapshots.py).

    Limits become flags of cellblock-kernel (see `cellblock-kernel --help`):
      memory   MiB (int) or '512M'/'2G'     --memory
      timeout  seconds per cell, kernel-side --timeout (0 = none); run_code()
               also takes a client-side timeout
      network  False/'none' (loopback only), True/'host', or a list of
               'HOST[:PORT]' the sandbox may reach through the kernel's
               egress proxy (e.g. ['pypi.org', 'files.pythonhosted.org']:
               no port = 80 and 443; '*.example.com' = names below it)
      cpus, pids, disk, artifacts ('none'|'images'|'all')
      isolation 'namespaces' (the host kernel, default), 'gvisor' (gVisor's
               user-space kernel) or 'microvm' (a guest kernel in a QEMU
               micro-VM); see docs/SECURITY.md "Isolation tiers"
      workdir_source  a host folder the sandbox's working directory overlays
               (--workdir-source): its files are readable (dotfiles never),
               what the code writes stays in the sandbox and comes back as
               artifacts; the folder itself is never modified
      extra_args  more flags, appended last (e.g. ['--max-output', '1M'])
    envs: environment variables of the sandbox's Python from its start
      (--env NAME: the values travel in the kernel's environment, never on a
      command line; names the kernel refuses, such as LD_PRELOAD or
      PYTHONPATH, make the start fail with the kernel's reason).
    secrets: {"NAME": ["api.example.com", ...]} (--secret NAME@HOSTS): the
      sandbox's NAME holds a placeholder, and the kernel's egress proxy puts
      the real value into request headers to those hosts only (TLS to them
      ends at the proxy, which verifies the real server).  The value is this
      process's environment variable NAME, or {"NAME": {"hosts": [...],
      "value": "..."}}; it travels in the kernel's environment, never on a
      command line and never into the sandbox.  The hosts must be in network.
    """

    def __init__(self, kernel_name="cellblock", memory=None, timeout=None, network=None, cpus=None,
                 pids=None, disk=None, artifacts=None, extra_args=None, kernelspec_path=None,
                 isolation=None,
                 envs=None, startup_timeout=60.0, kernel_stderr=None, workdir_source=None,
                 secrets=None, _launch_env=None):
        self._lock = threading.RLock()
        self._args = _limit_args(memory, timeout, network, cpus, pids, disk, artifacts, isolation)
        if workdir_source is not None:
            src = os.fspath(workdir_source)
            self._args += ["--workdir-source",
                           src if src == "cwd" else os.path.abspath(os.path.expanduser(src))]
        self._envs = {str(k): str(v) for k, v in dict(envs or {}).items()}
        for k in self._envs:
            if not k or "=" in k or "\0" in k:
                raise ValueError("not an environment variable name: %r" % k)
            self._args += ["--env", k]
        secret_env = _secret_args(secrets, self._args)
        self._args += [str(a) for a in (extra_args or [])]
        self._startup_timeout = startup_timeout
        self._spec_args = {"kernel_name": kernel_name, "kernelspec_path": kernelspec_path}  # fork
        self.kernel_info = {}
        self.workdir = None
        self.files = Filesystem(self)
        ksm, name = _spec_manager(kernel_name, kernelspec_path)
        self._km = KernelManager(kernel_name=name, kernel_spec_manager=ksm)
        self._kc = None
        self._closed = False
        # read by the kernel's launcher (--env NAME, --secret); fork's clones,
        # whose flags say the same NAMEs, are given the same (_launch_env)
        self._launch_env = dict(_launch_env or {})
        self._launch_env.update(self._envs)
        self._launch_env.update(secret_env)
        launch = {"extra_arguments": list(self._args)}
        if self._launch_env:
            launch["env"] = dict(os.environ, **self._launch_env)
        if kernel_stderr is not None:
            launch["stderr"] = kernel_stderr
        t0 = time.monotonic()
        self._km.start_kernel(**launch)
        _live.add(self)
        try:
            self._connect()
        except BaseException:
            self.kill()
            raise
        self.start_seconds = time.monotonic() - t0

    # E2B spelling
    @classmethod
    def create(cls, **kwargs):
        return cls(**kwargs)

    # ------------------------------------------------------------ lifecycle
    def _connect(self):
        if self._kc is None:
            self._kc = self._km.blocking_client()
            self._kc.start_channels()
        deadline = time.monotonic() + self._startup_timeout
        # Ready when a kernel_info_reply has come and iopub carries the status
        # of one of our requests (its subscription is live), and the banner
        # names the isolation in force (the sandbox is built) and the working
        # directory.  jupyter_client's wait_for_ready would also drain iopub
        # for 200 ms; a first execute only to learn the directory is not
        # needed either.
        self.kernel_info = _handshake(self._kc, self._km, deadline)
        banner = self.kernel_info.get("banner", "")
        while _SETTING_UP in banner and _FAILURE not in banner:
            time.sleep(_SETUP_POLL)
            self.kernel_info = _handshake(self._kc, self._km, deadline, iopub=False)
            banner = self.kernel_info.get("banner", "")
        m = _WORKDIR.search(banner)
        if m is not None and _SETTING_UP not in banner:
            self.workdir = m.group(1)
            return
        # a kernel that does not say (or a sandbox that failed to build):
        # a first execute shows that code runs, and where
        try:
            self.workdir = self.files._workdir()
        except (RuntimeError, OSError) as e:
            raise SandboxError("the sandbox cannot run code: %s" % e) from None

    @property
    def sandbox_id(self):
        return self._km.kernel_id or os.path.basename(self._km.connection_file or "")

    @property
    def kernel_pid(self):
        p = getattr(self._km, "provisioner", None)
        proc = getattr(p, "process", None) if p else None
        return getattr(proc, "pid", None)

    def is_running(self):
        return not self._closed and self._km.is_alive()

    def restart(self):
        """A fresh sandbox: variables, files and processes are gone."""
        with self._lock:
            self._km.restart_kernel(now=False)
            self._connect()

    def interrupt(self):
        self._km.interrupt_kernel()

    def close(self):
        """Shut the kernel down (gracefully, then by force); idempotent."""
        self._stop(now=False)

    def kill(self):
        """Kill the kernel now; idempotent."""
        self._stop(now=True)

    def _stop(self, now):
        with self._lock:
            if self._closed:
                return
            self._closed = True
            _live.discard(self)
            if self._kc is not None:
                try:
                    self._kc.stop_channels()
                except Exception:
                    pass
            try:
                if self._km.has_kernel:
                    self._km.shutdown_kernel(now=now)
            finally:
                try:
                    self._km.cleanup_resources()
                except Exception:
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._closed:
                self.kill()
        except Exception:
            pass

    # ------------------------------------------------------------ running code
    def run_code(self, code, language=None, timeout=None, on_stdout=None, on_stderr=None,
                 on_result=None, on_error=None, envs=None, request_timeout=None):
        """Run code as a notebook cell (it counts: In[n], _, history).

        timeout: seconds for this call; when exceeded the kernel is interrupted
        (and restarted if the cell ignores the interrupt) and the Execution's
        error is a TimeoutError.  on_stdout/on_stderr get each chunk as it
        arrives (an OutputMessage: a str with .line/.timestamp/.error);
        on_result gets each Result, on_error the ExecutionError.
        envs: environment variables for this run only.
        """
        if language not in (None, "python", "python3"):
            raise ValueError("cellblock runs Python only, not %r" % language)
        if timeout is None:
            timeout = request_timeout
        with self._lock:
            self._check_open()
            saved = self.files._setenv(envs) if envs else None
            try:
                return self._execute(code, timeout=timeout, on_stdout=on_stdout, on_stderr=on_stderr,
                                     on_result=on_result, on_error=on_error)
            finally:
                if saved is not None and not self._closed:
                    self.files._setenv(saved)

    def _check_open(self):
        if self._closed:
            raise SandboxError("the sandbox is closed")

    def _execute(self, code, silent=False, store_history=True, user_expressions=None, timeout=None,
                 on_stdout=None, on_stderr=None, on_result=None, on_error=None, want_reply=False):
        kc = self._kc
        ex = Execution()
        msg_id = kc.execute(code, silent=silent, store_history=store_history,
                            user_expressions=user_expressions or {}, allow_stdin=False,
                            stop_on_error=False)
        start = time.monotonic()
        deadline = start + timeout if timeout else None
        interrupted = False
        idle = False
        reply = None
        pending_clear = False
        displays = {}
        last_alive_check = start

        def clear():
            ex.results[:] = [r for r in ex.results if r.artifact or r.is_main_result]
            ex.logs.stdout.clear()
            ex.logs.stderr.clear()

        while reply is None or not idle:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                if not interrupted:
                    interrupted = True
                    ex.timed_out = True
                    try:
                        self._km.interrupt_kernel()
                    except Exception:
                        pass
                    deadline = now + INTERRUPT_GRACE
                else:          # the cell ignored the interrupt: a new sandbox
                    self._km.restart_kernel(now=True)
                    self._connect()
                    ex.error = ExecutionError(
                        "TimeoutError", "the cell exceeded the timeout of %g s, ignored the interrupt, "
                        "and the sandbox was restarted (all state is lost)" % timeout, "")
                    if on_error:
                        on_error(ex.error)
                    return ex
            wait = 0.5 if deadline is None else max(0.0, min(0.5, deadline - now))
            if idle:
                try:
                    m = kc.get_shell_msg(timeout=wait)
                except queue.Empty:
                    m = None
                if m is not None and m["parent_header"].get("msg_id") == msg_id:
                    reply = m
                continue
            try:
                m = kc.get_iopub_msg(timeout=wait)
            except queue.Empty:
                if now - last_alive_check > 2.0:
                    last_alive_check = now
                    if not self._km.is_alive():
                        self._closed = True
                        raise SandboxError("the kernel process died")
                continue
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            t, c = m["msg_type"], m["content"]
            if t == "status":
                if c.get("execution_state") == "idle":
                    idle = True
                continue
            if pending_clear and t in ("stream", "display_data", "execute_result", "error"):
                pending_clear = False
                clear()
            if t == "stream":
                is_err = c.get("name") == "stderr"
                chunk = OutputMessage(c.get("text", ""), error=is_err)
                (ex.logs.stderr if is_err else ex.logs.stdout).append(chunk)
                cb = on_stderr if is_err else on_stdout
                if cb:
                    cb(chunk)
            elif t in ("execute_result", "display_data"):
                r = Result(c.get("data"), c.get("metadata"), is_main_result=(t == "execute_result"),
                           sandbox=self)
                did = (c.get("transient") or {}).get("display_id")
                if did:
                    displays.setdefault(did, []).append(r)
                ex.results.append(r)
                if on_result:
                    on_result(r)
            elif t == "update_display_data":
                did = (c.get("transient") or {}).get("display_id")
                for r in displays.get(did, []):
                    r.__init__(c.get("data"), c.get("metadata"), r.is_main_result, self)
            elif t == "clear_output":
                if c.get("wait"):
                    pending_clear = True
                else:
                    clear()
            elif t == "error":
                ex.error = ExecutionError(c.get("ename", ""), c.get("evalue", ""), c.get("traceback", []))
                if on_error and not interrupted:
                    on_error(ex.error)
        rc = reply["content"]
        ex.execution_count = rc.get("execution_count")
        ex.reply_metadata = reply.get("metadata") or {}
        # Only the kernel's own collector vouches for a file: an artifact is
        # real when the reply lists it (path and sha256); any other bundle
        # claiming to be one (code in the sandbox can display anything) is
        # kept as a plain display.
        listed = (ex.reply_metadata.get("cellblock") or {}).get("artifacts") or []
        vouched = {(a.get("path"), a.get("sha256")) for a in listed if isinstance(a, dict)}
        for r in ex.results:
            if r.artifact and (r.artifact.get("path"), r.artifact.get("sha256")) not in vouched:
                r.demote_artifact()
        if rc.get("status") == "error" and ex.error is None:
            ex.error = ExecutionError(rc.get("ename", ""), rc.get("evalue", ""), rc.get("traceback", []))
            if on_error and not interrupted:
                on_error(ex.error)
        kernel_timeout = any(str(s).startswith(_TIMEOUT_NOTE) for s in ex.logs.stderr)
        if (interrupted or kernel_timeout) and ex.error is not None:
            ex.timed_out = True
            if interrupted:
                why = "the cell exceeded the timeout of %g s and was interrupted" % timeout
            else:
                why = next(str(s) for s in ex.logs.stderr if str(s).startswith(_TIMEOUT_NOTE))
                why = why.replace("[cellblock] ", "").strip()
            ex.error = ExecutionError("TimeoutError", why, ex.error.traceback)
            if on_error:
                on_error(ex.error)
        elif interrupted and ex.error is None:
            ex.timed_out = False      # it finished in the grace period
        if want_reply:
            return ex, rc
        return ex

    # ------------------------------------------------------------ control requests
    def _control(self, msg_type, content, timeout=30.0, error=SandboxError):
        """One request on the control channel; its reply's content (error,
        raised when none comes within timeout seconds)."""
        with self._lock:
            self._check_open()
            msg = self._kc.session.msg(msg_type, content)
            self._kc.control_channel.send(msg)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    m = self._kc.get_control_msg(timeout=max(0.01, deadline - time.monotonic()))
                except queue.Empty:
                    raise error("no %s_reply within %g s" % (msg_type[:-8], timeout)) from None
                if m["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                    return m["content"]

    def set_network(self, allow):
        """Replace the running sandbox's allowlist (a list of 'HOST[:PORT]';
        None: the one it started with), keeping its state; connections the
        new list does not allow are closed.  Needs a sandbox started with
        network=[...].  Returns the policy now in force; each Execution's
        ``network`` names the one its cell ran under."""
        if allow is not None:
            if isinstance(allow, str):
                allow = [allow]
            allow = list(allow)
            if not allow or not all(isinstance(h, str) and h and set(h) <= _HOST_CHARS
                                    for h in allow):
                raise ValueError("allow must be a non-empty list of 'HOST[:PORT]', or None")
        c = self._control("cellblock_network_request", {"allow": allow})
        if c.get("status") != "ok":
            raise ValueError(c.get("evalue") or "the kernel refused the network policy")
        return c.get("network")

    def usage(self):
        """The sandbox's CPU and memory now (usage_request, ipykernel's keys)."""
        return self._control("usage_request", {})

    def __repr__(self):
        return "<cellblock.Sandbox %s %s>" % (self.sandbox_id, "closed" if self._closed else "running")
