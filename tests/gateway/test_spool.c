/* The shared spool budget (gateway/spool.c): concurrent leases never pass it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>

#include "gateway/spool.h"

Test(spool, a_lease_is_refused_past_the_budget_and_gives_all_back_on_release)
{
    gateway_spool *s;
    gateway_spool_lease a, b;

    cr_assert_eq(gateway_spool_new(&s, 1000), 0);
    gateway_spool_lease_init(&a, s);
    gateway_spool_lease_init(&b, s);
    cr_expect_eq(gateway_spool_take(&a, 600), 0);
    cr_expect_eq(gateway_spool_take(&b, 500), -ENOSPC, "600 + 500 is past 1000");
    cr_expect_eq(gateway_spool_take(&b, 400), 0);
    cr_expect_eq(gateway_spool_used(s), 1000);
    cr_expect_eq(gateway_spool_take(&b, 1), -ENOSPC);
    gateway_spool_lease_release(&a);
    cr_expect_eq(gateway_spool_used(s), 400);
    cr_expect_eq(gateway_spool_take(&b, 600), 0);
    gateway_spool_lease_release(&b);
    gateway_spool_lease_release(&b);
    cr_expect_eq(gateway_spool_used(s), 0, "releasing twice gives back once");
    cr_expect_eq(gateway_spool_take(NULL, 1 << 30), 0, "no lease, no budget");
    cr_expect_eq(gateway_spool_take(&a, (size_t)-1), -ENOSPC);
    gateway_spool_free(s);
}

#define THREADS 8
#define TAKES   20000

static void *taker(void *arg)
{
    gateway_spool_lease *l = arg;

    for (int i = 0; i < TAKES; i++)
        gateway_spool_take(l, 7);
    return NULL;
}

Test(spool, concurrent_leases_never_charge_more_than_the_budget)
{
    gateway_spool *s;
    gateway_spool_lease leases[THREADS];
    pthread_t t[THREADS];
    uint64_t held = 0;

    cr_assert_eq(gateway_spool_new(&s, 100000), 0);
    for (int i = 0; i < THREADS; i++) {
        gateway_spool_lease_init(&leases[i], s);
        cr_assert_eq(pthread_create(&t[i], NULL, taker, &leases[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        held += leases[i].held;
    }
    cr_expect_leq(gateway_spool_used(s), 100000);
    cr_expect_eq(held, gateway_spool_used(s), "what leases hold is what is charged");
    cr_expect_gt(held, 100000 - 7, "the budget fills up");
    for (int i = 0; i < THREADS; i++)
        gateway_spool_lease_release(&leases[i]);
    cr_expect_eq(gateway_spool_used(s), 0);
    gateway_spool_free(s);
}

Test(spool, kept_bytes_stay_charged_after_the_lease_until_given_back)
{
    gateway_spool *s;
    gateway_spool_lease l;

    cr_assert_eq(gateway_spool_new(&s, 1000), 0);
    gateway_spool_lease_init(&l, s);
    cr_assert_eq(gateway_spool_take(&l, 600), 0);
    cr_expect_eq(gateway_spool_lease_keep(&l, 700), -EINVAL, "more than the lease holds");
    cr_expect_eq(gateway_spool_lease_keep(&l, 400), 0);
    gateway_spool_lease_release(&l);
    cr_expect_eq(gateway_spool_used(s), 400);
    /* The kept bytes count against every later request. */
    cr_expect_eq(gateway_spool_take(&l, 700), -ENOSPC);
    gateway_spool_give_back(s, 400);
    cr_expect_eq(gateway_spool_take(&l, 700), 0);
    gateway_spool_lease_release(&l);
    /* Held at start (packs already on disk), even past the cap. */
    gateway_spool_hold(s, 1500);
    cr_expect_eq(gateway_spool_used(s), 1500);
    cr_expect_eq(gateway_spool_take(&l, 1), -ENOSPC);
    gateway_spool_give_back(s, 1500);
    cr_expect_eq(gateway_spool_used(s), 0);
    gateway_spool_free(s);
}
