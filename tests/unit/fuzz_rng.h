/* fuzz_rng.h - the proxy tests' fuzz runs: a fixed-seed xorshift, so a
 * failing case repeats on every run. */
#ifndef CB_FUZZ_RNG_H
#define CB_FUZZ_RNG_H

#include <stdint.h>

static inline uint64_t fuzz_rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#endif
