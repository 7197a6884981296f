/*
 * mount.h - the sandbox's filesystem: a plan built by the launcher, run by
 * the sandbox's init in its new mount namespace.
 *
 * The plan names every host path by its resolved real path, so nothing is
 * looked up through a symlink after the old root moves.  Running it is
 * async-signal-safe (system calls on plan memory only).
 */
#ifndef CB_MOUNT_H
#define CB_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "isolate/sandbox_limits.h"

typedef enum {
    CB_MNT_DIR,      /* mkdir -p dst */
    CB_MNT_BIND_RO,  /* bind src read-only, nosuid, nodev (recursively) */
    CB_MNT_BIND_DEV, /* bind a device node src (rw, nosuid, noexec) */
    CB_MNT_TMPFS,    /* tmpfs at dst with options data */
    CB_MNT_SYMLINK,  /* symlink dst -> src */
    CB_MNT_FILE,     /* regular file dst with content data, mode */
    CB_MNT_PROC,     /* new procfs */
    CB_MNT_RDONLY,   /* remount dst (already a mount) read-only */
    CB_MNT_MASK,     /* hide dst: /dev/null over a file, an empty read-only tmpfs over a dir */
    CB_MNT_RO_SELF,  /* bind dst onto itself, read-only (a subtree of /proc) */
    CB_MNT_BLOB,     /* regular file dst with data_len bytes of data, mode and mtime */
    CB_MNT_OVERLAY,  /* a host folder overlaid at dst (isolate/overlay.h) */
    CB_MNT_COPY,     /* regular file dst copied from the host file open at fd: data_len bytes */
} cb_mount_kind_t;

typedef struct {
    cb_mount_kind_t kind;  /* what to do */
    char *src;             /* "/oldroot/<realpath>" or symlink target; owned */
    char *dst;             /* "/newroot/<path>"; owned */
    char *data;            /* tmpfs options or file content; owned */
    unsigned mode;         /* file/dir mode */
    bool src_is_dir;       /* BIND_*: the source is a directory */
    bool keep_bind;        /* BIND_RO: bind the host's mount as it is (see cb_mount_run) */
    size_t data_len;       /* BLOB: bytes of data */
    struct timespec mtime; /* BLOB: modification time kept from the host (pyc checks it) */
    int fd;                /* OVERLAY: detached mount of the lower (owned), or -1: bind src;
                            * COPY: the host file, opened by the launcher (owned) */
    uid_t uid;             /* OVERLAY: owner of the upper (the sandbox's id inside) */
    gid_t gid;             /* OVERLAY: its group */
} cb_mount_op_t;

typedef struct {
    cb_mount_op_t ops[CB_SANDBOX_MOUNTS_MAX]; /* in execution order */
    size_t n;                                 /* used entries */
    char stage[CB_PATH_MAX];                  /* host dir the staging tmpfs covers */
} cb_mount_plan_t;

/* Plan building (launcher side; these allocate and may log). */
void cb_mount_plan_init(cb_mount_plan_t *p);
/* A new zeroed op of kind at sandbox path (fd -1), for planners in other
 * files (overlay.c).  NULL with errno (ENOSPC: the plan is full). */
cb_mount_op_t *cb_mount_plan_add(cb_mount_plan_t *p, cb_mount_kind_t kind, const char *sandbox);
void cb_mount_plan_fini(cb_mount_plan_t *p);
/* Bind host path (resolved with realpath) at sandbox path, read-only.
 * Symlinked host paths (merged /usr: /lib -> usr/lib) become symlinks in
 * the sandbox when keep_symlink.  optional: a missing host path is fine.
 * 0 ok (or skipped), -1 errno. */
int cb_mount_plan_bind(cb_mount_plan_t *p, const char *host, const char *sandbox, bool optional,
                       bool keep_symlink);
int cb_mount_plan_dev(cb_mount_plan_t *p, const char *name); /* /dev/<name> */
int cb_mount_plan_tmpfs(cb_mount_plan_t *p, const char *sandbox, const char *options);
int cb_mount_plan_symlink(cb_mount_plan_t *p, const char *target, const char *sandbox);
int cb_mount_plan_file(cb_mount_plan_t *p, const char *sandbox, const char *content, unsigned mode);
int cb_mount_plan_dir(cb_mount_plan_t *p, const char *sandbox, unsigned mode);
int cb_mount_plan_proc(cb_mount_plan_t *p, const char *sandbox);
int cb_mount_plan_rdonly(cb_mount_plan_t *p, const char *sandbox);
/* After cb_mount_plan_proc(p, proc) and the /dev nodes: hide what /proc
 * tells of the host, as container runtimes do (runc's maskedPaths and
 * readonlyPaths, plus the boot command line, kernel symbols and modules),
 * and make /proc/sys and friends read-only.  Entries this kernel lacks are
 * skipped when the plan runs.  0 ok, -1 errno. */
int cb_mount_plan_proc_masks(cb_mount_plan_t *p, const char *proc);
/* Copies the regular files of host_dir (and of its subdirectories, up to
 * CB_SANDBOX_COPY_DEPTH) into a fresh tmpfs at sandbox, read-only
 * afterwards: the sandbox sees the files, and nothing of where they live on
 * the host (a bind would name the host path in /proc/self/mountinfo).
 * Modification times are kept.  Symlinks and hidden entries are skipped;
 * at most CB_SANDBOX_COPY_FILES_MAX files and CB_SANDBOX_COPY_BYTES_MAX
 * bytes.  0 ok, -1 errno (E2BIG: over a bound). */
int cb_mount_plan_copy_dir(cb_mount_plan_t *p, const char *host_dir, const char *sandbox);
/* Copies n host files (regular, at most CB_SANDBOX_COPY_FILES_MAX of them and
 * CB_SANDBOX_COPY_FD_BYTES_MAX bytes in all) into a fresh tmpfs at sandbox,
 * each under its base name, read-only afterwards.  The files are opened now,
 * by the launcher, and copied when the plan runs: a sandbox whose ids cannot
 * reach the host path (an install under a 0700 home) still gets them, and no
 * byte is held in the launcher's memory.  0 ok, -1 errno (E2BIG: over a bound). */
int cb_mount_plan_copy_files(cb_mount_plan_t *p, const char *sandbox, const char *const *hosts,
                             size_t n);

/* Async-signal-safe: make / private, build the new root from the plan,
 * pivot into it, detach the old root, make / read-only.
 *
 * What /proc/self/mountinfo then shows of the host: nothing that a mount of
 * the host's own would print.  Every tmpfs (the root, /dev, /tmp, home, ...)
 * is the upper layer of an overlay, so the tmpfs's options, with the
 * mounter's host uid in uid=/gid=, are never printed; a read-only bind of a
 * host directory is an overlay of it (a file: a bind out of an overlay of
 * its directory), so neither the host's disk, its device number nor its
 * superblock options are.  They all show as "overlay cellblock" with
 * options naming only staging paths.  Where overlayfs cannot serve (a
 * kernel without it in user namespaces, a host directory with mounts below
 * it, a file that is a mount point itself: keep_bind), the mount is made as
 * before, which works and shows the host's line.
 *
 * When the current root is not a mount point (a chroot: pivot_root says
 * EINVAL), the old root is bind-mounted into the staging tmpfs and we
 * chroot there first, so the staging tmpfs is a real mount root and the
 * final pivot_root works.
 * 0 ok; -1 errno, *failed = index of the failing op (-1: a fixed step). */
int cb_mount_run(const cb_mount_plan_t *p, int *failed);

#endif
