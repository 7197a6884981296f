"""Experiment (not shipped): dump a cellblock runner with criu from inside its
sandbox's mount+pid namespaces, as guest root.  Run in the test guest."""
import os, sys, subprocess, time, json, glob
BUILD = os.environ["BUILD"]  # a build of main with launcher-rootmap.diff applied
open("/tmp/cb_exp_rootmap", "w").write("1500000000\n")
os.environ["JUPYTER_PATH"] = BUILD + "/share/jupyter"
from jupyter_client.manager import KernelManager
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restore import KDAT, WORK     # the spike's work directory (SPIKE_DIR) and criu's feature cache
DUMP, IMG = os.path.join(WORK, "dump"), os.path.join(WORK, "img")   # the dump, the image edited from it

def sh(cmd, **kw):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)
    print("$", cmd, "->", r.returncode); print((r.stdout + r.stderr)[-3000:]); return r

def kids(pid):
    out = []
    for t in glob.glob("/proc/%d/task/*/children" % pid):
        out += [int(x) for x in open(t).read().split()]
    return out

def status(pid, keys=("Name", "PPid", "Uid", "NSpid", "NoNewPrivs", "Seccomp", "CapEff", "Threads")):
    d = {}
    for line in open("/proc/%d/status" % pid):
        k, _, v = line.partition(":")
        if k in keys: d[k] = v.strip()
    return d

km = KernelManager(kernel_name="cellblock")
STATE_MB = int(os.environ.get("STATE_MB", "0"))   # extra numpy state held by the dumped session
t_cold = time.monotonic()
km.start_kernel(extra_arguments=sys.argv[1:])
kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=120)
def run(code):
    kc.execute(code, user_expressions={"v": "repr(_v)"} if "_v" in code else {})
    rep = kc.get_shell_msg(timeout=120)
    return rep["content"]
print(run("import numpy as np\nx = 41\na = np.arange(1000)\nbig = np.ones(%d << 17)\n_v = (x, int(a.sum()))" % STATE_MB))
t_cold = time.monotonic() - t_cold
print("TIMES cold start to first result (numpy, %d MiB): %.3f s" % (STATE_MB, t_cold))
kpid = km.provisioner.process.pid
tree = []
def walk(p, d=0):
    tree.append((d, p)); [walk(c, d + 1) for c in kids(p)]
walk(kpid)
for d, p in tree: print("  " * d, p, status(p))
launcher = kids(kpid)[0]; init = kids(launcher)[0]; runner = kids(init)[0]
vpid = status(runner)["NSpid"].split()[-1]
print("init", init, "runner", runner, "vpid", vpid)
for p in (init, runner):
    print(p, "ns:", {n: os.readlink("/proc/%d/ns/%s" % (p, n)) for n in ("user","pid","mnt","net","cgroup")})
    sh("ls -l /proc/%d/fd; cat /proc/%d/uid_map" % (p, p))
sh("cat /proc/%d/mountinfo | head -40" % runner)
links = {n: os.readlink("/proc/%d/fd/%s" % (runner, n)) for n in os.listdir("/proc/%d/fd" % runner)}
print("links", links)
ext = ""
for n in os.listdir("/proc/%d/fd" % runner):
    l = os.readlink("/proc/%d/fd/%s" % (runner, n))
    if l.startswith("socket:["): ext += " --external unix[%s]" % l[8:-1]
if os.environ.get("EXTNET") == "1":   # the sandbox's network namespace as external
    ext += " --external net[%d]:sbnet" % os.stat("/proc/%d/ns/net" % runner).st_ino
os.environ["EXTRA"] = os.environ.get("EXTRA", "") + ext
os.makedirs(DUMP, exist_ok=True)
fd = os.open(DUMP, os.O_RDONLY | os.O_DIRECTORY)
os.set_inheritable(fd, True)
t_dump = time.monotonic()
NSNET = " --net" if os.environ.get("NSNET") == "1" else ""   # criu in the sandbox's network namespace too
r = sh(("nsenter -t %d --mount --pid" + NSNET + " -- sh -c 'mount -t tmpfs criu /tmp && criu dump -v4 -t %s -D /proc/self/fd/%d -o dump.log --leave-running %s; echo criu=$?; umount /tmp'")
       % (init, vpid, fd, os.environ.get("EXTRA", "")), pass_fds=(fd,))
print("TIMES dump %.3f s" % (time.monotonic() - t_dump)); sh("du -sk " + DUMP)
sh("grep -E 'Error|Warn' {0}/dump.log | head -30; tail -25 {0}/dump.log; ls -la {0}".format(DUMP))
print(run("_v = x + 1"))
kc.stop_channels(); km.shutdown_kernel(now=True)
sh("crit show {0}/inventory.img; crit show {0}/userns-*.img | head -30; crit show {0}/fs-2.img; crit show {0}/files.img | grep -E '\"name\"' | grep -v '/usr/lib' ".format(DUMP))
if os.environ.get("STRIP"):
    inv = json.loads(subprocess.check_output(["crit", "decode", "-i", DUMP + "/inventory.img"]))
    m = inv["entries"][0]["root_ns_mask"]
    print("mask before", hex(m)); m &= ~int(os.environ["STRIP"], 16); inv["entries"][0]["root_ns_mask"] = m
    print("mask after", hex(m))
    subprocess.run(["crit", "encode", "-o", DUMP + "/inventory.img"], input=json.dumps(inv).encode(), check=True)
shutil = __import__("shutil"); shutil.rmtree(IMG, True); shutil.copytree(DUMP, IMG)
if os.environ.get("INITROOT") == "1":
    import glob as _g
    f = _g.glob(IMG + "/userns-*.img")[0]
    u = json.loads(subprocess.check_output(["crit", "decode", "-i", f]))
    for k in ("uid_map", "gid_map"):
        u["entries"][0][k] = [{"first": 0, "lower_first": 1600000000, "count": 1}, {"first": 65534, "lower_first": 1600000001, "count": 1}]
    subprocess.run(["crit", "encode", "-o", f], input=json.dumps(u).encode(), check=True)
    sh("crit show " + f + " | tr -d ' \n'")
if os.environ.get("STRIPNS") == "1":
    def edit(f, fn):
        d = json.loads(subprocess.check_output(["crit", "decode", "-i", f])); fn(d)
        r = subprocess.run(["crit", "encode", "-o", f], input=json.dumps(d).encode(), capture_output=True)
        if r.returncode: print("crit encode", f, r.stderr.decode()[-1500:]); raise SystemExit(1)
    inv = json.loads(subprocess.check_output(["crit", "decode", "-i", IMG + "/inventory.img"]))["entries"][0]["root_ids"]
    def ids(d):
        for k in ("user_ns_id", "ipc_ns_id", "uts_ns_id", "cgroup_ns_id", "time_ns_id") + (("net_ns_id",) if os.environ.get("EXTNET") == "1" else ()):
            if k in d["entries"][0]: d["entries"][0][k] = inv[k]
        print("ids now", d["entries"][0])
    edit(IMG + "/ids-2.img", ids)
    def creds(d):
        c = d["entries"][0]["thread_core"]["creds"]
        for k in ("uid", "euid", "suid", "fsuid", "gid", "egid", "sgid", "fsgid"):
            c[k] = 1600000001
        c["groups"] = [1600000001 for g in c.get("groups", [])] or c.pop("groups", None) or []
        if not c.get("groups"): c.pop("groups", None)
        print("creds now", {k: v for k, v in c.items() if "cap" not in k})
    if os.environ.get("KEEPCREDS") != "1":
        for f in glob.glob(IMG + "/core-*.img"): edit(f, creds)
    if os.environ.get("NOTIMENS") == "1": os.unlink(IMG + "/timens-0.img")
    if os.environ.get("NOSIBLING") == "1":
        def nopdeath(d, path=""):
            if isinstance(d, dict):
                for k, v in d.items():
                    if k == "pdeath_sig":
                        print("pdeath_sig at", path + "/" + k, "was", v); d[k] = 0
                    else:
                        nopdeath(v, path + "/" + k)
            elif isinstance(d, list):
                for i, v in enumerate(d): nopdeath(v, path + "/%d" % i)
        for f in glob.glob(IMG + "/core-*.img"): edit(f, nopdeath)
sh("criu check; ls -la /run/criu.kdat; cp /run/criu.kdat {0}; chmod 644 {0}; chmod -R a+rX {1}".format(KDAT, IMG))
if os.environ.get("JOINUSER") == "1":
    import restore2 as restore
else:
    import restore

os.chmod(IMG, 0o755)
import select
def frame(obj):
    b = json.dumps(obj).encode(); ev.sendall(struct.pack(">I", len(b)) + b)
import struct
def rd(n):
    b = b""
    while len(b) < n:
        r, _, _ = select.select([ev], [], [], 30)
        if not r: raise TimeoutError("no frame")
        c = ev.recv(n - len(b))
        if not c: raise EOFError("runner closed")
        b += c
    return b
def execute(code, seq, exprs):
    frame({"type": "execute", "seq": seq, "code": code, "silent": False, "store_history": True,
           "user_expressions": exprs, "allow_stdin": False, "execution_count": seq})
    while True:
        n = struct.unpack(">I", rd(4))[0]; f = json.loads(rd(n))
        print("  frame", json.dumps(f)[:300])
        if f["type"] in ("started", "display", "error", "execute_result", "update_display", "clear_output"):
            frame({"type": "ack"})
        if f["type"] == "done": return f
# what each restored runner is asked: its state, and every layer seen from inside
PROBE = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r_unshare = (libc.unshare(0x10000000), ctypes.get_errno())
r_ptrace = (libc.ptrace(16, 1, 0, 0), ctypes.get_errno())
try:
    open('/opt/cellblock/park/x', 'w').write('x'); r_park = 'written'
except OSError as e: r_park = repr(e)
try:
    open(os.path.join(os.path.expanduser('~'), 'ok'), 'w').write('x'); r_home = 'written'
except OSError as e: r_home = repr(e)
st = {l.split(':')[0]: l.split(':')[1].strip() for l in open('/proc/self/status') if l.split(':')[0] in ('Uid','NoNewPrivs','Seccomp','CapEff','NSpid')}
"""
FORKS = int(os.environ.get("FORKS", "1"))   # kernels restored side by side from the one image
sandboxes = []
for i in range(FORKS):
    kw = {"hostbase": 1600000000 + 10 * i, "name": "exp-restored-%d" % i} if restore.__name__ == "restore2" else {}
    t_rs = time.monotonic()
    child, ev, out_r, err_r, cg = restore.main(IMG, links, **kw)
    t_rs = time.monotonic() - t_rs
    sandboxes.append((ev, out_r, err_r, cg))
    if i == 0:      # the first restore's first result, before the other forks exist
        t_fr = time.monotonic()
        f = execute("_v = x", 40, {"v": "repr(_v)"})
        print("TIMES restore %.3f s, then first result %.3f s: %s" % (t_rs, time.monotonic() - t_fr, f["user_expressions"]))
    procs = open(cg + "/cgroup.procs").read().split()
    print("cgroup procs", procs)
    for p in procs:
        try: print(p, status(int(p)), open("/proc/%s/cmdline" % p).read().replace("\0", " ")[:80])
        except OSError as e: print(p, e)
for i, (ev, out_r, err_r, cg) in enumerate(sandboxes):
    print("=== sandbox", i, cg)
    try:
        d = execute(PROBE + "\n_v = x", 50, {"v": "repr(_v)", "a": "repr(int(a.sum()))", "probes": "repr((r_unshare, r_ptrace, r_park, r_home, st, os.getpid()))", "count": "repr(get_ipython().execution_count)"})
        print("RESTORED ANSWERS:", json.dumps(d["user_expressions"], indent=1)[:3000])
    except Exception as e:
        print("talk failed:", repr(e))
    print("stdout:", os.read(out_r, 65536)[:2000] if select.select([out_r],[],[],0.5)[0] else b"")
    print("stderr:", os.read(err_r, 65536)[:3000] if select.select([err_r],[],[],0.5)[0] else b"")
    for p in open(cg + "/cgroup.procs").read().split():
        try: print("host view", p, status(int(p)), "cg", open("/proc/%s/cgroup" % p).read().strip(), "userns", os.readlink("/proc/%s/ns/user" % p))
        except OSError as e: print(p, e)
for ev, out_r, err_r, cg in sandboxes:
    for p in open(cg + "/cgroup.procs").read().split():
        try: os.kill(int(p), 9)
        except OSError: pass
time.sleep(0.5)
for ev, out_r, err_r, cg in sandboxes:
    try: os.rmdir(cg)
    except OSError as e: print("rmdir", e)
