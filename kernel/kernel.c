/*
 * kernel.c - cb_kernel_main: the wiring of the kernel's layers (core.h).
 *
 * Loads the connection file, builds the server (sockets, loop, signals),
 * the session driver on the server's loop with relay's callbacks, and the
 * request state dispatch and relay share; registers the server's callbacks
 * (requests to dispatch, SIGINT/SIGCHLD and iopub pacing to the session);
 * runs the loop; tears everything down in the reverse order.
 */
#include "kernel/kernel.h"

#include "artifacts/artifacts.h"
#include "isolate/log.h"
#include "kernel/dispatch.h"
#include "kernel/debug_kernel.h"
#include "kernel/relay.h"
#include "kernel/policy.h"
#include "kernel/snapshot.h"

#include <malloc.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

#define S_MMAP_THRESHOLD (256u << 10) /* larger blocks are mmapped: freed at once to the OS */

/* ---- the server's callbacks ----------------------------------------------------------- */

static void s_on_readable(void *ud, cb_channel_t ch) { cb_dispatch_serve(ud, ch); }

static void s_on_interrupt(void *ud) {
    cb_kernel_t *k = ud;
    cb_session_interrupt(k->session);
}

static void s_on_child(void *ud) {
    cb_kernel_t *k = ud;
    cb_session_reap(k->session);
}

static void s_on_pace(void *ud, bool paused) {
    cb_kernel_t *k = ud;
    if (k->session) cb_session_pause(k->session, paused);
}

static const cb_server_cbs_t s_server_cbs = {
    .on_readable = s_on_readable,
    .on_interrupt = s_on_interrupt,
    .on_child = s_on_child,
    .on_pace = s_on_pace,
};

/* ---- set-up ---------------------------------------------------------------------------------- */

/* Until the runner says hello, the version is what the interpreter's real
 * name tells (python3.11 -> 3.11), so early kernel_info replies (and
 * notebooks' language_info) are not just "3". */
static void s_guess_python_version(cb_kernel_t *k) {
    char real[CB_PATH_MAX];
    if (realpath(k->opts->c.python, real) == NULL) return;
    const char *b = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    if (strncmp(b, "python", 6) == 0 && b[6] >= '0' && b[6] <= '9' &&
        strspn(b + 6, "0123456789.") == strlen(b + 6))
        snprintf(k->python_version, sizeof k->python_version, "%.16s", b + 6);
}

static int s_server(cb_kernel_t *k, cb_conn_t *conn) {
    char eps[CB_CH_COUNT][CB_PATH_MAX];
    cb_server_cfg_t cfg = {.key = conn->key, .key_len = conn->key_len, .signals = true};
    for (int ch = 0; ch < CB_CH_COUNT; ch++) {
        if (cb_conn_endpoint(conn, ch, eps[ch], sizeof eps[ch]) < 0) {
            LOG_E("endpoint for %s too long", cb_channel_name(ch));
            return -1;
        }
        cfg.endpoints[ch] = eps[ch];
        k->ports[ch] = conn->ports[ch];
    }
    cfg.parent_pid = getppid();
    const char *jpy = getenv("JPY_PARENT_PID");
    if (jpy && atoi(jpy) > 1) cfg.parent_pid = (pid_t) atoi(jpy);
    k->srv = cb_server_new(&cfg, &s_server_cbs, k);
    sodium_memzero(conn->key, sizeof conn->key);
    return k->srv ? 0 : -1;
}

static int s_setup(cb_kernel_t *k, cb_conn_t *conn) {
    const cb_opts_t *o = k->opts;
    if (cb_opts_find_helpers(o, k->launcher_path, sizeof k->launcher_path, k->runner_path,
                             sizeof k->runner_path) < 0) {
        fprintf(stderr, "cellblock-kernel: cannot find the launcher, runner or python (see log)\n");
        sodium_memzero(conn->key, sizeof conn->key);
        return -1;
    }
    s_guess_python_version(k);
    if (s_server(k, conn) < 0) return -1;
    k->up = &cb_relay_upcalls;
    k->queue = calloc(CB_SHELL_QUEUE_MAX, sizeof *k->queue);
    k->history = cb_history_new();
    k->comms = cb_comms_new();
    if (k->queue == NULL || k->history == NULL || k->comms == NULL) return -1;
    k->artifacts = cb_opts_new_artifacts(o);
    k->scfg = (cb_session_cfg_t){
        .launcher = k->launcher_path,
        .python = o->c.python,
        .runner = k->runner_path,
        .launcher_args = o->fwd,
        .timeout_s = o->c.timeout_s,
        .memory_mb = o->c.memory_mb,
        .cell_output_max = (uint64_t) o->c.max_output_mb << 20,
        .artifacts = k->artifacts,
        .preload = o->c.preload,
    };
    k->session = cb_session_new(&k->scfg, &cb_relay_callbacks, k, cb_server_loop(k->srv));
    if (k->session == NULL || cb_debug_kernel_init(k) < 0 ||
        (k->snaps = cb_snapshots_new(k)) == NULL)
        return -1;
    if (o->c.resume) cb_snapshots_resume(k->snaps, o->c.resume); /* --resume IMAGE */
    if (strcmp(o->c.sandbox, "none") == 0)
        LOG_W("--sandbox none: user code runs WITHOUT any confinement");
    if (strcmp(o->c.network, "host") == 0)
        LOG_W("--network host: the sandbox shares the host's network");
    return 0;
}

static void s_teardown(cb_kernel_t *k) {
    k->exiting = true;
    if (k->session) cb_session_quit(k->session);
    cb_session_destroy(&k->session);
    cb_debug_kernel_fini(k);
    cb_snapshots_destroy(&k->snaps);
    if (k->cur_kind != CB_REQ_NONE) cb_msg_clear(&k->cur);
    while (k->q_len > 0) {
        cb_msg_clear(&k->queue[k->q_head].msg);
        k->q_head = (k->q_head + 1) % CB_SHELL_QUEUE_MAX;
        k->q_len--;
    }
    free(k->queue);
    cb_history_destroy(&k->history);
    cb_comms_destroy(&k->comms);
    json_decref(k->last_parent);
    cb_relay_forget_all(k);
    cb_server_destroy(&k->srv);
    cb_artifacts_destroy(&k->artifacts);
    cb_policy_destroy(k);
}

int cb_kernel_main(cb_opts_t *opts) {
    /* big blocks (frames, artifacts) go back to the OS when freed, so a
     * sandbox's burst leaves nothing behind in the kernel */
    mallopt(M_MMAP_THRESHOLD, S_MMAP_THRESHOLD);
    cb_conn_t *conn = calloc(1, sizeof *conn);
    cb_kernel_t *k = calloc(1, sizeof *k);
    if (k == NULL || conn == NULL) {
        free(conn);
        free(k);
        return 1;
    }
    k->opts = opts;
    cb_snapshots_open_resume(opts); /* --resume: the image's record, and its tier */
    int rc = cb_conn_load(opts->c.connection_file, conn);
    if (rc != CB_CONN_OK) {
        fprintf(stderr, "cellblock-kernel: connection file %s: %s\n",
                opts->c.connection_file ? opts->c.connection_file : "(none: use -f)", conn->error);
        sodium_memzero(conn, sizeof *conn);
        free(conn);
        free(k);
        return rc == CB_CONN_EUNSUPPORTED || opts->c.connection_file == NULL ? 2 : 1;
    }
    int status = 1;
    if (s_setup(k, conn) == 0) {
        cb_dispatch_status(k, NULL, "starting");
        (void) cb_session_start(k->session);
        cb_dispatch_sync_shell(k);
        LOG_I("cellblock-kernel %s ready (session %s)", CB_VERSION, cb_server_session(k->srv));
        cb_server_run(k->srv);
        status = 0;
    }
    sodium_memzero(conn, sizeof *conn);
    free(conn);
    s_teardown(k);
    free(k);
    return status;
}
