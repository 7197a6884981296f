/*
 * test_snap_agent.c - the checkpoint agent (tiers/snap_agent.c) as init runs
 * it, on scratch directories: while a checkpoint's fork is awaited the agent
 * reads every process in /proc on each look, so it looks soon after "arm"
 * (a fork that parks at once is seen at once) and then ever less often, up
 * to CB_SNAP_SCAN_MAX_MS; a new "arm" looks soon again, and a fork that
 * parks is still taken ("saved"); "export" copies a parked checkpoint's
 * files (as they were at the checkpoint) out of the store into a directory
 * sent with the command; "import" takes such files into a new store, makes
 * the park fifo again and takes the copy CRIU restores (a process holding
 * the fifo, blocked reading it) without a byte; both refuse what they cannot
 * do with the reason.
 */
#include "tap.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tiers/snap_agent.h"

#define S_SAID_MAX 64   /* reply lines kept */
#define S_PARK_MS  3000 /* a parking fork must be taken within this */
#define S_ROUNDS   16   /* looks without a fork: the backoff must reach its top by then */
#define S_PATH_MAX 64   /* a scratch directory's path */

static char s_said[S_SAID_MAX][CB_SNAP_LINE_MAX];
static int s_nsaid;

static void s_say(void *ud, const char *line) {
    (void) ud;
    if (s_nsaid < S_SAID_MAX) (void) snprintf(s_said[s_nsaid++], CB_SNAP_LINE_MAX, "%s", line);
}

static const char *s_last(void) { return s_nsaid > 0 ? s_said[s_nsaid - 1] : ""; }

static int s_mkdir(const char *root, const char *name, char *path, size_t len) {
    int n = snprintf(path, len, "%s/%s", root, name);
    if (n < 0 || (size_t) n >= len || mkdir(path, 0700) < 0) return -1;
    return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void s_write(const char *dir, const char *name, const char *text) {
    char path[2 * S_PATH_MAX];
    (void) snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text)) abort();
    close(fd);
}

static const char *s_read(const char *dir, const char *name, char *buf, size_t len) {
    char path[2 * S_PATH_MAX];
    (void) snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);
    if (fd >= 0) close(fd);
    buf[n < 0 ? 0 : n] = '\0';
    return buf;
}

/* One round of init's loop: poll for what the agent asks, then tick.
 * Returns the wait the agent asked for. */
static int s_round(cb_snap_agent_t *a) {
    int wait = cb_snap_agent_wait_ms(a);
    (void) poll(NULL, 0, wait);
    cb_snap_agent_tick(a);
    return wait;
}

/* A checkpoint's fork as the runner makes one: opens its park fifo and
 * stops until the agent takes it (none of the agent's fds, as in a runner). */
static pid_t s_fork_parking(const char *park, long id) {
    pid_t p = fork();
    if (p != 0) return p;
    (void) syscall(SYS_close_range, 3, ~0U, 0); /* the agent's fifos are not the runner's */
    char path[2 * S_PATH_MAX];
    (void) snprintf(path, sizeof path, "%s/%ld", park, id);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) _exit(2);
    (void) raise(SIGSTOP);
    pause(); /* the agent's drop kills it */
    _exit(0);
}

/* A checkpoint's copy as CRIU restores it: holding its park fifo, blocked
 * reading it, never stopped; a byte it reads ends it (status 3). */
static pid_t s_restored_copy(const char *park, long id) {
    pid_t p = fork();
    if (p != 0) return p;
    (void) syscall(SYS_close_range, 3, ~0U, 0);
    char path[2 * S_PATH_MAX], b;
    (void) snprintf(path, sizeof path, "%s/%ld", park, id);
    int fd = open(path, O_RDONLY | O_CLOEXEC); /* the agent holds it O_RDWR: no wait */
    if (fd < 0) _exit(2);
    _exit(read(fd, &b, 1) == 1 ? 3 : 4);
}

int main(void) {
    char root[] = "/tmp/cb-snap-agent-XXXXXX";
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char store_p[S_PATH_MAX], park_p[S_PATH_MAX], home_p[S_PATH_MAX], tmp_p[S_PATH_MAX];
    int store = s_mkdir(root, "store", store_p, sizeof store_p);
    int park = s_mkdir(root, "park", park_p, sizeof park_p);
    int home = s_mkdir(root, "home", home_p, sizeof home_p);
    int tmp = s_mkdir(root, "tmp", tmp_p, sizeof tmp_p);
    if (store < 0 || park < 0 || home < 0 || tmp < 0) {
        perror("mkdir");
        return 1;
    }
    close(home);
    close(tmp);
    static cb_snap_agent_t a;
    cb_snap_agent_init(&a, store, park, home_p, tmp_p, getpid(), false, NULL, s_say, NULL);
    TAP_OK(strncmp(s_last(), "ready", 5) == 0, "the agent is ready (%s)", s_last());
    TAP_EQ_INT(cb_snap_agent_wait_ms(&a), -1, "nothing awaited: no looks");

    cb_snap_agent_command(&a, "arm 1");
    TAP_OK(strncmp(s_last(), "armed 1 ", 8) == 0, "arm 1 (%s)", s_last());
    int first = cb_snap_agent_wait_ms(&a);
    TAP_OK(first >= 0 && first <= CB_SNAP_SCAN_MS, "the first look comes at once (%d ms)", first);

    /* no fork parks: each look comes later than the one before, up to the top */
    int last = first, grew = 0, top = 0;
    for (int i = 0; i < S_ROUNDS; i++) {
        (void) s_round(&a);
        int w = cb_snap_agent_wait_ms(&a);
        if (w > last) grew++;
        if (w > top) top = w;
        last = w;
    }
    TAP_OK(grew >= 3, "the looks grow apart (%d times)", grew);
    TAP_OK(top > CB_SNAP_SCAN_MAX_MS / 2 && top <= CB_SNAP_SCAN_MAX_MS,
           "at most CB_SNAP_SCAN_MAX_MS apart (%d ms)", top);

    /* a new checkpoint: looked for at once again, and its fork is taken */
    s_write(home_p, "note.txt", "at the checkpoint");
    s_write(tmp_p, "t.txt", "tmp then");
    cb_snap_agent_command(&a, "arm 2");
    TAP_OK(strncmp(s_last(), "armed 2 ", 8) == 0, "arm 2 (%s)", s_last());
    int again = cb_snap_agent_wait_ms(&a);
    TAP_OK(again >= 0 && again <= CB_SNAP_SCAN_MS, "arm looks at once again (%d ms)", again);
    pid_t fork2 = s_fork_parking(park_p, 2);
    char want[64];
    (void) snprintf(want, sizeof want, "saved 2 %d ", (int) fork2);
    bool saved = false;
    for (int spent = 0; !saved && spent < S_PARK_MS;) {
        spent += s_round(&a) + 1;
        for (int i = 0; i < s_nsaid; i++)
            if (strncmp(s_said[i], want, strlen(want)) == 0) saved = true;
    }
    TAP_OK(saved, "the parked fork is taken (%s)", s_last());
    int st = 0;

    /* export: the checkpoint's files, not the live ones, into a directory */
    s_write(home_p, "note.txt", "changed since");
    char out_p[S_PATH_MAX], got[64];
    int out = s_mkdir(root, "out", out_p, sizeof out_p);
    cb_snap_agent_command_fd(&a, "export 2", out);
    TAP_OK(strncmp(s_last(), "exported 2 ", 11) == 0, "export 2 (%s)", s_last());
    TAP_EQ_STR(s_read(out_p, "home/note.txt", got, sizeof got), "at the checkpoint",
               "the home as it was at the checkpoint");
    TAP_EQ_STR(s_read(out_p, "tmp/t.txt", got, sizeof got), "tmp then", "... and its /tmp");
    cb_snap_agent_command_fd(&a, "export 2", out);
    TAP_OK(strncmp(s_last(), "fail 2 export of home: File exists", 34) == 0,
           "into a directory that has them already: refused, nothing overwritten (%s)",
           s_last());
    cb_snap_agent_command(&a, "arm 3"); /* armed just now: its fork has not parked */
    cb_snap_agent_command_fd(&a, "export 3", out);
    TAP_OK(strcmp(s_last(), "fail 3 its copy has not parked") == 0, "an armed one: refused (%s)",
           s_last());
    cb_snap_agent_command(&a, "drop 3");
    cb_snap_agent_command_fd(&a, "export 9", out);
    TAP_OK(strcmp(s_last(), "fail 9 no such checkpoint") == 0, "an unknown one (%s)", s_last());
    cb_snap_agent_command(&a, "export 2");
    TAP_OK(strcmp(s_last(), "fail 2 export needs a directory sent with it") == 0,
           "without a directory (%s)", s_last());

    /* import: the exported checkpoint as a new sandbox's agent takes it from an
     * image; its copy is "restored": a process holding the fifo, blocked reading */
    cb_snap_agent_command_fd(&a, "import 7", out);
    TAP_OK(strncmp(s_last(), "imported 7 ", 11) == 0, "import 7 (%s)", s_last());
    TAP_EQ_STR(s_read(store_p, "7/0/note.txt", got, sizeof got), "at the checkpoint",
               "its home is in the store");
    TAP_EQ_STR(s_read(store_p, "7/1/t.txt", got, sizeof got), "tmp then", "... and its /tmp");
    char fifo_p[2 * S_PATH_MAX];
    (void) snprintf(fifo_p, sizeof fifo_p, "%s/7", park_p);
    struct stat fst;
    TAP_OK(stat(fifo_p, &fst) == 0 && S_ISFIFO(fst.st_mode) && (fst.st_mode & 07777) == 0644,
           "its park fifo made again, with the mode CRIU dumped it with");
    cb_snap_agent_command_fd(&a, "import 7", out);
    TAP_OK(strcmp(s_last(), "fail 7 the id is taken") == 0, "the same id again (%s)", s_last());
    pid_t restored = s_restored_copy(park_p, 7);
    (void) snprintf(want, sizeof want, "saved 7 %d ", (int) restored);
    saved = false;
    for (int spent = 0; !saved && spent < S_PARK_MS;) {
        spent += s_round(&a) + 1;
        for (int i = 0; i < s_nsaid; i++)
            if (strncmp(s_said[i], want, strlen(want)) == 0) saved = true;
    }
    TAP_OK(saved, "the restored copy is taken, though never stopped (%s)", s_last());
    for (int i = 0; i < 4; i++) (void) s_round(&a);
    TAP_EQ_INT(waitpid(restored, &st, WNOHANG), 0,
               "and given no byte: it still waits for the message that wakes it");
    cb_snap_agent_command(&a, "drop 7");
    TAP_EQ_INT(waitpid(restored, &st, 0), restored, "dropped, it ends");

    char bad_p[S_PATH_MAX];
    int bad = s_mkdir(root, "bad", bad_p, sizeof bad_p); /* no home/ nor tmp/ in it */
    cb_snap_agent_command_fd(&a, "import 8", bad);
    TAP_OK(strncmp(s_last(), "fail 8 import of home: ", 23) == 0, "an image without files (%s)",
           s_last());
    (void) snprintf(fifo_p, sizeof fifo_p, "%s/8", park_p);
    TAP_OK(access(fifo_p, F_OK) < 0, "... leaves no fifo behind");
    cb_snap_agent_command_fd(&a, "import 8", out);
    TAP_OK(strncmp(s_last(), "imported 8 ", 11) == 0, "and frees its id (%s)", s_last());
    cb_snap_agent_command(&a, "drop 8");
    cb_snap_agent_command(&a, "import 9");
    TAP_OK(strcmp(s_last(), "fail 9 import needs a directory sent with it") == 0,
           "import without a directory (%s)", s_last());
    close(bad);
    close(out);

    cb_snap_agent_command(&a, "drop 2");
    cb_snap_agent_command(&a, "drop 1");
    TAP_EQ_INT(waitpid(fork2, &st, 0), fork2, "the dropped copy ends");
    TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "... killed (status %#x)", st);
    cb_snap_agent_end(&a);

    pid_t rm = fork();
    if (rm == 0) {
        execlp("rm", "rm", "-rf", root, (char *) NULL);
        _exit(127);
    }
    (void) waitpid(rm, NULL, 0);
    TAP_DONE();
}
