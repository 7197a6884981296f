/*
 * seccomp_install.c - loading the filter seccomp.c built (see
 * seccomp_filter.h).  A file of its own so that the warm-start shared object
 * (isolate/warm_enter.c) installs the launcher's filter bytes with the very
 * call a cold runner uses, without linking libseccomp.
 */
#include "isolate/seccomp_filter.h"

#include <linux/seccomp.h>
#include <sys/prctl.h>

int cb_seccomp_install(const cb_seccomp_t *f) {
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f->prog, 0, 0) < 0 ? -1 : 0;
}
