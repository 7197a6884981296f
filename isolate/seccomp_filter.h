/*
 * seccomp_filter.h - (named so it does not shadow <seccomp.h>) the runner's system-call allowlist, built with libseccomp.
 *
 * Built in the launcher before clone and exported to classic BPF there, so
 * the child only needs one prctl to install it (no allocation after clone).
 */
#ifndef CB_SECCOMP_FILTER_H
#define CB_SECCOMP_FILTER_H

#include <linux/filter.h>
#include <stddef.h>

typedef struct {
    struct sock_fprog prog; /* what prctl(PR_SET_SECCOMP) takes; filter owned */
    unsigned n_allowed;     /* syscalls allowed (for the banner) */
} cb_seccomp_t;

/* Builds the filter for the native architecture.  0 ok, -1 with why. */
int cb_seccomp_build(cb_seccomp_t *out, char *why, size_t why_len);
/* Async-signal-safe: installs it (no_new_privs must already be set).
 * 0 ok, -1 errno. */
int cb_seccomp_install(const cb_seccomp_t *f);
/* Frees the program. */
void cb_seccomp_fini(cb_seccomp_t *f);

#endif
