"""What the security tests (conftest.py, test_hostile_runner.py) and their
benchmark (bench/hostile.py) share: a kernel started with extra arguments,
the prelude of a cell that writes raw frames on fd 3, as any code in the
sandbox can, and the /proc readings of the kernel process they judge it by.
No package-relative imports: bench/hostile.py imports it by path."""

import json
import os
import tempfile


def start_kernel(name, extra_argv=None, tmp_prefix="cb-kspec-", prefix_argv=None, **popen):
    """Starts kernelspec `name` with extra_argv after its argv and
    prefix_argv before it (through a copy of the spec in a temporary
    directory); popen: Popen's arguments (stderr=, say).  Returns
    (KernelManager, the temporary directory to remove after shutdown, or
    None)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    ksm, tmp = KernelSpecManager(), None
    if extra_argv or prefix_argv:
        spec = ksm.get_kernel_spec(name)
        tmp = tempfile.mkdtemp(prefix=tmp_prefix)
        kdir = os.path.join(tmp, "kernels", name + "-custom")
        os.makedirs(kdir)
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump(dict(spec.to_dict(), argv=list(prefix_argv or []) + spec.argv +
                           list(extra_argv or [])), f)
        ksm = KernelSpecManager(kernel_dirs=[os.path.join(tmp, "kernels")])
        name += "-custom"
    km = KernelManager(kernel_name=name, kernel_spec_manager=ksm)
    km.start_kernel(**popen)
    return km, tmp

# Writes raw frames on fd 3, as code in cellblock's sandbox can.
RAW = r'''
import os as _os, json as _json, sys as _sys
_S = _sys.modules["_cellblock_runner"]._S
def frame(o, seq=None, raw=None):
    o = dict(o)
    o.setdefault("seq", _S.seq if seq is None else seq)
    b = raw if raw is not None else _json.dumps(o).encode()
    _os.write(3, len(b).to_bytes(4, "big") + b)
'''

_HZ = os.sysconf("SC_CLK_TCK")


def status_bytes(pid, key):
    """A size from /proc/PID/status (VmRSS, VmHWM, ...) in bytes."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def reset_peak(pid):
    """Resets VmHWM to the current RSS."""
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def cpu_s(pid, children=False):
    """utime+stime (and, with children, cutime+cstime) in seconds; 0 when
    the process is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    t = int(rest[11]) + int(rest[12])
    if children:
        t += int(rest[13]) + int(rest[14])
    return t / _HZ
