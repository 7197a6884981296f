"""Snapshots of a cellblock session (docs/SNAPSHOTS.md): checkpoints in place
and rollback (every tier), pause to an image on disk and resume, fork.

    with Sandbox() as sb:
        sb.run_code("x = 1")
        sb.checkpoint("before")            # a fork parked in the sandbox
        sb.run_code("x = risky()")
        sb.rollback("before")              # x == 1 again, files of home and /tmp too

    sb = Sandbox(isolation="gvisor")       # or extra_args=["--pausable"] (namespaces, CRIU)
    image = sb.pause()                     # the session on disk; the sandbox ends
    sb2 = Sandbox.resume(image)            # later, in a new kernel
    clones = sb2.fork(4)                   # 4 more kernels from one image

Every operation is a cellblock_* request on the kernel's control channel;
the kernel does the work and keeps the record (names, execution counts):
nothing here trusts what the sandbox says.  A request the host cannot serve
raises SnapshotError with the kernel's reason (the cause and the fix).
"""

import time
from collections import namedtuple

__all__ = ["Checkpoint", "Rollback", "SnapshotError", "Snapshots"]

# seconds the kernel may take; pauses and resumes of large sessions take longer
CONTROL_TIMEOUT = 60.0
PAUSE_TIMEOUT = 300.0
PAUSE_STARTING_WAIT = 30.0  # seconds a pause waits for a new sandbox to say it can

Checkpoint = namedtuple("Checkpoint", "name execution_count created bytes files")
Checkpoint.__doc__ = "A checkpoint as the kernel records it."


class Rollback(namedtuple("Rollback", "name execution_count restored lost processes_ended "
                                      "ended_request")):
    """What a rollback restored and what it could not (threads, processes, ...)."""


class SnapshotError(RuntimeError):
    """The kernel refused or could not do a checkpoint operation; the message
    is its reason."""


def _checkpoint(d):
    return Checkpoint(d.get("name"), d.get("execution_count"), d.get("created"), d.get("bytes"),
                      d.get("files"))


class Snapshots:
    """Mixed into cellblock.Sandbox."""

    def _snap_control(self, msg_type, content=None, timeout=CONTROL_TIMEOUT):
        """One control request; its reply content, SnapshotError unless ok
        (Sandbox._control, for the network and usage requests, returns any
        status)."""
        c = self._control(msg_type, content or {}, timeout=timeout, error=SnapshotError)
        if c.get("status") != "ok":
            raise SnapshotError(c.get("evalue") or "the kernel refused %s" % msg_type)
        return c

    def checkpoint(self, name=None):
        """Keep the session as it is now (variables, imports, the shell's
        history and count, the files of the working directory and /tmp) under
        name (letters, digits, '.', '_', '-'; default In-N).  Between cells
        only.  Threads and processes the code started are not in it.  A name
        taken already is replaced.  At most 8 are kept."""
        c = self._snap_control("cellblock_checkpoint_request", {"name": name} if name else {})
        return Checkpoint(c["name"], c["execution_count"], c["created"], c["files"]["bytes"],
                          c["files"]["count"])

    def rollback(self, name):
        """Go back to checkpoint name, in this kernel and connection: a cell
        running now ends (its error says so); the execution count is the
        checkpoint's again.  The checkpoint is kept (roll back again at will)."""
        c = self._snap_control("cellblock_rollback_request", {"name": name})
        return Rollback(c["name"], c["execution_count"], c["restored"], c["lost"],
                        c["processes_ended"], c["ended_request"])

    def checkpoints(self):
        """The checkpoints kept, oldest first."""
        c = self._snap_control("cellblock_checkpoints_request")
        return [_checkpoint(d) for d in c["checkpoints"]]

    def forget(self, name):
        """Drop checkpoint name (its parked process and its files)."""
        self._snap_control("cellblock_forget_request", {"name": name})

    def pause(self, keep_kernel=False):
        """Write the whole session into an image on disk (its memory and the
        files of its home and /tmp; --isolation gvisor, or a --pausable
        namespaces sandbox where Debian's criu can dump) and end the
        sandbox, freeing its memory, host uid and cgroup.  Returns the
        image's id, for Sandbox.resume(id).  The kernel itself is shut down
        too unless keep_kernel (then its next cell resumes the image)."""
        # a sandbox that has just started may not have said yet whether it
        # can pause (the launcher asks criu first): the kernel says retry
        deadline = time.monotonic() + PAUSE_STARTING_WAIT
        while True:
            try:
                c = self._snap_control("cellblock_pause_request", timeout=PAUSE_TIMEOUT)
                break
            except SnapshotError as e:
                if "is starting; retry" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        if not keep_kernel:
            self.close()
        return c["image"]

    @classmethod
    def resume(cls, image, **kwargs):
        """A new Sandbox (a new kernel) started from a paused session's image:
        it continues where the pause left it, with its own sandbox, host uid,
        cgroup and limits; random generators are reseeded.  kwargs as
        Sandbox().  The image's tier is taken by itself: a gVisor image
        resumes in gVisor, a --pausable session's image in the namespaces
        tier; only isolation="gvisor" given for a namespaces image is
        refused (it would be weaker than asked)."""
        extra = list(kwargs.pop("extra_args", None) or [])
        return cls(extra_args=extra + ["--resume", str(image)], **kwargs)

    def fork(self, n, **kwargs):
        """n new Sandboxes from this session's state, side by side, each with
        its own sandbox, host uid, cgroup and limits (and fresh random
        state).  This session pauses into one image for it and resumes from
        it at its next cell.  Returns the list (close them when done)."""
        if not isinstance(n, int) or n < 1:
            raise ValueError("fork(n) needs n >= 1")
        image = self.pause(keep_kernel=True)
        # the clones get this sandbox's flags (limits, tier, image store) unless told otherwise
        # (and the values its --env and --secret flags name)
        like = dict(self._spec_args, extra_args=list(self._args),
                    isolation=None, _launch_env=self._launch_env)
        like.update(kwargs)
        # extra_args given here replace this session's flags; --resume is always added
        like["extra_args"] = list(like["extra_args"] or []) + ["--resume", image]
        out = []
        try:
            for _ in range(n):
                out.append(type(self)(**like))
        except BaseException:
            for sb in out:
                sb.kill()
            raise
        return out
