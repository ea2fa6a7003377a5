/*
 * Connection tracking (gateway/conns.c) on socketpairs: a cut is a
 * shutdown the peer sees as end of file, so each test watches the far end.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/conns.h"

#define N 8

static int near_end[N], far_end[N];

static void setup(void)
{
    int sv[2];

    for (int i = 0; i < N; i++) {
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        near_end[i] = sv[0];
        far_end[i] = sv[1];
    }
}

static void teardown(void)
{
    for (int i = 0; i < N; i++) {
        close(near_end[i]);
        close(far_end[i]);
    }
}

TestSuite(conns, .init = setup, .fini = teardown);

/* Has the gateway side of pair i been shut down? Waits up to ms. */
static int was_cut(int i, int ms)
{
    struct pollfd p = {.fd = far_end[i], .events = POLLIN};
    char c;

    return poll(&p, 1, ms) == 1 && read(far_end[i], &c, 1) == 0;
}

static config_limits limits(unsigned unauth, unsigned per_token, unsigned header_seconds)
{
    return (config_limits){
        .connections = 100,
        .unauthenticated = unauth,
        .per_token = per_token,
        .header_seconds = header_seconds,
        .idle_seconds = 60,
        .spool_bytes = 1 << 20,
        .inflate_ratio = 100,
    };
}

Test(conns, past_the_waiting_cap_the_oldest_waiting_connection_is_cut)
{
    config_limits lim = limits(3, 4, 60);
    gateway_conns *t;
    gateway_conn *c[N];
    rg_error err = RG_ERROR_INIT;
    gateway_conns_stats st;

    cr_assert_eq(gateway_conns_new(&t, &lim, &err), 0, "%s", err.msg);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(gateway_conns_opened(&c[i], t, near_end[i]), 0);
    /* An authorised connection no longer waits: it is never the one cut. */
    cr_assert_eq(gateway_conns_authorised(t, c[0], "aaaaaaaaaaaa"), 0);
    cr_assert_eq(gateway_conns_opened(&c[3], t, near_end[3]), 0);
    cr_assert_eq(gateway_conns_opened(&c[4], t, near_end[4]), 0);
    cr_expect(was_cut(1, 1000), "the oldest waiting connection is cut");
    cr_expect_not(was_cut(0, 0), "the authorised one is not");
    cr_expect_not(was_cut(4, 0), "the newest is not");
    cr_expect_not(was_cut(3, 0));
    cr_expect_not(was_cut(2, 0));
    gateway_conns_get_stats(&st, t);
    cr_expect_eq(st.open, 5);
    cr_expect_eq(st.waiting, 3);
    cr_expect_eq(st.cut, 1);
    cr_expect_eq(st.cut_evicted, 1);
    cr_expect_eq(st.cut_deadline, 0);
    /* Its request done, c[0] waits again, as the newest: c[2] goes next. */
    gateway_conns_request_done(t, c[0]);
    cr_expect(was_cut(2, 1000));
    for (int i = 0; i < 5; i++)
        gateway_conns_closed(t, c[i]);
    gateway_conns_free(t);
}

Test(conns, a_waiting_connection_is_cut_at_the_header_deadline)
{
    config_limits lim = limits(10, 4, 1);
    gateway_conns *t;
    gateway_conn *c[2];
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(gateway_conns_new(&t, &lim, &err), 0, "%s", err.msg);
    cr_assert_eq(gateway_conns_opened(&c[0], t, near_end[0]), 0);
    cr_assert_eq(gateway_conns_opened(&c[1], t, near_end[1]), 0);
    cr_assert_eq(gateway_conns_authorised(t, c[1], "bbbbbbbbbbbb"), 0);
    cr_expect_not(was_cut(0, 700), "not before the deadline");
    cr_expect(was_cut(0, 1500), "cut once the deadline passed");
    cr_expect_not(was_cut(1, 0), "a connection with a request running is not waiting");
    gateway_conns_closed(t, c[0]);
    gateway_conns_closed(t, c[1]);
    gateway_conns_free(t);
}

Test(conns, one_token_runs_at_most_per_token_requests)
{
    config_limits lim = limits(10, 2, 60);
    gateway_conns_stats st;
    gateway_conns *t;
    gateway_conn *c[4];
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(gateway_conns_new(&t, &lim, &err), 0, "%s", err.msg);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(gateway_conns_opened(&c[i], t, near_end[i]), 0);
    cr_expect_eq(gateway_conns_authorised(t, c[0], "aaaaaaaaaaaa"), 0);
    cr_expect_eq(gateway_conns_authorised(t, c[1], "aaaaaaaaaaaa"), 0);
    cr_expect_eq(gateway_conns_authorised(t, c[2], "aaaaaaaaaaaa"), -EBUSY);
    cr_expect_eq(gateway_conns_authorised(t, c[3], "bbbbbbbbbbbb"), 0, "another token");
    /* A connection's next request gives back its previous slot first. */
    cr_expect_eq(gateway_conns_authorised(t, c[1], "aaaaaaaaaaaa"), 0);
    gateway_conns_request_done(t, c[0]);
    cr_expect_eq(gateway_conns_authorised(t, c[2], "aaaaaaaaaaaa"), 0);
    /* Closing frees a slot a request still held. */
    gateway_conns_closed(t, c[1]);
    cr_expect_eq(gateway_conns_authorised(t, c[0], "aaaaaaaaaaaa"), 0);
    cr_expect_eq(gateway_conns_authorised(NULL, NULL, "aaaaaaaaaaaa"), 0, "untracked");
    gateway_conns_get_stats(&st, t);
    cr_expect_eq(st.per_token_refused, 1, "the refusal is counted");
    cr_expect_eq(st.open, 3, "one of four closed");
    gateway_conns_closed(t, c[0]);
    gateway_conns_closed(t, c[2]);
    gateway_conns_closed(t, c[3]);
    gateway_conns_closed(t, NULL);
    gateway_conns_free(t);
}
