/*
 * snap_agent.c - checkpoints in place, the trusted side inside the sandbox
 * (see snap_agent.h and docs/SNAPSHOTS.md).
 *
 * Store layout: <store>/<ID>/<k>/... with k = 0 for the home and 1 for /tmp.
 * The store is a directory the runner cannot reach or write: in the
 * namespaces tier a tmpfs that init mounted with the new mount API and never
 * attached anywhere (only init's fd leads to it, and init is not dumpable);
 * in the other tiers a root-only directory of a tmpfs the runner's uid
 * cannot enter.  Its size is the session's --disk and its pages are charged
 * to the session's memory cgroup (init belongs to it).
 *
 * The park fifos are in CB_SNAP_PARK_DIR, which the runner can read (a
 * parked copy opens its fifo for reading) but not write: Landlock (the
 * namespaces tier) or ownership by root (the other tiers).  So only the
 * agent can wake a parked copy, and a stopped child holding fifo ID open is
 * the fork the kernel asked for (or the sandbox's code imitating one, which
 * gains it nothing: it is the session's own state).
 */
#include "tiers/snap_agent.h"
#include "tiers/snap_agent_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tiers/snap_proc.h"
#include "tiers/snap_tree.h"

int64_t cb_snap_now_ms_(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cb_snap_say_(cb_snap_agent_t *a, const char *fmt, ...) {
    char line[CB_SNAP_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *c = line; *c; c++) /* one line, printable: reasons quote file names */
        if ((unsigned char) *c < 0x20 || (unsigned char) *c == 0x7f) *c = '?';
    if (a->say) a->say(a->ud, line);
}

/* The slot of checkpoint id (a doomed one is no checkpoint), or a free one for id 0. */
cb_snap_slot_t *cb_snap_find_(cb_snap_agent_t *a, long id) {
    for (int i = 0; i < CB_SNAP_SLOTS; i++)
        if (a->slot[i].id == id && !a->slot[i].doomed) return &a->slot[i];
    return NULL;
}

static cb_snap_slot_t *s_by_pid(cb_snap_agent_t *a, pid_t pid) {
    for (int i = 0; pid > 0 && i < CB_SNAP_SLOTS; i++)
        if (a->slot[i].id != 0 && a->slot[i].pid == pid) return &a->slot[i];
    return NULL;
}

/* The store's root, a new fd (the caller closes it), -1 with errno. */
static int s_store_root(const cb_snap_agent_t *a) {
    if (a->store >= 0) return fcntl(a->store, F_DUPFD_CLOEXEC, 0);
    if (a->store_path == NULL) {
        errno = ENOENT;
        return -1;
    }
    return open(a->store_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The directory of checkpoint id in the store, opened (creating it). */
int cb_snap_store_dir_(cb_snap_agent_t *a, long id, bool create) {
    char name[24];
    (void) snprintf(name, sizeof name, "%ld", id);
    int root = s_store_root(a);
    if (root < 0) return -1;
    int d = create && mkdirat(root, name, 0700) < 0
                ? -1
                : openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(root);
    errno = e;
    return d;
}

static void s_store_remove(cb_snap_agent_t *a, long id) {
    char name[24];
    (void) snprintf(name, sizeof name, "%ld", id);
    int d = cb_snap_store_dir_(a, id, false);
    if (d < 0) return;
    cb_snap_tree_t t = {.own = a->root};
    (void) cb_snap_tree_clear(&t, d);
    close(d);
    int root = s_store_root(a);
    if (root < 0) return;
    (void) unlinkat(root, name, AT_REMOVEDIR);
    close(root);
}

/* A fresh park fifo for id, opened O_RDWR (which never blocks and keeps a
 * reader's read blocking until we write), and never through a symlink put
 * in its place meanwhile. */
int cb_snap_make_fifo_(cb_snap_agent_t *a, long id) {
    char name[24];
    (void) snprintf(name, sizeof name, "%ld", id);
    (void) unlinkat(a->park, name, 0);
    if (mkfifoat(a->park, name, 0644) < 0) return -1;
    return openat(a->park, name, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
}

void cb_snap_free_(cb_snap_agent_t *a, cb_snap_slot_t *s, bool files) {
    char name[24];
    (void) snprintf(name, sizeof name, "%ld", s->id);
    if (s->fifo >= 0) close(s->fifo);
    (void) unlinkat(a->park, name, 0);
    if (files) s_store_remove(a, s->id);
    memset(s, 0, sizeof *s);
    s->fifo = -1;
}

void cb_snap_agent_init(cb_snap_agent_t *a, int store, int park, const char *home, const char *tmp,
                        pid_t runner, bool root, const char *why, cb_snap_say_fn say, void *ud) {
    memset(a, 0, sizeof *a);
    a->store = store;
    a->park = park;
    a->dirs[0] = home;
    a->dirs[1] = tmp;
    a->runner = runner;
    a->root = root;
    a->say = say;
    a->ud = ud;
    for (int i = 0; i < CB_SNAP_SLOTS; i++)
        a->slot[i].fifo = -1;
    if (store < 0 || park < 0)
        (void) snprintf(a->unavailable, sizeof a->unavailable, "%s",
                        why && why[0] ? why : "no checkpoint store in this sandbox");
    if (a->unavailable[0])
        cb_snap_say_(a, "unavailable %s", a->unavailable);
    else
        cb_snap_say_(a, "ready %d", CB_SNAP_MAX);
}

void cb_snap_agent_store_by_path(cb_snap_agent_t *a, const char *path) {
    if (a->store >= 0) close(a->store);
    a->store = -1;
    a->store_path = path;
}

/* ---- checkpoint ----------------------------------------------------------------- */

static int s_save_files(cb_snap_agent_t *a, cb_snap_slot_t *s, char *why, size_t len);

/* A fork is awaited from now: looked for after CB_SNAP_SCAN_MS, then ever
 * less often (cb_snap_agent_tick), so that a fork that parks at once is seen
 * at once and one that takes its time costs little (each look reads every
 * process of /proc, charged to the sandbox). */
void cb_snap_scan_soon_(cb_snap_agent_t *a) {
    a->scan_ms = CB_SNAP_SCAN_MS;
    a->scan_at = cb_snap_now_ms_() + CB_SNAP_SCAN_MS;
}

/* A slot given up before its copy parked: the fifo stays (it is how the copy
 * is recognised), the files go; the copy is killed if it parks in time. */
static void s_doom(cb_snap_agent_t *a, cb_snap_slot_t *s) {
    s_store_remove(a, s->id);
    s->doomed = true;
    if (s->armed_until == 0) s->armed_until = cb_snap_now_ms_() + CB_SNAP_FORK_MS;
}

/* Arms slot id: its park fifo, and the files copied at once -- the runner is
 * between cells and the kernel holds every request until the checkpoint is
 * done, so they are the files of the moment of the fork, which the runner
 * makes meanwhile.  "armed ID BYTES FILES" is all the kernel waits for on
 * this side: the copy parks afterwards ("saved"), or is reported lost. */
cb_snap_slot_t *cb_snap_new_slot_(cb_snap_agent_t *a, long id) {
    if (a->unavailable[0]) {
        cb_snap_say_(a, "fail %ld %s", id, a->unavailable);
        return NULL;
    }
    for (int i = 0; i < CB_SNAP_SLOTS; i++) /* doomed ones too: a fifo has the id's name */
        if (a->slot[i].id == id) {
            cb_snap_say_(a, "fail %ld the id is taken", id);
            return NULL;
        }
    cb_snap_slot_t *s = cb_snap_find_(a, 0);
    if (s == NULL) cb_snap_say_(a, "fail %ld %d checkpoints are kept already", id, CB_SNAP_MAX);
    return s;
}

static void s_arm(cb_snap_agent_t *a, long id) {
    cb_snap_slot_t *s = cb_snap_new_slot_(a, id);
    if (s == NULL) return;
    int fifo = cb_snap_make_fifo_(a, id);
    if (fifo < 0) {
        cb_snap_say_(a, "fail %ld making the park fifo: %s", id, strerror(errno));
        return;
    }
    s->id = id;
    s->fifo = fifo;
    s->armed_until = cb_snap_now_ms_() + CB_SNAP_FORK_MS;
    cb_snap_scan_soon_(a);
    char why[CB_SNAP_WHY_MAX];
    if (s_save_files(a, s, why, sizeof why) < 0) {
        s_doom(a, s);
        cb_snap_say_(a, "fail %ld %s", id, why);
        return;
    }
    cb_snap_say_(a, "armed %ld %llu %u", id, (unsigned long long) s->bytes, s->files);
}

int cb_snap_copy_into_(cb_snap_tree_t *t, int src, int parent, const char *name,
                       const char *opening, const char *copying, char *why, size_t len) {
    int dst = src < 0 || mkdirat(parent, name, 0700) < 0
                  ? -1
                  : openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = 0;
    if (dst < 0) {
        (void) snprintf(why, len, "%s: %s", opening, strerror(errno));
        rc = -1;
    } else if (cb_snap_tree_copy(t, src, dst) < 0) {
        (void) snprintf(why, len, "%s: %.120s", copying, t->why);
        rc = -1;
    }
    if (src >= 0) close(src);
    if (dst >= 0) close(dst);
    return rc;
}

/* Copies the live trees into the store for s.  0 ok, -1 with why. */
static int s_save_files(cb_snap_agent_t *a, cb_snap_slot_t *s, char *why, size_t len) {
    int top = cb_snap_store_dir_(a, s->id, true);
    if (top < 0) {
        (void) snprintf(why, len, "the checkpoint store: %s", strerror(errno));
        return -1;
    }
    cb_snap_tree_t t = {.own = a->root};
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        const char sub[2] = {(char) ('0' + k), '\0'}; /* "0" home, "1" /tmp */
        char opening[CB_SNAP_WHY_MAX / 2], copying[CB_SNAP_WHY_MAX / 2];
        (void) snprintf(opening, sizeof opening, "opening %s", a->dirs[k]);
        (void) snprintf(copying, sizeof copying, "copying %s", a->dirs[k]);
        int live = open(a->dirs[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = cb_snap_copy_into_(&t, live, top, sub, opening, copying, why, len);
    }
    close(top);
    s->bytes = t.bytes;
    s->files = t.entries;
    return rc;
}

static void s_adopt(cb_snap_agent_t *a, cb_snap_slot_t *s, pid_t pid) {
    if (s->doomed) { /* the checkpoint failed or was dropped while its fork was on the way */
        (void) kill(pid, SIGKILL);
        cb_snap_free_(a, s, false);
        return;
    }
    /* a parked copy is what the OOM killer takes first: never the runner */
    (void) cb_snap_proc_write(pid, "oom_score_adj", CB_SNAP_OOM_ADJ);
    /* the copy goes on only after this byte: a SIGCONT from the sandbox's
     * code before the agent saw it stopped finds none, and it stops again */
    if (write(s->fifo, CB_SNAP_PARK_TAKEN, 1) != 1) {
        long id = s->id;
        (void) kill(pid, SIGKILL);
        cb_snap_free_(a, s, true);
        cb_snap_say_(a, "lost %ld its park fifo: %s", id, strerror(errno));
        return;
    }
    s->pid = pid;
    s->armed_until = 0;
    (void) kill(pid, SIGCONT);
    if (s->replacement)
        cb_snap_say_(a, "kept %ld %d", s->id, (int) pid);
    else
        cb_snap_say_(a, "saved %ld %d %llu %u", s->id, (int) pid, (unsigned long long) s->bytes,
                     s->files);
}

/* ---- rollback ------------------------------------------------------------------------- */

static void s_lost(cb_snap_agent_t *a, cb_snap_slot_t *s, int status) {
    long id = s->id;
    cb_snap_free_(a, s, true);
    if (WIFSIGNALED(status))
        cb_snap_say_(
            a, "lost %ld its parked copy was killed by signal %d (%s)", id, WTERMSIG(status),
            WTERMSIG(status) == SIGKILL ? "the out-of-memory killer, or code in the sandbox"
                                        : "sent by code in the sandbox");
    else
        cb_snap_say_(a, "lost %ld its parked copy exited", id);
}

typedef struct {
    int others;  /* still to end this round */
    int ended;   /* distinct processes ended */
    int nkilled; /* ... recorded in s_killed */
} s_end_t;

static pid_t s_killed[CB_SNAP_KILLED_MAX];

static int s_end_one(cb_snap_agent_t *a, pid_t pid, char state, void *arg) {
    (void) a;
    s_end_t *e = arg;
    if (state == 'Z' || state == 'X' || cb_snap_proc_exiting(pid)) return 0; /* as good as gone */
    e->others++;
    if (kill(pid, SIGKILL) < 0) return 0;
    for (int i = 0; i < e->nkilled; i++) /* a process still dying is killed again, counted once */
        if (s_killed[i] == pid) return 0;
    if (e->nkilled < CB_SNAP_KILLED_MAX) s_killed[e->nkilled++] = pid;
    e->ended++;
    return 0;
}

/* Ends every process of this pid namespace but init and the parked copies.
 * Returns how many it ended, -1 when some would not go in time.  A process
 * whose threads are all exiting counts as gone: its memory is freed while
 * the rollback goes on, and init reaps it later. */
static int s_end_others(cb_snap_agent_t *a) {
    s_end_t e = {0, 0, 0};
    int64_t until = cb_snap_now_ms_() + CB_SNAP_KILL_MS;
    for (;;) {
        e.others = 0;
        if (cb_snap_proc_each(a, s_end_one, &e) < 0) return -1;
        for (;;) { /* reap what is ours already (orphans come to init as their parents die) */
            int st;
            pid_t p = waitpid(-1, &st, WNOHANG);
            if (p <= 0) break;
            cb_snap_slot_t *s = s_by_pid(a, p);
            if (s != NULL) s_lost(a, s, st);
        }
        if (e.others == 0) return e.ended;
        if (cb_snap_now_ms_() > until) return -1;
        struct timespec nap = {0, CB_SNAP_KILL_NAP_US * 1000L};
        nanosleep(&nap, NULL);
    }
}

/* An imported slot's copy, restored by CRIU: it took the agent's byte before
 * it was dumped and blocks reading its fifo, so no byte now (one more would
 * be read as the start of the message that wakes it). */
static void s_adopt_restored(cb_snap_agent_t *a, cb_snap_slot_t *s, pid_t pid) {
    (void) cb_snap_proc_write(pid, "oom_score_adj", CB_SNAP_OOM_ADJ);
    s->pid = pid;
    s->armed_until = 0;
    cb_snap_say_(a, "saved %ld %d %llu %u", s->id, (int) pid, (unsigned long long) s->bytes,
                 s->files);
}

/* An armed slot's copy: a stopped process holding its fifo (a grandchild of
 * init until its parent has exited, so not always init's to wait for). */
static int s_adopt_one(cb_snap_agent_t *a, pid_t pid, char state, void *arg) {
    (void) arg;
    if (pid == a->runner || state == 'Z' || state == 'X') return 0;
    for (int i = 0; i < CB_SNAP_SLOTS; i++) {
        cb_snap_slot_t *s = &a->slot[i];
        if (s->id == 0 || s->pid != 0 || (state != 'T' && !s->restored) ||
            !cb_snap_proc_holds(pid, s->fifo))
            continue;
        if (s->restored)
            s_adopt_restored(a, s, pid);
        else
            s_adopt(a, s, pid);
        return 0;
    }
    return 0;
}

static bool s_armed(const cb_snap_agent_t *a) {
    for (int i = 0; i < CB_SNAP_SLOTS; i++)
        if (a->slot[i].id != 0 && a->slot[i].pid == 0) return true;
    return false;
}

/* ... one the kernel counts as a checkpoint (not doomed) */
static bool s_awaited(const cb_snap_agent_t *a) {
    for (int i = 0; i < CB_SNAP_SLOTS; i++)
        if (a->slot[i].id != 0 && a->slot[i].pid == 0 && !a->slot[i].doomed) return true;
    return false;
}

static void s_scan(cb_snap_agent_t *a) {
    if (s_armed(a)) (void) cb_snap_proc_each(a, s_adopt_one, NULL);
}

static int s_restore_files(cb_snap_agent_t *a, long id, char *why, size_t len) {
    int top = cb_snap_store_dir_(a, id, false);
    if (top < 0) {
        (void) snprintf(why, len, "its files are missing from the store");
        return -1;
    }
    cb_snap_tree_t t = {.own = a->root};
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        const char sub[2] = {(char) ('0' + k), '\0'}; /* "0" home, "1" /tmp */
        int saved = openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int live = open(a->dirs[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (saved < 0 || live < 0 || cb_snap_tree_restore(&t, saved, live) < 0) {
            (void) snprintf(why, len, "restoring %s: %.120s", a->dirs[k],
                            t.why[0] ? t.why : strerror(errno));
            rc = -1;
        }
        if (saved >= 0) close(saved);
        if (live >= 0) close(live);
    }
    close(top);
    return rc;
}

static bool s_hex(const char *s, size_t n) {
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

/* Waits (bounded) until the forks on their way have parked (a checkpoint
 * just taken, the copy a rollback's runner makes of itself): ending the
 * sandbox's processes must not take them. */
static void s_settle(cb_snap_agent_t *a) {
    int64_t until = cb_snap_now_ms_() + CB_SNAP_FORK_MS;
    while (s_awaited(a) && cb_snap_now_ms_() <= until) {
        s_scan(a);
        if (!s_awaited(a)) return;
        struct timespec nap = {0, CB_SNAP_KILL_NAP_US * 1000L};
        nanosleep(&nap, NULL);
    }
}

static void s_roll(cb_snap_agent_t *a, long id, const char *nonce) {
    s_settle(a); /* the copy of the last rollback's runner may still be parking */
    cb_snap_slot_t *s = cb_snap_find_(a, id);
    if (s == NULL || s->pid == 0) {
        cb_snap_say_(a, "refused %ld %s", id, s ? "its fork has not parked" : "no such checkpoint");
        return;
    }
    if (!s_hex(nonce, CB_SNAP_NONCE_HEX)) {
        cb_snap_say_(a, "refused %ld bad nonce", id);
        return;
    }
    pid_t copy = s->pid;
    int ended = s_end_others(a);
    if (ended < 0) {
        cb_snap_say_(a, "fail %ld the sandbox's processes did not end in time", id);
        return;
    }
    s = cb_snap_find_(a, id); /* the copy itself may have died meanwhile */
    if (s == NULL || kill(copy, 0) < 0) {
        cb_snap_say_(a, "fail %ld its parked copy is gone", id);
        return;
    }
    char why[CB_SNAP_WHY_MAX];
    if (s_restore_files(a, id, why, sizeof why) < 0) {
        cb_snap_say_(a, "fail %ld %s", id, why);
        return;
    }
    /* the copy will fork again, to keep checkpoint id: a new fifo for that */
    int old = s->fifo;
    s->fifo = cb_snap_make_fifo_(a, id);
    if (s->fifo < 0) {
        s->fifo = old;
        {
            cb_snap_say_(a, "fail %ld making the park fifo: %s", id, strerror(errno));
            return;
        }
    }
    char msg[CB_SNAP_PARK_MSG];
    int n = snprintf(msg, sizeof msg, "resume %s\n", nonce);
    ssize_t w = write(old, msg, (size_t) n);
    close(old);
    if (w != n) {
        cb_snap_say_(a, "fail %ld waking its copy: %s", id, strerror(errno));
        return;
    }
    (void) kill(copy, SIGCONT); /* stopped before the others ended: it reads now */
    (void) cb_snap_proc_write(copy, "oom_score_adj", "0");
    a->runner = copy;
    s->pid = 0;
    s->replacement = true;
    s->armed_until = cb_snap_now_ms_() + CB_SNAP_FORK_MS;
    cb_snap_scan_soon_(a);
    cb_snap_say_(a, "rolled %ld %d %d", id, (int) copy,
                 ended > 0 ? ended - 1 : 0); /* - the old runner */
}

/* ---- the agent's interface -------------------------------------------------------------- */

void cb_snap_agent_command(cb_snap_agent_t *a, const char *line) {
    cb_snap_agent_command_fd(a, line, -1);
}

void cb_snap_agent_command_fd(cb_snap_agent_t *a, const char *line, int fd) {
    char verb[16] = "", arg[CB_SNAP_NONCE_HEX + 2] = "";
    long id = 0;
    int got = sscanf(line, "%15s %ld %33s", verb, &id, arg);
    if (got < 2 || id <= 0) {
        cb_snap_say_(a, "fail 0 unknown command");
        return;
    }
    if (strcmp(verb, "arm") == 0) return s_arm(a, id);
    if (strcmp(verb, "roll") == 0 && got == 3) return s_roll(a, id, arg);
    if (strcmp(verb, "export") == 0 && got == 2) return cb_snap_export_(a, id, fd);
    if (strcmp(verb, "import") == 0 && got == 2) return cb_snap_import_(a, id, fd);
    if (strcmp(verb, "drop") == 0) {
        cb_snap_slot_t *s = cb_snap_find_(a, id);
        if (s == NULL) {
            cb_snap_say_(a, "fail %ld no such checkpoint", id);
            return;
        }
        if (s->pid > 0) {
            (void) kill(s->pid, SIGKILL);
            cb_snap_free_(a, s, true);
        } else {
            s_doom(a, s); /* its fork may still park: it is killed then */
        }
        {
            cb_snap_say_(a, "dropped %ld", id);
            return;
        }
    }
    cb_snap_say_(a, "fail %ld unknown command", id);
}

bool cb_snap_agent_child(cb_snap_agent_t *a, pid_t pid, int status) {
    if (WIFSTOPPED(status)) {
        if (pid == a->runner) return false;
        if (s_by_pid(a, pid) != NULL) {
            /* a taken copy stops only while it waits for the byte, which is in
             * its fifo now: a stop the agent's SIGCONT came too early for (it
             * read nothing after someone else's SIGCONT, then stopped again),
             * or a SIGSTOP from the sandbox's code, would leave it asleep */
            (void) kill(pid, SIGCONT);
            return true;
        }
        for (int i = 0; i < CB_SNAP_SLOTS; i++) {
            cb_snap_slot_t *s = &a->slot[i];
            if (s->id != 0 && s->pid == 0 && cb_snap_proc_holds(pid, s->fifo)) {
                s_adopt(a, s, pid);
                return true;
            }
        }
        return false; /* the sandbox's own business (job control) */
    }
    if (!WIFEXITED(status) && !WIFSIGNALED(status)) return false;
    cb_snap_slot_t *s = s_by_pid(a, pid);
    if (s == NULL) return false;
    s_lost(a, s, status);
    return true;
}

int cb_snap_agent_wait_ms(const cb_snap_agent_t *a) {
    if (!s_armed(a)) return -1;
    int64_t left = a->scan_at - cb_snap_now_ms_(); /* the next look for an armed copy */
    return left <= 0 ? 0 : left > CB_SNAP_SCAN_MAX_MS ? CB_SNAP_SCAN_MAX_MS : (int) left;
}

void cb_snap_agent_tick(cb_snap_agent_t *a) {
    if (s_armed(a) && cb_snap_now_ms_() >= a->scan_at) {
        s_scan(a);
        a->scan_ms = a->scan_ms < CB_SNAP_SCAN_MS           ? CB_SNAP_SCAN_MS
                     : a->scan_ms * 2 > CB_SNAP_SCAN_MAX_MS ? CB_SNAP_SCAN_MAX_MS
                                                            : a->scan_ms * 2;
        a->scan_at = cb_snap_now_ms_() + a->scan_ms;
    }
    int64_t now = cb_snap_now_ms_();
    for (int i = 0; i < CB_SNAP_SLOTS; i++) {
        cb_snap_slot_t *s = &a->slot[i];
        if (s->id == 0 || s->armed_until == 0 || now < s->armed_until) continue;
        long id = s->id;
        bool repl = s->replacement, doomed = s->doomed, restored = s->restored;
        cb_snap_free_(a, s, true);
        if (doomed) continue;
        if (restored)
            cb_snap_say_(a, "lost %ld no restored copy appeared within %d ms", id,
                         CB_SNAP_RESTORE_MS);
        else if (repl)
            cb_snap_say_(a, "lost %ld the rolled-back runner did not park a copy of itself", id);
        else /* "armed" was said: for the kernel the checkpoint exists, so it is lost */
            cb_snap_say_(a, "lost %ld no fork of the runner parked within %d ms", id,
                         CB_SNAP_FORK_MS);
    }
}

void cb_snap_agent_end(cb_snap_agent_t *a) {
    for (int i = 0; i < CB_SNAP_SLOTS; i++)
        if (a->slot[i].id != 0 && a->slot[i].pid > 0) (void) kill(a->slot[i].pid, SIGKILL);
}
