/* placeholder while the gvisor tier is brought up */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "tier_impl.h"
cb_microvm_t *cb_microvm_new(const cb_options_t *opts, char *why, size_t why_len) {
    (void) opts;
    (void) snprintf(why, why_len, "microvm: not yet");
    return NULL;
}
void cb_microvm_destroy(cb_microvm_t **self_p) { (void) self_p; }
int cb_microvm_plan(cb_microvm_t *self, cb_mount_plan_t *mounts, cb_cgroup_limits_t *lim,
                    unsigned long uid, unsigned long gid, const char *runner, char *const *envp,
                    char *why, size_t why_len) {
    (void) self; (void) mounts; (void) lim; (void) uid; (void) gid; (void) runner; (void) envp; (void) why; (void) why_len;
    return -1;
}
void cb_microvm_run(const cb_microvm_t *self, int errfd) { (void) self; (void) errfd; _exit(127); }
void cb_microvm_describe(const cb_microvm_t *self, const char *base, char *buf, size_t len) { (void) self; (void) base; (void) buf; (void) len; }
const char *cb_microvm_hint(int arg) { (void) arg; return ""; }
