/*
 * landlock.h - write access only below a few directories (Landlock LSM).
 */
#ifndef CB_LANDLOCK_H
#define CB_LANDLOCK_H

/* The running kernel's Landlock ABI version, 0 when unavailable. */
int cb_landlock_abi(void);
/* Async-signal-safe: restricts this process (and what it execs) so that
 * filesystem writes are possible only below the NULL-terminated dirs and on
 * the NULL-terminated files; with ABI >= 6 also scopes signals and abstract
 * unix sockets to the sandbox.  Paths that do not exist are skipped.
 * no_new_privs must be set.  0 ok, -1 errno. */
int cb_landlock_apply(int abi, const char *const *dirs, const char *const *files);
/* The same for a --pausable sandbox: signals scoped, abstract unix sockets
 * not, so that criu's parasite in a dumped runner reaches criu's socket in
 * the sandbox's own network namespace (which holds no other's). */
int cb_landlock_apply_pausable(int abi, const char *const *dirs, const char *const *files);

/* Where the runner may write (the same lists for a cold and a warm start):
 * directories, and single files (the character devices), NULL-terminated. */
extern const char *const cb_landlock_sandbox_dirs[];
extern const char *const cb_landlock_sandbox_files[];

#endif
