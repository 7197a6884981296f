/*
 * criu_restore.h - the launcher's restore of a parked copy's CRIU image into
 * a new --pausable sandbox (docs/SNAPSHOTS.md "Pause, resume and fork
 * (namespaces)"; launcher/criu_dump.h made the image, launcher/criu_img.h
 * edited it, launcher/sandbox_criu.c drives the three).
 *
 * The new sandbox is made as any other (its user namespace first, uid 0 and
 * the sandbox's id mapped to two fresh host ids; its other namespaces, its
 * cgroup and limits, its mounts), and its init has made the checkpoint's
 * park fifo again and holds it (the agent's "import").  criu then runs as
 * root in every namespace of the sandbox but its user namespace, in the
 * sandbox's cgroup, under no_new_privs and a Landlock domain that lets it
 * write only where the runner may (and the copy's park fifo, its log and
 * work directory, /proc/self/loginuid), and restores the copy with
 * --join-ns user (the copy joins the sandbox's user namespace before
 * anything of the image is restored into it: the image's credentials,
 * 65534 inside, are the sandbox's runner's), as criu's child, which the
 * sandbox's init adopts when criu exits.  criu's main process keeps the
 * initial namespace's CAP_NET_ADMIN for its fd store (a restore by the
 * sandbox's own root fails in 3.17 for that).  The copy's pipes and sockets
 * (the image's fds.txt) are handed to criu as the new sandbox's ends, by
 * name (--inherit-fd fd[N]:NAME).
 */
#ifndef CB_CRIU_RESTORE_H
#define CB_CRIU_RESTORE_H

#include <stddef.h>
#include <sys/types.h>

#include "launcher/criu_dump.h"

#define CB_CRIU_CGROUP_FDS  4 /* cgroup.procs files the restorer joins (v1 hierarchies) */
#define CB_CRIU_RESTORE_LOG "restore.log" /* criu's log, in the work directory */
#define CB_CRIU_INHERIT_FD0 100           /* the first fd number criu gets the ends at */
#define CB_CRIU_USERNS_FD   99            /* ... and the sandbox's user namespace */
#define CB_CRIU_SCRATCH_FD0 512           /* where the ends wait while they are moved */
#define CB_CRIU_FD_MAX      1023          /* a copy's fd number in fds.txt */
#define CB_CRIU_LL_MAX      16            /* Landlock directories criu may write */

typedef struct {
    int fd;                      /* our end, handed to criu */
    char name[CB_CRIU_LINK_MAX]; /* the image's name of it ("socket:[N]", "pipe:[N]") */
} cb_criu_inherit_t;

typedef struct {
    pid_t init;                           /* the new sandbox's init (a host pid) */
    int imgfd;                            /* the image directory (edited, checked) */
    int workfd;                           /* a directory of guest root's: log, work files */
    int cgroup_procs[CB_CRIU_CGROUP_FDS]; /* the sandbox's cgroup.procs files, -1 unused */
    size_t n_inherit;                     /* the ends */
    cb_criu_inherit_t inherit[CB_CRIU_FDS_MAX];
    const char *const *rw_dirs;  /* Landlock: where criu may write (NULL-ended) */
    const char *const *rw_files; /* ... and single files */
    uid_t uid;                   /* the restored runner's host uid and gid, criu's real */
    gid_t gid;                   /* ids where it needs them (cb_criu_real_ids); -1: none */
} cb_criu_restore_t;

/* Reads the image's fds.txt into names (the copy's fd numbers and the names
 * criu knows their objects by).  Returns how many, -1 with why. */
int cb_criu_read_fds(int imgfd, int *fds, char (*names)[CB_CRIU_LINK_MAX], size_t max, char *why,
                     size_t why_len);

/* criu's command line for r, in a (cleared first); the fds it names are the
 * ones the restorer moves them to.  0 ok, -1 when it does not fit. */
int cb_criu_restore_argv(const cb_criu_restore_t *r, cb_tier_argv_t *a);

/* Restores the image into the sandbox of r->init.  Root only.  0 ok (the
 * copy runs, criu's child until criu exited, then init's); -1 with why. */
int cb_criu_restore(const cb_criu_restore_t *r, char *why, size_t why_len);

#endif
