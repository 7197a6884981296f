/*
 * idpool.h - one host id per sandbox, from a range, unique among the
 * sandboxes running on this host at the same time.
 *
 * Per-user kernel counters (inotify instances and watches, POSIX message
 * queue bytes, RLIMIT_NPROC, keyrings) are keyed by the host uid: two
 * sandboxes that share a uid share them, and one can exhaust them for the
 * other (and for host services of that uid).  So each sandbox's user
 * namespace maps its inside ids to a host id of its own, as nsjail does.
 *
 * An id is held by a lock file DIR/<id> locked with flock(LOCK_EX) for the
 * sandbox's life.  The lock goes with its open file description, so it is
 * released when the holder ends however it ends (SIGKILL included); the
 * file itself is unlinked on a clean release and reused otherwise.  The
 * search starts at a random place in the range, so an id just given back
 * (whose last processes may still be exiting) is rarely taken again at once.
 */
#ifndef CB_IDPOOL_H
#define CB_IDPOOL_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
    unsigned long id; /* the host id held (used as uid and gid) */
    int lock_fd;      /* flock'ed DIR/<id>, -1 when nothing is held */
    int dir_fd;       /* DIR, -1 when nothing is held */
    char name[32];    /* "<id>", the lock file's name in DIR */
} cb_idlease_t;

/* Creates DIR (mode 0700, missing parents 0755) when missing and checks
 * that it belongs to us and nobody else may write it, then takes a free id
 * of [first, first + count).  0 ok (*out filled), -1 with a reason (cause
 * and fix) in why.  *out is always safe to release. */
int cb_idpool_acquire(const char *dir, unsigned long first, unsigned long count, cb_idlease_t *out,
                      char *why, size_t why_len);
/* Parses "FIRST:COUNT" (--uid-range): FIRST >= CB_OPT_MIN_ID_FIRST, COUNT
 * >= 1, FIRST + COUNT - 1 <= CB_OPT_MAX_ID.  0 ok, -1 with a message. */
int cb_idpool_parse_range(const char *s, unsigned long *first, unsigned long *count, char *err,
                          size_t err_len);
/* Gives the id back (unlinks its lock file, then unlocks).  Idempotent. */
void cb_idpool_release(cb_idlease_t *lease);

#endif
