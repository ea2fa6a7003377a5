/*
 * The clock the tokens library reads and waits on. The gateway uses the
 * system's; a test injects its own, so what depends on time (a JWT's
 * validity, a rate-limit wait) is tested exactly and without sleeping.
 * Run tokens take the time as a `now` argument instead (token.h).
 */
#ifndef RG_TOKENS_CLOCK_H
#define RG_TOKENS_CLOCK_H

#include <stdint.h>

typedef struct tokens_clock {
    int64_t (*now)(void *ctx);                 /* unix seconds */
    void (*sleep)(void *ctx, int64_t seconds); /* wait that long (or pretend to) */
    void *ctx;
} tokens_clock;

/* The system clock: time(2) and nanosleep(2). */
extern const tokens_clock tokens_clock_system;

int64_t tokens_clock_now(const tokens_clock *c);
void tokens_clock_sleep(const tokens_clock *c, int64_t seconds);

#endif
