/*
 * microvm_priv.h - what the micro-VM tier's files share: the tier object
 * (microvm.c: the object, the KVM check, the plan), what the guest and QEMU
 * are given (microvm_args.c) and the supervisor (microvm_run.c).
 */
#ifndef CB_TIERS_MICROVM_PRIV_H
#define CB_TIERS_MICROVM_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include "tiers/tier_impl.h"

enum { CB_VM_ERR_SETUP = 1, CB_VM_ERR_EXEC = 2 }; /* the supervisor's CB_STEP_TIER codes */
enum { CB_VM_TCG = 0, CB_VM_KVM = 1 };            /* index of the QEMU argv */

/* QEMU's fds as the supervisor hands them over (0-2: /dev/null, /dev/null,
 * the pipe of its stderr) */
enum {
    CB_VM_QFD_IO = 3,      /* cb.io: a socketpair with the supervisor */
    CB_VM_QFD_CTL = 4,     /* cb.ctl: another */
    CB_VM_QFD_CONSOLE = 5, /* the guest's console (--log-level debug): the runner's stderr */
    CB_VM_QFD_DEBUG = 6,   /* cb.debug: the kernel's debugger socket (--debug-channel) */
    CB_VM_QFDS = 7,        /* slots in all */
};

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
    cb_tier_argv_t argv[2];                  /* QEMU: [CB_VM_TCG], [CB_VM_KVM] */
    cb_tier_argv_t env;                      /* QEMU's environment */
};

/* The namespaces tier's plan again below CB_VM_GUEST_ROOT (no /proc, no
 * /dev), the runner's copy and the guest's mountpoints.  0 ok, -1 errno. */
int cb_microvm_plan_guest_tree(cb_mount_plan_t *p, const char *runner);
/* /dev/kvm in the sandbox, before /dev turns read-only.  0 ok, -1 errno. */
int cb_microvm_plan_kvm(cb_mount_plan_t *p);
/* The guest's vm.conf (ids, limits, the runner's argv and env) into buf.
 * 0 ok, -1 too long. */
int cb_microvm_conf(const cb_microvm_t *m, unsigned long uid, unsigned long gid, const char *runner,
                    char *const *envp, char *buf, size_t len);
/* QEMU's command line, for KVM or TCG.  0 ok, -1 too long. */
int cb_microvm_qemu_argv(const cb_microvm_t *m, cb_tier_argv_t *a, bool kvm);

#endif
