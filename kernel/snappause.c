/*
 * snappause.c - pausing a session into an image on disk and resuming from
 * one (docs/SNAPSHOTS.md "Pause, resume and fork"), the kernel's part.
 *
 *   cellblock_pause_request {}   the sandbox (runner idle) is written into a
 *       new image of the store by its tier (gvisor: runsc checkpoint, plus
 *       the home), sealed by the launcher, then by the kernel with its own
 *       record (execution count, comms), and the sandbox ends: its memory,
 *       uid lease and cgroup are freed.  The reply names the image; the next
 *       request of this kernel resumes from it, and so can any number of new
 *       kernels (`cellblock-kernel --resume ID`, Sandbox.resume, fork).
 *
 * Resuming checks the kernel's record (its seal first, then its version and
 * tier); the launcher checks every file of the image and the host software
 * it pins before anything reads it, and the restored runner reseeds what a
 * clone would share.  An image that cannot be resumed makes every start
 * fail with the reason: never a fresh sandbox in its place.
 */
#include "kernel/debug.h"
#include "kernel/dispatch.h"
#include "kernel/costs.h"
#include "kernel/policy.h"
#include "kernel/snapimage.h"
#include "kernel/snapshot_priv.h"

#include "isolate/log.h"
#include "isolate/util.h"

#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

const char *cb_snappause_why(const cb_kernel_t *k) {
    const char *iso = k->opts->c.isolation;
    if (strcmp(k->opts->c.sandbox, "none") == 0) return "--sandbox none has nothing to pause";
    if (strcmp(iso, "gvisor") == 0)
        return cb_session_snap_pausable(k->session) < 0 ? "the sandbox is starting; retry"
                                                        : "the gvisor tier did not say it can";
    if (strcmp(iso, "microvm") == 0)
        return "the microvm tier cannot pause yet: QEMU refuses to migrate or save a VM while "
               "its filesystems are 9p exports (its root and home are); checkpoints in place "
               "(cellblock_checkpoint_request) work in it, and --isolation gvisor can pause";
    if (!k->opts->c.pausable && k->opts->c.resume == NULL)
        return "the namespaces tier pauses with CRIU only when the kernel is started with "
               "--pausable (as root, with Debian's criu installed); or use --isolation gvisor, "
               "or checkpoints in place (cellblock_checkpoint_request), which work in every tier";
    const char *host = cb_session_snap_pause_why(k->session);
    if (host[0] != '\0') return host; /* the launcher's: criu missing, or too old here */
    return cb_session_snap_pausable(k->session) < 0
               ? "the sandbox is starting; retry"
               : "CRIU is not installed on this host (apt-get install criu), or this is not a "
                 "root kernel; --isolation gvisor can pause too";
}

/* The namespaces tier (CRIU) dumps a checkpoint in place's parked copy */
static bool s_by_criu(const cb_kernel_t *k) {
    return strcmp(k->opts->c.isolation, "gvisor") != 0 && strcmp(k->opts->c.isolation, "microvm") != 0;
}

/* A pause that runs out of room in the store loses the session (a failed
 * runsc checkpoint ends gVisor's sandbox; a half-written dump is no image):
 * refused before anything is done when the store has less free space than
 * the sandbox's memory now (an image holds at most that, before
 * compression; its files are in it too, tmpfs) and some slack.  Unknown
 * figures refuse nothing. */
static int s_store_room(cb_kernel_t *k, const char *store, char *why, size_t len) {
    uint64_t mem = 0;
    cb_costs_t *c = cb_policy_costs(k);
    struct statvfs v;
    if (c == NULL || cb_costs_memory(c, k->session, &mem) < 0 || statvfs(store, &v) < 0) return 0;
    uint64_t avail = (uint64_t) v.f_bavail * v.f_frsize;
    uint64_t need = mem + ((uint64_t) CB_IMAGE_ROOM_SLACK_MB << 20);
    if (avail >= need) return 0;
    snprintf(why, len,
             "the image store %.300s has %llu MiB free, and this session may need up to %llu MiB "
             "(its memory now, before compression, and %d MiB): free space there, or pause "
             "into another store (--image-dir); the session goes on as it was",
             store, (unsigned long long) (avail >> 20), (unsigned long long) (need >> 20),
             CB_IMAGE_ROOM_SLACK_MB);
    return -1;
}

void cb_snapshot_pause(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    cb_snapshots_t *sn = k->snaps;
    char why[CB_PATH_MAX + CB_SNAP_WHY_MAX];
    if (cb_session_snap_pausable(k->session) != 1) {
        snprintf(why, sizeof why, "this session cannot be paused: %s", cb_snappause_why(k));
        cb_dispatch_answer(k, ch, m, cb_snapshots_error(why));
        return;
    }
    const char *dbg = k->debug ? cb_debug_snapshot_why(k->debug, false) : NULL;
    if (dbg) {
        snprintf(why, sizeof why, "this session cannot be paused now: %s", dbg);
        cb_dispatch_answer(k, ch, m, cb_snapshots_error(why));
        return;
    }
    if (sn->op != CB_SNAP_NONE) {
        cb_dispatch_answer(k, ch, m,
                           cb_snapshots_error("another checkpoint operation is in "
                                              "progress; retry when it ends"));
        return;
    }
    char dir[CB_PATH_MAX + CB_IMAGE_ID_HEX + 2];
    if (cb_image_store(k->opts, sn->store, sizeof sn->store, why, sizeof why) < 0 ||
        s_store_room(k, sn->store, why, sizeof why) < 0 ||
        cb_image_create(sn->store, sn->pause_id, &sn->pause_fd, why, sizeof why) < 0) {
        cb_dispatch_answer(k, ch, m, cb_snapshots_error(why));
        return;
    }
    snprintf(dir, sizeof dir, "%s/%s", sn->store, sn->pause_id);
    long ckpt = s_by_criu(k) ? ++sn->next_id : 0; /* an id no checkpoint of the user's has */
    if (cb_session_snap_pause(k->session, sn->pause_id, dir, sn->pause_fd, ckpt, why,
                              sizeof why) < 0) {
        close(sn->pause_fd);
        sn->pause_fd = -1;
        cb_image_discard(sn->store, sn->pause_id);
        cb_dispatch_answer(k, ch, m, cb_snapshots_error(why));
        return;
    }
    sn->op = CB_SNAP_PAUSE;
    sn->from_cell = false;
    cb_dispatch_status(k, m->header, "busy");
    sn->req = *m; /* answered when the image is sealed */
    memset(m, 0, sizeof *m);
    sn->have_req = true;
    LOG_I("pausing the session into image %s", sn->pause_id);
}

/* The kernel's record of the session, for its image: a new reference. */
static json_t *s_record(cb_snapshots_t *sn) {
    cb_kernel_t *k = sn->k;
    char now[32];
    cb_iso_now(now);
    json_t *ckpts = json_array(); /* parked in the sandbox, so in the image too */
    for (int i = 0; ckpts && !s_by_criu(k) && i < CB_SNAP_MAX; i++) { /* CRIU: one copy only */
        const cb_snap_rec_t *c = &sn->rec[i];
        if (c->id != 0)
            json_array_append_new(ckpts,
                                  json_pack("{s:I, s:s, s:i, s:s, s:I, s:i, s:I, s:O}", "id",
                                            (json_int_t) c->id, "name", c->name, "count", c->count,
                                            "created", c->created, "bytes", (json_int_t) c->bytes,
                                            "files", (int) c->files, "threads",
                                            (json_int_t) c->threads, "comms", c->comms));
    }
    return json_pack("{s:i, s:s, s:s, s:s, s:s, s:i, s:o, s:o, s:I}", "version", 1, "id",
                     sn->pause_id, "created", now, "cellblock", CB_VERSION, "tier",
                     k->opts->c.isolation, "execution_count", k->exec_count, "comms",
                     cb_comms_info(k->comms, NULL), "checkpoints", ckpts, "next_id",
                     (json_int_t) sn->next_id);
}

void cb_snappause_done(cb_snapshots_t *sn, const cb_snap_result_t *r) {
    char why[CB_SNAP_WHY_MAX * 2] = "";
    json_auto_t *rec = r->ok ? s_record(sn) : NULL;
    bool sealed = r->ok && rec && cb_image_seal_record(sn->pause_fd, rec, why, sizeof why) == 0;
    close(sn->pause_fd);
    sn->pause_fd = -1;
    if (!sealed) {
        cb_image_discard(sn->store, sn->pause_id);
        char text[CB_SNAP_TEXT_MAX];
        snprintf(text, sizeof text, "the pause failed: %.300s%s", r->ok ? why : r->why,
                 r->ok ? "" : " (the sandbox may have been replaced: see the next cell)");
        cb_snapshots_finish_req(sn, cb_snapshots_error(text));
        return;
    }
    LOG_I("session paused into image %s (%llu bytes)", sn->pause_id, (unsigned long long) r->bytes);
    bool criu = s_by_criu(sn->k);
    json_t *reply =
        json_pack("{s:s, s:s, s:I, s:i, s:s, s:b}", "status", "ok", "image", sn->pause_id, "bytes",
                  (json_int_t) r->bytes, "execution_count", sn->k->exec_count, "resume",
                  "the next request here, or cellblock-kernel --resume ID, Sandbox.resume(ID)",
                  "checkpoints_kept", !criu);
    if (criu) { /* the image holds the session, not the copies parked beside it */
        for (int i = 0; i < CB_SNAP_MAX; i++)
            if (sn->rec[i].id != 0) {
                json_decref(sn->rec[i].comms);
                memset(&sn->rec[i], 0, sizeof sn->rec[i]);
            }
        json_object_set_new(reply, "note",
                            json_string("the namespaces tier's image holds the session only: the "
                                        "checkpoints in place taken before the pause are gone"));
    }
    cb_snapshots_finish_req(sn, reply);
}

/* The image --resume names: its sealed record, read once before the
 * session exists (cb_snapshots_open_resume) and taken over when the kernel
 * is set up (cb_snapshots_resume); or why it cannot be resumed here. */
static struct {
    json_t *rec;
    char dir[CB_PATH_MAX];
    char why[CB_SNAP_WHY_MAX * 2];
} s_image;

void cb_snapshots_open_resume(cb_opts_t *o) {
    if (o->c.resume == NULL) return;
    s_image.rec = cb_image_open(o, o->c.resume, s_image.dir, sizeof s_image.dir, s_image.why,
                                sizeof s_image.why);
    const char *tier = s_image.rec ? json_string_value(json_object_get(s_image.rec, "tier")) : NULL;
    /* only a gVisor image in a kernel at the namespaces tier: the stronger tier */
    if (tier == NULL || strcmp(tier, "gvisor") != 0 || strcmp(o->c.isolation, "namespaces") != 0)
        return;
    char why[CB_SNAP_WHY_MAX];
    cb_config_t c = o->c;
    c.isolation = "gvisor";
    if (cb_flags_check_isolation(&c, why, sizeof why) < 0) {
        snprintf(s_image.why, sizeof s_image.why,
                 "the image %s is of the gvisor tier, which this kernel's flags cannot run: %s",
                 o->c.resume, why);
        return;
    }
    const char *fwd[CB_OPTS_FWD_MAX + 1];
    int n = cb_flags_forward(&c, fwd, CB_OPTS_FWD_MAX, o->fwd_store, CB_OPTS_FWD_MAX);
    if (n < 0) return;
    o->c.isolation = c.isolation;
    memcpy(o->fwd, fwd, sizeof fwd[0] * (size_t) n);
    o->fwd[n] = NULL;
    LOG_I("--resume %s: a gVisor image, resumed at the gvisor tier", o->c.resume);
}

void cb_snapshots_resume(cb_snapshots_t *sn, const char *ref) {
    cb_kernel_t *k = sn->k;
    char why[CB_SNAP_WHY_MAX * 2];
    const char *dir = s_image.dir;
    json_auto_t *rec = steal_pointer(&s_image.rec);
    snprintf(why, sizeof why, "%s", s_image.why);
    const char *tier = rec ? json_string_value(json_object_get(rec, "tier")) : NULL;
    const char *ver = rec ? json_string_value(json_object_get(rec, "cellblock")) : NULL;
    if (rec != NULL && (ver == NULL || strcmp(ver, CB_VERSION) != 0))
        snprintf(why, sizeof why, "the image %s was made by cellblock %.32s, this is %s", ref,
                 ver ? ver : "?", CB_VERSION);
    else if (rec != NULL && !why[0] && (tier == NULL || strcmp(tier, k->opts->c.isolation) != 0))
        snprintf(why, sizeof why,
                 "the image %s is of the %.32s tier: start the kernel with --isolation %.32s", ref,
                 tier ? tier : "?", tier ? tier : "?");
    if (rec == NULL || why[0]) {
        LOG_E("--resume: %s", why);
        cb_session_refuse_start(k->session, why);
        return;
    }
    json_t *n = json_object_get(rec, "execution_count");
    if (json_is_integer(n) && json_integer_value(n) >= 0)
        k->exec_count = (int) json_integer_value(n); /* the kernel's own record, sealed */
    const char *cid;
    json_t *v;
    json_object_foreach(json_object_get(rec, "comms"), cid, v)(void)
        cb_comms_open(k->comms, cid, json_string_value(json_object_get(v, "target_name")));
    size_t i;
    json_t *c;
    int slot = 0;
    json_array_foreach(json_object_get(rec, "checkpoints"), i, c) {
        json_int_t id = 0, count = 0, bytes = 0, files = 0, threads = 0;
        const char *name = NULL, *created = NULL;
        json_t *comms = NULL;
        if (slot >= CB_SNAP_MAX ||
            json_unpack(c, "{s:I, s:s, s:I, s:s, s:I, s:I, s:I, s:o}", "id", &id, "name", &name,
                        "count", &count, "created", &created, "bytes", &bytes, "files", &files,
                        "threads", &threads, "comms", &comms) < 0 ||
            id <= 0)
            continue;
        cb_snap_rec_t *r = &sn->rec[slot++];
        r->id = (long) id;
        snprintf(r->name, sizeof r->name, "%s", name);
        r->count = (int) count;
        snprintf(r->created, sizeof r->created, "%s", created);
        r->bytes = (uint64_t) bytes;
        r->files = (uint32_t) files;
        r->threads = (long) threads;
        r->comms = json_incref(comms);
    }
    json_t *nid = json_object_get(rec, "next_id");
    if (json_is_integer(nid)) sn->next_id = (long) json_integer_value(nid);
    cb_session_resume_from(k->session, dir);
    LOG_I("resuming from image %s (In [%d])", dir, k->exec_count);
}
