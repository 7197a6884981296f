"""Isolation tiers (docs/SECURITY.md "Isolation tiers"): --isolation gvisor, and
what every tier shares (the flag in each front door, failing closed).

Kernels are started through jupyter_client from kernelspecs that add
`--isolation gvisor` to the built one, as `cellblock-kernel install
--isolation gvisor` would.  The whole output and security suites also run
under gVisor with `make test-tiers` (CB_TEST_KERNEL_ARGS="--isolation gvisor").
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from .conftest import BUILD, KSPEC_FILE, KERNEL_BIN
from .helpers import Kernel, collect_iopub, descendants, get_reply, request

pytestmark = pytest.mark.cellblock_only

MUST_WORK = os.environ.get("CB_MUST_WORK") == "1"
CELLBLOCK = os.path.join(BUILD, "bin", "cellblock")
HOST_RELEASE = os.uname().release
with open("/proc/version") as _f:
    HOST_VERSION = _f.read().strip()

PROBE = "import os\nprint(os.uname().release)\nprint(open('/proc/version').read().strip())"


def skip_or_fail(why):
    if MUST_WORK:
        pytest.fail("cannot run (CB_MUST_WORK=1): " + why)
    pytest.skip(why)


def tier_spec_manager(tmp_path_factory, name, extra):
    """A KernelSpecManager with one kernelspec: the built one plus `extra`."""
    with open(KSPEC_FILE) as f:
        spec = json.load(f)
    spec["argv"] = spec["argv"] + extra
    root = tmp_path_factory.mktemp("kspec-" + name)
    (root / name).mkdir()
    (root / name / "kernel.json").write_text(json.dumps(spec))
    return KernelSpecManager(kernel_dirs=[str(root)])


def runsc_path():
    """The runsc the gvisor tier runs: the first in its directories (tiers/gvisor.c)."""
    return shutil.which("runsc", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")


def needs_gvisor():
    if runsc_path() is None:
        skip_or_fail("runsc is not installed (apt-get install runsc; scripts/deps.sh)")
    if os.geteuid() != 0:
        skip_or_fail("the gvisor tier needs cgroups, which here means running as root")


def start(ksm, name, timeout=60):
    return Kernel(kernel_name=name, kernel_spec_manager=ksm).start(timeout=timeout)


def banner(k):
    r = request(k.kc, "kernel_info_request", {}, timeout=30)
    return r.content["banner"]


def launcher_pids(kernel_pid):
    out = set()
    for p in descendants(kernel_pid):
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == "cellblock-launc":
                    out.add(p)
        except OSError:
            pass
    return out


def _cgroup_bases():
    """Where this process's (and so its kernels') cgroups sit, per hierarchy."""
    bases = []
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            path = "" if path == "/" else path
            for c in (ctrls.split(",") if ctrls else ["", "unified"]):
                if c in ("memory", "pids", "cpu", "freezer", "", "unified"):
                    bases.append(("/sys/fs/cgroup/" + c).rstrip("/") + path)
    return [b for b in bases if os.path.isdir(b)]


def cgroup_dirs(launchers, kernel_pid=None):
    """The cgroup directories of these launchers (and of the kernel's parent group)."""
    found = []
    for base in _cgroup_bases():
        for pid in launchers:
            found += glob.glob(f"{base}/cellblock-{pid}-*") + glob.glob(f"{base}/*/cellblock-{pid}-*")
        if kernel_pid is not None:
            found += glob.glob(f"{base}/cellblock-k{kernel_pid}-*")
    return sorted(set(found))


@pytest.fixture(scope="module")
def gv_ksm(tmp_path_factory):
    needs_gvisor()
    return tier_spec_manager(tmp_path_factory, "cb-gvisor", ["--isolation", "gvisor"])


@pytest.fixture(scope="module")
def gv(gv_ksm):
    k = start(gv_ksm, "cb-gvisor")
    yield k
    k.stop(check=True)


# ---- the code talks to gVisor's kernel ----------------------------------------------


def test_gvisor_code_sees_another_kernel(gv, kernel):
    # control: the namespaces tier shares the host's kernel, and the probe sees it
    ns = kernel.execute(PROBE)
    assert ns.status == "ok", ns.error_text()
    assert ns.stream().splitlines()[0] == HOST_RELEASE
    r = gv.execute(PROBE)
    assert r.status == "ok", r.error_text()
    release, version = r.stream().splitlines()[:2]
    assert release != HOST_RELEASE, "under gVisor, uname -r is the host's: " + release
    assert version != HOST_VERSION
    b = banner(gv)
    assert "gVisor" in b and "user-space kernel" in b, b


def test_gvisor_runs_the_platform_its_banner_names(gv):
    """runsc from 2023 on has the systrap platform (its default there), an older
    one ptrace: the kernel asks the installed runsc, puts the platform on
    runsc's command line and names it in the banner; from the host, the
    running Sentry's command line must say the same."""
    h = subprocess.run([runsc_path(), "flags"], capture_output=True, text=True, timeout=30)
    m = re.search(r"\n  -platform [^\n]*\n[^\n]*", h.stdout + h.stderr)
    want = "systrap" if m and "systrap" in m.group(0) else "ptrace"
    assert gv.execute("pass").status == "ok"  # the sandbox is up: the banner says what runs
    assert "(runsc, %s platform)" % want in banner(gv), banner(gv)
    platforms = set()
    for p in descendants(gv.pid):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        platforms |= {a.split("=", 1)[1] for a in args if a.startswith("--platform=")}
    assert platforms == {want}, platforms


def test_gvisor_syscall_allowlist_still_applies(gv):
    # gVisor would implement unshare and ptrace itself; the allowlist refuses them first
    r = gv.execute(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), ctypes.get_errno())\n"      # CLONE_NEWUSER
        "print(libc.ptrace(0, 0, None, None), ctypes.get_errno())")  # PTRACE_TRACEME
    assert r.status == "ok", r.error_text()
    lines = r.stream().split()
    assert lines[0] == "-1" and int(lines[1]) == 1, r.stream()   # EPERM
    assert lines[2] == "-1" and int(lines[3]) == 1, r.stream()


# ---- outputs, artifacts, interrupt: the same kernel protocol ------------------------


def test_gvisor_outputs_and_artifacts(gv):
    r = gv.execute(
        "import sys\nprint('to stdout'); print('to stderr', file=sys.stderr)\n"
        "from IPython.display import display, HTML\n"
        "open('table.csv', 'w').write('a,b\\n1,2\\n')\n"
        "display(HTML('<b>bold</b>'))\n"
        "6 * 7")
    assert r.status == "ok", r.error_text()
    assert r.stream("stdout") == "to stdout\n"
    assert r.stream("stderr") == "to stderr\n"
    datas = [m["content"] for m in r.of_type("display_data")]
    assert any("text/html" in d["data"] for d in datas), datas
    arts = [d for d in datas if "cellblock" in d.get("metadata", {})]
    assert [a["metadata"]["cellblock"]["artifact"]["path"] for a in arts] == ["table.csv"]
    assert arts[0]["data"]["text/csv"] == "a,b\n1,2\n"
    res = r.of_type("execute_result")
    assert res and res[0]["content"]["data"]["text/plain"] == "42"


def test_gvisor_interrupt_keeps_state(gv):
    assert gv.execute("kept = 'still here'").status == "ok"
    msg_id = gv.kc.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(120)")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:   # wait until the cell runs
        m = gv.kc.get_iopub_msg(timeout=30)
        if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream":
            break
    t0 = time.monotonic()
    request(gv.kc, "interrupt_request", {}, channel="control", timeout=10)
    reply = get_reply(gv.kc, msg_id, timeout=20)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert time.monotonic() - t0 < 15
    collect_iopub(gv.kc, msg_id)
    r = gv.execute("print(kept)")
    assert r.stream() == "still here\n"


# ---- limits and teardown ------------------------------------------------------------------


def test_gvisor_memory_limit_then_fresh_sandbox(gv_ksm, tmp_path_factory):
    ksm = tier_spec_manager(tmp_path_factory, "cb-gvisor-small",
                            ["--isolation", "gvisor", "--memory", "200"])
    k = start(ksm, "cb-gvisor-small")
    try:
        r = k.execute("chunks = []\nfor _ in range(60):\n"
                      "    chunks.append(bytearray(16 << 20)); chunks[-1][::4096] = b'x' * (4 << 10)\n"
                      "print('survived', len(chunks))", timeout=90)
        assert r.status == "error", r.stream()
        assert "memory" in r.error_text().lower(), r.error_text()
        r = k.execute("print('fresh')")
        assert r.status == "ok" and r.stream() == "fresh\n"
    finally:
        k.stop(check=True)


def test_gvisor_teardown_leaves_nothing(gv_ksm):
    k = start(gv_ksm, "cb-gvisor")
    stopped = False
    try:
        r = k.execute("import subprocess\nsubprocess.Popen(['sleep', '300'])\n"
                      "subprocess.Popen(['sh', '-c', 'sleep 300 &'])\nprint('ok')")
        assert r.status == "ok", r.error_text()
        kpid = k.pid
        launchers = launcher_pids(kpid)
        assert launchers, "no launcher found below the kernel"
        assert cgroup_dirs(launchers), "the sandbox has no cgroup to check"
        names = set()
        for p in descendants(k.pid):
            try:
                names.add(open(f"/proc/{p}/comm").read().strip())
            except OSError:
                pass
        assert any(n.startswith("runsc") or n == "exe" for n in names), names
        k.stop(check=True)   # every process the kernel started is gone
        stopped = True
        deadline = time.monotonic() + 10
        while cgroup_dirs(launchers, kpid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not cgroup_dirs(launchers, kpid)
    finally:
        if not stopped:
            k.stop(check=False)


# ---- the flag in every front door; failing closed -------------------------------------


def test_cellblock_run_gvisor_json():
    needs_gvisor()
    p = subprocess.run([CELLBLOCK, "run", "--isolation", "gvisor", "--json", "-"],
                       input=PROBE.encode(), capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    out = "".join(json.loads(p.stdout)["logs"]["stdout"]).splitlines()
    assert out[0] != HOST_RELEASE


def test_isolation_usage_errors():
    p = subprocess.run([CELLBLOCK, "run", "--isolation", "vmware", "-"], input=b"1",
                       capture_output=True, timeout=30)
    assert p.returncode == 2 and b"--isolation" in p.stderr
    p = subprocess.run([CELLBLOCK, "run", "--sandbox", "none", "--isolation", "gvisor", "-"],
                       input=b"1", capture_output=True, timeout=30)
    assert p.returncode == 2 and b"needs --sandbox full" in p.stderr
    p = subprocess.run([CELLBLOCK, "run", "--network", "host", "--isolation", "microvm", "-"],
                       input=b"1", capture_output=True, timeout=30)
    assert p.returncode == 2 and b"--network none only" in p.stderr


def test_install_writes_the_tier(tmp_path):
    p = subprocess.run([KERNEL_BIN, "install", "--prefix", str(tmp_path), "--name", "cb-vm",
                        "--isolation", "microvm"], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr.decode()
    spec = json.loads((tmp_path / "share/jupyter/kernels/cb-vm/kernel.json").read_text())
    i = spec["argv"].index("--isolation")
    assert spec["argv"][i + 1] == "microvm"
    assert "micro-VM" in spec["display_name"]


def test_client_sandbox_isolation():
    needs_gvisor()
    sys.path.insert(0, os.path.join(os.path.dirname(BUILD), "client"))
    try:
        from cellblock import Sandbox
    finally:
        sys.path.pop(0)
    with pytest.raises(ValueError):
        Sandbox(isolation="docker")
    sb = Sandbox(isolation="gvisor", kernelspec_path=os.path.dirname(KSPEC_FILE))
    try:
        ex = sb.run_code(PROBE)
        assert ex.error is None, ex.error
        assert "".join(ex.logs.stdout).splitlines()[0] != HOST_RELEASE
    finally:
        sb.kill()


def test_gvisor_fails_closed_as_ordinary_user(staged_install):
    """As an ordinary user runsc would need --rootless (the code as uid 0 in
    gVisor) and there is no cgroup here: the tier refuses, with the cause and
    the fix, instead of running weaker."""
    needs_gvisor()
    runuser = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if runuser is None:
        skip_or_fail("runuser missing")
    p = subprocess.run([runuser, "-u", "nobody", "--", staged_install.cellblock, "run",
                        "--isolation", "gvisor", "-"], input=b"print('ran')",
                       capture_output=True, timeout=60, cwd="/",
                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    err = p.stderr.decode()
    assert p.returncode == 3, err
    assert b"ran" not in p.stdout
    assert "--isolation gvisor needs" in err and "run the kernel as root" in err


def test_microvm_fails_closed_without_guest_kernel(tmp_path):
    """A runner installed without the guest image: fatal with the fix."""
    runner = tmp_path / "share" / "cellblock" / "runner"
    shutil.copytree(os.path.join(BUILD, "share", "cellblock", "runner"), runner)
    p = subprocess.run([CELLBLOCK, "run", "--isolation", "microvm", "--runner",
                        str(runner / "runner.py"), "-"], input=b"print('ran')",
                       capture_output=True, timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 3, err
    assert b"ran" not in p.stdout
    assert "guest kernel is not built" in err and "linux-image-amd64" in err


@pytest.mark.parametrize("tier", ["gvisor", "microvm"])
def test_tier_from_an_install_in_a_private_home(tier, tmp_path):
    """cellblock installed under a 0700 home (a clone in /root): the sandbox's
    ids cannot reach that path, so the tier's own files (cellblock-init, the
    guest kernel and initrd) are copied in from descriptors the launcher opens,
    never bound by path.  Found on a fresh machine (issue 9)."""
    if tier == "gvisor":
        needs_gvisor()
    else:
        from .test_tiers_microvm import needs_microvm
        needs_microvm()
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    os.chmod(home, 0o700)
    for part in ("bin", "libexec", "share"):
        shutil.copytree(os.path.join(BUILD, part), home / part, symlinks=True)
    p = subprocess.run([str(home / "bin" / "cellblock"), "run", "--isolation", tier, "-"],
                       input=PROBE.encode(), capture_output=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert p.stdout.decode().splitlines()[0] != HOST_RELEASE, p.stdout.decode()
