/*
 * criu_pack.c - a CRIU image's pages compressed in the image, and written
 * back raw for criu at a resume (see criu_pack.h).
 */
#include "launcher/criu_pack.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "isolate/util.h"

#define S_CHUNK    (1u << 20) /* bytes read or written at a time */
#define S_NAME_MAX 64         /* "pages-N.img.zst" */
#define S_PREFIX   "pages-"
#define S_RAW      ".img"

typedef struct {
    char name[CB_CRIU_PACK_FILES][S_NAME_MAX];
    size_t n;
} s_names_t;

/* "pages-" digits, then suffix (".img" or ".img.zst"), nothing else: as criu names them */
static bool s_is_pages(const char *name, const char *suffix) {
    size_t d = strspn(name + strlen(S_PREFIX), "0123456789");
    return strncmp(name, S_PREFIX, strlen(S_PREFIX)) == 0 && d > 0 &&
           strcmp(name + strlen(S_PREFIX) + d, suffix) == 0;
}

/* The regular files of dirfd named pages-N SUFFIX (listed first, then
 * handled: the directory changes meanwhile).  0, -1 with why. */
static int s_list(int dirfd, const char *suffix, s_names_t *out, char *why, size_t len) {
    out->n = 0;
    DIR *d = cb_opendir_at(dirfd);
    if (d == NULL) {
        cb_fmt_why(why, len, "listing the image: %s", strerror(errno));
        return -1;
    }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        if (!s_is_pages(e->d_name, suffix)) continue;
        if ((e->d_type != DT_REG && e->d_type != DT_UNKNOWN) ||
            strlen(e->d_name) >= S_NAME_MAX - strlen(CB_CRIU_PACK_SUFFIX)) {
            cb_fmt_why(why, len, "the image's %.64s is not a pages file", e->d_name);
            rc = -1;
        } else if (out->n >= CB_CRIU_PACK_FILES) {
            cb_fmt_why(why, len, "the image holds more than %d pages files", CB_CRIU_PACK_FILES);
            rc = -1;
        } else {
            memcpy(out->name[out->n++], e->d_name, strlen(e->d_name) + 1); /* length checked */
        }
    }
    closedir(d);
    return rc;
}

static int s_open_in(int dirfd, const char *name, char *why, size_t len) {
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        cb_fmt_why(why, len, "%s: %s", name, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* ---- pause: compress ----------------------------------------------------------------- */

typedef struct {
    ZSTD_CCtx *cc;
    char *in, *out;
    uint64_t raw, packed;
} s_pack_t;

static int s_pack_one(s_pack_t *p, int dirfd, const char *name, char *why, size_t len) {
    char packed[S_NAME_MAX];
    (void) snprintf(packed, sizeof packed, "%.*s%s", S_NAME_MAX - (int) sizeof CB_CRIU_PACK_SUFFIX,
                    name, CB_CRIU_PACK_SUFFIX);
    cb_autofd int in = s_open_in(dirfd, name, why, len);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0) return -1;
    cb_autofd int out =
        openat(dirfd, packed, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        cb_fmt_why(why, len, "%s: %s", packed, strerror(errno));
        return -1;
    }
    const char *fail = NULL;
    size_t z = ZSTD_CCtx_reset(p->cc, ZSTD_reset_session_only);
    if (!ZSTD_isError(z)) z = ZSTD_CCtx_setPledgedSrcSize(p->cc, (unsigned long long) st.st_size);
    for (bool last = false; !last && fail == NULL && !ZSTD_isError(z);) {
        ssize_t n = read(in, p->in, S_CHUNK);
        if (n < 0) {
            fail = strerror(errno);
            break;
        }
        last = n == 0;
        p->raw += (uint64_t) n;
        ZSTD_inBuffer ib = {p->in, (size_t) n, 0};
        do {
            ZSTD_outBuffer ob = {p->out, S_CHUNK, 0};
            z = ZSTD_compressStream2(p->cc, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
            if (ZSTD_isError(z)) break;
            if (cb_write_all(out, p->out, ob.pos) < 0) {
                fail = strerror(errno);
                break;
            }
            p->packed += ob.pos;
        } while (last ? z != 0 : ib.pos < ib.size);
    }
    if (fail == NULL && ZSTD_isError(z)) fail = ZSTD_getErrorName(z);
    if (fail == NULL && unlinkat(dirfd, name, 0) < 0) fail = strerror(errno);
    if (fail != NULL) {
        cb_fmt_why(why, len, "compressing %s: %s", name, fail);
        (void) unlinkat(dirfd, packed, 0);
        return -1;
    }
    return 0;
}

int cb_criu_pack(int dirfd, uint64_t *raw, uint64_t *packed, char *why, size_t why_len) {
    static s_names_t names;
    if (s_list(dirfd, S_RAW, &names, why, why_len) < 0) return -1;
    s_pack_t p = {ZSTD_createCCtx(), malloc(S_CHUNK), malloc(S_CHUNK), 0, 0};
    int rc = 0;
    if (p.cc == NULL || p.in == NULL || p.out == NULL) {
        cb_fmt_why(why, why_len, "compressing the image: out of memory");
        rc = -1;
    } else {
        (void) ZSTD_CCtx_setParameter(p.cc, ZSTD_c_compressionLevel, CB_CRIU_PACK_LEVEL);
        /* fails where libzstd has no threads: then it packs in this one */
        (void) ZSTD_CCtx_setParameter(p.cc, ZSTD_c_nbWorkers, CB_CRIU_PACK_WORKERS);
        (void) ZSTD_CCtx_setParameter(p.cc, ZSTD_c_checksumFlag, 1);
    }
    for (size_t i = 0; rc == 0 && i < names.n; i++)
        rc = s_pack_one(&p, dirfd, names.name[i], why, why_len);
    ZSTD_freeCCtx(p.cc);
    free(p.in);
    free(p.out);
    *raw = p.raw;
    *packed = p.packed;
    return rc;
}

/* ---- resume: decompress -------------------------------------------------------------- */

typedef struct {
    ZSTD_DCtx *dc;
    char *in, *out;
    uint64_t left; /* bytes that may still be written */
    uint64_t bytes;
} s_unpack_t;

/* The output of one call, charged and written.  0, -1 with fail set. */
static int s_put(s_unpack_t *u, int out, const ZSTD_outBuffer *ob, const char **fail) {
    if (ob->pos > u->left) {
        *fail = "it holds more than the session's limits allow";
        return -1;
    }
    u->left -= ob->pos;
    u->bytes += ob->pos;
    if (cb_write_all(out, ob->dst, ob->pos) < 0) {
        *fail = strerror(errno);
        return -1;
    }
    return 0;
}

static int s_unpack_one(s_unpack_t *u, int from, const char *name, int to, uid_t uid, gid_t gid,
                        char *why, size_t len) {
    char raw[S_NAME_MAX];
    (void) snprintf(raw, sizeof raw, "%.*s", (int) (strlen(name) - strlen(CB_CRIU_PACK_SUFFIX)),
                    name);
    cb_autofd int in = s_open_in(from, name, why, len);
    if (in < 0) return -1;
    cb_autofd int out = openat(to, raw, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0 || fchown(out, uid, gid) < 0) {
        cb_fmt_why(why, len, "%s: %s", raw, strerror(errno));
        return -1;
    }
    const char *fail = NULL;
    size_t z = ZSTD_DCtx_reset(u->dc, ZSTD_reset_session_only), pending = 1;
    ssize_t n = 0;
    while (fail == NULL && !ZSTD_isError(z) && (n = read(in, u->in, S_CHUNK)) > 0) {
        ZSTD_inBuffer ib = {u->in, (size_t) n, 0};
        while (ib.pos < ib.size && fail == NULL) {
            ZSTD_outBuffer ob = {u->out, S_CHUNK, 0};
            pending = z = ZSTD_decompressStream(u->dc, &ob, &ib);
            if (ZSTD_isError(z) || s_put(u, out, &ob, &fail) < 0) break;
        }
    }
    if (n < 0 && fail == NULL) fail = strerror(errno);
    /* the input is read: what zstd still holds, until it says the frame ended */
    while (fail == NULL && !ZSTD_isError(z) && pending != 0) {
        ZSTD_inBuffer ib = {u->in, 0, 0};
        ZSTD_outBuffer ob = {u->out, S_CHUNK, 0};
        pending = z = ZSTD_decompressStream(u->dc, &ob, &ib);
        if (ZSTD_isError(z)) break;
        if (ob.pos == 0)
            fail = "it ends in the middle of its data";
        else
            (void) s_put(u, out, &ob, &fail);
    }
    if (fail == NULL && ZSTD_isError(z)) fail = ZSTD_getErrorName(z);
    if (fail != NULL) {
        cb_fmt_why(why, len, "decompressing the image's %s: %s", name, fail);
        return -1;
    }
    return 0;
}

int cb_criu_unpack(int from, int to, uid_t uid, gid_t gid, uint64_t max, uint64_t *bytes, char *why,
                   size_t why_len) {
    static s_names_t names;
    if (s_list(from, S_RAW CB_CRIU_PACK_SUFFIX, &names, why, why_len) < 0) return -1;
    s_unpack_t u = {ZSTD_createDCtx(), malloc(S_CHUNK), malloc(S_CHUNK), max, 0};
    int rc = 0;
    if (u.dc == NULL || u.in == NULL || u.out == NULL) {
        cb_fmt_why(why, why_len, "decompressing the image: out of memory");
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < names.n; i++)
        rc = s_unpack_one(&u, from, names.name[i], to, uid, gid, why, why_len);
    ZSTD_freeDCtx(u.dc);
    free(u.in);
    free(u.out);
    *bytes = u.bytes;
    return rc;
}
