/*
 * criu_pack.h - the memory of a paused --pausable session, compressed in its
 * image (docs/SNAPSHOTS.md "Pause, resume and fork (namespaces)").
 *
 * CRIU 3.17 writes the pages of the dumped memory raw (pages-N.img), so an
 * image was about as large as the session's resident memory.  After the
 * dump the launcher compresses each pages-N.img into pages-N.img.zst
 * (zstd, libzstd) and removes the raw file; the image is then sealed with
 * the compressed files in its manifest.  At a resume, after the seal is
 * checked, the launcher writes them back raw into the stage copy criu
 * restores from (which it makes anyway, for the new runner's uid), bounded
 * by the session's limits.  Only the launcher's own output is ever
 * decompressed, and only once it is known to be that.
 */
#ifndef CB_CRIU_PACK_H
#define CB_CRIU_PACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CB_CRIU_PACK_SUFFIX  ".zst" /* pages-N.img + this, in an image */
#define CB_CRIU_PACK_LEVEL   1      /* zstd's level: fast; memory pages pack well at it */
#define CB_CRIU_PACK_WORKERS 2      /* zstd's threads while the launcher compresses */
#define CB_CRIU_PACK_FILES   64     /* pages files in one image (one per task, and more) */

/* In the image directory dirfd: every pages-*.img compressed into
 * pages-*.img.zst (0600), the raw file removed.  *raw and *packed get the
 * bytes before and after.  0 ok, -1 with why (the image is then not to be
 * sealed). */
int cb_criu_pack(int dirfd, uint64_t *raw, uint64_t *packed, char *why, size_t why_len);

/* Every pages-*.img.zst of the (verified) image at from, written raw as
 * pages-*.img into the directory at to, 0600 and owned by uid:gid; at most
 * max bytes in all.  *bytes gets how many.  0 ok, -1 with why. */
int cb_criu_unpack(int from, int to, uid_t uid, gid_t gid, uint64_t max, uint64_t *bytes, char *why,
                   size_t why_len);

#endif
