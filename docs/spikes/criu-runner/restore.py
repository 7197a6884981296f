"""Experiment (not shipped): restore a dumped cellblock runner INSIDE a new
sandbox, criu running there as the sandbox's root under no_new_privs and a
Landlock domain.  Run as guest root after route.py's dump (image in IMG)."""
import ctypes, os, shutil, socket, struct, time
libc = ctypes.CDLL(None, use_errno=True)
NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET = (0x20000, 0x2000000, 0x4000000,
    0x8000000, 0x10000000, 0x20000000, 0x40000000)
INITROOT = os.environ.get("INITROOT") == "1"
LLDIRS = [d for d in os.environ.get("LLDIRS", "").split(":") if d]
# where route.py keeps the dump, the edited image and criu's feature cache
WORK = os.path.abspath(os.environ.get("SPIKE_DIR", "/var/tmp/criu-runner"))
KDAT = os.path.join(WORK, "criu.kdat")
MS_REC, MS_PRIVATE, MS_BIND = 16384, 1 << 18, 4096

def chk(rc, what):
    if rc != 0 and rc != None and rc < 0:
        e = ctypes.get_errno(); raise OSError(e, "%s: %s" % (what, os.strerror(e)))
    return rc

def mount(src, dst, fstype, flags, data=None):
    chk(libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(), ctypes.c_ulong(flags),
                   data and data.encode()), "mount %s" % dst)

def landlock(dirs, files):
    WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 2, 16, 32
    MAKE = 64 | 128 | 256 | 512 | 1024 | 2048 | 4096
    REFER = 8192
    wdir = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE | REFER
    abi = libc.syscall(444, None, 0, 1)
    attr = struct.pack("=Q", wdir)
    rs = chk(libc.syscall(444, attr, len(attr), 0), "landlock_create_ruleset")
    for path, acc in [(d, wdir) for d in dirs] + [(f, WRITE_FILE) for f in files]:
        fd = os.open(path, os.O_PATH)
        pb = struct.pack("=Qi", acc, fd)
        chk(libc.syscall(445, rs, 1, pb, 0), "landlock_add_rule %s" % path)
        os.close(fd)
    chk(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    chk(libc.syscall(446, rs, 0), "landlock_restrict_self")
    return abi

def sandbox_mounts(img, home_id):
    """In the new sandbox's init: its proc, tmpfs mounts and criu's feature cache,
    the image copied into its /tmp."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("proc", "/proc", "proc", 0)
    mount("tmp", "/tmp", "tmpfs", 0, "mode=1777")
    mount("home", "/home/user", "tmpfs", 0, "mode=0700,uid=%d,gid=%d" % (home_id, home_id))
    mount("park", "/opt/cellblock/park", "tmpfs", 0, "mode=0777")
    mount("run", "/run", "tmpfs", 0, "mode=0755")
    if os.path.exists(KDAT):
        shutil.copy(KDAT, "/run/criu.kdat")
    shutil.copytree(img, "/tmp/img")

def main(img, links, hostbase=1600000000):
    # the kernel's side of the new channels
    ev_k, ev_r = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    db_k, db_r = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_r, out_w = os.pipe(); err_r, err_w = os.pipe()
    cg = "/sys/fs/cgroup/exp-restored"
    os.makedirs(cg, exist_ok=True)
    open(cg + "/memory.max", "w").write("%d" % (300 << 20))
    open(cg + "/pids.max", "w").write("64")
    for d in ("/home/user", "/opt/cellblock/park", "/opt/cellblock/runner", "/run/exp"):
        os.makedirs(d, exist_ok=True)
    go_r, go_w = os.pipe(); ready_r, ready_w = os.pipe(); rep_r, rep_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(go_w); os.close(ready_r); os.close(rep_r)
            if not INITROOT:
                chk(libc.unshare(NEWUSER), "unshare user")
            os.write(ready_w, b"u"); os.read(go_r, 1)
            os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
            chk(libc.unshare(NEWNS | NEWPID | NEWIPC | NEWUTS | NEWNET | NEWCGROUP), "unshare rest")
            pid = os.fork()
            if pid:
                os._exit(0)
            # init, pid 1 of the new pid namespace
            sandbox_mounts(img, 1600000001)
            open("/proc/sys/kernel/ns_last_pid", "w").write("99")
            criu = os.fork()
            if criu == 0:
                if os.environ.get("NOLL") == "1":
                    chk(libc.prctl(38, 1, 0, 0, 0), "no_new_privs"); abi = -1
                else:
                    abi = landlock(["/tmp", "/home/user"] + LLDIRS, ["/dev/null", "/proc/self/loginuid"])
                fds = {60: ev_r.fileno(), 61: db_r.fileno(), 62: out_w, 63: err_w}
                for n, f in fds.items(): os.dup2(f, n, inheritable=True)
                argv = ["criu", "restore", "-v4", "-D", "/tmp/img", "-o", "/tmp/restore.log",
                        "--restore-detached", "--restore-sibling", "--manage-cgroups=ignore",
                        "--pidfile", "/tmp/pid",
                        "--inherit-fd", "fd[60]:" + links["3"], "--inherit-fd", "fd[61]:" + links["4"],
                        "--inherit-fd", "fd[62]:" + links["1"], "--inherit-fd", "fd[63]:" + links["2"]]
                os.write(rep_w, ("landlock abi %d; criu pid %d\n" % (abi, os.getpid())).encode())
                o = os.open("/tmp/criu.out", os.O_WRONLY | os.O_CREAT, 0o644); os.dup2(o, 1); os.dup2(o, 2)
                os.execvp("criu", argv)
            _, st = os.waitpid(criu, 0)
            log = open("/tmp/criu.out").read() + (open("/tmp/restore.log").read() if os.path.exists("/tmp/restore.log") else "(no log)")
            errs = "\n".join(l for l in log.splitlines() if "Error" in l or "Warn" in l)
            os.write(rep_w, ("criu status %d\n%s\n--- tail\n%s\n" % (st, errs[-3000:], log[-2500:])).encode())
            os.close(rep_w)
            os.close(ready_w); os.close(go_r)
            while True:
                try:
                    os.wait()
                except ChildProcessError:
                    time.sleep(0.2)
        except BaseException:
            import traceback; os.write(rep_w, ("child failed: %s\n" % traceback.format_exc()).encode()); os._exit(1)
    os.close(go_r); os.close(ready_w); os.close(rep_w)
    ev_r.close(); db_r.close(); os.close(out_w); os.close(err_w)
    os.read(ready_r, 1)
    if not INITROOT:
        with open("/proc/%d/uid_map" % child, "w") as f: f.write("0 %d 1\n65534 %d 1\n" % (hostbase, hostbase + 1))
        with open("/proc/%d/gid_map" % child, "w") as f: f.write("0 %d 1\n65534 %d 1\n" % (hostbase, hostbase + 1))
    open(cg + "/cgroup.procs", "w").write(str(child))
    os.write(go_w, b"g")
    rep = b""
    while True:
        b = os.read(rep_r, 65536)
        if not b: break
        rep += b
    print(rep.decode(errors="replace"))
    return child, ev_k, out_r, err_r, cg
