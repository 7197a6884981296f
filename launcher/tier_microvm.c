/*
 * tier_microvm.c - --isolation microvm: the runner runs in a QEMU micro-VM,
 * on its own Linux kernel.
 *
 *   sandbox init (pid 1) ─▶ supervisor ─▶ qemu-system-x86_64 -M microvm
 *   (namespaces tier,       (seccomp,       guest: cellblock-init (vm/init.c) ─▶ python runner.py
 *    unchanged)              Landlock,
 *                            no caps)
 *
 * QEMU is the runner's slot of the namespaces sandbox: same uid, no
 * capabilities, seccomp allowlist, Landlock, cgroup, pid/net/mount
 * namespaces.  A bug in QEMU's device emulation lands there, not on the host.
 *
 * Files: the sandbox plan (read-only system dirs, runner, --ro-bind, the
 * synthesized /etc files) is planned a second time under CB_VM_GUEST_ROOT,
 * and that tree, with nothing else (no /proc, no /dev of the sandbox), is the
 * guest's 9p root, read-only.  The sandbox's tmpfs home is a second 9p share,
 * read-write: what the code writes lands in the host-side tmpfs the kernel's
 * artifact collector already holds an O_PATH fd of.  /tmp and /dev/shm are
 * guest tmpfs sized by --disk.
 *
 * Channels: virtio-serial ports backed by the runner's own fds (QEMU
 * -add-fd for the stdout/stderr pipes, the event socket as a socket
 * chardev): the guest runner writes its output straight into the kernel's
 * pipes, no relay.  A fourth port, cb.ctl, carries 'i' (SIGINT) in and the
 * runner's status out; the host parses it as untrusted.
 *
 * Limits: guest RAM = --memory + CB_VM_KERNEL_MB, vCPUs = ceil(--cpus); in
 * the guest a cgroup holds the runner to --memory and --pids; the host
 * cgroup holds QEMU to the RAM plus its own overhead and --cpus.
 *
 * Accelerator: KVM when /dev/kvm runs a probe guest and the sandbox's ids
 * may open it; otherwise TCG emulation (announced).  If a KVM guest does
 * not come up within CB_VM_KVM_BOOT_MS (nested virtualisation that runs a
 * probe but not Linux), the supervisor restarts it under TCG.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isolate/log.h"
#include "launcher/tier_impl.h"
#include "isolate/util.h"

enum { S_ERR_SETUP = 1, S_ERR_EXEC = 2 };
enum { S_TCG = 0, S_KVM = 1 };

#define S_NEWROOT_LEN (sizeof "/" CB_SANDBOX_NEWROOT - 1)
#define S_OLDROOT_LEN (sizeof "/" CB_SANDBOX_OLDROOT - 1)

struct cb_microvm {
    const cb_options_t *opts;                /* borrowed */
    char qemu[CB_PATH_MAX];                  /* host path of qemu-system-x86_64 */
    char vmlinuz[CB_PATH_MAX];               /* host path of the guest kernel */
    char initrd[CB_PATH_MAX];                /* host path of the initramfs */
    char release[CB_DESC_PART_MAX];          /* guest kernel release */
    bool kvm;                                /* try KVM first */
    char accel_note[CB_REPORT_LINE_MAX / 4]; /* why not KVM, for the banner */
    int vcpus;                               /* -smp */
    long ram_mb;                             /* -m */
    cb_tier_argv_t argv[2];                  /* QEMU: [S_TCG], [S_KVM] */
    cb_tier_argv_t env;                      /* QEMU's environment */
};

static const char *const s_bin_dirs[] = {"/usr/local/bin", "/usr/bin", "/bin", NULL};

/* Runs a one-instruction (hlt) guest in a child; true when it halted in time. */
static bool s_kvm_probe(char *why, size_t why_len) {
    int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (kvm < 0) {
        (void) snprintf(why, why_len, "no usable /dev/kvm (%s)", strerror(errno));
        return false;
    }
    close(kvm);
    pid_t pid = fork();
    if (pid < 0) {
        (void) snprintf(why, why_len, "KVM probe: fork: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        int k = open("/dev/kvm", O_RDWR | O_CLOEXEC);
        int vm = k < 0 ? -1 : ioctl(k, KVM_CREATE_VM, 0);
        if (vm < 0) _exit(2);
        unsigned char *mem =
            mmap(NULL, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) _exit(2);
        mem[0] = 0xf4; /* hlt */
        struct kvm_userspace_memory_region r = {.slot = 0,
                                                .guest_phys_addr = 0x1000,
                                                .memory_size = 0x1000,
                                                .userspace_addr = (unsigned long) mem};
        int cpu =
            ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r) < 0 ? -1 : ioctl(vm, KVM_CREATE_VCPU, 0);
        int sz = cpu < 0 ? -1 : ioctl(k, KVM_GET_VCPU_MMAP_SIZE, 0);
        if (sz <= 0) _exit(2);
        struct kvm_run *run = mmap(NULL, (size_t) sz, PROT_READ | PROT_WRITE, MAP_SHARED, cpu, 0);
        struct kvm_sregs sr;
        if (run == MAP_FAILED || ioctl(cpu, KVM_GET_SREGS, &sr) < 0) _exit(2);
        sr.cs.base = 0;
        sr.cs.selector = 0;
        struct kvm_regs rg = {.rip = 0x1000, .rflags = 2};
        if (ioctl(cpu, KVM_SET_SREGS, &sr) < 0 || ioctl(cpu, KVM_SET_REGS, &rg) < 0 ||
            ioctl(cpu, KVM_RUN, 0) < 0)
            _exit(2);
        _exit(run->exit_reason == KVM_EXIT_HLT ? 0 : 1);
    }
    int st = 0;
    pid_t got = 0;
    struct timespec nap = {.tv_sec = 0, .tv_nsec = 1000000L};
    for (int waited = 0; waited < CB_VM_KVM_PROBE_MS && got == 0; waited++) {
        got = waitpid(pid, &st, WNOHANG);
        if (got == 0) nanosleep(&nap, NULL);
    }
    if (got == 0) {
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, &st, 0);
        (void) snprintf(why, why_len, "KVM did not run a probe guest within %d ms",
                        CB_VM_KVM_PROBE_MS);
        return false;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        (void) snprintf(why, why_len, "KVM refused a probe guest");
        return false;
    }
    return true;
}

/* May the sandbox's runner ids open /dev/kvm?  (As root the sandbox runs as
 * --uid/--gid with no groups; otherwise as the kernel's own user.) */
static bool s_kvm_reachable(unsigned long uid, unsigned long gid) {
    struct stat st;
    if (stat("/dev/kvm", &st) < 0) return false;
    if (geteuid() != 0) return access("/dev/kvm", R_OK | W_OK) == 0;
    if (st.st_uid == uid) return (st.st_mode & 0600) == 0600;
    if (st.st_gid == gid) return (st.st_mode & 0060) == 0060;
    return (st.st_mode & 0006) == 0006;
}

cb_microvm_t *cb_microvm_new(const cb_options_t *opts, char *why, size_t why_len) {
    cb_microvm_t *m = calloc(1, sizeof *m);
    if (m == NULL) return NULL;
    m->opts = opts;
    if (cb_tier_find_program(s_bin_dirs, "qemu-system-x86_64", m->qemu, sizeof m->qemu) < 0) {
        (void) snprintf(why, why_len,
                        "--isolation microvm needs QEMU, which is not installed: apt-get install "
                        "qemu-system-x86 (Debian/Ubuntu), or use --isolation gvisor|namespaces");
        free(m);
        return NULL;
    }
    /* <prefix>/share/cellblock/runner/runner.py -> <prefix>/share/cellblock/vm */
    char dir[CB_PATH_MAX];
    (void) snprintf(dir, sizeof dir, "%s", opts->runner);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) *slash = '\0';
    slash = strrchr(dir, '/');
    if (slash != NULL) *slash = '\0';
    char rel_path[CB_PATH_MAX + 16];
    int a = snprintf(m->vmlinuz, sizeof m->vmlinuz, "%s/%s/vmlinuz", dir, CB_VM_IMAGE_DIR);
    int b = snprintf(m->initrd, sizeof m->initrd, "%s/%s/initrd.img", dir, CB_VM_IMAGE_DIR);
    (void) snprintf(rel_path, sizeof rel_path, "%s/%s/release", dir, CB_VM_IMAGE_DIR);
    if (a < 0 || (size_t) a >= sizeof m->vmlinuz || b < 0 || (size_t) b >= sizeof m->initrd ||
        access(m->vmlinuz, R_OK) != 0 || access(m->initrd, R_OK) != 0) {
        (void) snprintf(why, why_len,
                        "--isolation microvm: the guest kernel is not built (%s/%s): install "
                        "linux-image-amd64 (scripts/deps.sh does) and run make",
                        dir, CB_VM_IMAGE_DIR);
        free(m);
        return NULL;
    }
    cb_autofd int rf = open(rel_path, O_RDONLY | O_CLOEXEC);
    ssize_t n = rf < 0 ? -1 : read(rf, m->release, sizeof m->release - 1);
    m->release[n > 0 ? n : 0] = '\0';
    m->release[strcspn(m->release, "\n")] = '\0';
    return m;
}

void cb_microvm_destroy(cb_microvm_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    free(*self_p);
    *self_p = NULL;
}

/* ---- planning (launcher side) ------------------------------------------------ */

/* The namespaces tier's plan, again, below CB_VM_GUEST_ROOT: only what the
 * guest's root needs (binds, files, links, mountpoints), never /proc or /dev. */
static int s_plan_guest_tree(cb_mount_plan_t *p, const char *runner) {
    size_t n = p->n; /* the ops the namespaces tier planned */
    for (size_t i = 0; i < n; i++) {
        const cb_mount_op_t *op = &p->ops[i];
        const char *path = op->dst + S_NEWROOT_LEN; /* as the sandbox sees it */
        if (strncmp(path, "/dev", 4) == 0 && (path[4] == '\0' || path[4] == '/')) continue;
        /* the runner is a copy in a tmpfs (BLOBs): copied again below */
        size_t rl = strlen(CB_SANDBOX_RUNNER_DIR);
        if (strncmp(path, CB_SANDBOX_RUNNER_DIR, rl) == 0 && (path[rl] == '\0' || path[rl] == '/'))
            continue;
        char dst[CB_PATH_MAX];
        int w = snprintf(dst, sizeof dst, "%s%s", CB_VM_GUEST_ROOT, path);
        if (w < 0 || (size_t) w >= sizeof dst) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int rc = 0;
        switch (op->kind) {
        case CB_MNT_BIND_RO:
            rc = cb_mount_plan_bind(p, op->src + S_OLDROOT_LEN, dst, false, false);
            break;
        case CB_MNT_FILE: rc = cb_mount_plan_file(p, dst, op->data, op->mode); break;
        case CB_MNT_SYMLINK: rc = cb_mount_plan_symlink(p, op->src, dst); break;
        case CB_MNT_DIR: rc = cb_mount_plan_dir(p, dst, op->mode); break;
        case CB_MNT_TMPFS:
        case CB_MNT_OVERLAY: /* (--workdir-source, refused with a tier) */
        case CB_MNT_PROC: rc = cb_mount_plan_dir(p, dst, CB_SANDBOX_MKDIR_MODE); break;
        case CB_MNT_BIND_DEV:
        case CB_MNT_RDONLY:
        case CB_MNT_MASK:    /* /proc's: the guest has its own */
        case CB_MNT_RO_SELF: /* same */
        case CB_MNT_BLOB:
        case CB_MNT_COPY: break;
        }
        if (rc < 0) return -1;
    }
    char rdir[CB_PATH_MAX];
    (void) snprintf(rdir, sizeof rdir, "%s", runner);
    char *slash = strrchr(rdir, '/');
    if (slash != NULL) *slash = '\0';
    if (cb_mount_plan_copy_dir(p, rdir, CB_VM_GUEST_ROOT CB_SANDBOX_RUNNER_DIR) < 0) return -1;
    return cb_mount_plan_dir(p, CB_VM_GUEST_ROOT "/dev", CB_SANDBOX_MKDIR_MODE);
}

/* /dev/kvm for QEMU: planned before /dev turns read-only. */
static int s_plan_kvm(cb_mount_plan_t *p) {
    size_t ro = p->n;
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i].kind == CB_MNT_RDONLY && strcmp(p->ops[i].dst + S_NEWROOT_LEN, "/dev") == 0)
            ro = i;
    if (cb_mount_plan_dev(p, "kvm") < 0) return -1;
    if (ro < p->n - 1) { /* move the new op in front of the read-only remount */
        cb_mount_op_t kvm = p->ops[p->n - 1];
        memmove(&p->ops[ro + 1], &p->ops[ro], (p->n - 1 - ro) * sizeof p->ops[0]);
        p->ops[ro] = kvm;
    }
    return 0;
}

static int s_conf(const cb_microvm_t *m, unsigned long uid, unsigned long gid, const char *runner,
                  char *const *envp, char *buf, size_t len) {
    const cb_options_t *o = m->opts;
    long shm = o->disk_mb < CB_SANDBOX_SHM_MB_MAX ? o->disk_mb : CB_SANDBOX_SHM_MB_MAX;
    int w = snprintf(buf, len,
                     "uid %lu\ngid %lu\nnofile %ld\npids %ld\nmemory_mb %ld\ntmp_mb %ld\n"
                     "shm_mb %ld\ncwd %s\narg %s\narg -I\narg -u\narg %s\n",
                     uid, gid, o->open_files, o->pids, o->memory_mb, o->disk_mb, shm,
                     CB_SANDBOX_HOME, o->python, runner);
    if (w < 0 || (size_t) w >= len) return -1;
    size_t off = (size_t) w;
    for (size_t i = 0; envp[i] != NULL; i++) {
        w = snprintf(buf + off, len - off, "env %s\n", envp[i]);
        if (w < 0 || (size_t) w >= len - off) return -1;
        off += (size_t) w;
    }
    return 0;
}

static int s_qemu_argv(const cb_microvm_t *m, cb_tier_argv_t *a, bool kvm) {
    const cb_options_t *o = m->opts;
    /* fds as the supervisor hands them over: 3 event socket, 4 ctl socket,
     * 5/6 the kernel's stdout/stderr pipes */
    int rc = 0;
    rc |= cb_tier_argv_add(a, "%s", m->qemu);
    rc |= cb_tier_argv_add(a, "-nodefaults");
    rc |= cb_tier_argv_add(a, "-no-user-config");
    rc |= cb_tier_argv_add(a, "-nographic");
    rc |= cb_tier_argv_add(a, "-no-reboot");
    rc |= cb_tier_argv_add(a, "-M");
    if (kvm) {
        rc |= cb_tier_argv_add(a, "microvm,x-option-roms=off,isa-serial=%s,rtc=off",
                               o->log_level == CB_LOG_DEBUG ? "on" : "off");
        rc |= cb_tier_argv_add(a, "-accel");
        rc |= cb_tier_argv_add(a, "kvm");
        rc |= cb_tier_argv_add(a, "-cpu");
        rc |= cb_tier_argv_add(a, "host");
    } else {
        /* TCG: the microvm machine hangs in about half the boots here (timer
         * set-up without kvmclock); the pc machine, with its PIT, HPET and
         * ACPI timer, has not.  Same guest, virtio-pci instead of -mmio. */
        rc |= cb_tier_argv_add(a, "pc");
        rc |= cb_tier_argv_add(a, "-accel");
        rc |= cb_tier_argv_add(a, "tcg,thread=multi,tb-size=%d", CB_VM_TCG_TB_MB);
        rc |= cb_tier_argv_add(a, "-cpu");
        rc |= cb_tier_argv_add(a, "max");
    }
    rc |= cb_tier_argv_add(a, "-m");
    rc |= cb_tier_argv_add(a, "%ld", m->ram_mb);
    rc |= cb_tier_argv_add(a, "-smp");
    rc |= cb_tier_argv_add(a, "%d", m->vcpus);
    rc |= cb_tier_argv_add(a, "-kernel");
    rc |= cb_tier_argv_add(a, "%s/vmlinuz", CB_TIER_OWN_DIR);
    rc |= cb_tier_argv_add(a, "-initrd");
    rc |= cb_tier_argv_add(a, "%s/initrd.img", CB_TIER_OWN_DIR);
    rc |= cb_tier_argv_add(a, "-append");
    rc |= cb_tier_argv_add(
        a, "%s panic=-1 reboot=t rdinit=/init tsc=reliable no_timer_check lpj=%d",
        o->log_level == CB_LOG_DEBUG ? "console=ttyS0 cb.debug" : "quiet loglevel=1", CB_VM_LPJ);
    if (o->log_level == CB_LOG_DEBUG) { /* the guest's console on the runner's stderr */
        rc |= cb_tier_argv_add(a, "-chardev");
        rc |= cb_tier_argv_add(a, "file,id=con,path=/dev/fdset/6,append=on");
        rc |= cb_tier_argv_add(a, "-serial");
        rc |= cb_tier_argv_add(a, "chardev:con");
    }
    const char *bus = kvm ? "device" : "pci"; /* virtio-mmio on microvm, PCI on pc */
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtio-rng-%s", bus);
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtio-serial-%s,max_ports=8", bus);
    /* append=on: QEMU would ftruncate() a pipe for O_TRUNC */
    rc |= cb_tier_argv_add(a, "-add-fd");
    rc |= cb_tier_argv_add(a, "fd=5,set=5");
    rc |= cb_tier_argv_add(a, "-add-fd");
    rc |= cb_tier_argv_add(a, "fd=6,set=6");
    rc |= cb_tier_argv_add(a, "-chardev");
    rc |= cb_tier_argv_add(a, "file,id=out,path=/dev/fdset/5,append=on");
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtserialport,chardev=out,name=%s", CB_VM_PORT_STDOUT);
    rc |= cb_tier_argv_add(a, "-chardev");
    rc |= cb_tier_argv_add(a, "file,id=err,path=/dev/fdset/6,append=on");
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtserialport,chardev=err,name=%s", CB_VM_PORT_STDERR);
    rc |= cb_tier_argv_add(a, "-chardev");
    rc |= cb_tier_argv_add(a, "socket,id=ev,fd=3");
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtserialport,chardev=ev,name=%s", CB_VM_PORT_EVENTS);
    rc |= cb_tier_argv_add(a, "-chardev");
    rc |= cb_tier_argv_add(a, "socket,id=ctl,fd=4");
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtserialport,chardev=ctl,name=%s", CB_VM_PORT_CTL);
    rc |= cb_tier_argv_add(a, "-fsdev");
    rc |=
        cb_tier_argv_add(a, "local,id=root,path=%s,security_model=none,readonly=on,multidevs=remap",
                         CB_VM_GUEST_ROOT);
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtio-9p-%s,fsdev=root,mount_tag=%s", bus, CB_VM_TAG_ROOT);
    rc |= cb_tier_argv_add(a, "-fsdev");
    rc |= cb_tier_argv_add(a, "local,id=home,path=%s,security_model=none,multidevs=remap",
                           CB_SANDBOX_HOME);
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtio-9p-%s,fsdev=home,mount_tag=%s", bus, CB_VM_TAG_HOME);
    return rc == 0 ? 0 : -1;
}

int cb_microvm_plan(cb_microvm_t *m, cb_mount_plan_t *mounts, cb_cgroup_limits_t *lim,
                    unsigned long uid, unsigned long gid, const char *runner, char *const *envp,
                    char *why, size_t why_len) {
    const cb_options_t *o = m->opts;
    char conf[CB_VM_CONF_MAX];
    if (s_conf(m, uid, gid, runner, envp, conf, sizeof conf) < 0) {
        (void) snprintf(why, why_len, "the micro-VM's runner configuration is too long");
        return -1;
    }
    char kvm_why[sizeof m->accel_note] = "";
    m->kvm = s_kvm_probe(kvm_why, sizeof kvm_why);
    if (m->kvm && !s_kvm_reachable(uid, gid)) {
        m->kvm = false;
        (void) snprintf(kvm_why, sizeof kvm_why,
                        "/dev/kvm is closed to the sandbox's ids: --gid of the kvm group");
    }
    (void) snprintf(m->accel_note, sizeof m->accel_note, "%s", kvm_why);
    /* copied, not bound: an install under a 0700 home is out of the
     * sandbox's ids' reach (and the files are small) */
    const char *images[] = {m->vmlinuz, m->initrd};
    if (s_plan_guest_tree(mounts, o->runner) < 0 ||
        cb_mount_plan_file(mounts, CB_VM_GUEST_ROOT CB_VM_CONF, conf, 0444) < 0 ||
        cb_mount_plan_copy_files(mounts, CB_TIER_OWN_DIR, images, 2) < 0 ||
        (m->kvm && s_plan_kvm(mounts) < 0)) {
        (void) snprintf(why, why_len, "planning the micro-VM's files: %s (%zu mounts)",
                        strerror(errno), mounts->n);
        return -1;
    }
    m->vcpus = (int) ceil(o->cpus);
    if (m->vcpus < 1) m->vcpus = 1;
    if (m->vcpus > CB_VM_CPUS_MAX) m->vcpus = CB_VM_CPUS_MAX;
    m->ram_mb = o->memory_mb + CB_VM_KERNEL_MB;
    lim->memory_mb += CB_VM_KERNEL_MB + CB_VM_QEMU_MB;
    lim->pids += CB_VM_PIDS;
    for (int k = S_TCG; k <= S_KVM; k++) {
        memset(&m->argv[k], 0, sizeof m->argv[k]);
        if (s_qemu_argv(m, &m->argv[k], k == S_KVM) < 0) {
            (void) snprintf(why, why_len, "QEMU command line too long");
            return -1;
        }
    }
    memset(&m->env, 0, sizeof m->env);
    if (cb_tier_argv_add(&m->env, "PATH=%s", CB_SANDBOX_PATH) < 0 ||
        cb_tier_argv_add(&m->env, "LANG=%s", CB_SANDBOX_LANG) < 0) {
        (void) snprintf(why, why_len, "QEMU environment too long");
        return -1;
    }
    return 0;
}

void cb_microvm_describe(const cb_microvm_t *m, const char *base, char *buf, size_t len) {
    char accel[sizeof m->accel_note + 64];
    if (m->kvm)
        (void) snprintf(accel, sizeof accel, "KVM (TCG if the KVM guest does not boot)");
    else
        (void) snprintf(accel, sizeof accel, "TCG emulation (%s)", m->accel_note);
    (void) snprintf(buf, len,
                    "micro-VM: the code runs on its own Linux kernel (%s; QEMU, %s; %d vCPU, "
                    "%ld MiB; read-only 9p system, no network device); QEMU runs in the %s",
                    m->release[0] ? m->release : "guest", accel, m->vcpus, m->ram_mb, base);
}

const char *cb_microvm_hint(int arg) {
    switch (arg) {
    case S_ERR_SETUP: return "the micro-VM's supervisor could not set up its channels";
    case S_ERR_EXEC: return "QEMU could not be started (qemu-system-x86)";
    default: return "";
    }
}

/* ---- the supervisor (runner slot, confined; no malloc) ---------------------------- */

typedef struct {
    char line[CB_VM_STATUS_MAX];       /* partial line from cb.ctl */
    size_t used;                       /* bytes in line */
    bool ready;                        /* the guest said "ready" */
    bool have_status;                  /* "exit S O" received */
    int status;                        /* the runner's wait status in the guest */
    bool oom;                          /* the guest's cgroup OOM-killed */
    char fail[CB_VM_STATUS_MAX];       /* "fail ..." text */
    char qemu_err[CB_VM_QEMU_ERR_MAX]; /* the start of QEMU's stderr */
    size_t qemu_err_used;              /* bytes in it */
} s_vm_t;

/* One line from the guest: bounded, parsed as untrusted. */
static void s_guest_line(s_vm_t *v, const char *l) {
    if (strcmp(l, "ready") == 0) {
        v->ready = true;
    } else if (strncmp(l, "exit ", 5) == 0) {
        char *end;
        long st = strtol(l + 5, &end, 10);
        long oom = strtol(end, NULL, 10);
        v->have_status = true;
        v->status = (int) (st & 0xffff);
        v->oom = oom == 1;
    } else if (strncmp(l, "fail ", 5) == 0) {
        size_t k = 0;
        for (const char *c = l + 5; *c != '\0' && k + 1 < sizeof v->fail; c++)
            v->fail[k++] = (*c >= ' ' && *c < 0x7f) ? *c : '?';
        v->fail[k] = '\0';
    }
}

static ssize_t s_read_ctl(s_vm_t *v, int ctl) {
    char buf[CB_VM_STATUS_MAX];
    ssize_t n = read(ctl, buf, sizeof buf);
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || v->used + 1 >= sizeof v->line) {
            v->line[v->used] = '\0';
            s_guest_line(v, v->line);
            v->used = 0;
            if (buf[i] == '\n') continue;
        }
        v->line[v->used++] = buf[i];
    }
    return n;
}

static void s_read_err(s_vm_t *v, int fd) {
    char buf[CB_VM_STATUS_MAX];
    ssize_t n = read(fd, buf, sizeof buf);
    for (ssize_t i = 0; i < n && v->qemu_err_used + 1 < sizeof v->qemu_err; i++)
        v->qemu_err[v->qemu_err_used++] = buf[i];
}

static int64_t s_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Starts QEMU with the channels; the guest runs until QEMU exits.
 * Returns QEMU's pid or -1. */
static pid_t s_start(const cb_microvm_t *m, int k, int devnull, int err_w, int ctl_w) {
    const int fds[7] = {devnull, devnull, err_w, CB_FD_EVENT, ctl_w, 1, 2};
    return cb_tier_spawn(m->qemu, m->argv[k].argv, m->env.argv, fds, 7);
}

void cb_microvm_run(const cb_microvm_t *m, int errfd) {
    cb_tier_block_signals();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    int ctl[2], err[2];
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (sfd < 0 || devnull < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0 ||
        pipe2(err, O_CLOEXEC) < 0)
        cb_child_fail(errfd, CB_STEP_TIER, S_ERR_SETUP);
    /* QEMU writes the guest's output without blocking its main loop: a full
     * pipe throttles the virtio port (backpressure reaches the guest) */
    if (cb_set_nonblock(1, 1) < 0 || cb_set_nonblock(2, 1) < 0)
        cb_child_fail(errfd, CB_STEP_TIER, S_ERR_SETUP);
    int k = m->kvm ? S_KVM : S_TCG;
    pid_t qemu = s_start(m, k, devnull, err[1], ctl[1]);
    if (qemu < 0) cb_child_fail(errfd, CB_STEP_TIER, S_ERR_EXEC);
    close(errfd);
    static s_vm_t v;
    int64_t deadline = k == S_KVM ? s_now_ms() + CB_VM_KVM_BOOT_MS : -1;
    for (;;) {
        struct pollfd pf[3] = {{.fd = sfd, .events = POLLIN},
                               {.fd = ctl[0], .events = POLLIN},
                               {.fd = err[0], .events = POLLIN}};
        int timeout = deadline < 0 ? -1 : (int) (deadline - s_now_ms());
        if (deadline >= 0 && timeout < 0) timeout = 0;
        int r = poll(pf, 3, timeout);
        if (r < 0 && errno != EINTR) break;
        if (pf[1].revents & (POLLIN | POLLHUP)) s_read_ctl(&v, ctl[0]);
        if (pf[2].revents & (POLLIN | POLLHUP)) s_read_err(&v, err[0]);
        if (v.ready) deadline = -1;
        bool qemu_gone = false;
        if (pf[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t) sizeof si) {
                if (si.ssi_signo == SIGINT) (void) !write(ctl[0], "i", 1);
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP) (void) kill(qemu, SIGKILL);
            }
            int st;
            pid_t p;
            while ((p = waitpid(-1, &st, WNOHANG)) > 0)
                if (p == qemu) qemu_gone = true;
        }
        bool kvm_stuck = deadline >= 0 && s_now_ms() >= deadline;
        if (k == S_KVM && !v.ready && (kvm_stuck || qemu_gone)) {
            /* KVM that runs a probe but not this guest (nested virtualisation) */
            if (!qemu_gone) {
                (void) kill(qemu, SIGKILL);
                (void) waitpid(qemu, NULL, 0);
            }
            k = S_TCG;
            deadline = -1;
            v.qemu_err_used = 0;
            qemu = s_start(m, k, devnull, err[1], ctl[1]);
            if (qemu < 0) break;
            continue;
        }
        if (qemu_gone) break;
    }
    /* what the guest wrote before QEMU exited */
    (void) cb_set_nonblock(ctl[0], 1);
    for (int i = 0; i < CB_VM_CTL_DRAIN_MAX && !v.have_status && s_read_ctl(&v, ctl[0]) > 0; i++) {
    }
    if (v.have_status) {
        if (v.oom) _exit(CB_VM_EXIT_OOM); /* the launcher reports oom=1 (cb_tier_guest_oom) */
        cb_tier_exit_like(v.status);
    }
    /* no status from the guest: say why on the runner's stderr */
    (void) cb_set_nonblock(2, 0);
    static const char head[] = "[cellblock] the micro-VM stopped before its runner ended: ";
    (void) cb_write_all(2, head, sizeof head - 1);
    if (v.fail[0] != '\0') (void) cb_write_all(2, v.fail, strlen(v.fail));
    (void) cb_write_all(2, "\n", 1);
    if (v.qemu_err_used > 0) (void) cb_write_all(2, v.qemu_err, v.qemu_err_used);
    _exit(125);
}
