/*
 * cgstat.c - read a sandbox cgroup's counters (see cgstat.h).  Files are
 * small and read with one bounded read each; paths from /proc/PID/cgroup
 * are joined only below CB_CGROUP_ROOT and opened with O_NOFOLLOW.
 */
#include "isolate/cgstat.h"
#include "isolate/cgroup_priv.h" /* CGROUP2_SUPER_MAGIC */

#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#define S_FILE_MAX     4096         /* bytes read of one counter file */
#define S_PROCS_MAX    4096         /* processes summed when there is no cpuacct group */
#define S_NS_PER_USEC  1000ull

void cb_cgstat_init(cb_cgstat_t *s) {
    memset(s, 0, sizeof *s);
    s->mem_dir = s->cpu_dir = s->peak_fd = -1;
}

void cb_cgstat_close(cb_cgstat_t *s) {
    if (s->mem_dir >= 0) close(s->mem_dir);
    if (s->cpu_dir >= 0 && s->cpu_dir != s->mem_dir) close(s->cpu_dir);
    if (s->peak_fd >= 0) close(s->peak_fd);
    cb_cgstat_init(s);
}

/* Is rel ("/a/b/cellblock-12-34") a sandbox's group?  Only that shape:
 * not the kernel's parent (cellblock-k...) nor a vacated leaf, where the
 * runner of a sandbox without limits would sit too. */
static bool s_is_sandbox(const char *rel) {
    const char *last = strrchr(rel, '/');
    if (last == NULL || strstr(rel, "/..") != NULL ||
        strncmp(last + 1, CB_CGROUP_NAME_PREFIX, sizeof CB_CGROUP_NAME_PREFIX - 1) != 0)
        return false;
    const char *p = last + sizeof CB_CGROUP_NAME_PREFIX;
    size_t a = strspn(p, "0123456789");
    if (a == 0 || p[a] != '-') return false;
    size_t b = strspn(p + a + 1, "0123456789");
    return b > 0 && p[a + 1 + b] == '\0';
}

static int s_open_dir(const char *mount, const char *rel) {
    char path[CB_PATH_MAX];
    int n = snprintf(path, sizeof path, "%s%s", mount, rel);
    if (n < 0 || (size_t) n >= sizeof path) return -1;
    return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* One small file below dir into buf (NUL-terminated).  0 ok, -1 errno. */
static int s_read(int dir, const char *file, char *buf, size_t len) {
    cb_autofd int fd = openat(dir, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    ssize_t r;
    do
        r = read(fd, buf, len - 1);
    while (r < 0 && errno == EINTR);
    if (r < 0) return -1;
    buf[r] = '\0';
    return 0;
}

static int s_read_u64(int dir, const char *file, uint64_t *v) {
    char buf[64];
    if (s_read(dir, file, buf, sizeof buf) < 0) return -1;
    if (strncmp(buf, "max", 3) == 0) {
        *v = 0; /* no limit */
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    if (errno != 0 || end == buf) {
        errno = EINVAL;
        return -1;
    }
    *v = x;
    return 0;
}

int cb_cgstat_open(cb_cgstat_t *s, pid_t member) {
    cb_cgstat_init(s);
    char path[64], buf[S_FILE_MAX];
    (void) snprintf(path, sizeof path, "/proc/%ld/cgroup", (long) member);
    cb_autofd int pd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (member <= 0 || pd < 0 || s_read(pd, path + 1, buf, sizeof buf) < 0) return -1;
    /* "ID:CONTROLLERS:PATH" per hierarchy; v2's is "0::PATH" */
    char *save = NULL;
    const char *v2 = NULL, *mem = NULL, *acct = NULL, *acct_ctl = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL) continue;
        *c2 = '\0';
        const char *ctl = c1 + 1, *rel = c2 + 1;
        if (ctl[0] == '\0' && strncmp(line, "0:", 2) == 0) v2 = rel;
        if (strcmp(ctl, "memory") == 0) mem = rel;
        if (strstr(ctl, "cpuacct") != NULL) acct = rel, acct_ctl = ctl;
    }
    if (v2 != NULL && s_is_sandbox(v2)) {
        static const char *const mounts[] = {CB_CGROUP_ROOT, CB_CGROUP_ROOT "/unified"};
        for (size_t i = 0; i < 2 && s->version == 0; i++) {
            struct statfs sf;
            if (statfs(mounts[i], &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC) continue;
            int d = s_open_dir(mounts[i], v2);
            if (d < 0) continue;
            s->version = 2;
            s->mem_dir = s->cpu_dir = d;
        }
    }
    if (s->version == 0 && mem != NULL && s_is_sandbox(mem)) {
        s->mem_dir = s_open_dir(CB_CGROUP_ROOT "/memory", mem);
        if (s->mem_dir < 0) return -1;
        s->version = 1;
        if (acct != NULL && s_is_sandbox(acct)) {
            char mount[CB_PATH_MAX];
            (void) snprintf(mount, sizeof mount, "%s/%s", CB_CGROUP_ROOT, acct_ctl);
            s->cpu_dir = s_open_dir(mount, acct);
        }
    }
    if (s->version == 0) return -1;
    s->member = member;
    return 0;
}

/* v1 without cpuacct: the CPU time of the group's processes, each with
 * the children it reaped (/proc/PID/stat utime stime cutime cstime). */
static int s_cpu_procs(const cb_cgstat_t *s, uint64_t *ns) {
    cb_autofd int fd = openat(s->mem_dir, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "r");
    if (f == NULL) return -1;
    fd = -1; /* the stream owns it */
    long tick = sysconf(_SC_CLK_TCK);
    uint64_t ticks = 0;
    long pid;
    for (int n = 0; n < S_PROCS_MAX && fscanf(f, "%ld", &pid) == 1; n++) {
        char path[64], st[S_FILE_MAX];
        (void) snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        cb_autofd int sfd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t r = sfd >= 0 ? read(sfd, st, sizeof st - 1) : -1;
        if (r <= 0) continue; /* gone meanwhile */
        st[r] = '\0';
        const char *p = strrchr(st, ')'); /* comm may hold anything */
        unsigned long long f14 = 0, f15 = 0, f16 = 0, f17 = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
                        &f14, &f15, &f16, &f17) == 4)
            ticks += f14 + f15 + f16 + f17;
    }
    fclose(f);
    *ns = tick > 0 ? ticks * (1000000000ull / (uint64_t) tick) : 0;
    return 0;
}

int cb_cgstat_cpu(const cb_cgstat_t *s, uint64_t *ns, bool *from_procs) {
    *from_procs = false;
    if (s->version == 2) {
        char buf[S_FILE_MAX];
        if (s_read(s->cpu_dir, "cpu.stat", buf, sizeof buf) < 0) return -1;
        const char *u = strstr(buf, "usage_usec ");
        if (u == NULL) {
            errno = EINVAL;
            return -1;
        }
        *ns = strtoull(u + 11, NULL, 10) * S_NS_PER_USEC;
        return 0;
    }
    if (s->version == 1 && s->cpu_dir >= 0) return s_read_u64(s->cpu_dir, "cpuacct.usage", ns);
    if (s->version == 1) {
        *from_procs = true;
        return s_cpu_procs(s, ns);
    }
    errno = ENOENT;
    return -1;
}

int cb_cgstat_memory(const cb_cgstat_t *s, uint64_t *current, uint64_t *limit) {
    if (s->version == 0) {
        errno = ENOENT;
        return -1;
    }
    bool v2 = s->version == 2;
    if (s_read_u64(s->mem_dir, v2 ? "memory.current" : "memory.usage_in_bytes", current) < 0 ||
        s_read_u64(s->mem_dir, v2 ? "memory.max" : "memory.limit_in_bytes", limit) < 0)
        return -1;
    if (!v2 && *limit >= (1ull << 62)) *limit = 0; /* v1's "unlimited" */
    return 0;
}

void cb_cgstat_peak_start(cb_cgstat_t *s) {
    s->peak_per_cell = false;
    if (s->version == 2) {
        if (s->peak_fd >= 0) close(s->peak_fd);
        s->peak_fd = openat(s->mem_dir, "memory.peak", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        /* Linux 6.12+: a write resets the peak this open file reports */
        s->peak_per_cell = s->peak_fd >= 0 && write(s->peak_fd, "reset\n", 6) == 6;
        if (s->peak_fd < 0) s->peak_fd = openat(s->mem_dir, "memory.peak", O_RDONLY | O_CLOEXEC);
    } else if (s->version == 1) {
        cb_autofd int fd =
            openat(s->mem_dir, "memory.max_usage_in_bytes", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        s->peak_per_cell = fd >= 0 && write(fd, "0\n", 2) == 2;
    }
}

int cb_cgstat_peak(const cb_cgstat_t *s, uint64_t *bytes) {
    if (s->version == 1) return s_read_u64(s->mem_dir, "memory.max_usage_in_bytes", bytes);
    if (s->version == 2 && s->peak_fd >= 0) {
        char buf[64];
        ssize_t r = pread(s->peak_fd, buf, sizeof buf - 1, 0);
        if (r <= 0) return -1;
        buf[r] = '\0';
        *bytes = strtoull(buf, NULL, 10);
        return 0;
    }
    if (s->version == 2) return s_read_u64(s->mem_dir, "memory.peak", bytes);
    errno = ENOENT;
    return -1;
}
