/*
 * outdir.h - `cellblock run --out DIR`: files written into a directory on
 * the host on behalf of the sandbox, which is the attacker.
 *
 * Names are the kernel's: display-N.ext for displays, or the relative path
 * the kernel's own artifact collector found, which the sandbox chose.  So
 * each is checked again against the host's name policy (isolate/names.h: no
 * absolute path, no empty, "." or ".." or hidden component, valid UTF-8 with
 * no control, C1 or bidi character, bounded length) and must end in an
 * extension of a type the collector returns.  Every component is opened beneath DIR with openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS (O_NOFOLLOW one component at a time
 * where openat2 is missing), and files are created with O_EXCL: nothing in
 * DIR is ever overwritten or written through — a taken name gets a new one
 * ("chart-1.png").
 */
#ifndef CB_OUTDIR_H
#define CB_OUTDIR_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cb_outdir cb_outdir_t;

/* Creates DIR if needed and opens it.  NULL with errno on failure. */
cb_outdir_t *cb_outdir_open(const char *path);
void cb_outdir_close(cb_outdir_t **self_p);
/* NULL when rel is a name this module will write (see above); otherwise
 * why not, as a sentence written to why (why_len bytes) and returned. */
const char *cb_outdir_refusal(const char *rel, char *why, size_t why_len);
/* True when cb_outdir_refusal has nothing to say. */
bool cb_outdir_name_ok(const char *rel);
/* Writes len bytes as rel (or a free variant of it).  The name used, relative
 * to DIR, goes to used (used_len bytes).  0 ok, -1 with errno (EINVAL: a
 * refused name). */
int cb_outdir_write(cb_outdir_t *o, const char *rel, const void *data, size_t len, char *used,
                    size_t used_len);

#endif
