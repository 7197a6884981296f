/* test_cgroup.c - cgroup v2 and v1 file-level logic against fake trees in
 * a temp dir (no privileges needed), plus a real v1 group when writable. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/cgroup.h"
#include "launcher/workdir.h"
#include "isolate/util.h"
#include "tap.h"

/* snprintf that checks for truncation (tests build paths under a temp dir) */
#define FMT(b, ...)                                                                                \
    do {                                                                                           \
        if (snprintf(b, sizeof b, __VA_ARGS__) >= (int) sizeof b) abort();                         \
    } while (0)

static void put(const char *dir, const char *file, const char *v) {
    char p[4096];
    FMT(p, "%s/%s", dir, file);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(v, f);
        fclose(f);
    }
}

static const char *get(const char *dir, const char *file) {
    static char buf[4096];
    if (cb_cgroup_read(dir, file, buf, sizeof buf) < 0) return "(missing)";
    return buf;
}

/* A pid that is gone: a child that exited and was reaped. */
static pid_t dead_pid(void) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    waitpid(c, NULL, 0);
    return c;
}

static int is_dir(const char *d) {
    struct stat st;
    return stat(d, &st) == 0 && S_ISDIR(st.st_mode);
}

/* v2: the kernel's parent group is created on demand, controllers handed
 * down through it, and the sandbox's limits set in the child. */
static void s_test_v2_parent(const char *root, const cb_cgroup_limits_t *lim) {
    char base[4096], par[4096], box[4096], why[512] = "";
    FMT(base, "%s/v2p", root);
    mkdir(base, 0755);
    put(base, "cgroup.controllers", "cpu io memory pids\n");
    put(base, "cgroup.subtree_control", "memory pids cpu\n");
    FMT(par, "%s/cellblock-k1-2", base);
    mkdir(par, 0755); /* a real kernel creates its files on mkdir */
    put(par, "cgroup.subtree_control", "");
    FMT(box, "%s/box", par);
    mkdir(box, 0755);
    static const char *files[] = {"memory.max", "memory.swap.max", "pids.max",
                                  "cpu.max",    "cgroup.procs",    "cgroup.kill"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        put(box, files[i], "");
    cb_cgroup_t *cg = cb_cgroup_new_v2(base, 0, "cellblock-k1-2", "box", lim, why, sizeof why);
    TAP_OK(cg != NULL, "v2 group below a parent (%s)", why);
    if (cg == NULL) return;
    TAP_OK(strstr(get(par, "cgroup.subtree_control"), "+cpu") != NULL,
           "v2 parent hands controllers down: %s", get(par, "cgroup.subtree_control"));
    TAP_EQ_STR(get(box, "pids.max"), "64", "v2 limits set in the child of the parent");
    TAP_EQ_INT(cb_cgroup_add(cg, 4243), 0, "v2 add below the parent");
    TAP_EQ_STR(get(box, "cgroup.procs"), "4243", "v2 pid in the child's cgroup.procs");
    put(box, "cgroup.procs", "");
    cb_cgroup_destroy(&cg);
    TAP_EQ_STR(get(box, "cgroup.kill"), "1", "v2 destroy kills through cgroup.kill");
}

static void s_test_names(void) {
    char k[64], l[64], n[128];
    unsigned long long st = cb_proc_start_time(getpid());
    TAP_OK(st > 0, "our start time: %llu", st);
    TAP_EQ_INT(cb_proc_start_time(dead_pid()), 0, "a reaped pid has no start time");
    TAP_EQ_INT(cb_cgroup_kernel_name(getpid(), k, sizeof k), 0, "kernel name");
    FMT(n, "cellblock-k%ld-%llu", (long) getpid(), st);
    TAP_EQ_STR(k, n, "kernel name is cellblock-k<pid>-<start>");
    TAP_EQ_INT(cb_cgroup_launcher_name(getpid(), l, sizeof l), 0, "launcher name");
    FMT(n, "cellblock-%ld-%llu", (long) getpid(), st);
    TAP_EQ_STR(l, n, "launcher name is cellblock-<pid>-<start>");
    TAP_EQ_INT(cb_cgroup_kernel_name(dead_pid(), k, sizeof k), -1, "no name for a gone pid");
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_ALIVE, "our own group: owner alive");
    FMT(n, "cellblock-k%ld-%llu", (long) getpid(), st);
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_ALIVE, "our own parent: owner alive");
    FMT(n, "cellblock-%ld-%llu", (long) getpid(), st + 1);
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_GONE, "same pid, other start time: reused pid, gone");
    FMT(n, "cellblock-k%ld-%llu", (long) dead_pid(), st);
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_GONE, "dead kernel: gone");
    FMT(n, "cellblock-%ld", (long) dead_pid());
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_GONE, "first-release name of a dead pid: gone");
    FMT(n, "cellblock-%ld", (long) getpid());
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_GONE,
               "first-release name whose pid is no launcher (pid reused): gone");
    /* a killed launcher its parent has not reaped yet: a zombie cleans
     * nothing up, so its group is stale */
    pid_t z = fork();
    if (z == 0) _exit(0);
    siginfo_t zi;
    (void) waitid(P_PID, (id_t) z, &zi, WEXITED | WNOWAIT); /* exited, not reaped */
    char zs = 0;
    unsigned long long zst = cb_proc_start_state(z, &zs);
    TAP_OK(zst > 0 && zs == 'Z', "an exited child not reaped: a zombie (state %c)", zs ? zs : '?');
    FMT(n, "cellblock-%ld-%llu", (long) z, zst);
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_GONE, "a zombie launcher's group: gone");
    (void) waitpid(z, NULL, 0);
    /* a warm-start template's group, named after its supervisor (issue 21) */
    TAP_EQ_INT(cb_cgroup_warm_name(getpid(), k, sizeof k), 0, "template name");
    FMT(n, "cellblock-w%ld-%llu", (long) getpid(), st);
    TAP_EQ_STR(k, n, "template name is cellblock-w<pid>-<start>");
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_ALIVE, "a live supervisor's template group: alive");
    FMT(n, "cellblock-w%ld-%llu", (long) dead_pid(), st);
    TAP_EQ_INT(cb_cgroup_owner(n), CB_OWNER_GONE, "a gone supervisor's template group: gone");
    static const char *unknown[] = {"cellblock-unit-test",
                                    "cellblock-k12",
                                    "cellblock-w12",
                                    "cellblock-w",
                                    "cellblock-1-",
                                    "cellblock-1-2x",
                                    "cellblock--1-2",
                                    "cellblock-0-5",
                                    "cellblock-99999999999999999999999-1",
                                    "other-1-2",
                                    "cellblock-k",
                                    "cellblock-"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        TAP_EQ_INT(cb_cgroup_owner(unknown[i]), CB_OWNER_UNKNOWN, unknown[i]);
}

/* The sweep on a fake tree: what is stale goes, what is alive or not ours
 * stays, whatever the nesting. */
static void s_test_sweep(const char *root) {
    char base[4096], p[4096];
    FMT(base, "%s/sweep", root);
    mkdir(base, 0755);
    unsigned long long st = cb_proc_start_time(getpid());
    long me = (long) getpid(), dead = (long) dead_pid(), dead2 = (long) dead_pid();
    char live_k[128], stale_k[128], stale_k2[128], legacy[128];
    FMT(live_k, "%s/cellblock-k%ld-%llu", base, me, st);
    FMT(stale_k, "%s/cellblock-k%ld-%llu", base, dead, st);
    FMT(stale_k2, "%s/cellblock-k%ld-7", base, dead2);
    FMT(legacy, "%s/cellblock-%ld", base, dead);
    mkdir(live_k, 0755);
    mkdir(stale_k, 0755);
    mkdir(stale_k2, 0755);
    mkdir(legacy, 0755);
    FMT(p, "%s/cellblock-%ld-%llu", live_k, dead, st); /* killed launcher of a live kernel */
    mkdir(p, 0755);
    FMT(p, "%s/cellblock-%ld-%llu", live_k, me, st); /* a live launcher */
    mkdir(p, 0755);
    FMT(p, "%s/cellblock-%ld-%llu", stale_k, me, st); /* dead kernel, launcher still ending */
    mkdir(p, 0755);
    FMT(p, "%s/cellblock-%ld-%llu", stale_k, dead2, st); /* dead kernel, dead launcher */
    mkdir(p, 0755);
    FMT(p, "%s/cellblock-%ld-3", stale_k2, dead);
    mkdir(p, 0755);
    FMT(p, "%s/cellblock-unit-test", base);
    mkdir(p, 0755);
    FMT(p, "%s/system.slice", base);
    mkdir(p, 0755);

    int r = cb_cgroup_sweep_dir(base);
    TAP_EQ_INT(r, -1, "sweep: a stale parent stayed (its launcher still runs): reported");
    TAP_OK(!is_dir(legacy), "legacy group of a dead launcher removed");
    TAP_OK(!is_dir(stale_k2), "parent of a dead kernel with only dead launchers removed");
    TAP_OK(is_dir(stale_k), "parent of a dead kernel with a live launcher kept");
    FMT(p, "%s/cellblock-%ld-%llu", stale_k, me, st);
    TAP_OK(is_dir(p), "live launcher below a dead kernel kept");
    FMT(p, "%s/cellblock-%ld-%llu", stale_k, dead2, st);
    TAP_OK(!is_dir(p), "dead launcher below a dead kernel removed");
    TAP_OK(is_dir(live_k), "parent of a live kernel kept");
    FMT(p, "%s/cellblock-%ld-%llu", live_k, dead, st);
    TAP_OK(!is_dir(p), "killed launcher's group below a live kernel removed");
    FMT(p, "%s/cellblock-%ld-%llu", live_k, me, st);
    TAP_OK(is_dir(p), "live launcher's group kept");
    FMT(p, "%s/cellblock-unit-test", base);
    TAP_OK(is_dir(p), "a cellblock-* name we do not make is never touched");
    FMT(p, "%s/system.slice", base);
    TAP_OK(is_dir(p), "other groups are never touched");

    /* the owner itself removes its parent; a live child keeps it */
    char kname[128];
    FMT(kname, "cellblock-k%ld-%llu", me, st);
    TAP_EQ_INT(cb_cgroup_remove_parent_dir(base, kname), -1, "parent with a live child stays");
    FMT(p, "%s/cellblock-%ld-%llu", live_k, me, st);
    rmdir(p);
    FMT(p, "%s/cellblock-%ld-%llu", live_k, dead, st);
    mkdir(p, 0755);
    TAP_EQ_INT(cb_cgroup_remove_parent_dir(base, kname), 0,
               "parent with only stale children removed");
    TAP_OK(!is_dir(live_k), "the parent is gone");
    TAP_EQ_INT(cb_cgroup_remove_parent_dir(base, kname), 0, "removing it again is fine");
    FMT(p, "%s/cellblock-%ld-%llu", stale_k, me, st);
    rmdir(p); /* that launcher ended */
    FMT(p, "%s/cellblock-%ld-9", base, dead);
    mkdir(p, 0755);
    r = cb_cgroup_sweep_dir(base);
    TAP_EQ_INT(r, 2, "second sweep: the dead kernel's parent and a new stale group, counted");
    TAP_OK(!is_dir(stale_k), "the dead kernel's parent is gone once its launcher ended");

    /* a stale group with members: cgroup.kill written, each member SIGKILLed */
    char full[4096];
    FMT(full, "%s/cellblock-%ld-5", base, dead2);
    mkdir(full, 0755);
    pid_t c = fork();
    if (c == 0) {
        pause();
        _exit(0);
    }
    char v[32];
    FMT(v, "%ld\n", (long) c);
    put(full, "cgroup.procs", v);
    put(full, "cgroup.kill", "");
    r = cb_cgroup_sweep_dir(base);
    int wst = 0;
    waitpid(c, &wst, 0);
    TAP_OK(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL, "member of a stale group SIGKILLed");
    TAP_EQ_STR(get(full, "cgroup.kill"), "1", "stale v2 group: cgroup.kill written");
    TAP_EQ_INT(r, -1, "a fake group with files cannot be removed: reported");
}

/* Our directory in the v1 pids hierarchy, or the unified one: where the
 * real groups of this test go. */
static int real_base(char *out, size_t len) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f == NULL) return -1;
    char line[1024];
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL || strncmp(c1, ":pids:", 6) != 0) continue;
        if (snprintf(out, len, "/sys/fs/cgroup/pids%s", strcmp(c2 + 1, "/") ? c2 + 1 : "") <
            (int) len)
            rc = 0;
    }
    fclose(f);
    return rc;
}

/* On this machine: the kernel-side cleanup calls find and remove what a
 * SIGKILLed launcher and kernel leave. */
/* A real group's OOM kill seen through cb_cgroup_oom_watch (what the
 * launcher polls on the gvisor tier): a child that allocates past a 16 MiB
 * limit (at most 256 MiB if the limit failed) is killed, the fd fires, and
 * the event is taken once. */
static void s_test_real_oom(const char *kname, const char *lname) {
    char why[256], name[96];
    (void) snprintf(name, sizeof name, "%s-oom", lname);
    cb_cgroup_limits_t small = {.memory_mb = 16, .pids = 8, .cpus = 1};
    cb_cgroup_t *cg = cb_cgroup_new_auto(kname, name, &small, why, sizeof why);
    if (cg == NULL) {
        TAP_SKIP("no writable cgroup for the OOM watch");
        return;
    }
    short events = 0;
    int fd = cb_cgroup_oom_watch(cg, &events);
    TAP_OK(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC, "oom watch: an fd, close-on-exec");
    TAP_EQ_INT(cb_cgroup_oom_watch(cg, &events), fd, "oom watch: the same fd again");
    struct pollfd pf = {.fd = fd, .events = events};
    TAP_OK(poll(&pf, 1, 0) == 0, "oom watch: quiet before any OOM");
    TAP_OK(!cb_cgroup_oom_fired(cg), "oom watch: nothing fired yet");
    int go[2];
    if (pipe(go) < 0) return;
    pid_t c = fork();
    if (c == 0) {
        char b;
        close(go[1]);
        if (read(go[0], &b, 1) != 1) _exit(2);
        for (int i = 0; i < 64; i++) { /* 4 MiB at a time, every page touched */
            char *m = malloc(4u << 20);
            if (m == NULL) _exit(3);
            memset(m, 1, 4u << 20);
        }
        _exit(0);
    }
    close(go[0]);
    TAP_EQ_INT(cb_cgroup_add(cg, c), 0, "oom watch: child added");
    (void) !write(go[1], "x", 1);
    close(go[1]);
    int st = 0;
    waitpid(c, &st, 0);
    TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "oom watch: the child was OOM-killed");
    int n = poll(&pf, 1, 5000);
    TAP_OK(n == 1 && (pf.revents & events), "oom watch: the fd fired");
    TAP_OK(cb_cgroup_oom_fired(cg), "oom watch: the event says a kill");
    TAP_OK(cb_cgroup_oom(cg), "oom watch: the group's OOM counter agrees");
    TAP_OK(!cb_cgroup_oom_fired(cg), "oom watch: taken once");
    cb_cgroup_destroy(&cg);
}

static void s_test_real_cleanup(const char *kname, const char *lname,
                                const cb_cgroup_limits_t *lim) {
    char why[512] = "", base[2048], p[4096];
    if (real_base(base, sizeof base) < 0) {
        TAP_SKIP("no v1 pids hierarchy: the real cleanup is checked on v1 only");
        return;
    }
    cb_cgroup_t *cg = cb_cgroup_new_auto(kname, lname, lim, why, sizeof why);
    TAP_OK(cg != NULL, "real: group again (%s)", why);
    if (cg == NULL) return;
    cb_cgroup_destroy(&cg);
    FMT(p, "%s/%s", base, kname);
    TAP_OK(!is_dir(p), "real: destroy removed the emptied parent too (%s)", p);
    /* a launcher that makes its group and dies by SIGKILL, as the kernel
     * sees it: reaped, its group left behind */
    pid_t c = fork();
    if (c == 0) {
        char n[64], w[512];
        if (cb_cgroup_launcher_name(getpid(), n, sizeof n) < 0 ||
            cb_cgroup_new_auto(kname, n, lim, w, sizeof w) == NULL)
            _exit(1);
        raise(SIGKILL);
        _exit(2);
    }
    int st = 0;
    waitpid(c, &st, 0);
    TAP_OK(WIFSIGNALED(st), "real: the 'launcher' made its group and was SIGKILLed");
    TAP_OK(is_dir(p), "real: its parent group is left behind");
    TAP_EQ_INT(cb_cgroup_cleanup_launcher(c), 0, "real: cleanup after the reaped launcher");
    DIR *d = opendir(p);
    int left = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        if (e->d_type == DT_DIR && strncmp(e->d_name, "cellblock-", 10) == 0) left++;
    if (d) closedir(d);
    TAP_EQ_INT(left, 0, "real: the killed launcher's group is gone");
    TAP_EQ_INT(cb_cgroup_cleanup_kernel(), 0, "real: cleanup at kernel exit");
    TAP_OK(!is_dir(p), "real: the kernel's parent group is gone");
}

int main(void) {
    char root[] = "/tmp/cb-test-cgroup-XXXXXX";
    if (mkdtemp(root) == NULL) return 1;
    cb_cgroup_limits_t lim = {.memory_mb = 256, .pids = 64, .cpus = 1.5};
    char why[512] = "";

    /* v2: a delegated parent with controllers available but not yet enabled */
    put(root, "cgroup.controllers", "cpuset cpu io memory pids\n");
    put(root, "cgroup.subtree_control", "");
    char box[4096];
    FMT(box, "%s/box", root);
    /* the fake kernel would create these files on mkdir; pre-create them */
    mkdir(box, 0755);
    static const char *files[] = {"memory.max",  "memory.swap.max", "memory.oom.group",
                                  "pids.max",    "cpu.max",         "cgroup.procs",
                                  "cgroup.kill", "memory.events"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        put(box, files[i], "");
    cb_cgroup_t *cg = cb_cgroup_new_v2(root, 0, NULL, "box", &lim, why, sizeof why);
    TAP_OK(cg != NULL, "v2 group created (%s)", why);
    if (cg != NULL) {
        TAP_EQ_STR(get(box, "memory.max"), "268435456", "v2 memory.max");
        TAP_EQ_STR(get(box, "memory.swap.max"), "0", "v2 no swap");
        TAP_EQ_STR(get(box, "pids.max"), "64", "v2 pids.max");
        TAP_EQ_STR(get(box, "cpu.max"), "150000 100000", "v2 cpu.max quota period");
        TAP_EQ_STR(get(box, "memory.oom.group"), "",
                   "v2 memory.oom.group left alone (an OOM kills one task, as on v1)");
        int dfd = cb_cgroup_dirfd(cg);
        struct stat ds, bs;
        TAP_OK(dfd >= 0 && fstat(dfd, &ds) == 0 && stat(box, &bs) == 0 && ds.st_ino == bs.st_ino,
               "v2 dirfd is the group's directory (for CLONE_INTO_CGROUP)");
        if (dfd >= 0) close(dfd);
        TAP_OK(strstr(get(root, "cgroup.subtree_control"), "+cpu") != NULL, /* last of the writes */
               "v2 controllers enabled in the parent's subtree_control");
        TAP_EQ_INT(cb_cgroup_add(cg, 4242), 0, "v2 add");
        TAP_EQ_STR(get(box, "cgroup.procs"), "4242", "v2 pid written to cgroup.procs");
        TAP_OK(!cb_cgroup_oom(cg), "v2 no oom when oom_kill absent");
        put(box, "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
        TAP_OK(cb_cgroup_oom(cg), "v2 oom_kill 1 seen in memory.events");
        put(box, "cgroup.procs", "");
        TAP_EQ_INT(cb_cgroup_kill(cg), 0, "v2 kill on an empty group");
        TAP_EQ_STR(get(box, "cgroup.kill"), "1", "v2 kill writes cgroup.kill");
        char d[256];
        cb_cgroup_describe(cg, d, sizeof d);
        TAP_OK(strstr(d, "cgroup v2") && strstr(d, "no swap"), "v2 describe: %s", d);
        cb_cgroup_destroy(&cg);
        TAP_OK(cg == NULL, "destroy nulls the pointer");
    }
    /* v2: a group of the same name that holds processes is never shared */
    char busy[4096];
    FMT(busy, "%s/busy", root);
    mkdir(busy, 0755);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        put(busy, files[i], "");
    char me[32];
    FMT(me, "%ld\n", (long) getpid()); /* a regression that kills it would kill this test */
    put(busy, "cgroup.procs", me);
    cb_cgroup_t *shared = cb_cgroup_new_v2(root, 0, NULL, "busy", &lim, why, sizeof why);
    TAP_OK(shared == NULL, "a live group of the same name is not taken over (%s)", why);
    cb_cgroup_destroy(&shared);
    /* v2: not delegated (read-only parent) -> a reason that names the fix */
    char ro[4096];
    FMT(ro, "%s/ro", root);
    mkdir(ro, 0555);
    if (geteuid() != 0) {
        cg = cb_cgroup_new_v2(ro, 0, NULL, "box", &lim, why, sizeof why);
        TAP_OK(cg == NULL && strstr(why, "Delegate=yes"), "v2 undelegated refused: %s", why);
    } else {
        TAP_OK(1, "# root: W_OK always true, undelegated case checked as user");
    }
    /* v2: subtree_control cannot take the controller */
    char nod[4096];
    FMT(nod, "%s/nodeleg", root);
    mkdir(nod, 0755);
    put(nod, "cgroup.subtree_control", "");
    char sc[4096];
    FMT(sc, "%s/cgroup.subtree_control", nod);
    chmod(sc, 0444);
    if (geteuid() != 0) {
        cg = cb_cgroup_new_v2(nod, 0, NULL, "box", &lim, why, sizeof why);
        TAP_OK(cg == NULL && strstr(why, "not enabled"), "v2 missing controller refused: %s", why);
    } else {
        TAP_OK(1, "# root bypasses file modes");
    }

    /* v1 fake tree */
    char v1[4096], self[4096];
    FMT(v1, "%s/v1", root);
    mkdir(v1, 0755);
    static const char *ctrls[] = {"memory", "pids", "cpu", "freezer"};
    for (size_t i = 0; i < 4; i++) {
        char d[4096];
        FMT(d, "%s/%s", v1, ctrls[i]);
        mkdir(d, 0755);
        FMT(d, "%s/%s/me", v1, ctrls[i]);
        mkdir(d, 0755);
        FMT(d, "%s/%s/me/g", v1, ctrls[i]);
        mkdir(d, 0755);
    }
    char mg[4096], pg[4096], fg[4096];
    FMT(mg, "%s/memory/me/g", v1);
    FMT(pg, "%s/pids/me/g", v1);
    FMT(fg, "%s/freezer/me/g", v1);
    put(mg, "memory.limit_in_bytes", "");
    put(mg, "memory.memsw.limit_in_bytes", "");
    put(mg, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
    put(pg, "pids.max", "");
    put(fg, "freezer.state", "THAWED");
    FMT(self, "%s/self", root);
    put(root, "self", "4:memory:/me\n8:pids:/me\n1:cpu,cpuacct:/me\n6:freezer:/me\n0::/\n");
    cg = cb_cgroup_new_v1(v1, self, NULL, "g", &lim, why, sizeof why);
    TAP_OK(cg != NULL, "v1 group created (%s)", why);
    if (cg != NULL) {
        TAP_EQ_STR(get(mg, "memory.limit_in_bytes"), "268435456", "v1 memory limit");
        TAP_EQ_STR(get(mg, "memory.memsw.limit_in_bytes"), "268435456", "v1 memsw = limit");
        TAP_EQ_STR(get(pg, "pids.max"), "64", "v1 pids.max");
        TAP_EQ_INT(cb_cgroup_dirfd(cg), -1, "v1: no dirfd, nothing to clone into");
        TAP_OK(!cb_cgroup_oom(cg), "v1 oom_kill 0");
        put(mg, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
        TAP_OK(cb_cgroup_oom(cg), "v1 oom_kill 2 seen");
        char d[256];
        cb_cgroup_describe(cg, d, sizeof d);
        TAP_OK(strstr(d, "cgroup v1") && strstr(d, "no swap"), "v1 describe: %s", d);
        /* a warm start's fork joins through files the launcher opened */
        char cpu[4096];
        put(mg, "cgroup.procs", "");
        put(pg, "cgroup.procs", "");
        put(fg, "cgroup.procs", "");
        FMT(cpu, "%s/cpu/me/g", v1);
        put(cpu, "cgroup.procs", "");
        int fds[8], one[1];
        int nfd = cb_cgroup_procs_fds(cg, fds, 8);
        TAP_EQ_INT(nfd, 3, "v1: one cgroup.procs per hierarchy in use (cpu: no quota file)");
        for (int i = 0; i < nfd; i++)
            TAP_OK(write(fds[i], "0", 1) == 1 && fcntl(fds[i], F_GETFD) == FD_CLOEXEC,
                   "cgroup.procs %d writable, close-on-exec", i);
        for (int i = 0; i < nfd; i++)
            close(fds[i]);
        TAP_EQ_STR(get(mg, "cgroup.procs"), "0", "what the fork writes lands in the group's file");
        TAP_EQ_INT(cb_cgroup_procs_fds(cg, one, 1), -1, "more hierarchies than room: refused");
        put(mg, "cgroup.procs", "");
        put(pg, "cgroup.procs", "");
        put(fg, "cgroup.procs", "");
        cb_cgroup_destroy(&cg);
    }
    put(root, "self2", "4:memory:/nowhere-else\n");
    FMT(self, "%s/self2", root);
    cg = cb_cgroup_new_v1("/nonexistent-root", self, NULL, "g", &lim, why, sizeof why);
    TAP_OK(cg == NULL && strstr(why, "not writable"), "v1 unusable: %s", why);

    s_test_v2_parent(root, &lim);
    s_test_names();
    s_test_sweep(root);

    /* a real group on this machine, below a parent, when we may write it */
    char kname[64], lname[64];
    TAP_EQ_INT(cb_cgroup_kernel_name(getpid(), kname, sizeof kname), 0, "our parent name");
    TAP_EQ_INT(cb_cgroup_launcher_name(getpid(), lname, sizeof lname), 0, "our group name");
    cg = cb_cgroup_new_auto(kname, lname, &lim, why, sizeof why);
    if (cg == NULL) {
        TAP_SKIP("no writable cgroup on this machine (needs root or delegation)");
    } else {
        pid_t c = fork();
        if (c == 0) {
            pause();
            _exit(0);
        }
        TAP_EQ_INT(cb_cgroup_add(cg, c), 0, "real: child added");
        TAP_EQ_INT(cb_cgroup_kill(cg), 0, "real: kill empties the group");
        int st = 0;
        waitpid(c, &st, 0);
        TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "real: child died of SIGKILL");
        cb_cgroup_destroy(&cg);
        s_test_real_cleanup(kname, lname, &lim);
        s_test_real_oom(kname, lname);
    }
    chmod(sc, 0644);
    cb_workdir_remove(root);
    TAP_DONE();
}
