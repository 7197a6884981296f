"""Experiment (not shipped): restore a dumped cellblock runner into a new
sandbox that HAS its own user namespace.  The sandbox (user namespace first,
uid 0 -> a second host id and 65534 -> the new host uid; then mount, pid,
net, ipc, uts and cgroup namespaces owned by it) is made first; then guest
root setns()es into every namespace but the user one, takes no_new_privs and
a Landlock domain, and runs `criu restore --join-ns user:/proc/1/ns/user,0,0`:
criu's main process keeps the initial namespace's CAP_NET_ADMIN for its fd
store, the restored task joins the sandbox's user namespace before anything
of the image is restored into it.  The image's credentials stay as dumped
(the runner's id inside, 65534)."""
import os, shutil, socket, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restore import (chk, landlock, libc, NEWCGROUP, NEWIPC, NEWNET, NEWNS, NEWPID, NEWUSER,  # noqa: E402
                     NEWUTS, sandbox_mounts, WORK)
# guest root (criu) cannot create files on the sandbox's tmpfs mounts: its uid 0 is not
# mapped in their user namespace (EOVERFLOW); its log goes to the spike's work directory
LOGDIR = os.path.join(WORK, "r2log")
# NOSIBLING=1: the runner is restored as criu's child, not its sibling; criu runs in the
# sandbox's pid namespace, so when it exits the runner is adopted by the sandbox's init
# (route.py clears the image's parent-death signal), and the restorer need not stay
NOSIBLING = os.environ.get("NOSIBLING") == "1"
SIBLING = [] if NOSIBLING else ["--restore-sibling"]
LLDIRS = [d for d in os.environ.get("LLDIRS", "").split(":") if d]

def main(img, links, hostbase=1600000000, name="exp-restored"):
    ev_k, ev_r = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    db_k, db_r = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_r, out_w = os.pipe(); err_r, err_w = os.pipe()
    # criu reopens an inherited pipe through /proc/self/fd: the sandbox's root may do so
    # only if the pipe's owner is mapped in its user namespace (the new host uid is)
    for f in (out_r, out_w, err_r, err_w):
        os.fchown(f, hostbase + 1, hostbase + 1)
    cg = "/sys/fs/cgroup/" + name
    os.makedirs(cg, exist_ok=True)
    open(cg + "/memory.max", "w").write("%d" % (300 << 20))
    open(cg + "/pids.max", "w").write("64")
    for d in ("/home/user", "/opt/cellblock/park", "/opt/cellblock/runner"):
        os.makedirs(d, exist_ok=True)
    go_r, go_w = os.pipe(); ready_r, ready_w = os.pipe(); rep_r, rep_w = os.pipe()
    t0 = time.monotonic()
    child = os.fork()
    if child == 0:      # becomes the sandbox: user namespace first
        try:
            os.close(go_w); os.close(ready_r); os.close(rep_r)
            chk(libc.unshare(NEWUSER), "unshare user")
            os.write(ready_w, b"u"); os.read(go_r, 1)
            os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
            chk(libc.unshare(NEWNS | NEWPID | NEWIPC | NEWUTS | NEWNET | NEWCGROUP), "unshare rest")
            if os.fork():
                os._exit(0)
            # init, pid 1 of the new pid namespace, root of the sandbox's user namespace only
            sandbox_mounts(img, 65534)
            if os.environ.get("PARKFIFO"):   # parked.py: the parked copy's fifo, made again
                os.mkfifo(os.environ["PARKFIFO"])   # criu wants the dumped mode (init's: 0644)
                os.chmod(os.environ["PARKFIFO"], 0o644)
                # held open for writing, as init holds a parked copy's fifo: with no
                # writer the restored copy's read() would see EOF and end it
                park_w = os.open(os.environ["PARKFIFO"], os.O_RDWR | os.O_NONBLOCK)
            os.system("chmod -R a+rX /tmp/img")
            open("/proc/sys/kernel/ns_last_pid", "w").write("99")
            os.write(ready_w, b"i"); os.close(ready_w); os.close(rep_w)
            while True:
                try:
                    os.wait()
                except ChildProcessError:
                    time.sleep(0.2)
        except BaseException:
            import traceback; os.write(rep_w, ("sandbox failed: %s\n" % traceback.format_exc()).encode()); os._exit(1)
    os.close(go_r); os.close(ready_w)
    os.read(ready_r, 1)
    m = "0 %d 1\n65534 %d 1\n" % (hostbase, hostbase + 1)
    open("/proc/%d/uid_map" % child, "w").write(m)
    open("/proc/%d/gid_map" % child, "w").write(m)
    open(cg + "/cgroup.procs", "w").write(str(child))
    os.write(go_w, b"g")
    if os.read(ready_r, 1) != b"i":
        os.close(rep_w); print(os.read(rep_r, 65536).decode()); raise SystemExit("sandbox not ready")
    os.waitpid(child, 0)   # it exited after forking init: the cgroup holds init alone
    procs = [int(p) for p in open(cg + "/cgroup.procs").read().split()]
    init = procs[0]
    shutil.rmtree(LOGDIR, True); os.makedirs(LOGDIR)
    t1 = time.monotonic()
    if os.environ.get("RESTORER") == "launcher":   # the launcher's code (launcher/criu_restore.c)
        import subprocess
        ends = {1: out_w, 2: err_w, 3: ev_r.fileno(), 4: db_r.fileno()}

        for n, f in ends.items():
            os.dup2(f, 200 + n, inheritable=True)
        exe = os.environ["RESTORE_DRV"]
        p = subprocess.run([exe, str(init), img, LOGDIR, cg + "/cgroup.procs"],
                           pass_fds=[200 + n for n in ends], capture_output=True, text=True)
        for n in ends:
            os.close(200 + n)
        log = open(LOGDIR + "/restore.log").read() if os.path.exists(LOGDIR + "/restore.log") else ""
        print(p.stdout, p.stderr, "\n".join(l for l in log.splitlines() if "Error" in l)[-3000:])
        os.close(rep_w); ev_r.close(); db_r.close(); os.close(out_w); os.close(err_w)
        print("TIMES sandbox %.3f s, criu restore %.3f s" % (t1 - t0, time.monotonic() - t1))
        return child, ev_k, out_r, err_r, cg
    restorer = os.fork()
    if restorer == 0:   # guest root; every namespace of the sandbox but its user namespace
        try:
            open(cg + "/cgroup.procs", "w").write(str(os.getpid()))
            fds = [(os.open("/proc/%d/ns/%s" % (init, n), os.O_RDONLY | os.O_CLOEXEC), f)
                   for n, f in (("ipc", NEWIPC), ("uts", NEWUTS), ("net", NEWNET), ("cgroup", NEWCGROUP),
                                ("pid", NEWPID), ("mnt", NEWNS))]
            for fd, f in fds:
                chk(libc.setns(fd, f), "setns %x" % f); os.close(fd)
            os.chdir("/")
            criu = os.fork()
            if criu == 0:
                # Landlock forbids a landlocked criu to ptrace-access init's /proc (EACCES):
                # the user namespace is opened first and named by the fd
                uns = os.open("/proc/1/ns/user", os.O_RDONLY)
                os.dup2(uns, 64, inheritable=True)
                abi = landlock(["/tmp", "/home/user", LOGDIR] + LLDIRS, ["/dev/null", "/proc/self/loginuid"])
                for n, f in {60: ev_r.fileno(), 61: db_r.fileno(), 62: out_w, 63: err_w}.items():
                    os.dup2(f, n, inheritable=True)
                argv = ["criu", "restore", "-v4", "-D", "/tmp/img", "-o", LOGDIR + "/restore.log", "-W", LOGDIR,
                        "--restore-detached", "--manage-cgroups=ignore"] + SIBLING + [
                        "--join-ns", "user:/proc/self/fd/64,0,0",
                        "--inherit-fd", "fd[60]:" + links["3"], "--inherit-fd", "fd[61]:" + links["4"],
                        "--inherit-fd", "fd[62]:" + links["1"], "--inherit-fd", "fd[63]:" + links["2"]]
                os.write(rep_w, ("landlock abi %d; criu pid %d\n" % (abi, os.getpid())).encode())
                o = os.open(LOGDIR + "/criu.out", os.O_WRONLY | os.O_CREAT, 0o644); os.dup2(o, 1); os.dup2(o, 2)
                os.execvp("criu", argv)
            _, st = os.waitpid(criu, 0)
            log = open(LOGDIR + "/criu.out").read() + (open(LOGDIR + "/restore.log").read() if os.path.exists(LOGDIR + "/restore.log") else "(no log)")
            errs = "\n".join(l for l in log.splitlines() if "Error" in l or "Warn" in l)
            os.write(rep_w, ("criu status %d\n%s\n--- tail\n%s\n" % (st, errs[-3000:], log[-2500:])).encode())
            # the restored runner is our child (--restore-sibling), with the parent-death
            # signal it had under the sandbox's init: we stay, as its parent, till it ends
            os.close(rep_w)
            while not NOSIBLING:
                try:
                    os.wait()
                except ChildProcessError:
                    break
            os._exit(0)
        except BaseException:
            import traceback; os.write(rep_w, ("restorer failed: %s\n" % traceback.format_exc()).encode()); os._exit(1)
    os.close(rep_w); ev_r.close(); db_r.close(); os.close(out_w); os.close(err_w)
    rep = b""
    while True:
        b = os.read(rep_r, 65536)
        if not b: break
        rep += b
    t2 = time.monotonic()
    print(rep.decode(errors="replace"))
    print("TIMES sandbox %.3f s, criu restore %.3f s" % (t1 - t0, t2 - t1))
    return child, ev_k, out_r, err_r, cg
