"""Pause, resume and fork (docs/SNAPSHOTS.md), the gvisor tier, through
jupyter_client: a session written into an image and its sandbox ended, the
next cell resuming it, new kernels (`--resume ID`) resuming it side by side
with their own sandbox, host uid and fresh random state, and images that
must be refused before anything reads them (changed, foreign, of other host
software, too large).  The namespaces tier says why it cannot pause here."""

import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from .helpers import Kernel, request
from .test_tiers import needs_gvisor, runsc_path

pytestmark = pytest.mark.cellblock_only


def ctl(k, msg_type, timeout=120, **content):
    return request(k.kc, msg_type, content, channel="control", timeout=timeout).reply["content"]


def out(k, code, timeout=120):
    r = k.execute(code, timeout=timeout)
    assert r.status == "ok", r.reply["content"]
    return "".join(m["content"]["text"] for m in r.of_type("stream"))


@pytest.fixture
def store():
    d = tempfile.mkdtemp(prefix="cb-images-")
    os.chmod(d, 0o700)
    yield os.path.join(d, "store")
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def start(kernel_factory):
    made = []

    def go(*extra, python=None):
        from jupyter_client.kernelspec import KernelSpecManager
        spec = KernelSpecManager().get_kernel_spec("cellblock")
        argv = list(spec.argv)
        if python:
            argv[argv.index("--python") + 1] = python
        tmp = tempfile.mkdtemp(prefix="cb-pause-kspec-")
        made.append(tmp)
        kdir = os.path.join(tmp, "kernels", "cb-pause")
        os.makedirs(kdir)
        with open(os.path.join(kdir, "kernel.json"), "w") as f:
            json.dump(dict(spec.to_dict(), argv=argv + list(extra)), f)
        ksm = KernelSpecManager(kernel_dirs=[os.path.join(tmp, "kernels")])
        return kernel_factory(kernel_name="cb-pause", kernel_spec_manager=ksm)

    yield go
    for t in made:
        shutil.rmtree(t, ignore_errors=True)


def host_uid(k):
    banner = request(k.kc, "kernel_info_request", {}, timeout=30).reply["content"]["banner"]
    return int(re.search(r"host uid (\d+)", banner).group(1))


def test_namespaces_tier_says_why_it_cannot_pause(kernel):
    out(kernel, "x = 1")
    r = ctl(kernel, "cellblock_pause_request")
    assert r["status"] == "error" and "CRIU" in r["evalue"] and "--isolation gvisor" in r["evalue"]
    info = request(kernel.kc, "kernel_info_request", {}).reply["content"]["cellblock_snapshots"]
    assert info["pause"] is False and "CRIU" in info["pause_why"]
    assert out(kernel, "print(x)") == "1\n"  # nothing half-done


@pytest.mark.timeout(300)
def test_pause_resume_and_fork(start, store):
    needs_gvisor()
    a = start("--isolation", "gvisor", "--image-dir", store)
    out(a, "import random, numpy\nx = 42\nopen('note.txt', 'w').write('kept')\n"
           "print(random.random(), numpy.random.random())")
    uid_a = host_uid(a)
    p = ctl(a, "cellblock_pause_request")
    assert p["status"] == "ok", p
    image = p["image"]
    assert re.fullmatch(r"[0-9a-f]{32}", image) and p["execution_count"] == 1
    d = os.path.join(store, image)
    assert os.stat(store).st_mode & 0o777 == 0o700 and os.stat(d).st_mode & 0o777 == 0o700
    for f in ("checkpoint.img", "files.json", "files.mac", "kernel.json", "kernel.mac"):
        assert os.stat(os.path.join(d, f)).st_mode & 0o777 == 0o600, f
    assert os.stat(os.path.join(store, ".key")).st_mode & 0o777 == 0o600
    # the same kernel: its next cell resumes the image
    r = a.execute("print(x, open('note.txt').read())\nrandom.random()", timeout=120)
    assert r.status == "ok" and r.reply["content"]["execution_count"] == 2
    assert "42 kept" in "".join(m["content"]["text"] for m in r.of_type("stream"))
    # fork: new kernels from the one image, side by side, each its own
    clones = [start("--isolation", "gvisor", "--image-dir", store, "--resume", image)
              for _ in range(2)]
    draws = set()
    for i, c in enumerate(clones):
        r = c.execute("x += %d\nprint(x, open('note.txt').read(), random.random(), "
                      "numpy.random.random())" % (i + 1), timeout=120)
        assert r.status == "ok", r.reply["content"]
        assert r.reply["content"]["execution_count"] == 2  # the image's count, from its record
        text = "".join(m["content"]["text"] for m in r.of_type("stream")).split()
        assert text[:2] == [str(43 + i), "kept"]
        draws.add(tuple(text[2:4]))
    assert len({d[0] for d in draws}) == 2, "clones must not repeat each other's random draws"
    assert len({d[1] for d in draws}) == 2, "clones must not repeat each other's numpy draws"
    assert out(a, "print(x)") == "42\n"  # independent state
    uids = {uid_a, host_uid(a)} | {host_uid(c) for c in clones}
    assert len(uids) == 4, "every sandbox has its own host uid: %s" % uids


@pytest.mark.timeout(300)
def test_a_resumed_session_pauses_again_at_once(start, store):
    """A pause right after a resume: the restored init is still dialling the
    debugger's socket back then, a host socket runsc checkpoint cannot
    save (it failed about one time in three, and the session was lost)."""
    needs_gvisor()
    a = start("--isolation", "gvisor", "--image-dir", store)
    out(a, "x = 0")
    for i in range(4):
        p = ctl(a, "cellblock_pause_request")
        assert p["status"] == "ok", "pause %d: %s" % (i, p)
        assert out(a, "x += 1\nprint(x)") == "%d\n" % (i + 1)
    p = ctl(a, "cellblock_pause_request")
    assert p["status"] == "ok", p
    b = start("--isolation", "gvisor", "--image-dir", store, "--resume", p["image"])
    assert out(b, "print(x)") == "4\n"


@pytest.mark.timeout(300)
def test_resume_takes_the_images_tier(start, store):
    """`--resume ID` alone (a kernel at the default namespaces tier) resumes
    a gVisor image in gVisor, the stronger tier: a client need not know which
    tier paused it."""
    needs_gvisor()
    a = start("--isolation", "gvisor", "--image-dir", store)
    out(a, "x = 7")
    p = ctl(a, "cellblock_pause_request")
    assert p["status"] == "ok", p
    b = start("--image-dir", store, "--resume", p["image"])
    assert out(b, "print(x)") == "7\n"
    banner = request(b.kc, "kernel_info_request", {}, timeout=30).reply["content"]["banner"]
    assert "gVisor" in banner, banner
    # flags that tier cannot take: refused, and the reason is the flag's
    c = start("--image-dir", store, "--resume", p["image"], "--pausable")
    r = c.execute("print(x)", timeout=120)
    assert r.status == "error", r.reply["content"]
    e = r.reply["content"]["evalue"]
    assert "of the gvisor tier, which this kernel's flags cannot run" in e and "--pausable" in e, e


@pytest.mark.timeout(300)
def test_a_pause_the_store_has_no_room_for_is_refused_and_loses_nothing(start):
    """A store too small for the image: runsc checkpoint would fail half-way
    ("no space left on device") and end the sandbox with it, so the kernel
    refuses the pause before anything is done, and the session goes on."""
    needs_gvisor()
    small = tempfile.mkdtemp(prefix="cb-small-store-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", small], check=True)
    try:
        a = start("--isolation", "gvisor", "--image-dir", os.path.join(small, "store"))
        out(a, "import numpy, pandas\nx = 5")
        p = ctl(a, "cellblock_pause_request")
        assert p["status"] == "error", p
        assert "MiB free" in p["evalue"] and "--image-dir" in p["evalue"], p["evalue"]
        assert out(a, "print(x)") == "5\n"  # the same sandbox: nothing lost
        store = os.path.join(small, "store")
        assert [n for n in os.listdir(store) if n != ".key"] == [], os.listdir(store)
    finally:
        subprocess.run(["umount", small], check=False)
        os.rmdir(small)


@pytest.mark.timeout(300)
def test_images_that_must_be_refused(start, store, tmp_path):
    needs_gvisor()
    # a copy of the interpreter (a venv with --copies): a file the image pins
    venv = tempfile.mkdtemp(prefix="cb-pause-venv-", dir="/var/tmp")
    try:
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--copies", "--without-pip",
                        "--system-site-packages", venv], check=True)
        os.chmod(venv, 0o755)
        py = os.path.join(venv, "bin", "python3")
        a = start("--isolation", "gvisor", "--image-dir", store, python=py)
        out(a, "x = 1")
        image = ctl(a, "cellblock_pause_request")["image"]
        d = os.path.join(store, image)

        def refused(why, mutate, undo):
            mutate()
            try:
                k = start("--isolation", "gvisor", "--image-dir", store, "--resume", image,
                          python=py)
                r = k.execute("print(x)", timeout=120)
                assert r.status == "error", "a %s image was resumed" % why
                assert "could not be started" in r.reply["content"]["evalue"], r.reply["content"]
                return r.reply["content"]["evalue"]
            finally:
                undo()

        img = os.path.join(d, "checkpoint.img")
        with open(img, "rb") as f:
            first = f.read(1)
        def flip(b):
            with open(img, "r+b") as f:
                f.write(b)
        e = refused("changed", lambda: flip(bytes([first[0] ^ 1])), lambda: flip(first))
        assert "not the ones sealed" in e, e
        rec = os.path.join(d, "kernel.json")
        saved = open(rec).read()
        e = refused("changed record", lambda: open(rec, "w").write(saved.replace('"execution_count":1', '"execution_count":99')),
                    lambda: open(rec, "w").write(saved))
        assert "seal does not match" in e, e
        key = os.path.join(store, ".key")
        k0 = open(key, "rb").read()
        e = refused("foreign", lambda: open(key, "wb").write(os.urandom(32)),
                    lambda: open(key, "wb").write(k0))
        assert "seal does not match" in e, e
        st = os.stat(py)
        e = refused("other software's", lambda: os.utime(py, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9)),
                    lambda: os.utime(py, ns=(st.st_atime_ns, st.st_mtime_ns)))
        assert "other host software" in e and os.path.realpath(py) in e, e
        # untouched, it resumes
        k = start("--isolation", "gvisor", "--image-dir", store, "--resume", image, python=py)
        assert out(k, "print(x)") == "1\n"
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def runsc_writes_raw():
    """Whether the runsc the gvisor tier finds (tiers/gvisor.c) can write an
    image's memory uncompressed (gVisor from 2023 on: `checkpoint -compression`)."""
    runsc = runsc_path()
    if runsc is None:
        return False
    h = subprocess.run([runsc, "checkpoint", "--help"], capture_output=True, text=True, timeout=30)
    return "-compression" in h.stdout + h.stderr


@pytest.mark.timeout(300)
def test_the_memory_is_left_uncompressed_where_runsc_can(start, store):
    """A resume then reads the memory as it is instead of inflating it on the
    sandbox's own CPU quota (docs/SNAPSHOTS.md); an older runsc compresses.
    64 MiB of one byte: raw it is all in the image, compressed almost none."""
    needs_gvisor()
    raw = runsc_writes_raw()
    a = start("--isolation", "gvisor", "--image-dir", store)
    out(a, "blob = b'\\x01' * (64 << 20)")
    c = ctl(a, "cellblock_pause_request", timeout=240)
    assert c["status"] == "ok", c
    if raw:
        assert c["bytes"] >= 64 << 20, c
    else:
        assert c["bytes"] < 32 << 20, c
    k = start("--isolation", "gvisor", "--image-dir", store, "--resume", c["image"])
    assert out(k, "print(len(blob), blob[-1], blob.count(1))") == "67108864 1 67108864\n"


@pytest.mark.timeout(300)
def test_an_image_larger_than_the_limits_is_refused(start, store):
    needs_gvisor()
    a = start("--isolation", "gvisor", "--image-dir", store, "--memory", "512")
    # incompressible: an image of more than 320 MiB, compressed or not; a resume
    # at 32 MiB and 1 MiB of disk allows 32 + 192 (runsc's own) + 2 + 64
    out(a, "import os\nblob = os.urandom(320 << 20)")
    image = ctl(a, "cellblock_pause_request", timeout=240)["image"]
    k = start("--isolation", "gvisor", "--image-dir", store, "--resume", image, "--memory", "32",
              "--disk", "1")
    r = k.execute("print(len(blob))", timeout=120)
    assert r.status == "error" and "more than the session's limits allow" in \
        r.reply["content"]["evalue"], r.reply["content"]


@pytest.mark.timeout(300)
def test_checkpoints_in_place_in_gvisor_and_across_a_pause(start, store):
    """In gVisor the fork is gVisor's and the agent is gVisor's init (root
    there): the runner still cannot reach the store or wake a copy, and the
    parked copies travel in the image."""
    needs_gvisor()
    a = start("--isolation", "gvisor", "--image-dir", store)
    out(a, "import os\nx = 1\nopen('f', 'w').write('one')")
    cp = ctl(a, "cellblock_checkpoint_request", name="c")
    assert cp["status"] == "ok", cp
    out(a, "x = 2\nopen('f', 'w').write('two')")
    rb = ctl(a, "cellblock_rollback_request", name="c")
    assert rb["status"] == "ok", rb
    probe = out(a, """
import os
res = [x, open('f').read(), os.getuid() != 0]
for p in ('/run/cellblock', '/run/cellblock/store'):
    try:
        os.listdir(p); res.append('listed ' + p)
    except OSError as e:
        res.append(type(e).__name__)
for n in os.listdir('/opt/cellblock/park'):
    try:
        os.open('/opt/cellblock/park/' + n, os.O_WRONLY | os.O_NONBLOCK); res.append('opened')
    except OSError as e:
        res.append(type(e).__name__)
print(res)
""")
    assert probe.strip() == "[1, 'one', True, 'PermissionError', 'PermissionError', " \
                            "'PermissionError']", probe
    out(a, "x = 3")
    image = ctl(a, "cellblock_pause_request")["image"]
    b = start("--isolation", "gvisor", "--image-dir", store, "--resume", image)
    assert out(b, "print(x)") == "3\n"
    names = [c["name"] for c in ctl(b, "cellblock_checkpoints_request")["checkpoints"]]
    assert names == ["c"]
    assert ctl(b, "cellblock_rollback_request", name="c")["status"] == "ok"
    assert out(b, "print(x, open('f').read())") == "1 one\n"


@pytest.mark.timeout(600)
def test_checkpoints_in_place_in_the_microvm(start):
    """In the micro-VM the fork is the guest's and the agent is the guest's
    init; the micro-VM itself cannot pause (9p), and says so."""
    from .test_tiers_microvm import needs_microvm
    needs_microvm()
    k = start("--isolation", "microvm")
    for _ in range(3):  # under TCG on a busy host a boot can miss the hello deadline (30 s)
        if k.execute("1", timeout=300).status == "ok":
            break
    out(k, "import os\nx = 1\nopen('f', 'w').write('one')", timeout=300)
    assert ctl(k, "cellblock_checkpoint_request", name="c", timeout=300)["status"] == "ok"
    out(k, "x = 2\nopen('f', 'w').write('two')\nopen('g', 'w').write('new')")
    assert ctl(k, "cellblock_rollback_request", name="c", timeout=300)["status"] == "ok"
    assert out(k, "print(x, open('f').read(), os.path.exists('g'), os.getuid() != 0)") == \
        "1 one False True\n"
    p = ctl(k, "cellblock_pause_request")
    assert p["status"] == "error" and "9p" in p["evalue"], p
