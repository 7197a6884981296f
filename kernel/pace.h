/*
 * pace.h - what one session's sandbox may make the kernel do: token buckets
 * for frames and bytes per second, and output budgets.
 *
 * The session reads the runner's fds only while the buckets hold tokens, so
 * a sandbox that floods stalls itself (its writes block on a full pipe or
 * socket) instead of taking the kernel's CPU; and every byte it sends is
 * charged to a budget — the request's, the idle period's, the session's —
 * so what reaches clients is bounded too.
 */
#ifndef CB_PACE_H
#define CB_PACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double tokens;   /* available now; may go negative after a large take */
    double rate;     /* refill per second */
    double burst;    /* most tokens held */
    int64_t last_ms; /* last refill */
} cb_bucket_t;

void cb_bucket_init(cb_bucket_t *b, double rate, double burst, int64_t now_ms);
/* Refills for the time passed, then takes n (possibly into debt). */
void cb_bucket_take(cb_bucket_t *b, double n, int64_t now_ms);
/* True when something may be taken now (tokens > 0 after refilling). */
bool cb_bucket_ready(cb_bucket_t *b, int64_t now_ms);
/* Milliseconds until cb_bucket_ready turns true (0 if it is). */
int64_t cb_bucket_wait_ms(cb_bucket_t *b, int64_t now_ms);

typedef struct {
    uint64_t limit; /* bytes allowed */
    uint64_t used;  /* bytes charged so far (saturates at limit) */
    bool told;      /* the user was told it ran out */
} cb_budget_t;

void cb_budget_init(cb_budget_t *b, uint64_t limit);
/* Charges n bytes; returns how many of them fit (0..n). */
uint64_t cb_budget_charge(cb_budget_t *b, uint64_t n);
bool cb_budget_spent(const cb_budget_t *b);

#endif
