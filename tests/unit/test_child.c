/*
 * test_child.c - the runner's exec plan (launcher/child.c): the fixed
 * environment, and --env applied to it: NAME=VALUE as given, a bare NAME
 * from the environment the parent process started with (its
 * /proc/PID/environ, not its current one), a name it lacks left unset, a
 * fixed entry replaced rather than duplicated, and -I turned into -s -P
 * when a PYTHON* entry must take effect.
 */
#include "launcher/child.h"
#include "tap.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *s_get(const cb_exec_plan_t *p, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; p->envp[i]; i++)
        if (strncmp(p->envp[i], name, n) == 0 && p->envp[i][n] == '=') return p->envp[i] + n + 1;
    return NULL;
}

static int s_count(const cb_exec_plan_t *p, const char *name) {
    size_t n = strlen(name);
    int c = 0;
    for (size_t i = 0; p->envp[i]; i++)
        c += strncmp(p->envp[i], name, n) == 0 && p->envp[i][n] == '=';
    return c;
}

int main(void) {
    /* a "kernel" with a known start-up environment */
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0) return 1;
    pid_t kid = fork();
    if (kid == 0) {
        char *const argv[] = {"sleep", "30", NULL};
        char *const envp[] = {"API_TOKEN=s3cret=x", "TZ=Europe/Paris", "EMPTY=", NULL};
        close(pp[0]);
        execve("/bin/sleep", argv, envp);
        _exit(127);
    }
    close(pp[1]);
    char c;
    (void) read(pp[0], &c, 1); /* EOF at exec */
    close(pp[0]);

    static cb_exec_plan_t p;
    TAP_EQ_INT(cb_exec_plan_init(&p, "/usr/bin/python3", "/opt/r.py", "/home/user", "user"), 0,
               "plan");
    TAP_EQ_STR(p.argv[1], "-I", "isolated by default");
    const char *env[] = {"API_TOKEN", "TZ",  "MISSING", "LANG=de_DE.UTF-8",
                         "X=1",       "X=2", "EMPTY",   NULL};
    TAP_EQ_INT(cb_exec_plan_env(&p, env, 7, kid), 0, "--env applied");
    TAP_EQ_STR(s_get(&p, "API_TOKEN"), "s3cret=x", "bare NAME: the parent's start-up value");
    TAP_EQ_STR(s_get(&p, "TZ"), "Europe/Paris", "bare TZ");
    TAP_OK(s_get(&p, "MISSING") == NULL, "a name the parent lacks is left unset");
    TAP_EQ_STR(s_get(&p, "LANG"), "de_DE.UTF-8", "a fixed entry replaced");
    TAP_EQ_INT(s_count(&p, "LANG"), 1, "... not duplicated");
    TAP_EQ_STR(s_get(&p, "X"), "2", "the last of a repeated name wins");
    TAP_EQ_INT(s_count(&p, "X"), 1, "... once");
    TAP_EQ_STR(s_get(&p, "EMPTY"), "", "an empty value is a value");
    TAP_EQ_STR(s_get(&p, "HOME"), "/home/user", "the fixed entries stay");
    TAP_EQ_STR(p.argv[1], "-I", "no PYTHON* entry: still -I");

    const char *py[] = {"PYTHONHASHSEED=0"};
    TAP_EQ_INT(cb_exec_plan_env(&p, py, 1, kid), 0, "PYTHONHASHSEED");
    TAP_OK(strcmp(p.argv[1], "-s") == 0 && strcmp(p.argv[2], "-P") == 0 &&
               strcmp(p.argv[3], "-u") == 0 && strcmp(p.argv[4], "/opt/r.py") == 0 &&
               p.argv[5] == NULL,
           "a PYTHON* entry: -s -P -u RUNNER (-I without -E)");

    static cb_exec_plan_t q;
    cb_exec_plan_init(&q, "/usr/bin/python3", "/opt/r.py", "/home/user", "user");
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    const char *gone[] = {"API_TOKEN", "A=1"};
    TAP_EQ_INT(cb_exec_plan_env(&q, gone, 2, kid), 0, "parent gone: not fatal");
    TAP_OK(s_get(&q, "API_TOKEN") == NULL && strcmp(s_get(&q, "A"), "1") == 0,
           "bare names left unset, NAME=VALUE kept");
    TAP_DONE();
}
