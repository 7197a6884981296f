/*
 * snap_proc.c - the checkpoint agent's view of the sandbox's processes
 * through /proc (see snap_proc.h).
 */
#include "tiers/snap_proc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tiers/snap_tree.h"

#define S_PF_KTHREAD 0x00200000u /* /proc/PID/stat flags: a kernel thread (the VM's) */
#define S_PF_EXITING 0x00000004u /* ... the thread is exiting */
#define S_PROC_BUF   512         /* bytes of /proc/PID/stat read */

static char s_pdents[CB_SNAP_DENTS_BUF]; /* /proc/PID/fd listings */

int cb_snap_proc_write(pid_t pid, const char *file, const char *value) {
    char path[64];
    (void) snprintf(path, sizeof path, "/proc/%d/%s", (int) pid, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t w = write(fd, value, strlen(value));
    close(fd);
    return w < 0 ? -1 : 0;
}

/* /proc/PID/stat: state letter, parent and flags.  -1 when it is gone. */
static int s_stat(pid_t pid, char *state, pid_t *ppid, unsigned *flags) {
    char path[64], buf[S_PROC_BUF];
    (void) snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* comm may hold anything: fields follow the last ')' */
    if (p == NULL) return -1;
    int pp = 0;
    unsigned long fl = 0;
    if (sscanf(p + 1, " %c %d %*d %*d %*d %*d %lu", state, &pp, &fl) != 3) return -1;
    *ppid = (pid_t) pp;
    *flags = (unsigned) fl;
    return 0;
}

bool cb_snap_proc_holds(pid_t pid, int fd) {
    struct stat want;
    if (fd < 0 || fstat(fd, &want) < 0) return false;
    char path[64];
    (void) snprintf(path, sizeof path, "/proc/%d/fd", (int) pid);
    int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) return false;
    bool found = false;
    for (;;) {
        long n = syscall(SYS_getdents64, d, s_pdents, sizeof s_pdents);
        if (n <= 0) break;
        for (long off = 0; off < n && !found;) {
            cb_snap_dirent64_t *e = (cb_snap_dirent64_t *) (s_pdents + off);
            off += e->d_reclen;
            struct stat st;
            if (e->d_name[0] != '.' && fstatat(d, e->d_name, &st, 0) == 0 &&
                st.st_dev == want.st_dev && st.st_ino == want.st_ino)
                found = true;
        }
        if (found) break;
    }
    close(d);
    return found;
}

/* init itself, a kept process, or a parked copy: never ended by a rollback */
static bool s_kept(const cb_snap_agent_t *a, pid_t pid) {
    if (pid == getpid() || (a->keep > 0 && pid == a->keep)) return true;
    for (int i = 0; i < CB_SNAP_SLOTS; i++)
        if (a->slot[i].id != 0 && a->slot[i].pid == pid) return true;
    return false;
}

/* (the guest kernel's threads, in the micro-VM) */
int cb_snap_proc_each(cb_snap_agent_t *a, cb_snap_pid_fn fn, void *arg) {
    static char dents[CB_SNAP_DENTS_BUF];
    int d = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) return -1;
    for (;;) {
        long n = syscall(SYS_getdents64, d, dents, sizeof dents);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            cb_snap_dirent64_t *e = (cb_snap_dirent64_t *) (dents + off);
            off += e->d_reclen;
            char *end;
            long v = strtol(e->d_name, &end, 10);
            if (*end != '\0' || v <= 0 || s_kept(a, (pid_t) v)) continue;
            char state;
            pid_t ppid;
            unsigned flags;
            /* a process without a parent in this namespace came from outside it
             * (runsc exec's relay; the guest kernel's kthreadd): not the code's */
            if (s_stat((pid_t) v, &state, &ppid, &flags) < 0 || (flags & S_PF_KTHREAD) || ppid == 0)
                continue;
            if (fn(a, (pid_t) v, state, arg) < 0) {
                close(d);
                return -1;
            }
        }
    }
    close(d);
    return 0;
}

/* What it was writing is written, it writes nothing more. */
bool cb_snap_proc_exiting(pid_t pid) {
    static char dents[CB_SNAP_DENTS_BUF];
    char path[64];
    (void) snprintf(path, sizeof path, "/proc/%d/task", (int) pid);
    int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) return true; /* gone */
    bool all = true;
    for (;;) {
        long n = syscall(SYS_getdents64, d, dents, sizeof dents);
        if (n <= 0) break;
        for (long off = 0; off < n && all;) {
            cb_snap_dirent64_t *e = (cb_snap_dirent64_t *) (dents + off);
            off += e->d_reclen;
            if (e->d_name[0] == '.') continue;
            char tpath[96], buf[S_PROC_BUF];
            (void) snprintf(tpath, sizeof tpath, "/proc/%d/task/%s/stat", (int) pid, e->d_name);
            int fd = open(tpath, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t r = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (r <= 0) continue;
            buf[r] = '\0';
            char *p = strrchr(buf, ')');
            unsigned long fl = 0;
            char st = '?';
            if (p && sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &st, &fl) == 2)
                all = st == 'Z' || st == 'X' || (fl & S_PF_EXITING) != 0;
        }
    }
    close(d);
    return all;
}
