/*
 * microvm.c - --isolation microvm: the runner runs in a QEMU micro-VM,
 * on its own Linux kernel.
 *
 *   sandbox init (pid 1) ─▶ supervisor ─▶ qemu-system-x86_64 -M microvm
 *   (namespaces tier,       (seccomp,       guest: cellblock-init (tiers/init.c) ─▶ python runner.py
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
 * Channels (microvm_args.c, microvm_run.c): the runner's stdout, stderr and
 * event socket share one virtio-serial port, cb.io, so their bytes keep the
 * order they were written in (tiers/vm_mux.h): init in the guest
 * multiplexes them (tiers/init_mux.c), the supervisor here sorts them into
 * the kernel's pipes and socket (tiers/vm_demux.c), output before the frame
 * that followed it, with backpressure, parsing what comes as untrusted.  A
 * second port, cb.ctl, carries 'i' (SIGINT) in and "ready"/"fail" out.  A
 * third, cb.debug, is the debugger's channel (the runner's fd 4), a socket
 * chardev on the kernel's debug socket.
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isolate/util.h"
#include "tiers/microvm_priv.h"

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

int cb_microvm_plan(cb_microvm_t *m, cb_mount_plan_t *mounts, cb_cgroup_limits_t *lim,
                    unsigned long uid, unsigned long gid, const char *runner, char *const *envp,
                    char *why, size_t why_len) {
    const cb_options_t *o = m->opts;
    char conf[CB_VM_CONF_MAX];
    if (cb_microvm_conf(m, uid, gid, runner, envp, conf, sizeof conf) < 0) {
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
    if (cb_microvm_plan_guest_tree(mounts, o->runner) < 0 ||
        cb_mount_plan_file(mounts, CB_VM_GUEST_ROOT CB_VM_CONF, conf, 0444) < 0 ||
        cb_mount_plan_copy_files(mounts, CB_TIER_OWN_DIR, images, 2) < 0 ||
        (m->kvm && cb_microvm_plan_kvm(mounts) < 0)) {
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
    for (int k = CB_VM_TCG; k <= CB_VM_KVM; k++) {
        memset(&m->argv[k], 0, sizeof m->argv[k]);
        if (cb_microvm_qemu_argv(m, &m->argv[k], k == CB_VM_KVM) < 0) {
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
    case CB_VM_ERR_SETUP: return "the micro-VM's supervisor could not set up its channels";
    case CB_VM_ERR_EXEC: return "QEMU could not be started (qemu-system-x86)";
    default: return "";
    }
}
