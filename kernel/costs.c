/*
 * costs.c - a cell's costs and the sandbox's usage (see costs.h).
 *
 * The cgroup is found from the runner's host pid (the launcher's "started"
 * report) and kept open while that runner lives; a cell during which the
 * sandbox was replaced says so ("sandbox_restarted") and counts from the new
 * sandbox's start; one whose sandbox started with it ("sandbox_started": the
 * first of `cellblock run`, the first after a restart) includes the start-up.  Per-host network costs are the difference of the
 * proxy's counters (which grow from its start) between the cell's start
 * and end; a proxy restarted meanwhile counts from zero.
 */
#include "kernel/costs.h"

#include "isolate/cgstat.h"
#include "isolate/log.h"
#include "kernel/launch.h"
#include "kernel/netctl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_NS_PER_S 1e9
#define S_MS_PER_S 1e3

struct cb_costs {
    bool network;       /* an egress proxy counts per host */
    cb_cgstat_t cg;     /* the sandbox's cgroup, when it has one */
    int64_t t0_ms;      /* the cell's start */
    uint64_t cpu0_ns;   /* CPU of the group at the start */
    bool cpu0_ok;       /* ... known */
    pid_t runner0;      /* the runner at the start */
    uint64_t out[2];    /* stdout, stderr bytes of the cell */
    uint64_t display;   /* display bytes of the cell */
    json_t *net0;       /* the proxy's counters at the start (owned), or NULL */
    uint64_t usage_cpu; /* usage_request: CPU at the last request */
    int64_t usage_ms;   /* ... and when */
    pid_t usage_runner; /* ... of which runner */
};

cb_costs_t *cb_costs_new(bool network) {
    cb_costs_t *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->network = network;
    cb_cgstat_init(&c->cg);
    return c;
}

void cb_costs_destroy(cb_costs_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_costs_t *c = *self_p;
    *self_p = NULL;
    cb_cgstat_close(&c->cg);
    json_decref(c->net0);
    free(c);
}

/* The cgroup of the runner now (reopened when the runner changed). */
static pid_t s_cgroup(cb_costs_t *c, cb_session_t *s) {
    cb_launch_t *l = cb_session_launcher(s);
    pid_t runner = l ? l->runner_pid : -1;
    if (runner != c->cg.member || c->cg.version == 0) {
        cb_cgstat_close(&c->cg);
        if (runner > 0 && cb_cgstat_open(&c->cg, runner) < 0)
            LOG_D("costs: no cgroup for runner %ld", (long) runner);
    }
    return runner;
}

void cb_costs_begin(cb_costs_t *c, cb_session_t *s) {
    c->t0_ms = cb_now_ms();
    c->out[0] = c->out[1] = c->display = 0;
    c->runner0 = s_cgroup(c, s);
    bool procs;
    c->cpu0_ok = c->cg.version != 0 && cb_cgstat_cpu(&c->cg, &c->cpu0_ns, &procs) == 0;
    if (c->cg.version != 0) cb_cgstat_peak_start(&c->cg);
    json_decref(c->net0);
    c->net0 = NULL;
    char why[CB_LAUNCH_TEXT_MAX];
    cb_launch_t *l = cb_session_ready(s) ? cb_session_launcher(s) : NULL;
    if (c->network && l != NULL && (c->net0 = cb_netctl_stats(l, why, sizeof why)) == NULL)
        LOG_W("costs: the proxy's counters at the cell's start: %s", why);
}

void cb_costs_stream(cb_costs_t *c, int which, size_t n) { c->out[which ? 1 : 0] += n; }

void cb_costs_display(cb_costs_t *c, size_t n) { c->display += n; }

static json_int_t s_get(const json_t *o, const char *host, const char *key) {
    return json_integer_value(json_object_get(json_object_get(o, host), key));
}

/* Per-host differences between the proxy's counters now and at the start. */
static json_t *s_network(cb_costs_t *c, cb_session_t *s) {
    char why[CB_LAUNCH_TEXT_MAX];
    cb_launch_t *l = cb_session_ready(s) ? cb_session_launcher(s) : NULL;
    json_auto_t *now = l ? cb_netctl_stats(l, why, sizeof why) : NULL;
    json_t *out = json_object();
    if (now == NULL) {
        if (l != NULL) LOG_W("costs: the proxy's counters at the cell's end: %s", why);
        return out;
    }
    static const char *const keys[] = {"connections", "bytes_up", "bytes_down", "refused"};
    const char *host;
    json_t *v;
    json_object_foreach(now, host, v) {
        json_int_t d[4];
        bool any = false, reset = false;
        for (size_t i = 0; i < 4; i++) {
            json_int_t a = s_get(now, host, keys[i]), b = s_get(c->net0, host, keys[i]);
            if (a < b) reset = true; /* the proxy restarted: its counters began anew */
            d[i] = a - b;
        }
        for (size_t i = 0; i < 4; i++) {
            if (reset) d[i] = s_get(now, host, keys[i]);
            any = any || d[i] > 0;
        }
        if (any)
            json_object_set_new(out, host,
                                json_pack("{s:I, s:I, s:I, s:I}", keys[0], d[0], keys[1], d[1],
                                          keys[2], d[2], keys[3], d[3]));
    }
    return out;
}

json_t *cb_costs_end(cb_costs_t *c, cb_session_t *s, const json_t *artifacts) {
    int64_t wall = cb_now_ms() - c->t0_ms;
    pid_t runner = s_cgroup(c, s);
    bool started = c->runner0 <= 0 && runner > 0; /* during the cell: its start-up counts */
    bool restarted = c->runner0 > 0 && runner != c->runner0;
    uint64_t cpu = 0, cur = 0, lim = 0, peak = 0;
    bool procs = false;
    bool cpu_ok = c->cg.version != 0 && cb_cgstat_cpu(&c->cg, &cpu, &procs) == 0;
    bool mem_ok = c->cg.version != 0 && cb_cgstat_memory(&c->cg, &cur, &lim) == 0;
    bool peak_ok = c->cg.version != 0 && cb_cgstat_peak(&c->cg, &peak) == 0;
    if (cpu_ok && c->cpu0_ok && !restarted && !started && cpu >= c->cpu0_ns) cpu -= c->cpu0_ns;
    json_int_t files = 0, bytes = 0;
    size_t i;
    json_t *a;
    json_array_foreach(artifacts, i, a) {
        files++;
        bytes += json_integer_value(json_object_get(a, "size"));
    }
    json_t *o = json_pack(
        "{s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:b, s:b}", "wall_s",
        (double) wall / S_MS_PER_S, "cpu_s",
        cpu_ok ? json_real((double) cpu / S_NS_PER_S) : json_null(), "cpu_source",
        cpu_ok ? json_string(procs ? "processes" : "cgroup") : json_null(), "memory_peak_bytes",
        peak_ok ? json_integer((json_int_t) peak) : json_null(), "memory_peak_scope",
        peak_ok ? json_string(c->cg.peak_per_cell && !restarted ? "cell" : "sandbox") : json_null(),
        "memory_bytes", mem_ok ? json_integer((json_int_t) cur) : json_null(), "memory_limit_bytes",
        mem_ok && lim > 0 ? json_integer((json_int_t) lim) : json_null(), "stdout_bytes",
        (json_int_t) c->out[0], "stderr_bytes", (json_int_t) c->out[1], "display_bytes",
        (json_int_t) c->display, "files_written", files, "files_bytes", bytes, "sandbox_started",
        started, "sandbox_restarted", restarted);
    if (o != NULL && c->cg.version == 0)
        json_object_set_new(o, "cgroup",
                            json_string("none (rlimits only): no CPU or memory figures"));
    if (o != NULL && c->network) json_object_set_new(o, "network", s_network(c, s));
    return o;
}

int cb_costs_memory(cb_costs_t *c, cb_session_t *s, uint64_t *bytes) {
    uint64_t lim = 0;
    (void) s_cgroup(c, s);
    return c->cg.version != 0 && cb_cgstat_memory(&c->cg, bytes, &lim) == 0 ? 0 : -1;
}

json_t *cb_costs_usage(cb_costs_t *c, cb_session_t *s) {
    pid_t runner = s_cgroup(c, s);
    uint64_t cpu = 0, cur = 0, lim = 0;
    bool procs = false;
    bool cpu_ok = c->cg.version != 0 && cb_cgstat_cpu(&c->cg, &cpu, &procs) == 0;
    bool mem_ok = c->cg.version != 0 && cb_cgstat_memory(&c->cg, &cur, &lim) == 0;
    int64_t now = cb_now_ms();
    double percent = 0.0; /* as psutil's first cpu_percent: nothing to compare with yet */
    if (cpu_ok && c->usage_ms > 0 && runner == c->usage_runner && cpu >= c->usage_cpu &&
        now > c->usage_ms)
        percent = (double) (cpu - c->usage_cpu) / 1e6 / (double) (now - c->usage_ms) * 100.0;
    if (cpu_ok) {
        c->usage_cpu = cpu;
        c->usage_ms = now;
        c->usage_runner = runner;
    }
    char host[256] = "";
    (void) gethostname(host, sizeof host - 1);
    uint64_t total = lim, avail = lim > cur ? lim - cur : 0;
    json_t *vm = json_pack("{s:I, s:I, s:f, s:I, s:I}", "total", (json_int_t) total, "available",
                           (json_int_t) avail, "percent",
                           total > 0 ? (double) cur * 100.0 / (double) total : 0.0, "used",
                           (json_int_t) cur, "free", (json_int_t) avail);
    return json_pack(
        "{s:s, s:i, s:f, s:I, s:i, s:o, s:{s:s, s:b}}", "hostname", host, "pid", (int) getpid(),
        "kernel_cpu", percent, "kernel_memory", (json_int_t) (mem_ok ? cur : 0), "cpu_count",
        (int) sysconf(_SC_NPROCESSORS_ONLN), "host_virtual_memory", vm, "cellblock", "scope",
        "the sandbox (its cgroup), not the kernel process", "cgroup", c->cg.version != 0);
}
