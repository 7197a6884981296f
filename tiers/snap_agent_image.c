/*
 * snap_agent_image.c - a checkpoint's files to and from the image of a
 * paused --pausable sandbox (see snap_agent.h: "export", "import").
 *
 * The image holds CRIU's dump of a parked copy and the checkpoint's home
 * and /tmp as home/ and tmp/.  "export" copies a parked checkpoint's files
 * out of the store into the directory the launcher sends; "import", in the
 * new sandbox the launcher restores the image into, makes the checkpoint's
 * park fifo again (with the mode it was dumped with: CRIU checks it) and
 * holds it, copies home/ and tmp/ into the store, and awaits the restored
 * copy: a process holding that fifo, in whatever state CRIU left it (it was
 * dumped blocked reading the fifo, after the agent's byte), taken without a
 * byte.  From then on it is a parked checkpoint like any other, which
 * "roll" wakes.  The copies are the bounded, never-following ones of
 * snap_tree.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiers/snap_agent.h"
#include "tiers/snap_agent_priv.h"
#include "tiers/snap_tree.h"

static const char *const s_names[2] = {"home", "tmp"}; /* the store's "0" and "1" */

/* export: a parked checkpoint's files, copied from the store into dir as
 * home/ and tmp/ (made there, 0700).  The copy must have parked: an armed
 * checkpoint's files may be incomplete. */
void cb_snap_export_(cb_snap_agent_t *a, long id, int dir) {
    cb_snap_slot_t *s = cb_snap_find_(a, id);
    if (dir < 0) {
        cb_snap_say_(a, "fail %ld export needs a directory sent with it", id);
        return;
    }
    if (s == NULL || s->pid <= 0 || s->doomed) {
        cb_snap_say_(a, "fail %ld %s", id,
                     s == NULL ? "no such checkpoint" : "its copy has not parked");
        return;
    }
    int top = cb_snap_store_dir_(a, id, false);
    if (top < 0) {
        cb_snap_say_(a, "fail %ld its files are missing from the store", id);
        return;
    }
    cb_snap_tree_t t = {.own = a->root};
    char why[CB_SNAP_WHY_MAX] = "", what[32];
    for (int k = 0, rc = 0; k < 2 && rc == 0; k++) {
        const char sub[2] = {(char) ('0' + k), '\0'}; /* "0" home, "1" /tmp */
        (void) snprintf(what, sizeof what, "export of %s", s_names[k]);
        int src = openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = cb_snap_copy_into_(&t, src, dir, s_names[k], what, what, why, sizeof why);
    }
    close(top);
    if (why[0] != '\0')
        cb_snap_say_(a, "fail %ld %s", id, why);
    else
        cb_snap_say_(a, "exported %ld %llu %u %d", id, (unsigned long long) t.bytes, t.entries,
                     (int) s->pid);
}

/* Copies dir/home and dir/tmp into the store's directory top (as "0", "1").
 * 0 ok, -1 with why. */
static int s_import_files(int top, int dir, cb_snap_tree_t *t, char *why, size_t len) {
    char what[32];
    for (int k = 0; k < 2; k++) {
        const char sub[2] = {(char) ('0' + k), '\0'};
        (void) snprintf(what, sizeof what, "import of %s", s_names[k]);
        int src = openat(dir, s_names[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cb_snap_copy_into_(t, src, top, sub, what, what, why, len) < 0) return -1;
    }
    return 0;
}

void cb_snap_import_(cb_snap_agent_t *a, long id, int dir) {
    if (dir < 0) {
        cb_snap_say_(a, "fail %ld import needs a directory sent with it", id);
        return;
    }
    cb_snap_slot_t *s = cb_snap_new_slot_(a, id);
    if (s == NULL) return;
    char why[CB_SNAP_WHY_MAX] = "";
    int top = cb_snap_store_dir_(a, id, true);
    if (top < 0) {
        cb_snap_say_(a, "fail %ld the checkpoint store: %s", id, strerror(errno));
        return;
    }
    cb_snap_tree_t t = {.own = a->root};
    int rc = s_import_files(top, dir, &t, why, sizeof why);
    close(top);
    int fifo = rc < 0 ? -1 : cb_snap_make_fifo_(a, id);
    if (rc == 0 && fifo < 0)
        (void) snprintf(why, sizeof why, "making the park fifo: %s", strerror(errno));
    s->id = id; /* the slot owns the fifo and the files from here: a failure frees both */
    s->fifo = fifo;
    s->restored = true;
    s->bytes = t.bytes;
    s->files = t.entries;
    s->armed_until = cb_snap_now_ms_() + CB_SNAP_RESTORE_MS;
    if (why[0] != '\0') {
        cb_snap_free_(a, s, true);
        cb_snap_say_(a, "fail %ld %s", id, why);
        return;
    }
    cb_snap_scan_soon_(a);
    cb_snap_say_(a, "imported %ld %llu %u", id, (unsigned long long) s->bytes, s->files);
}
