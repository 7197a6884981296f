/*
 * sandbox_limits.h - bounds and fixed values of the launcher and the
 * confinement steps in isolate/.  The shared defaults of the user-visible
 * options (memory, pids, ...) stay in limits.h, owned by the lead; this file
 * holds the numbers only the sandbox code uses.
 */
#ifndef CB_SANDBOX_LIMITS_H
#define CB_SANDBOX_LIMITS_H

#include "isolate/cb_limits.h"

/* ---- launcher options ------------------------------------------------- */
#define CB_OPT_MAX_MEMORY_MB  (1024L * 1024L) /* 1 TiB: refuse larger --memory */
#define CB_OPT_MIN_MEMORY_MB  16L             /* python needs at least this */
#define CB_OPT_MAX_PIDS       1000000L        /* --pids upper bound */
#define CB_OPT_MIN_PIDS       4L              /* init + runner + a little */
#define CB_OPT_MAX_CPUS       1024.0          /* --cpus upper bound */
#define CB_OPT_MIN_CPUS       0.01            /* --cpus lower bound */
#define CB_OPT_MAX_DISK_MB    (1024L * 1024L) /* --disk upper bound */
#define CB_OPT_MIN_DISK_MB    1L              /* --disk lower bound */
#define CB_OPT_MAX_OPEN_FILES (1L << 20)      /* --open-files upper bound */
#define CB_OPT_MIN_OPEN_FILES 16L             /* python needs a few */
#define CB_OPT_MAX_ID         0x7ffffffeL     /* --uid/--gid upper bound */
#define CB_OPT_MAX_RO_BINDS   32              /* --ro-bind repeats */
#define CB_OPT_MIN_ID_FIRST   65536UL         /* --uid-range: above system, user, nobody ids */

/* ---- buffers, named for what they hold ---------------------------------- */
#define CB_PROC_PATH_MAX    64  /* "/proc/<pid>/<file>" */
#define CB_DEV_PATH_MAX     64  /* "/dev/<node>" */
#define CB_CGROUP_NAME_MAX  64  /* a group's name: "cellblock-k<pid>-<start>" */
#define CB_CGROUP_VALUE_MAX 64  /* one value written to or read from a cgroup file */
#define CB_CGROUP_EVENTS_MAX 256 /* bytes of memory.events read (its six counters) */
#define CB_MOUNT_OPTS_MAX   128 /* the options of one tmpfs mount */
#define CB_DESC_PART_MAX    128 /* one part of the isolation description */

/* ---- launcher fds and runner ------------------------------------------ */
#define CB_FD_EVENT           3                              /* event socket, kept by the runner */
#define CB_FD_REPORT          4                              /* report socket, launcher only */
#define CB_FD_LAUNCHER_DEBUG  5 /* the debugger's channel as the launcher gets it */
#define CB_FD_DEBUG           4 /* ... and as the runner has it (after the report socket went) */
#define CB_RUNNER_ARGC_MAX    8                              /* python -I -u FILE NULL */
#define CB_ENV_MAX            48                             /* entries of the runner's env */
#define CB_ENV_ENTRY_MAX      512                            /* bytes of one env entry */
#define CB_ENV_NAME_MAX       128                            /* --env: bytes of a NAME */
#define CB_ENV_PARENT_MAX     (2u << 20)                     /* --env NAME: environ bytes read */
#define CB_REPORT_PUMP_MAX    256                            /* log datagrams relayed per pump */
#define CB_REAP_LOOP_MAX      4096                           /* waitpid(WNOHANG) per SIGCHLD */
#define CB_WORKDIR_TEMPLATE   "/tmp/cellblock-XXXXXX"        /* --sandbox none workdir */
#define CB_RMTREE_DEPTH_MAX   64                             /* rm -r recursion bound */
#define CB_SANDBOX_PATH       "/usr/local/bin:/usr/bin:/bin" /* runner's PATH */
#define CB_SANDBOX_LANG       "C.UTF-8"                      /* LANG and LC_ALL */
#define CB_SANDBOX_USER       "user"                         /* USER and passwd name */
#define CB_SANDBOX_HOSTNAME   "cellblock"                    /* uts ns hostname */
#define CB_SANDBOX_IPYTHONDIR "/tmp/.ipython"                /* IPython's profile dir */

/* ---- per-sandbox host ids (isolate/idpool.h) -------------------------- */
/* Default range: 0x70000000, the first id above systemd's container range
 * (524288-1879048191) and below 2^31, 65536 ids: far from real users, from
 * /etc/subuid allocations (100000+) and from nobody (65534). */
#define CB_SANDBOX_ID_FIRST 1879048192UL          /* --uid-range FIRST */
#define CB_SANDBOX_ID_COUNT 65536UL               /* --uid-range COUNT */
#define CB_SANDBOX_ID_RANGE "1879048192:65536"    /* the two above, as the flag's default */
#define CB_SANDBOX_ID_DIR   "/run/cellblock/uids" /* lock files, one per id in use (root) */

#define CB_USERNS_MOUNTINFO_MAX (256u << 10) /* bytes of /proc/self/mountinfo read */
#define CB_CHROOT_UP_MAX        4096         /* ".." steps to a chroot's real root */

/* ---- sandbox filesystem ------------------------------------------------ */
#define CB_SANDBOX_HOME           "/home/user"            /* cwd and HOME in the sandbox */
#define CB_SANDBOX_RUNNER_DIR     "/opt/cellblock/runner" /* ro tmpfs copy of the runner dir */
#define CB_SANDBOX_STAGE          "/tmp"                  /* host dir the staging tmpfs covers */
#define CB_SANDBOX_NEWROOT        "newroot"               /* inside the staging tmpfs */
#define CB_SANDBOX_OLDROOT        "oldroot"               /* old root while building */
#define CB_SANDBOX_MOUNTS_MAX     256                     /* mount plan entries (microvm: two plans, a copy op per runner file) */
#define CB_SANDBOX_COPY_DEPTH     2                       /* runner copy: subdir levels */
#define CB_SANDBOX_COPY_FILES_MAX 64                      /* runner copy: files */
#define CB_SANDBOX_COPY_BYTES_MAX (8u << 20)              /* runner copy: bytes in all */
#define CB_SANDBOX_COPY_FD_BYTES_MAX (64u << 20) /* copied host files (a guest kernel) */
#define CB_SANDBOX_COPY_SLACK_KB  64                      /* runner tmpfs beyond its files */
#define CB_SANDBOX_FILE_MAX       4096                    /* synthesized /etc file bytes */
#define CB_SANDBOX_TMPFS_INODES   65536                   /* nr_inodes of each writable tmpfs */
#define CB_SANDBOX_ROOT_TMPFS_KB  1024                    /* the read-only root tmpfs */
#define CB_SANDBOX_DEV_TMPFS_KB   64                      /* /dev */
#define CB_SANDBOX_SHM_MB_MAX     256                     /* /dev/shm never above this */
#define CB_SANDBOX_MKDIR_MODE     0755                    /* mountpoints we create */

/* ---- --workdir-source: the notebook folder overlay (isolate/overlay.h) -- */
#define CB_OVERLAY_SCAN_MAX   50000       /* entries of the folder examined at start */
#define CB_OVERLAY_DEPTH_MAX  32          /* directory levels below the folder walked */
#define CB_OVERLAY_DIRENT_BUF 4096        /* getdents64 buffer per level of the walk */
#define CB_OVERLAY_UPPER_FS   "ovl-upper" /* staging: the tmpfs of upper and work */
#define CB_OVERLAY_LOWER      "ovl-lower" /* staging: the read-only folder */

/* ---- cgroups ----------------------------------------------------------- */
#define CB_CGROUP_ROOT              "/sys/fs/cgroup"      /* where controllers are mounted */
#define CB_CGROUP_NAME_PREFIX       "cellblock-"          /* every group we make */
#define CB_CGROUP_NAME_FMT          "cellblock-%s%ld-%llu" /* kind, pid, start time: */
#define CB_CGROUP_KIND_LAUNCHER     ""                     /* ... a launcher's group */
#define CB_CGROUP_KIND_KERNEL       "k"                    /* ... a kernel's parent */
#define CB_CGROUP_KIND_WARM         "w"                    /* ... a warm template's (supervisor) */
#define CB_CGROUP_LEGACY_COMM       "cellblock-launc"     /* comm of a launcher (15 chars) */
#define CB_CGROUP_CREATE_TRIES      8                     /* parent vanished: mkdir again */
#define CB_CGROUP_SWEEP_DEPTH       3                     /* kernel/launcher/stray */
#define CB_CGROUP_SWEEP_MAX         65536                 /* subdirs examined per directory */
#define CB_CGROUP_STALE_KILL_ROUNDS 50                    /* kill rounds for a stale group */
#define CB_PID_MAX                  4194304               /* PID_MAX_LIMIT on 64-bit */
#define CB_CGROUP_CPU_PERIOD_US     100000L               /* cfs period */
#define CB_CGROUP_KILL_ROUNDS       100                   /* freeze/kill/thaw attempts */
#define CB_CGROUP_FREEZE_WAIT_US    1000                  /* between FREEZING polls */
#define CB_CGROUP_FREEZE_POLLS      1000                  /* polls before giving up */
#define CB_CGROUP_RMDIR_TRIES       200                   /* rmdir retries while emptying */
#define CB_CGROUP_FILE_MAX          65536                 /* bytes read from a cgroup file */
#define CB_CGROUP_CONTROLLERS_MAX   8                     /* v1 hierarchies we use */
#define CB_CGROUP_LEAF              "cellblock-leaf"      /* v2: where a delegated group's own
                                                             processes go (cgroup_v2.c) */
#define CB_CGROUP_VACATE_ROUNDS     16                    /* v2: rounds of moving them there */
#define CB_CGROUP_XATTR_MAX         8                     /* bytes of a delegate xattr read */

/* ---- teardown ----------------------------------------------------------- */
#define CB_TERM_GRACE_MS 200 /* SIGTERM: wait for init before rm */

#endif
