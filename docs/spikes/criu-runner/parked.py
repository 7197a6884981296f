"""Experiment (not shipped): the route docs/SNAPSHOTS.md proposes for a build.
A --pausable kernel (main's launcher, no hand-made change) takes a checkpoint
in place; guest root dumps the *parked copy* with criu run in every namespace
of the sandbox but the user one (so the image holds no namespace but that
one), and the image is restored unedited into a new sandbox (restore2.py,
NOSIBLING=1: criu's child, adopted by the sandbox's init).  The park fifo is
made again at its path first; then the copy is woken as a rollback wakes it
("resume NONCE" on the fifo, the resync frame on the new channel) and must
answer with the checkpoint's state.  Run in the test guest as root:

    python3 guest/guestvm.py --timeout 900 -- env NOSIBLING=1 \\
        /usr/bin/python3 "$PWD/docs/spikes/criu-runner/parked.py"
"""
import json
import os
import re
import secrets
import select
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("NOSIBLING", "1")
import restore2  # noqa: E402
from restore import KDAT, WORK  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILD = os.environ.get("BUILD", os.path.join(REPO, "build"))
os.environ["JUPYTER_PATH"] = BUILD + "/share/jupyter"
from jupyter_client.manager import KernelManager  # noqa: E402

DUMP = os.path.join(WORK, "parked-dump")
STATE_MB = int(os.environ.get("STATE_MB", "0"))


def sh(cmd, **kw):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)
    print("$", cmd[:200], "->", r.returncode)
    print((r.stdout + r.stderr)[-3000:])
    return r


def kids(pid):
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        out += [int(x) for x in open("/proc/%d/task/%s/children" % (pid, t)).read().split()]
    return out


def status(pid):
    d = {}
    for line in open("/proc/%d/status" % pid):
        k, _, v = line.partition(":")
        if k in ("Name", "State", "PPid", "Uid", "NSpid", "NoNewPrivs", "Seccomp", "CapEff"):
            d[k] = v.strip()
    return d


def fdlinks(pid):
    return {n: os.readlink("/proc/%d/fd/%s" % (pid, n)) for n in os.listdir("/proc/%d/fd" % pid)}


def ctl(kc, msg_type, **content):
    msg = kc.session.msg(msg_type, content)
    kc.control_channel.send(msg)
    while True:
        r = kc.get_control_msg(timeout=120)
        if r["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return r["content"]


# ---- 1. a pausable kernel, a cell, a checkpoint in place --------------------
km = KernelManager(kernel_name="cellblock")
km.start_kernel(extra_arguments=["--pausable"])
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=180)
kc.execute("import random\nx = 41\nnums = [random.random() for _ in range(3)]\n"
           "import numpy as np\nbig = np.ones(%d << 17)\nopen('note.txt', 'w').write('home')"
           % STATE_MB)
print(kc.get_shell_msg(timeout=180)["content"]["status"])
print("checkpoint:", ctl(kc, "cellblock_checkpoint_request", name="c"))
time.sleep(2)  # the copy parks after the reply
kpid = km.provisioner.process.pid
launcher = kids(kpid)[0]
init = kids(launcher)[0]
copy = None
for p in kids(init):
    links = fdlinks(p)
    fifo = [v for v in links.values() if v.startswith("/opt/cellblock/park/")]
    print(p, status(p), fifo)
    if fifo:
        copy, park = p, fifo[0]
assert copy, "no parked copy"
vpid = status(copy)["NSpid"].split()[-1]
links = fdlinks(copy)
print("copy", copy, "vpid", vpid, "links", links)
print("uid_map", open("/proc/%d/uid_map" % copy).read())

# ---- 2. the dump: criu in every namespace of the sandbox but the user one ----
ext = []
for n, l in links.items():
    m = re.fullmatch(r"socket:\[(\d+)\]", l)
    if m:
        ext += ["--external", "unix[%s]" % m.group(1)]
shutil.rmtree(DUMP, True)
os.makedirs(DUMP)
dfd = os.open(DUMP, os.O_RDONLY | os.O_DIRECTORY)
t = time.monotonic()
if os.environ.get("DUMPER") == "launcher":  # the launcher's dump (launcher/criu_dump.c)
    os.close(dfd)
    r = subprocess.run([BUILD + "/tests/test_criu_dump"], capture_output=True, text=True,
                       env={"CB_CRIU_DUMP_LIVE": "%d %d %s" % (init, copy, DUMP)})
    print(r.stdout, r.stderr)
    sh("cat %s/fds.txt" % DUMP)
else:
  r = subprocess.run(["nsenter", "-t", str(init), "--mount", "--pid", "--net", "--ipc", "--uts",
                    "--cgroup", "--", "sh", "-c",
                    "mount -t tmpfs criu /tmp && criu dump -v4 -t %s -D /proc/self/fd/%d "
                    "-o dump.log --leave-running %s; rc=$?; umount /tmp; exit $rc"
                    % (vpid, dfd, " ".join("'%s'" % a for a in ext))],
                   pass_fds=(dfd,), capture_output=True, text=True)
print("TIMES dump %.3f s, rc %d" % (time.monotonic() - t, r.returncode))
sh("grep -E 'Error|Warn' {0}/dump.log | head; du -sk {0}; ls {0}".format(DUMP))
sh("crit show {0}/inventory.img | tr -d ' \\n'; echo; crit show {0}/ids-{1}.img | tr -d ' \\n';"
   " echo; ls {0} | grep -c timens; crit show {0}/core-{1}.img | grep -E 'pdeath|\"uid\"|state'"
   .format(DUMP, vpid))
# the session goes on meanwhile
kc.execute("print(x)")
print(kc.get_shell_msg(timeout=60)["content"]["status"])
kc.stop_channels()
km.shutdown_kernel(now=True)
if r.returncode != 0:
    sys.exit("dump failed")

# ---- 3. restore into a new sandbox; the park fifo made again ---------------
# EDIT_IDS=1: the task's user namespace id set to the image's root one, so
# that criu joins the new sandbox's user namespace (--join-ns) instead of
# making one from userns-*.img; NOTIMENS=1: the time namespace image removed
def edit(f, fn):
    d = json.loads(subprocess.check_output(["crit", "decode", "-i", f]))
    fn(d)
    subprocess.run(["crit", "encode", "-o", f], input=json.dumps(d).encode(), check=True)


if os.environ.get("EDIT_IDS") == "launcher":  # the launcher's code (launcher/criu_img.c)
    exe = os.path.join(WORK, "edit")
    here = os.path.dirname(os.path.abspath(__file__))
    sh("cc -iquote %s -o %s %s/edit.c %s/lib/libcb_launcher.a %s/lib/libcb_isolate.a -lprotobuf-c"
       % (REPO, exe, here, BUILD, BUILD))
    sh("%s %s" % (exe, DUMP))
    sh("crit show %s/ids-%s.img | tr -d ' \n'; ls %s | grep -c timens" % (DUMP, vpid, DUMP))
elif os.environ.get("EDIT_IDS") == "1":
    root = json.loads(subprocess.check_output(
        ["crit", "decode", "-i", DUMP + "/inventory.img"]))["entries"][0]["root_ids"]
    edit("%s/ids-%s.img" % (DUMP, vpid),
         lambda d: d["entries"][0].update(user_ns_id=root["user_ns_id"]))
    sh("crit show %s/ids-%s.img | tr -d ' \n'" % (DUMP, vpid))
if os.environ.get("NOTIMENS") == "1":
    os.unlink(DUMP + "/timens-0.img")
sh("criu check; cp /run/criu.kdat %s; chmod 644 %s" % (KDAT, KDAT))
os.chmod(DUMP, 0o755)
sh("chmod -R a+rX " + DUMP)
os.environ["PARKFIFO"] = park
if os.environ.get("RESTORER") == "launcher":  # the launcher's restorer (launcher/criu_restore.c)
    drv = os.path.join(WORK, "restore_drv")
    here = os.path.dirname(os.path.abspath(__file__))
    sh("cc -D_GNU_SOURCE -iquote %s -o %s %s/restore_drv.c %s/lib/libcb_launcher.a "
       "%s/lib/libcb_tiers.a %s/lib/libcb_isolate.a -lprotobuf-c -ljansson -lseccomp"
       % (REPO, drv, here, BUILD, BUILD, BUILD))
    os.environ["RESTORE_DRV"] = drv
t = time.monotonic()
child, ev, out_r, err_r, cg = restore2.main(DUMP, links)
print("TIMES restore %.3f s" % (time.monotonic() - t))
procs = open(cg + "/cgroup.procs").read().split()
for p in procs:
    print("restored sandbox", p, status(int(p)), fdlinks(int(p)))

# ---- 4. wake it as a rollback does ---------------------------------------------
nonce = secrets.token_hex(16)
rinit = int(procs[0])
# non-blocking: ENXIO if nothing holds the fifo for reading (no restored copy)
wfd = os.open("/proc/%d/root%s" % (rinit, park), os.O_WRONLY | os.O_NONBLOCK)
os.write(wfd, ("resume %s\n" % nonce).encode())
os.close(wfd)


def framed(text):
    return len(text).to_bytes(4, "big") + text.encode("ascii")


def rd(n):
    b = b""
    while len(b) < n:
        r_, _, _ = select.select([ev], [], [], 30)
        if not r_:
            raise TimeoutError("no frame")
        c = ev.recv(n - len(b))
        if not c:
            raise EOFError("the restored copy closed its channel")
        b += c
    return b


def frames_until(kind):
    while True:
        f = json.loads(rd(int.from_bytes(rd(4), "big")))
        print("  frame", json.dumps(f)[:300])
        if f["type"] in ("started", "display", "error", "execute_result", "update_display",
                         "clear_output"):
            ev.sendall(framed(json.dumps({"type": "ack"})))
        if f["type"] == kind:
            return f


t = time.monotonic()
ev.sendall(framed('{"type":"resync","nonce":"%s"}' % nonce))
print("resumed:", frames_until("resumed"), "%.3f s" % (time.monotonic() - t))
ev.sendall(framed(json.dumps(
    {"type": "execute", "seq": 7, "code": "import os\n_v = (x, nums, open('note.txt').read() "
     "if os.path.exists('note.txt') else None)", "silent": False, "store_history": True,
     "user_expressions": {"v": "repr(_v)", "st": "open('/proc/self/status').read()[:900]"},
     "allow_stdin": False, "execution_count": 7})))
done = frames_until("done")
print("RESTORED COPY ANSWERS:", json.dumps(done.get("user_expressions"))[:2500],
      "first result %.3f s after the wake" % (time.monotonic() - t))
for p in open(cg + "/cgroup.procs").read().split():
    try:
        print("host view", p, status(int(p)), os.readlink("/proc/%s/ns/user" % p))
    except OSError as e:
        print(p, e)
print("stderr:", os.read(err_r, 65536)[:2000] if select.select([err_r], [], [], 0.5)[0] else b"")
for p in open(cg + "/cgroup.procs").read().split():
    try:
        os.kill(int(p), 9)
    except OSError:
        pass
time.sleep(0.5)
os.rmdir(cg)
