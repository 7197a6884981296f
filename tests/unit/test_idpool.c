/* test_idpool.c - per-sandbox host ids: distinct, exhausted cleanly, given
 * back on release and when the holder is SIGKILLed, never shared with a
 * live holder (another process), lock directory checked. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/idpool.h"
#include "launcher/workdir.h"
#include "tap.h"

#define FIRST 1879048192UL

static char why[512];

/* A child that leases the only id of [FIRST+9, 1] and reports it on a pipe,
 * then waits (until killed). */
static pid_t holder(const char *dir, unsigned long id, int *readyfd) {
    int p[2];
    if (pipe(p) < 0) abort();
    pid_t c = fork();
    if (c == 0) {
        cb_idlease_t l;
        char ok = cb_idpool_acquire(dir, id, 1, &l, why, sizeof why) == 0 ? 'y' : 'n';
        (void) write(p[1], &ok, 1);
        pause();
        _exit(0);
    }
    close(p[1]);
    *readyfd = p[0];
    return c;
}

int main(void) {
    char root[] = "/tmp/cb-test-idpool-XXXXXX";
    if (mkdtemp(root) == NULL) return 1;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/run/cellblock/uids", root);

    cb_idlease_t a, b, c, d, e;
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST, 4, &a, why, sizeof why), 0, "first lease");
    struct stat st;
    TAP_OK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700, "lock dir created 0700");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST, 4, &b, why, sizeof why), 0, "second lease");
    TAP_OK(a.id != b.id, "two leases, two ids (%lu, %lu)", a.id, b.id);
    TAP_OK(a.id >= FIRST && a.id < FIRST + 4 && b.id >= FIRST && b.id < FIRST + 4,
           "ids inside the range");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST, 4, &c, why, sizeof why), 0, "third lease");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST, 4, &d, why, sizeof why), 0, "fourth lease");
    TAP_OK(a.id != c.id && a.id != d.id && b.id != c.id && b.id != d.id && c.id != d.id,
           "four distinct ids");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST, 4, &e, why, sizeof why), -1, "range exhausted");
    TAP_OK(strstr(why, "in use") && strstr(why, "--uid-range"), "exhaustion names the fix: %s",
           why);
    unsigned long freed = b.id;
    char lock[512];
    snprintf(lock, sizeof lock, "%s/%lu", dir, freed);
    TAP_OK(access(lock, F_OK) == 0, "a lock file per id in use");
    cb_idpool_release(&b);
    TAP_OK(access(lock, F_OK) != 0, "release unlinks the lock file");
    cb_idpool_release(&b);
    TAP_OK(b.lock_fd == -1 && b.dir_fd == -1, "release is idempotent");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST, 4, &e, why, sizeof why), 0, "lease after release");
    TAP_EQ_INT(e.id, freed, "it gets the id given back");
    cb_idpool_release(&a);
    cb_idpool_release(&c);
    cb_idpool_release(&d);
    cb_idpool_release(&e);

    /* another process holds the only id: we cannot have it */
    int rfd;
    pid_t h = holder(dir, FIRST + 9, &rfd);
    char ok = 0;
    TAP_OK(read(rfd, &ok, 1) == 1 && ok == 'y', "a child holds the id");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST + 9, 1, &a, why, sizeof why), -1,
               "an id held by a live process is not given out");
    /* SIGKILLed holder: no release ran, the lock file stays, the id is free */
    kill(h, SIGKILL);
    waitpid(h, NULL, 0);
    close(rfd);
    snprintf(lock, sizeof lock, "%s/%lu", dir, FIRST + 9);
    TAP_OK(access(lock, F_OK) == 0, "the killed holder's lock file stays");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST + 9, 1, &a, why, sizeof why), 0,
               "the id of a SIGKILLed holder is free again");
    TAP_EQ_INT(a.id, FIRST + 9, "same id");
    cb_idpool_release(&a);

    /* a clean release sweeps the lock files of killed holders, never a live one's */
    pid_t k1 = holder(dir, FIRST + 9, &rfd);
    TAP_OK(read(rfd, &ok, 1) == 1 && ok == 'y', "a child holds an id");
    close(rfd);
    kill(k1, SIGKILL);
    waitpid(k1, NULL, 0);
    TAP_OK(access(lock, F_OK) == 0, "its lock file stays after a SIGKILL");
    int live_fd;
    pid_t live = holder(dir, FIRST + 10, &live_fd);
    TAP_OK(read(live_fd, &ok, 1) == 1 && ok == 'y', "another child holds another id");
    char live_lock[512], junk[512];
    snprintf(live_lock, sizeof live_lock, "%s/%lu", dir, FIRST + 10);
    snprintf(junk, sizeof junk, "%s/not-an-id", dir);
    int jf = open(junk, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    close(jf);
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST + 20, 1, &a, why, sizeof why), 0, "a lease");
    cb_idpool_release(&a);
    TAP_OK(access(lock, F_OK) != 0, "its release removed the killed holder's lock file");
    TAP_OK(access(live_lock, F_OK) == 0, "... not the live holder's");
    TAP_OK(access(junk, F_OK) == 0, "... nor a file that is no id's");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST + 10, 1, &a, why, sizeof why), -1,
               "the live holder still has its id");
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    close(live_fd);
    unlink(junk);
    unlink(live_lock);

    /* the lock directory must be ours and not writable by others */
    chmod(dir, 0777);
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST, 4, &a, why, sizeof why), -1,
               "a world-writable lock dir is refused");
    TAP_OK(strstr(why, "writable") != NULL, "reason: %s", why);
    chmod(dir, 0700);
    char link[512];
    snprintf(link, sizeof link, "%s/link", root);
    (void) symlink(dir, link);
    TAP_EQ_INT(cb_idpool_acquire(link, FIRST, 4, &a, why, sizeof why), -1,
               "a symlinked lock dir is refused");
    TAP_EQ_INT(cb_idpool_acquire(dir, 0, 4, &a, why, sizeof why), -1, "id 0 is never given");
    TAP_EQ_INT(cb_idpool_acquire(dir, FIRST, 0, &a, why, sizeof why), -1, "empty range refused");
    cb_idpool_release(&a);
    cb_workdir_remove(root);
    TAP_DONE();
}
