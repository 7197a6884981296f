/*
 * artifacts_fs.h - the only code in artifacts/ that touches the filesystem.
 *
 * Everything is relative to a directory fd of the sandbox's working directory
 * and nothing ever follows a link: paths are opened with openat2(2)
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV, or, where openat2 is missing or filtered, one component at
 * a time with O_NOFOLLOW and a device check for directories.  The walk is
 * bounded in depth and in entries examined; reads are bounded by the size
 * fstat reported and detect a file that changes under them.
 */
#ifndef CB_ARTIFACTS_FS_H
#define CB_ARTIFACTS_FS_H

#include "artifacts/artifacts.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* What the walk found at a path. */
typedef enum {
    CB_ARTIFACTS_FS_FILE,     /* a regular file (lstat) */
    CB_ARTIFACTS_FS_SYMLINK,  /* a symbolic link: not followed */
    CB_ARTIFACTS_FS_SPECIAL,  /* fifo, socket or device: not opened */
    CB_ARTIFACTS_FS_TOO_DEEP, /* a directory below max_depth: not scanned */
    CB_ARTIFACTS_FS_MOUNT,    /* a directory on another mount: not scanned */
    CB_ARTIFACTS_FS_ERROR,    /* could not be examined or opened (err) */
    CB_ARTIFACTS_FS_TOO_LONG, /* names in this directory would exceed CB_PATH_MAX */
} cb_artifacts_fs_what_t;

typedef struct {
    char *path;                  /* raw relative path, '/'-separated (owned) */
    struct stat st;              /* lstat at scan time */
    cb_artifacts_fs_what_t what; /* what it is */
    int err;                     /* errno for ERROR, else 0 */
} cb_artifacts_fs_item_t;

typedef struct {
    cb_artifacts_fs_item_t *items; /* sorted by path (strcmp) after the walk */
    size_t n;                      /* items used */
    size_t cap;                    /* items allocated */
    size_t entries;                /* directory entries examined */
    bool truncated;                /* stopped at max_entries */
} cb_artifacts_fs_walk_t;

/* Walks rootfd (borrowed, readable directory fd).  Hidden names (leading '.')
 * are skipped without being looked at; every other entry becomes an item.
 * 0 ok (even if truncated), -1 out of memory or rootfd unreadable (logged).
 * The walk must be freed with cb_artifacts_fs_walk_free either way. */
int cb_artifacts_fs_walk(int rootfd, unsigned max_depth, size_t max_entries,
                         cb_artifacts_fs_walk_t *out);
void cb_artifacts_fs_walk_free(cb_artifacts_fs_walk_t *w);

/* Opens the relative path beneath rootfd without following any link or
 * crossing a mount.  O_CLOEXEC | O_NOFOLLOW | O_NOCTTY are added to flags.
 * fd, or -1 with errno (ELOOP: a link on the way, EXDEV: a mount, EINVAL: a
 * path with an empty, "." or ".." component or an absolute one). */
int cb_artifacts_fs_open_beneath(int rootfd, const char *path, int flags);

typedef enum {
    CB_ARTIFACTS_FS_READ_OK,          /* *buf holds exactly want->st_size bytes */
    CB_ARTIFACTS_FS_READ_ERROR,       /* open or read failed: *err */
    CB_ARTIFACTS_FS_READ_CHANGED,     /* replaced, grew, shrank or touched while read */
    CB_ARTIFACTS_FS_READ_NOT_REGULAR, /* became something other than a regular file */
    CB_ARTIFACTS_FS_READ_LINKED,      /* st_nlink > 1 */
    CB_ARTIFACTS_FS_READ_SYMLINK,     /* a link appeared on the way */
    CB_ARTIFACTS_FS_READ_TOO_LARGE,   /* larger than max */
} cb_artifacts_fs_read_t;

/* Opens path beneath rootfd (O_RDONLY | O_NONBLOCK, so a FIFO swapped in
 * cannot block), insists it is still the regular file want describes (same
 * device, inode, size), reads at most want->st_size bytes and confirms with a
 * second fstat that nothing changed.  hook (may be NULL) is called before the
 * open and before the first read.  On OK *buf is a new malloc'd buffer (never
 * NULL, even for 0 bytes) of *len bytes; otherwise *buf is NULL. */
cb_artifacts_fs_read_t cb_artifacts_fs_read(int rootfd, const char *path, const struct stat *want,
                                            size_t max, cb_artifacts_hook_fn hook, void *hook_arg,
                                            uint8_t **buf, size_t *len, int *err);

/* See artifacts.h: cb_artifacts_force_fallback. */
void cb_artifacts_fs_force_fallback(bool on);

#endif
