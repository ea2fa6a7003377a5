/* The injectable clock; see clock.h. */
#include "tokens/clock.h"

#include <errno.h>
#include <time.h>

static int64_t clock_system_now(void *ctx)
{
    (void)ctx;
    return (int64_t)time(NULL);
}

static void clock_system_sleep(void *ctx, int64_t seconds)
{
    struct timespec ts = {(time_t)seconds, 0};

    (void)ctx;
    /* Bounded: each EINTR resumes with what is left. */
    while (seconds > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

const tokens_clock tokens_clock_system = {clock_system_now, clock_system_sleep, NULL};

int64_t tokens_clock_now(const tokens_clock *c)
{
    return c->now(c->ctx);
}

void tokens_clock_sleep(const tokens_clock *c, int64_t seconds)
{
    c->sleep(c->ctx, seconds);
}
