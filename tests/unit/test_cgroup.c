/* test_cgroup.c - cgroup v2 and v1 file-level logic against fake trees in
 * a temp dir (no privileges needed), plus a real v1 group when writable. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "launcher/workdir.h"
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
    cb_cgroup_t *cg = cb_cgroup_new_v2(root, "box", &lim, why, sizeof why);
    TAP_OK(cg != NULL, "v2 group created (%s)", why);
    if (cg != NULL) {
        TAP_EQ_STR(get(box, "memory.max"), "268435456", "v2 memory.max");
        TAP_EQ_STR(get(box, "memory.swap.max"), "0", "v2 no swap");
        TAP_EQ_STR(get(box, "pids.max"), "64", "v2 pids.max");
        TAP_EQ_STR(get(box, "cpu.max"), "150000 100000", "v2 cpu.max quota period");
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
    /* v2: not delegated (read-only parent) -> a reason that names the fix */
    char ro[4096];
    FMT(ro, "%s/ro", root);
    mkdir(ro, 0555);
    if (geteuid() != 0) {
        cg = cb_cgroup_new_v2(ro, "box", &lim, why, sizeof why);
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
        cg = cb_cgroup_new_v2(nod, "box", &lim, why, sizeof why);
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
    cg = cb_cgroup_new_v1(v1, self, "g", &lim, why, sizeof why);
    TAP_OK(cg != NULL, "v1 group created (%s)", why);
    if (cg != NULL) {
        TAP_EQ_STR(get(mg, "memory.limit_in_bytes"), "268435456", "v1 memory limit");
        TAP_EQ_STR(get(mg, "memory.memsw.limit_in_bytes"), "268435456", "v1 memsw = limit");
        TAP_EQ_STR(get(pg, "pids.max"), "64", "v1 pids.max");
        TAP_OK(!cb_cgroup_oom(cg), "v1 oom_kill 0");
        put(mg, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
        TAP_OK(cb_cgroup_oom(cg), "v1 oom_kill 2 seen");
        char d[256];
        cb_cgroup_describe(cg, d, sizeof d);
        TAP_OK(strstr(d, "cgroup v1") && strstr(d, "no swap"), "v1 describe: %s", d);
        cb_cgroup_destroy(&cg);
    }
    put(root, "self2", "4:memory:/nowhere-else\n");
    FMT(self, "%s/self2", root);
    cg = cb_cgroup_new_v1("/nonexistent-root", self, "g", &lim, why, sizeof why);
    TAP_OK(cg == NULL && strstr(why, "not writable"), "v1 unusable: %s", why);

    /* a real v1 group on this machine, when we may write it */
    cg = cb_cgroup_new_auto("cellblock-unit-test", &lim, why, sizeof why);
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
    }
    chmod(sc, 0644);
    cb_workdir_remove(root);
    TAP_DONE();
}
