/*
 * sandbox_criu.c - pausing a --pausable namespaces sandbox into an image with
 * CRIU, and resuming one from it: the launcher's side (docs/SNAPSHOTS.md
 * "Pause, resume and fork").
 *
 * Pause: the kernel has taken a checkpoint in place, CKPT, whose copy has
 * parked, and sends "pause IMG CKPT" with the image directory.
 *   1. IMG/.stage (0700, the runner's host uid: init, the agent, runs as
 *      that uid) gets the checkpoint's files from the agent ("export")
 *   2. they are copied, as root, into IMG/home and IMG/tmp; the stage goes
 *   3. the copy must hold no pipe or socket but its output and channels
 *      (a resumed session gets those back, nothing else), and is dumped
 *      (criu_dump.c), the dump edited for a restore into another user
 *      namespace (criu_img.c), CKPT written beside it (criu.id)
 *   4. the image is sealed and reported as any other (snapimage.c)
 * Resume (--resume-image of this tier): the sandbox is made as any
 * --pausable one, but its first runner is a placeholder that runs no code;
 * the kernel's end of the event channel gets a resync frame with a nonce of
 * ours before the kernel holds it, so the restored copy, woken with that
 * nonce, finds it first and then the kernel's resume frame.
 *   1. IMG/home and IMG/tmp are copied into a stage in the store, every
 *      entry given to the new runner's host uid; "import CKPT" + stage
 *   2. "imported": criu restores the copy (criu_restore.c) with the new
 *      sandbox's ends: the kernel's output pipes (our fds 1 and 2) and the
 *      runner's channel ends we keep
 *   3. "saved CKPT": "roll CKPT NONCE" ends the placeholder, puts the files
 *      back and wakes the copy; "rolled": "drop CKPT" (the copy the woken
 *      one parks again would hold the session's memory twice)
 * Any step that fails ends the sandbox with the reason ("fatal"): the kernel
 * refuses the resume with it, never a fresh session in its place.  The
 * agent's lines about CKPT are ours, not the kernel's.
 */
#include "launcher/sandbox_priv.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"
#include "launcher/criu_img.h"
#include "launcher/criu_pack.h"
#include "launcher/criu_restore.h"
#include "launcher/snapimage.h"
#include "tiers/snap_tree.h"

#define S_STAGE       ".stage"  /* the pause's stage, in the image directory */
#define S_STAGE_IMG   "img"     /* resume: the image's copy, in the stage */
#define S_STAGE_SWEEP 16        /* dead launchers' stages removed per resume */
#define S_ID_FILE     "criu.id" /* the image's checkpoint id */
#define S_ID_MAX      24        /* bytes of it */
#define S_CHILDREN    4096      /* bytes of init's children list read */
#define S_WHY         512       /* bytes of a reason */
#define S_RESYNC_BODY "{\"type\":\"resync\",\"nonce\":\"%s\"}"

typedef enum { S_IDLE, S_EXPORT, S_IMPORT, S_RESTORED, S_ROLLING, S_DROPPING } s_phase_t;

static struct {
    s_phase_t phase;
    long ckpt;                         /* the checkpoint we pause or resume (0: none) */
    int imgfd;                         /* pause: the image directory; resume: the verified one */
    int stagefd;                       /* the stage */
    int storefd;                       /* resume: the store (the stage's parent) */
    char stage[32];                    /* resume: the stage's name in the store */
    char img_id[CB_IMAGE_ID_HEX + 1];  /* pause: the image's id */
    char nonce[CB_SNAP_NONCE_HEX + 1]; /* resume: the wake's nonce */
} S = {.imgfd = -1, .stagefd = -1, .storefd = -1};

static const char *const s_names[2] = {"home", "tmp"};

static void s_close(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static int s_agent(cb_sandbox_t *sb, int fd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_agent(cb_sandbox_t *sb, int fd, const char *fmt, ...) {
    char line[CB_SNAP_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t) n >= sizeof line) return -1;
    return cb_sandbox_snap_command(sb, line, fd);
}

/* Copies dir from/NAME into a new to/NAME (0700, ours), for each of home, tmp. */
/* A new directory name of parent (0700), opened, and owned by the host id
 * owner (-1: ours).  -1 errno. */
static int s_new_dir(int parent, const char *name, long owner) {
    if (mkdirat(parent, name, 0700) < 0) return -1;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && owner >= 0 && fchown(fd, (uid_t) owner, (gid_t) owner) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int s_copy_trees(cb_snap_tree_t *t, int from, int to, char *why, size_t len) {
    for (int k = 0; k < 2; k++) {
        cb_autofd int src =
            openat(from, s_names[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        cb_autofd int dst = src < 0 ? -1 : s_new_dir(to, s_names[k], -1);
        if (dst < 0) {
            cb_fmt_why(why, len, "the image's %s: %s", s_names[k], strerror(errno));
            return -1;
        }
        if (cb_snap_tree_copy(t, src, dst) < 0) {
            cb_fmt_why(why, len, "copying the image's %s: %s", s_names[k], t->why);
            return -1;
        }
    }
    return 0;
}

/* Removes the directory name of parent and everything in it. */
static void s_remove_tree(int parent, const char *name) {
    cb_autofd int d = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cb_snap_tree_t t = {0};
    if (d >= 0) (void) cb_snap_tree_clear(&t, d);
    (void) unlinkat(parent, name, AT_REMOVEDIR);
}

/* ---- pause ---------------------------------------------------------------------------- */

static void s_pause_end(void) {
    if (S.stagefd >= 0) s_remove_tree(S.imgfd, S_STAGE);
    s_close(&S.stagefd);
    s_close(&S.imgfd);
    S.phase = S_IDLE;
    S.ckpt = 0;
}

static void s_pause_fail(const char *why) {
    LOG_E("pause: %s", why);
    (void) cb_report("snap fail 0 %s", why);
    s_pause_end();
    cb_snapimage_abandon();
}

/* A pause refused before anything was done: its image's fd goes too. */
static int s_refuse(const char *why) {
    (void) cb_report("snap fail 0 %s", why);
    cb_snapimage_abandon();
    return 0;
}

int cb_sandbox_criu_pause(cb_sandbox_t *sb, const char *line, int fd) {
    char why[S_WHY];
    long ckpt = 0;
    char img[CB_IMAGE_ID_HEX + 1];
    if (sscanf(line, "pause " CB_IMAGE_ID_SCAN " %ld", img, &ckpt) != 2 || ckpt <= 0 || fd < 0)
        return s_refuse("a pause of this tier names an image and a checkpoint");
    if (S.phase != S_IDLE) { /* the one in progress keeps its image */
        (void) cb_report("snap fail 0 another pause or resume is in progress");
        return 0;
    }
    if (!sb->opts->pausable || !sb->root)
        return s_refuse("only a --pausable sandbox of a root launcher can be paused");
    if (cb_criu_usable(why, sizeof why) < 0) return s_refuse(why);
    S.ckpt = ckpt;
    memcpy(S.img_id, img, sizeof S.img_id);
    S.imgfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    (void) unlinkat(S.imgfd, S_STAGE, AT_REMOVEDIR);
    if (S.imgfd < 0 || (S.stagefd = s_new_dir(S.imgfd, S_STAGE, (long) sb->lease.id)) < 0) {
        cb_fmt_why(why, sizeof why, "making the image's stage: %s", strerror(errno));
        s_pause_fail(why);
        return 0;
    }
    S.phase = S_EXPORT;
    if (s_agent(sb, S.stagefd, "export %ld", ckpt) < 0) {
        s_pause_fail("the sandbox's init did not take the export");
        return 0;
    }
    LOG_I("pause into image %s: exporting checkpoint %ld", S.img_id, ckpt);
    return 0;
}

/* The host pid of init's child whose pid in the sandbox is vpid, -1 if none. */
static pid_t s_child_of_init(pid_t init, pid_t vpid, cb_criu_target_t *t) {
    char path[64], buf[S_CHILDREN], why[S_WHY];
    (void) snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", (long) init, (long) init);
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *save = NULL;
    for (char *p = strtok_r(buf, " \n", &save); p != NULL; p = strtok_r(NULL, " \n", &save)) {
        pid_t c = (pid_t) strtol(p, NULL, 10);
        if (c > 0 && cb_criu_target(c, t, why, sizeof why) == 0 && t->vpid == vpid) return c;
    }
    return -1;
}

/* Which of the copy's fds a resumed session gets back: its output, its channels. */
static bool s_end_we_give(int fd) {
    return fd == STDOUT_FILENO || fd == STDERR_FILENO || fd == CB_FD_EVENT || fd == CB_FD_DEBUG;
}

static void s_pause_exported(cb_sandbox_t *sb, const char *rest) {
    char why[S_WHY] = "";
    unsigned long long bytes = 0;
    unsigned files = 0;
    int vpid = 0;
    cb_snap_tree_t t = {0};
    cb_criu_target_t tg;
    if (sscanf(rest, "%llu %u %d", &bytes, &files, &vpid) != 3 || vpid <= 0) {
        s_pause_fail("the sandbox's init did not say which process holds the checkpoint");
        return;
    }
    if (s_copy_trees(&t, S.stagefd, S.imgfd, why, sizeof why) < 0) {
        s_pause_fail(why);
        return;
    }
    s_remove_tree(S.imgfd, S_STAGE);
    s_close(&S.stagefd);
    pid_t copy = s_child_of_init(sb->init, (pid_t) vpid, &tg);
    if (copy < 0) {
        s_pause_fail("the checkpoint's copy is gone");
        return;
    }
    for (size_t i = 0; i < tg.n_fds; i++)
        if (!s_end_we_give(tg.fd[i])) {
            cb_fmt_why(why, sizeof why,
                       "the session holds fd %d (%s) open, which a resumed session could not "
                       "get back: close it (or end what uses it) and pause again",
                       tg.fd[i], tg.link[i]);
            s_pause_fail(why);
            return;
        }
    size_t n_ids = 0;
    char id[S_ID_MAX];
    int idlen = snprintf(id, sizeof id, "%ld\n", S.ckpt);
    uint64_t raw = 0, packed = 0;
    if (cb_criu_dump(sb->init, copy, S.imgfd, why, sizeof why) < 0 ||
        cb_criu_img_join_userns(S.imgfd, &n_ids, why, sizeof why) < 0 ||
        cb_criu_pack(S.imgfd, &raw, &packed, why, sizeof why) < 0) {
        s_pause_fail(why);
        return;
    }
    LOG_I("pause: the session's memory pages compressed from %llu to %llu bytes",
          (unsigned long long) raw, (unsigned long long) packed);
    cb_autofd int f = openat(S.imgfd, S_ID_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f < 0 || cb_write_all(f, id, (size_t) idlen) < 0) {
        cb_fmt_why(why, sizeof why, "writing the image's %s: %s", S_ID_FILE, strerror(errno));
        s_pause_fail(why);
        return;
    }
    LOG_I("pause: checkpoint %ld dumped (%llu bytes of files, %u entries)", S.ckpt, bytes, files);
    s_pause_end();
    /* sealed and reported; then the sandbox ends, as a paused gVisor one does
     * (its memory, uid lease and cgroup freed: the image holds the session) */
    if (cb_snapimage_sealed(sb->opts, S.img_id) == 0) cb_sandbox_kill(sb);
}

/* ---- resume --------------------------------------------------------------------------- */

bool cb_sandbox_pauses_by_criu(const cb_sandbox_t *sb) { return sb != NULL && sb->tier == NULL; }

bool cb_sb_criu_resuming(const cb_sandbox_t *sb) {
    return sb->opts->resume_image != NULL && sb->tier == NULL;
}

static void s_resume_fail(cb_sandbox_t *sb, const char *why) {
    LOG_E("resume: %s", why);
    (void) cb_report("fatal the image could not be restored: %s", why);
    if (S.stagefd >= 0) s_remove_tree(S.storefd, S.stage);
    s_close(&S.stagefd);
    s_close(&S.storefd);
    s_close(&S.imgfd);
    S.phase = S_IDLE;
    cb_sandbox_kill(sb);
}

int cb_sb_criu_resync(cb_sandbox_t *sb, int kernel_end) {
    if (!cb_sb_criu_resuming(sb)) return 0;
    unsigned char raw[CB_SNAP_NONCE_HEX / 2];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(S.nonce, sizeof S.nonce, raw, sizeof raw);
    char body[96];
    int n = snprintf(body, sizeof body, S_RESYNC_BODY, S.nonce);
    unsigned char frame[4 + sizeof body];
    frame[0] = 0, frame[1] = 0, frame[2] = (unsigned char) (n >> 8), frame[3] = (unsigned char) n;
    memcpy(frame + 4, body, (size_t) n);
    return cb_write_all(kernel_end, frame, 4 + (size_t) n);
}

/* Stages of launchers that died while resuming (their pid gone, or ours). */
static void s_sweep_stages(int store) {
    cb_autofd int d = fcntl(store, F_DUPFD_CLOEXEC, 3);
    DIR *dir = d < 0 ? NULL : fdopendir(d);
    if (dir == NULL) return;
    d = -1; /* the stream has it */
    struct dirent *e;
    char name[S_STAGE_SWEEP][sizeof S.stage];
    size_t n = 0;
    while (n < S_STAGE_SWEEP && (e = readdir(dir)) != NULL) {
        long pid = 0;
        char end = 0;
        if (sscanf(e->d_name, S_STAGE "-%ld%c", &pid, &end) == 1 && pid > 0 &&
            (pid == (long) getpid() || (kill((pid_t) pid, 0) < 0 && errno == ESRCH)))
            (void) snprintf(name[n++], sizeof name[0], "%.*s", (int) sizeof name[0] - 1, e->d_name);
    }
    for (size_t i = 0; i < n; i++)
        s_remove_tree(dirfd(dir), name[i]);
    closedir(dir);
}

/* The image's checkpoint id (criu.id, sealed with the rest). */
static long s_read_id(int imgfd) {
    char buf[S_ID_MAX] = "";
    cb_autofd int f = openat(imgfd, S_ID_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = f < 0 ? -1 : read(f, buf, sizeof buf - 1);
    char *end = NULL;
    long id = n > 0 ? strtol(buf, &end, 10) : 0;
    return end != NULL && *end == '\n' && id > 0 ? id : -1;
}

void cb_sb_criu_resume_begin(cb_sandbox_t *sb, int imgfd) {
    char why[S_WHY] = "";
    S.imgfd = imgfd;
    if (!cb_sb_criu_resuming(sb) || imgfd < 0) return;
    if ((S.ckpt = s_read_id(imgfd)) < 0) {
        s_resume_fail(sb, "the image names no checkpoint (criu.id)");
        return;
    }
    (void) snprintf(S.stage, sizeof S.stage, S_STAGE "-%ld", (long) getpid());
    S.storefd = openat(imgfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (S.storefd >= 0) s_sweep_stages(S.storefd);
    if (S.storefd < 0 || (S.stagefd = s_new_dir(S.storefd, S.stage, (long) sb->lease.id)) < 0) {
        cb_fmt_why(why, sizeof why, "making a stage in the image store: %s", strerror(errno));
        s_resume_fail(sb, why);
        return;
    }
    /* the whole image, copied: the restored task reads some of criu's files
     * itself, once it is in the sandbox's user namespace (as the runner's
     * host uid), and the image stays 0600 root's for every other resume;
     * its memory pages are written back raw (criu_pack.h), bounded as the
     * image itself is */
    cb_snap_tree_t t = {.as = true,
                        .as_uid = (uid_t) sb->lease.id,
                        .as_gid = (gid_t) sb->lease.id,
                        .skip_suffix = CB_CRIU_PACK_SUFFIX};
    uint64_t pages = 0;
    cb_autofd int copy = s_new_dir(S.stagefd, S_STAGE_IMG, (long) sb->lease.id);
    if (copy < 0 || cb_snap_tree_copy(&t, imgfd, copy) < 0) {
        cb_fmt_why(why, sizeof why, "copying the image for criu: %s",
                   t.why[0] ? t.why : strerror(errno));
        s_resume_fail(sb, why);
        return;
    }
    if (cb_criu_unpack(imgfd, copy, (uid_t) sb->lease.id, (gid_t) sb->lease.id,
                       cb_snapimage_max_bytes(sb->opts), &pages, why, sizeof why) < 0) {
        s_resume_fail(sb, why);
        return;
    }
    t.bytes += pages;
    s_close(&S.imgfd);
    S.imgfd = copy; /* from here on, criu and the agent read the copy */
    copy = -1;
    S.phase = S_IMPORT;
    if (s_agent(sb, S.imgfd, "import %ld", S.ckpt) < 0)
        s_resume_fail(sb, "init did not take the import");
    LOG_I("resume: checkpoint %ld's files staged (%llu bytes)", S.ckpt,
          (unsigned long long) t.bytes);
}

/* The new ends of the copy's pipes and sockets, by the image's fds.txt. */
static int s_inherit(cb_sandbox_t *sb, cb_criu_restore_t *r, char *why, size_t len) {
    int fds[CB_CRIU_FDS_MAX];
    char names[CB_CRIU_FDS_MAX][CB_CRIU_LINK_MAX];
    int n = cb_criu_read_fds(r->imgfd, fds, names, CB_CRIU_FDS_MAX, why, len);
    for (int i = 0; i < n; i++) {
        int end = fds[i] == STDOUT_FILENO || fds[i] == STDERR_FILENO ? fds[i]
                  : fds[i] == CB_FD_EVENT ? sb->chan_keep[CB_SB_CHAN_EVENT]
                  : fds[i] == CB_FD_DEBUG ? sb->chan_keep[CB_SB_CHAN_DEBUG]
                                          : -1;
        struct stat st;
        if (end < 0 || fstat(end, &st) < 0) {
            cb_fmt_why(why, len, "the image's fd %d (%s) has no end in this sandbox", fds[i],
                       names[i]);
            return -1;
        }
        /* criu reopens a pipe through /proc/self/fd: its owner must be mapped
         * in the sandbox's user namespace */
        if (S_ISFIFO(st.st_mode) && fchown(end, (uid_t) sb->lease.id, (gid_t) sb->lease.id) < 0) {
            cb_fmt_why(why, len, "giving the output pipe to the sandbox: %s", strerror(errno));
            return -1;
        }
        r->inherit[r->n_inherit].fd = end;
        memcpy(r->inherit[r->n_inherit++].name, names[i], CB_CRIU_LINK_MAX);
    }
    return n < 0 ? -1 : 0;
}

static void s_restore(cb_sandbox_t *sb) {
    /* criu's Landlock domain is the restored runner's too (CRIU restores no
     * Landlock domain, and the restored task is criu's fork): the runner's
     * own places, and of the park directory the copy's fifo alone (criu
     * opens it for writing too), never the directory (only init may make or
     * wake a parked copy); the work directory and loginuid are out of the
     * runner's reach (no path leads to the one, a user namespace may not
     * write the other) */
    static const char *const dirs[] = {"/tmp", CB_SANDBOX_HOME, "/dev/shm", NULL};
    char fifo[sizeof CB_SNAP_PARK_DIR + S_ID_MAX];
    (void) snprintf(fifo, sizeof fifo, CB_SNAP_PARK_DIR "/%ld", S.ckpt);
    const char *const files[] = {"/dev/null", "/proc/self/loginuid", fifo, NULL};
    char why[S_WHY] = "";
    cb_criu_restore_t r = {.init = sb->init,
                           .rw_dirs = dirs,
                           .rw_files = files,
                           .uid = sb->root ? (uid_t) sb->lease.id : (uid_t) -1,
                           .gid = sb->root ? (gid_t) sb->lease.id : (gid_t) -1};
    for (int i = 0; i < CB_CRIU_CGROUP_FDS; i++)
        r.cgroup_procs[i] = -1;
    /* criu names the image's and work directory's fds by number, below its own */
    r.imgfd = fcntl(S.imgfd, F_DUPFD_CLOEXEC, 3);
    r.workfd = fcntl(S.stagefd, F_DUPFD_CLOEXEC, 3);
    int rc = -1;
    if (sb->cg != NULL && cb_cgroup_procs_fds(sb->cg, r.cgroup_procs, CB_CRIU_CGROUP_FDS) < 0)
        cb_fmt_why(why, sizeof why, "the sandbox's cgroup: %s", strerror(errno));
    else if (r.imgfd >= 0 && r.workfd >= 0 && s_inherit(sb, &r, why, sizeof why) == 0)
        rc = cb_criu_restore(&r, why, sizeof why);
    for (int i = 0; i < CB_CRIU_CGROUP_FDS; i++)
        s_close(&r.cgroup_procs[i]);
    s_close(&r.imgfd);
    s_close(&r.workfd);
    if (rc < 0) {
        s_resume_fail(sb, why[0] ? why : "criu restore failed");
        return;
    }
    S.phase = S_RESTORED; /* the agent says "saved" once it has taken the copy */
    LOG_I("resume: checkpoint %ld's copy restored", S.ckpt);
}

/* ---- the agent's lines ------------------------------------------------------------------ */

bool cb_sb_criu_line(cb_sandbox_t *sb, const char *line) {
    char verb[16] = "";
    long id = 0;
    int off = 0;
    if (S.ckpt <= 0 || sscanf(line, "%15s %ld %n", verb, &id, &off) < 2 || id != S.ckpt)
        return false;
    const char *rest = line + off;
    bool failed =
        strcmp(verb, "fail") == 0 || strcmp(verb, "lost") == 0 || strcmp(verb, "refused") == 0;
    char why[S_WHY];
    switch (S.phase) {
    case S_EXPORT:
        if (failed) {
            cb_fmt_why(why, sizeof why, "exporting the checkpoint's files: %.300s", rest);
            s_pause_fail(why);
        } else if (strcmp(verb, "exported") == 0) {
            s_pause_exported(sb, rest);
        }
        return true;
    case S_IMPORT:
    case S_RESTORED:
    case S_ROLLING:
        if (failed) {
            cb_fmt_why(why, sizeof why, "the sandbox's init: %.300s", rest);
            s_resume_fail(sb, why);
        } else if (strcmp(verb, "imported") == 0 && S.phase == S_IMPORT) {
            s_restore(sb);
        } else if (strcmp(verb, "saved") == 0 && S.phase == S_RESTORED) {
            S.phase = S_ROLLING;
            if (s_agent(sb, -1, "roll %ld %s", S.ckpt, S.nonce) < 0)
                s_resume_fail(sb, "init did not take the wake");
        } else if (strcmp(verb, "rolled") == 0 && S.phase == S_ROLLING) {
            LOG_I("resume: checkpoint %ld's copy woken: it is the runner", S.ckpt);
            s_remove_tree(S.storefd, S.stage);
            s_close(&S.stagefd);
            s_close(&S.storefd);
            s_close(&S.imgfd);
            S.phase = S_DROPPING;
            (void) s_agent(sb, -1, "drop %ld", S.ckpt);
        }
        return true;
    case S_DROPPING:
        if (strcmp(verb, "dropped") == 0 || failed) S.phase = S_IDLE, S.ckpt = 0;
        return true; /* and its copy's "kept" */
    default: return false;
    }
}
