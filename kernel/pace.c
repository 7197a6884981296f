/*
 * pace.c - token buckets and budgets (see pace.h).
 */
#include "kernel/pace.h"

#define S_MS_PER_S 1000.0

static void s_refill(cb_bucket_t *b, int64_t now_ms) {
    if (now_ms > b->last_ms) {
        b->tokens += b->rate * (double) (now_ms - b->last_ms) / S_MS_PER_S;
        if (b->tokens > b->burst) b->tokens = b->burst;
        b->last_ms = now_ms;
    }
}

void cb_bucket_init(cb_bucket_t *b, double rate, double burst, int64_t now_ms) {
    b->rate = rate;
    b->burst = burst;
    b->tokens = burst;
    b->last_ms = now_ms;
}

void cb_bucket_take(cb_bucket_t *b, double n, int64_t now_ms) {
    s_refill(b, now_ms);
    b->tokens -= n;
}

bool cb_bucket_ready(cb_bucket_t *b, int64_t now_ms) {
    s_refill(b, now_ms);
    return b->tokens > 0;
}

int64_t cb_bucket_wait_ms(cb_bucket_t *b, int64_t now_ms) {
    if (cb_bucket_ready(b, now_ms)) return 0;
    return (int64_t) ((-b->tokens) * S_MS_PER_S / b->rate) + 1;
}

void cb_budget_init(cb_budget_t *b, uint64_t limit) {
    b->limit = limit;
    b->used = 0;
    b->told = false;
}

uint64_t cb_budget_charge(cb_budget_t *b, uint64_t n) {
    uint64_t room = b->limit > b->used ? b->limit - b->used : 0;
    uint64_t fit = n < room ? n : room;
    b->used += fit;
    if (fit < n) b->used = b->limit;
    return fit;
}

bool cb_budget_spent(const cb_budget_t *b) { return b->used >= b->limit; }
