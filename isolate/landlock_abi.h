/*
 * landlock_abi.h - the Landlock constants and ruleset attribute of the ABIs
 * cellblock uses, for system headers that predate them (Debian 12's stop at
 * ABI 3).  Shared by the sandbox's ruleset (isolate/landlock.c) and the
 * network proxy's (proxy/confine.c).
 */
#ifndef CB_LANDLOCK_ABI_H
#define CB_LANDLOCK_ABI_H

#include <linux/landlock.h>
#include <stdint.h>

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1) /* ABI 6 */
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#define CB_LANDLOCK_ABI_REFER    2 /* first ABI with REFER */
#define CB_LANDLOCK_ABI_TRUNCATE 3 /* first ABI with TRUNCATE */
#define CB_LANDLOCK_ABI_IOCTL    5 /* first ABI with IOCTL_DEV */
#define CB_LANDLOCK_ABI_SCOPE    6 /* first ABI with scoped signals/sockets */

/* struct landlock_ruleset_attr as of ABI 6 (fs, net, scoped); pass
 * offsetof(..., handled_access_net) as its size below ABI 6. */
typedef struct {
    uint64_t handled_access_fs;  /* rights the ruleset governs */
    uint64_t handled_access_net; /* unused: the net namespace does this */
    uint64_t scoped;             /* LANDLOCK_SCOPE_* */
} cb_landlock_attr_t;

#endif
