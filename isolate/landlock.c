/*
 * landlock.c - Landlock ruleset for the runner.
 *
 * Reads and execution stay governed by the mounts (everything visible is
 * read-only anyway); Landlock adds a second, independent wall around
 * writes, which still holds if a bind were ever mounted writable by
 * mistake.  Rights are taken per ABI version: REFER (2), TRUNCATE (3);
 * ABI 6 scopes signals and abstract unix sockets to the Landlock domain
 * (useful with --network host, where the host's abstract sockets are in
 * reach).  A --pausable sandbox scopes signals only: criu's parasite in the
 * runner talks to criu over an abstract socket of the sandbox's network
 * namespace, which is the sandbox's own (--pausable refuses --network host
 * where the kernel has scopes).  The system headers may predate newer ABIs,
 * so the values we need are defined here when missing.
 */
#include "isolate/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isolate/landlock_abi.h"
#include "isolate/sandbox_limits.h"

const char *const cb_landlock_sandbox_dirs[] = {CB_SANDBOX_HOME, "/tmp", "/dev/shm", NULL};
const char *const cb_landlock_sandbox_files[] = {"/dev/null",    "/dev/zero", "/dev/full",
                                                 "/dev/random", "/dev/urandom", "/dev/kvm",
                                                 NULL};

#define S_FS_WRITE_FILE (LANDLOCK_ACCESS_FS_WRITE_FILE)
#define S_FS_WRITE_DIR                                                                             \
    (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                               \
     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | \
     LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |   \
     LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM)

int cb_landlock_abi(void) {
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? 0 : (int) v;
}

static int s_rule(int ruleset, const char *path, uint64_t access) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
    long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    int e = errno;
    close(fd);
    errno = e;
    return rc < 0 ? -1 : 0;
}

static int s_apply(int abi, const char *const *dirs, const char *const *files, uint64_t scoped) {
    if (abi <= 0) {
        errno = ENOSYS;
        return -1;
    }
    uint64_t extra_dir = 0, extra_file = 0;
    if (abi >= CB_LANDLOCK_ABI_REFER) extra_dir |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= CB_LANDLOCK_ABI_TRUNCATE) {
        extra_dir |= LANDLOCK_ACCESS_FS_TRUNCATE;
        extra_file |= LANDLOCK_ACCESS_FS_TRUNCATE;
    }
    cb_landlock_attr_t attr = {.handled_access_fs = S_FS_WRITE_DIR | extra_dir};
    size_t attr_size = offsetof(cb_landlock_attr_t, handled_access_net);
    if (abi >= CB_LANDLOCK_ABI_SCOPE) {
        attr.scoped = scoped;
        attr_size = sizeof attr;
    }
    int rs = (int) syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
    if (rs < 0) return -1;
    int rc = -1;
    for (size_t i = 0; dirs != NULL && dirs[i] != NULL; i++)
        if (s_rule(rs, dirs[i], S_FS_WRITE_DIR | extra_dir) < 0) goto out;
    for (size_t i = 0; files != NULL && files[i] != NULL; i++)
        if (s_rule(rs, files[i], S_FS_WRITE_FILE | extra_file) < 0) goto out;
    if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) goto out;
    rc = 0;
out:;
    int e = errno;
    close(rs);
    errno = e;
    return rc;
}

int cb_landlock_apply(int abi, const char *const *dirs, const char *const *files) {
    return s_apply(abi, dirs, files, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL);
}

int cb_landlock_apply_pausable(int abi, const char *const *dirs, const char *const *files) {
    return s_apply(abi, dirs, files, LANDLOCK_SCOPE_SIGNAL);
}
