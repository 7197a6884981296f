/*
 * workdir.h - the host-side working directory of --sandbox none, and the
 * symlink-safe recursive removal used to clean it up.
 */
#ifndef CB_LAUNCHER_WORKDIR_H
#define CB_LAUNCHER_WORKDIR_H

#include <stddef.h>

/* mkdtemp(CB_WORKDIR_TEMPLATE) into path (CB_PATH_MAX).  0 ok, -1 errno. */
int cb_workdir_create(char *path, size_t path_len);
/* Removes path and everything below it; never follows a symlink, never
 * crosses into another mount.  0 ok, -1 if something could not be removed. */
int cb_workdir_remove(const char *path);
/* Same, relative to dirfd (the test drives this one). */
int cb_workdir_remove_at(int dirfd, const char *name);

#endif
