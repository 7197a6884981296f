/*
 * tap.h - a tiny TAP producer for the C unit tests (after bubblewrap's
 * test-utils and libuv's task.h): every ASSERT prints both sides.
 */
#ifndef CB_TAP_H
#define CB_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

#define TAP_OK(cond, ...)                                                                          \
    do {                                                                                           \
        int tap_ok_ = !!(cond); /* evaluated once: cond may have effects */                        \
        tap_n++;                                                                                   \
        if (tap_ok_) {                                                                             \
            printf("ok %d - ", tap_n);                                                             \
        } else {                                                                                   \
            tap_failed++;                                                                          \
            printf("not ok %d - ", tap_n);                                                         \
        }                                                                                          \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        if (!tap_ok_) printf("#   at %s:%d: %s\n", __FILE__, __LINE__, #cond);                     \
    } while (0)

#define TAP_EQ_INT(a, b, name)                                                                     \
    do {                                                                                           \
        long long tap_a_ = (long long) (a), tap_b_ = (long long) (b);                              \
        TAP_OK(tap_a_ == tap_b_, "%s", name);                                                      \
        if (tap_a_ != tap_b_) printf("#   got %lld, want %lld\n", tap_a_, tap_b_);                 \
    } while (0)

#define TAP_EQ_STR(a, b, name)                                                                     \
    do {                                                                                           \
        const char *tap_a_ = (a), *tap_b_ = (b);                                                   \
        int tap_eq_ = tap_a_ && tap_b_ && strcmp(tap_a_, tap_b_) == 0;                             \
        TAP_OK(tap_eq_, "%s", name);                                                               \
        if (!tap_eq_)                                                                              \
            printf("#   got '%s', want '%s'\n", tap_a_ ? tap_a_ : "(null)",                        \
                   tap_b_ ? tap_b_ : "(null)");                                                    \
    } while (0)

#define TAP_SKIP(reason)                                                                           \
    do {                                                                                           \
        if (getenv("CB_MUST_WORK") && strcmp(getenv("CB_MUST_WORK"), "1") == 0) {                  \
            tap_n++;                                                                               \
            tap_failed++;                                                                          \
            printf("not ok %d - skip not allowed (CB_MUST_WORK=1): %s\n", tap_n, reason);          \
        } else {                                                                                   \
            tap_n++;                                                                               \
            printf("ok %d # SKIP %s\n", tap_n, reason);                                            \
        }                                                                                          \
    } while (0)

#define TAP_DONE()                                                                                 \
    do {                                                                                           \
        printf("1..%d\n", tap_n);                                                                  \
        if (tap_failed) printf("# %d of %d failed\n", tap_failed, tap_n);                          \
        return tap_failed ? 1 : 0;                                                                 \
    } while (0)

#endif
