/*
 * snapimage.h - images of paused sessions, the launcher's part
 * (docs/SNAPSHOTS.md "Pause, resume and fork"): the launcher relays the
 * kernel's `snap` commands to the sandbox, seals an image once the sandbox
 * has written it, and verifies one before anything restores it.
 *
 * An image is a directory of the kernel's store (0700, root's or the
 * kernel's user's), made by the kernel:
 *
 *   checkpoint.img    runsc's image of gVisor (the code's memory, gVisor's /tmp)
 *   home/             the sandbox's home, copied by the tier's supervisor
 *   files.json        every entry with its type, size and SHA-256, the host
 *                     software it pins, the total size
 *   files.mac         HMAC-SHA256 of files.json under the store's key
 *   kernel.json/.mac  the kernel's record of the session (kernel/snapimage.c)
 *
 * The key (<store>/.key, 0600) never enters a sandbox: the launcher reads
 * it only before clone (verify) or after (seal), and wipes it after use.
 */
#ifndef CB_LAUNCHER_SNAPIMAGE_H
#define CB_LAUNCHER_SNAPIMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/options.h"
#include "launcher/sandbox.h"

/* A command of the kernel (after "snap "), fd attached or -1: relayed to the
 * sandbox; `pause ID` keeps a copy of the image directory's fd to seal it
 * once the sandbox says it is written.  0 ok, -1 errno. */
int cb_snapimage_command(cb_sandbox_t *sb, const char *line, int fd);
/* A line of the sandbox's checkpoint agent or tier: reported to the kernel as
 * `snap LINE`, except `paused ID BYTES`, which is sealed first (and reported
 * as a failure if it cannot be). */
void cb_snapimage_answer(const cb_options_t *o, const char *line);
/* The image id the sandbox has written: sealed and reported as paused (0),
 * or the failure reported (-1). */
int cb_snapimage_sealed(const cb_options_t *o, const char *id);
/* The pause failed before the image was written: its fd goes. */
void cb_snapimage_abandon(void);
/* --resume-image: the image's files are exactly what files.mac vouches for,
 * its size fits the limits, and the host software it pins is unchanged.
 * Returns the image directory it checked, opened (the tier reads that fd,
 * never the path again: the caller owns it), or -1 with the cause and the
 * fix in why. */
int cb_snapimage_verify(const cb_options_t *o, char *why, size_t len);
/* The most bytes an image of a session with these limits may hold (and,
 * written back raw, its memory pages: criu_pack.h). */
uint64_t cb_snapimage_max_bytes(const cb_options_t *o);

#endif
