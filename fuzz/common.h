/*
 * common.h - helpers shared by the libFuzzer harnesses in fuzz/.
 *
 * Each harness is one fuzz_<target>.c with LLVMFuzzerTestOneInput; these are
 * the bits they share: splitting an input into parts at a separator byte,
 * the kernel's log sent to /dev/null at DEBUG (so every log format runs on
 * fuzzed data without flooding the terminal; FUZZ_LOG=1 shows it), a
 * checked abort that names the broken property, and temporary directories
 * on tmpfs that are removed without ever following a link.
 */
#ifndef CB_FUZZ_COMMON_H
#define CB_FUZZ_COMMON_H

#include "isolate/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Separates the parts of one input (0xff never occurs in UTF-8 text, so
 * JSON parts stay clean; the dictionaries carry it as "\xff"). */
#define FZ_SEP 0xffu

typedef struct {
    const uint8_t *p; /* into the input (borrowed) */
    size_t n;         /* bytes */
} fz_part_t;

/* Splits d[0..n) at FZ_SEP into at most max parts (the last takes the rest,
 * separators included).  Returns the count (>= 1). */
static inline size_t fz_split(const uint8_t *d, size_t n, fz_part_t *parts, size_t max) {
    size_t k = 0, start = 0;
    for (size_t i = 0; i < n && k + 1 < max; i++)
        if (d[i] == FZ_SEP) {
            parts[k++] = (fz_part_t){d + start, i - start};
            start = i + 1;
        }
    parts[k++] = (fz_part_t){d + start, n - start};
    return k;
}

/* A property the code under test must keep did not hold: report and abort,
 * so libFuzzer saves the input as a crash. */
#define FZ_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz: %s:%d: property broken: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The kernel's log at DEBUG into /dev/null, or to stderr with FUZZ_LOG=1. */
static inline void fz_quiet_log(void) {
    cb_log_threshold = CB_LOG_DEBUG;
    if (getenv("FUZZ_LOG") != NULL) return;
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) cb_log_set_fd(fd);
}

/* ---- temporary trees ----------------------------------------------------------------- */

#define FZ_TMP_PATH_MAX 256 /* bytes of a temporary directory's path */

/* Makes a fresh directory named after tag into path: under $FUZZ_TMP (which
 * fuzz/run.sh makes per run on tmpfs and removes afterwards, so a crash
 * leaves nothing behind), else /dev/shm or /tmp.  0 ok, -1 with errno. */
static inline int fz_mkdtemp(const char *tag, char path[FZ_TMP_PATH_MAX]) {
    const char *base = getenv("FUZZ_TMP");
    if (base == NULL || base[0] == '\0') base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, FZ_TMP_PATH_MAX, "%s/cb-fuzz-%s-XXXXXX", base, tag);
    return mkdtemp(path) ? 0 : -1;
}

/* Removes everything inside dirfd (borrowed), never following a link:
 * entries are unlinked by name, directories entered with O_NOFOLLOW. */
static inline void fz_empty_dir(int dirfd) {
    int fd = dup(dirfd);
    if (fd < 0) return;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (unlinkat(dirfd, e->d_name, 0) == 0) continue;
        int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
            fchmod(sub, 0700); /* a harness may have made it unreadable */
            fz_empty_dir(sub);
            close(sub);
        }
        unlinkat(dirfd, e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* Removes the tree at path (an absolute directory made by fz_mkdtemp). */
static inline void fz_rmtree(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        fz_empty_dir(fd);
        close(fd);
    }
    rmdir(path);
}

#endif
