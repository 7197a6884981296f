"""--isolation microvm through jupyter_client: the runner on its own Linux kernel
in a QEMU VM (docs/SECURITY.md "Isolation tiers").

On machines without usable KVM (these: nested virtualisation) the VM runs
under TCG emulation, several seconds per start, so `make test` keeps one
shared VM kernel for most checks plus one restart; CB_TIERS_FULL=1 (set by
`make test-tiers`) adds the slower ones.
"""
import json
import os
import shutil
import time

import pytest

from .conftest import BUILD
from .helpers import collect_iopub, get_reply, request
from .test_tiers import (HOST_RELEASE, HOST_VERSION, PROBE, cgroup_dirs, launcher_pids,
                         skip_or_fail, start, tier_spec_manager)

pytestmark = [pytest.mark.cellblock_only, pytest.mark.timeout(240)]

VM_DIR = os.path.join(BUILD, "share", "cellblock", "vm")
FULL = os.environ.get("CB_TIERS_FULL") == "1"
START_TIMEOUT = 90   # a TCG boot on a loaded 2-core machine


def needs_microvm():
    if shutil.which("qemu-system-x86_64", path="/usr/local/bin:/usr/bin:/bin") is None:
        skip_or_fail("QEMU is not installed (qemu-system-x86; scripts/deps.sh)")
    if not os.path.exists(os.path.join(VM_DIR, "vmlinuz")):
        skip_or_fail("the guest kernel is not built (linux-image-amd64, then make)")
    if os.geteuid() != 0:
        skip_or_fail("the microvm tier needs cgroups, which here means running as root")


@pytest.fixture(scope="module")
def vm_ksm(tmp_path_factory):
    needs_microvm()
    return tier_spec_manager(tmp_path_factory, "cb-microvm", ["--isolation", "microvm"])


@pytest.fixture(scope="module")
def vm(vm_ksm):
    k = start(vm_ksm, "cb-microvm", timeout=START_TIMEOUT)
    yield k
    kpid = k.pid
    launchers = launcher_pids(kpid)
    assert cgroup_dirs(launchers), "the VM's sandbox has no cgroup to check"
    k.stop(check=True)   # QEMU, the supervisor, init: all gone
    deadline = time.monotonic() + 10
    while cgroup_dirs(launchers, kpid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not cgroup_dirs(launchers, kpid), "cgroups left after shutdown"


def test_microvm_code_sees_its_own_kernel(vm):
    r = vm.execute(PROBE, timeout=60)
    assert r.status == "ok", r.error_text()
    release, version = r.stream().splitlines()[:2]
    with open(os.path.join(VM_DIR, "release")) as f:
        guest = f.read().strip()
    assert release == guest, (release, guest)
    assert release != HOST_RELEASE and version != HOST_VERSION
    b = request(vm.kc, "kernel_info_request", {}, timeout=30).content["banner"]
    assert "micro-VM" in b and "own Linux kernel" in b and ("TCG" in b or "KVM" in b), b


def test_microvm_outputs_and_artifacts(vm):
    r = vm.execute(
        "import sys\nprint('to stdout'); print('to stderr', file=sys.stderr)\n"
        "open('result.csv', 'w').write('x,y\\n1,2\\n')\n"
        "from IPython.display import display, Markdown\ndisplay(Markdown('*hi*'))\n"
        "'done'", timeout=60)
    assert r.status == "ok", r.error_text()
    assert r.stream("stdout") == "to stdout\n"
    assert r.stream("stderr") == "to stderr\n"
    datas = [m["content"] for m in r.of_type("display_data")]
    assert any("text/markdown" in d["data"] for d in datas), datas
    arts = [d for d in datas if "cellblock" in d.get("metadata", {})]
    assert [a["metadata"]["cellblock"]["artifact"]["path"] for a in arts] == ["result.csv"]
    assert arts[0]["data"]["text/csv"] == "x,y\n1,2\n"
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "'done'"


def test_microvm_system_is_read_only_and_host_invisible(vm, tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("s3cret")
    r = vm.execute(
        "import os\nfor p in ('/usr/cellblock-probe', '/etc/cellblock-probe', '/cellblock-probe'):\n"
        "    try:\n        open(p, 'w'); print('WROTE', p)\n"
        "    except OSError as e:\n        print('refused', e.errno)\n"
        "print(os.path.exists(%r), os.path.exists('/dev/kvm'), sorted(os.listdir('/dev')))"
        % str(secret), timeout=60)
    assert r.status == "ok", r.error_text()
    out = r.stream()
    assert "WROTE" not in out and out.count("refused") == 3, out
    assert "False False" in out, out


def test_microvm_interrupt_keeps_state(vm):
    assert vm.execute("kept = 41 + 1", timeout=60).status == "ok"
    msg_id = vm.kc.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(300)")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = vm.kc.get_iopub_msg(timeout=60)
        if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream":
            break
    request(vm.kc, "interrupt_request", {}, channel="control", timeout=10)
    reply = get_reply(vm.kc, msg_id, timeout=30)
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    collect_iopub(vm.kc, msg_id)
    assert vm.execute("print(kept)", timeout=60).stream() == "42\n"


# Each cell's output, before its idle, in order around a display: stdout,
# stderr, a subprocess's, and every third cell a print larger than the pipes
# on both sides of the VM (the guest's, the kernel's), so QEMU meets a full pipe.
ORDER_CELLS = 9
ORDER_BIG = 1 << 20
ORDER_CODE = (
    "import sys, subprocess\n"
    "from IPython.display import display\n"
    "n = {n}\n"
    "for i in range(3):\n"
    "    print('out', n, i)\n"
    "    print('err', n, i, file=sys.stderr)\n"
    "subprocess.run(['sh', '-c', 'echo sub-out {n}; echo sub-err {n} >&2'])\n"
    "{big}"
    "display({{'text/plain': 'mid {n}'}}, raw=True)\n"
    "print('after', n); print('after-err', n, file=sys.stderr)\n"
    "print('end', n)\n")


def test_microvm_output_order_many_cells(vm):
    for n in range(ORDER_CELLS):
        big = n % 3 == 2
        code = ORDER_CODE.format(
            n=n, big="sys.stdout.write('x' * %d + '\\n')\n" % ORDER_BIG if big else "")
        r = vm.execute(code, timeout=120)
        assert r.status == "ok", r.error_text()
        before = "".join("out %d %d\n" % (n, i) for i in range(3)) + "sub-out %d\n" % n
        if big:
            before += "x" * ORDER_BIG + "\n"
        out, err = r.stream("stdout"), r.stream("stderr")
        assert out == before + "after %d\nend %d\n" % (n, n), (n, len(out), out[-200:])
        assert err == "".join("err %d %d\n" % (n, i) for i in range(3)) + \
            "sub-err %d\nafter-err %d\n" % (n, n), (n, err)
        # the stdout written before the display arrived before it
        seen = ""
        for m in r.outputs():
            if m["msg_type"] == "display_data":
                assert m["content"]["data"]["text/plain"] == "mid %d" % n
                break
            if m["msg_type"] == "stream" and m["content"]["name"] == "stdout":
                seen += m["content"]["text"]
        assert seen == before, (n, len(seen), seen[-200:])


def test_microvm_memory_limit_then_fresh_vm(vm_ksm, tmp_path_factory):
    ksm = tier_spec_manager(tmp_path_factory, "cb-microvm-small",
                            ["--isolation", "microvm", "--memory", "160"])
    k = start(ksm, "cb-microvm-small", timeout=START_TIMEOUT)
    try:
        r = k.execute("chunks = []\nfor _ in range(40):\n"
                      "    chunks.append(bytearray(8 << 20)); chunks[-1][::4096] = b'x' * (2 << 10)\n"
                      "print('survived', len(chunks))", timeout=120)
        assert r.status == "error", r.stream()
        assert "memory" in r.error_text().lower(), r.error_text()
        r = k.execute("print('fresh')", timeout=START_TIMEOUT)
        assert r.status == "ok" and r.stream() == "fresh\n", r.error_text()
    finally:
        k.stop(check=True)


@pytest.mark.skipif(not FULL, reason="slow under TCG: make test-tiers (CB_TIERS_FULL=1)")
def test_microvm_pids_limit(vm_ksm, tmp_path_factory):
    ksm = tier_spec_manager(tmp_path_factory, "cb-microvm-pids",
                            ["--isolation", "microvm", "--pids", "24"])
    k = start(ksm, "cb-microvm-pids", timeout=START_TIMEOUT)
    try:
        r = k.execute("import subprocess\nps = []\ntry:\n"
                      "    for _ in range(60): ps.append(subprocess.Popen(['sleep', '30']))\n"
                      "except OSError as e: print('refused after', len(ps), e.errno)\n"
                      "for p in ps: p.kill()", timeout=120)
        assert r.status == "ok", r.error_text()
        assert "refused after" in r.stream(), r.stream()
        assert int(r.stream().split()[2]) < 24
    finally:
        k.stop(check=True)


@pytest.mark.skipif(not FULL, reason="slow under TCG: make test-tiers (CB_TIERS_FULL=1)")
def test_microvm_cellblock_run_json(tmp_path):
    import subprocess
    needs_microvm()
    p = subprocess.run([os.path.join(BUILD, "bin", "cellblock"), "run", "--isolation", "microvm",
                        "--json", "--out", str(tmp_path), "-"],
                       input=(PROBE + "\nopen('f.txt', 'w').write('vm')").encode(),
                       capture_output=True, timeout=START_TIMEOUT)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    ex = json.loads(p.stdout)
    assert "".join(ex["logs"]["stdout"]).splitlines()[0] != HOST_RELEASE
    assert (tmp_path / "f.txt").read_text() == "vm"
