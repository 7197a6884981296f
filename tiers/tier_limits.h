/*
 * tier_limits.h - bounds, fixed paths and overheads of the isolation tiers
 * (the tiers/ sources, init.c among them).  The shared option defaults stay in
 * limits.h; the namespaces sandbox's own numbers in sandbox_limits.h.
 */
#ifndef CB_TIER_LIMITS_H
#define CB_TIER_LIMITS_H

#include "isolate/sandbox_limits.h"

/* ---- prepared argv/env ----------------------------------------------------- */
#define CB_TIER_ARGV_MAX 112                /* entries of one prepared argv */
#define CB_TIER_ARG_MAX  (CB_PATH_MAX + 96) /* bytes of one entry */
#define CB_TIER_FDS_MAX  8                  /* fds a supervisor hands its child */

/* ---- where the tiers' files appear inside the sandbox ---------------------- */
#define CB_TIER_DIR       "/opt/cellblock/tier" /* ro binds of the tier's programs */
#define CB_TIER_OWN_DIR   CB_TIER_DIR "/own" /* copies of cellblock's own files (tmpfs) */
#define CB_TIER_INIT_NAME "cellblock-init"   /* tiers/init.c, beside the launcher */
#define CB_TIER_INIT      CB_TIER_OWN_DIR "/" CB_TIER_INIT_NAME
#define CB_TIER_STATE     "/tmp/.cellblock-tier" /* supervisor's private dir (0700) */

/* ---- gvisor -------------------------------------------------------------- */
#define CB_GVISOR_RUNSC      CB_TIER_DIR "/runsc"       /* the runsc binary, bound */
#define CB_GVISOR_BPF        CB_TIER_DIR "/seccomp.bpf" /* the allowlist, for cellblock-init */
#define CB_TIER_BPF_MAX      (64u << 10)                /* bytes of that BPF program */
#define CB_GVISOR_ID         "cellblock"                /* container id */
#define CB_GVISOR_DBG_DIR    CB_TIER_DIR "/debug" /* the debugger's socket dir, in gVisor */
#define CB_GVISOR_DBG_HOST   CB_TIER_STATE "/debug" /* ... its source, the supervisor's */
#define CB_GVISOR_DBG_NAME   "socket"                /* the socket in it */
#define CB_GVISOR_RELAY_BUF  (64u << 10) /* bytes relayed at once each way (debugger) */
#define CB_GVISOR_MEM_MB     192         /* cgroup memory added for runsc's sentry, gofer, run */
#define CB_GVISOR_PIDS       192         /* cgroup pids added for their threads and stubs */
#define CB_GVISOR_CONFIG_MAX (64u << 10) /* bytes of the OCI config.json */
#define CB_GVISOR_LOG_TAIL   2048        /* bytes of runsc's log shown when it fails */
#define CB_GVISOR_HELP_MAX   (32u << 10) /* bytes of runsc's help read (`runsc flags`: 11 KiB) */
#define CB_GVISOR_HELP_MS    5000        /* ... it is killed after this long */
#define CB_GVISOR_FLAG_MAX   64          /* a flag's name looked for in it */
#define CB_GVISOR_SHM_MB_MAX CB_SANDBOX_SHM_MB_MAX /* /dev/shm never above this */

/* ---- microvm -------------------------------------------------------------- */
#define CB_VM_IMAGE_DIR     "vm"                   /* <share>/cellblock/vm: vmlinuz, initrd.img */
#define CB_VM_GUEST_ROOT    "/opt/cellblock/guest" /* the guest's 9p root, ro */
#define CB_VM_CONF          "/.cellblock/vm.conf"  /* in the guest root: runner, ids, limits */
#define CB_VM_CONF_MAX      CB_SANDBOX_FILE_MAX    /* bytes of vm.conf */
#define CB_VM_KERNEL_MB     96      /* guest RAM added for the guest kernel and page cache */
#define CB_VM_QEMU_MB       256     /* cgroup memory added for QEMU itself (TCG cache included) */
#define CB_VM_TCG_TB_MB     64      /* TCG translation cache */
#define CB_VM_PIDS          160     /* cgroup pids added for QEMU's threads */
#define CB_VM_CPUS_MAX      16      /* vCPUs at most */
#define CB_VM_QEMU_ERR_MAX  2048    /* bytes of QEMU's stderr kept for a failure message */
#define CB_VM_STATUS_MAX    320     /* bytes of one status line from the guest (a snap line) */
#define CB_VM_EXIT_OOM      124     /* supervisor's exit code: the guest OOM-killed the runner */
#define CB_VM_CTL_DRAIN_MAX 64      /* reads of cb.ctl after QEMU exited */
#define CB_VM_MUX_PAYLOAD_MAX (16u << 10) /* bytes of one record on cb.io (tiers/vm_mux.h) */
#define CB_VM_MUX_UP_BUF    (64u << 10) /* guest: records the port has not taken yet */
#define CB_VM_MUX_DOWN_BUF  (64u << 10) /* bytes for the runner held at once (each side) */
#define CB_VM_DEMUX_BUF     (64u << 10) /* host: bytes read from cb.io at once */
#define CB_VM_DEMUX_ROUNDS  16      /* host: reads of cb.io per wake-up */
#define CB_VM_END_QUIET_MS  2000    /* guest, runner gone: its pipes close within this of quiet */
#define CB_VM_END_FLUSH_MS  10000   /* host, QEMU gone: what it wrote reaches the kernel by then */
#define CB_VM_KVM_PROBE_MS  500     /* the KVM probe's guest must halt within this */
#define CB_VM_KVM_BOOT_MS   4000    /* a KVM guest must say "ready" by then, else TCG */
#define CB_VM_LPJ           4000000 /* loops_per_jiffy given to the guest (TCG: no PIT calibration) */
#define CB_VM_PORT_WAIT_MS  10000   /* guest: virtio ports must appear by then */
#define CB_VM_9P_MSIZE      (512u << 10) /* 9p message size */

/* virtio-serial port names (guest: /sys/class/virtio-ports/X/name) */
#define CB_VM_PORT_IO     "cb.io" /* the runner's fds 1, 2 and 3, in order (tiers/vm_mux.h) */
#define CB_VM_PORT_CTL    "cb.ctl"
#define CB_VM_PORT_DEBUG  "cb.debug" /* the debugger's channel (the runner's fd 4) */

/* 9p mount tags */
#define CB_VM_TAG_ROOT "cbroot"
#define CB_VM_TAG_HOME "cbhome"

#endif
