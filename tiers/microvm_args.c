/*
 * microvm_args.c - what the micro-VM is given, prepared at planning time in
 * the launcher: the guest's root tree (the sandbox plan again), its vm.conf,
 * and QEMU's command line with the guest's devices and channels.
 *
 * Channels (virtio-serial): cb.io carries the runner's stdout, stderr and
 * event socket in one queue, so they keep their order (tiers/vm_mux.h); the
 * supervisor holds the other end and sorts them into the kernel's pipes and
 * socket.  cb.ctl carries SIGINT and checkpoint commands in, and "ready",
 * setup failures and checkpoint answers out.  cb.debug is the debugger's
 * channel (the runner's fd 4), on the kernel's own socket.  QEMU is given
 * neither the kernel's pipes nor its event socket.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "isolate/log.h"
#include "isolate/snap_limits.h"
#include "tiers/microvm_priv.h"

#define S_NEWROOT_LEN (sizeof "/" CB_SANDBOX_NEWROOT - 1)
#define S_OLDROOT_LEN (sizeof "/" CB_SANDBOX_OLDROOT - 1)

/* The namespaces tier's plan, again, below CB_VM_GUEST_ROOT: only what the
 * guest's root needs (binds, files, links, mountpoints), never /proc or /dev. */
int cb_microvm_plan_guest_tree(cb_mount_plan_t *p, const char *runner) {
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
    /* the park fifos' mountpoint (the guest's init mounts a tmpfs there) */
    if (cb_mount_plan_dir(p, CB_VM_GUEST_ROOT CB_SNAP_PARK_DIR, CB_SANDBOX_MKDIR_MODE) < 0)
        return -1;
    return cb_mount_plan_dir(p, CB_VM_GUEST_ROOT "/dev", CB_SANDBOX_MKDIR_MODE);
}

/* /dev/kvm for QEMU: planned before /dev turns read-only. */
int cb_microvm_plan_kvm(cb_mount_plan_t *p) {
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

int cb_microvm_conf(const cb_microvm_t *m, unsigned long uid, unsigned long gid, const char *runner,
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
    if (o->debug_channel) {
        w = snprintf(buf + off, len - off, "debug 1\n");
        if (w < 0 || (size_t) w >= len - off) return -1;
        off += (size_t) w;
    }
    for (size_t i = 0; envp[i] != NULL; i++) {
        w = snprintf(buf + off, len - off, "env %s\n", envp[i]);
        if (w < 0 || (size_t) w >= len - off) return -1;
        off += (size_t) w;
    }
    return 0;
}

/* A virtio-serial port named name on the socket QEMU gets as its fd. */
static int s_port(cb_tier_argv_t *a, const char *id, int fd, const char *name) {
    int rc = 0;
    rc |= cb_tier_argv_add(a, "-chardev");
    rc |= cb_tier_argv_add(a, "socket,id=%s,fd=%d", id, fd);
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtserialport,chardev=%s,name=%s", id, name);
    return rc;
}

int cb_microvm_qemu_argv(const cb_microvm_t *m, cb_tier_argv_t *a, bool kvm) {
    const cb_options_t *o = m->opts;
    int rc = 0; /* QEMU's fds: CB_VM_QFD_* (microvm_run.c) */
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
        /* append=on: QEMU would ftruncate() a pipe for O_TRUNC */
        rc |= cb_tier_argv_add(a, "-add-fd");
        rc |= cb_tier_argv_add(a, "fd=%d,set=%d", CB_VM_QFD_CONSOLE, CB_VM_QFD_CONSOLE);
        rc |= cb_tier_argv_add(a, "-chardev");
        rc |= cb_tier_argv_add(a, "file,id=con,path=/dev/fdset/%d,append=on", CB_VM_QFD_CONSOLE);
        rc |= cb_tier_argv_add(a, "-serial");
        rc |= cb_tier_argv_add(a, "chardev:con");
    }
    const char *bus = kvm ? "device" : "pci"; /* virtio-mmio on microvm, PCI on pc */
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtio-rng-%s", bus);
    rc |= cb_tier_argv_add(a, "-device");
    rc |= cb_tier_argv_add(a, "virtio-serial-%s,max_ports=8", bus);
    /* one port for fds 1-3: one queue, so their bytes keep their order */
    rc |= s_port(a, "io", CB_VM_QFD_IO, CB_VM_PORT_IO);
    rc |= s_port(a, "ctl", CB_VM_QFD_CTL, CB_VM_PORT_CTL);
    if (o->debug_channel) rc |= s_port(a, "dbg", CB_VM_QFD_DEBUG, CB_VM_PORT_DEBUG);
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
