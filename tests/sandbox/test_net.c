/*
 * sandbox/net.c: naming the gateway (a table of arguments and what each
 * parses to or why it is refused; loopback only), the allow-list and the
 * proxy's request parser (tables), and the bridge itself in
 * a real user and net namespace: a child binds the gateway's addresses
 * inside and passes them out, the relay in this process carries its
 * connections to a server on the host's loopback, falling back to the
 * gateway's other address when the first has nobody listening.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/net.h"
#include "sandbox/ns.h"

typedef struct parse_case {
    char arg[64];
    char host[32]; /* empty: refused */
    unsigned port;
} parse_case;

ParameterizedTestParameters(net, parse_host_port_and_urls)
{
    static parse_case cases[] = {
        {"127.0.0.1:8470", "127.0.0.1", 8470},
        {"localhost:1", "localhost", 1},
        {"[::1]:65535", "::1", 65535},
        {"http://127.0.0.1:8470", "127.0.0.1", 8470},
        {"http://127.0.0.1:8470/github.com/acme/app.git", "127.0.0.1", 8470},
        {"http://gw.local/", "gw.local", 80},
        {"https://gw.local", "gw.local", 443},
        {"http://[::1]:9/x", "::1", 9},
        /* Refused: no port, a bad port, no host, an unclosed bracket. */
        {"127.0.0.1", "", 0},
        {"127.0.0.1:", "", 0},
        {"127.0.0.1:0", "", 0},
        {"127.0.0.1:65536", "", 0},
        {"127.0.0.1:80x", "", 0},
        {"127.0.0.1:-1", "", 0},
        {"127.0.0.1:80/path", "", 0},
        {":80", "", 0},
        {"http://:80/", "", 0},
        {"[::1:80", "", 0},
        {"[::1]80", "", 0},
        {"", "", 0},
    };
    return cr_make_param_array(parse_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(parse_case *c, net, parse_host_port_and_urls)
{
    rg_error err = RG_ERROR_INIT;
    char host[SANDBOX_NET_HOST_MAX];
    unsigned port = 0;
    int rc = sandbox_net_parse(host, sizeof(host), &port, c->arg, &err);

    if (c->host[0] == '\0') {
        cr_assert_lt(rc, 0, "'%s' was accepted", c->arg);
        cr_assert_neq(err.msg[0], '\0', "'%s': no message", c->arg);
        return;
    }
    cr_assert_eq(rc, 0, "'%s': %s", c->arg, err.msg);
    cr_assert_str_eq(host, c->host, "'%s'", c->arg);
    cr_assert_eq(port, c->port, "'%s'", c->arg);
}

Test(net, resolve_accepts_loopback_only)
{
    rg_error err = RG_ERROR_INIT;
    sandbox_net_gateway gw;
    const struct sockaddr_in *sin;

    cr_assert_eq(sandbox_net_resolve(&gw, "http://127.0.0.1:8470/", &err), 0, "%s", err.msg);
    cr_assert_eq(gw.naddr, 1);
    sin = (const struct sockaddr_in *)&gw.addr[0];
    cr_assert_eq(sin->sin_family, AF_INET);
    cr_assert_eq(ntohs(sin->sin_port), 8470);
    cr_assert_eq(sandbox_net_resolve(&gw, "127.3.2.1:1", &err), 0, "%s", err.msg);
    cr_assert_eq(sandbox_net_resolve(&gw, "192.0.2.1:80", &err), RG_E_DENIED);
    cr_assert(strstr(err.msg, "not a loopback address") != NULL, "%s", err.msg);
    cr_assert_eq(sandbox_net_resolve(&gw, "10.0.0.1:80", &err), RG_E_DENIED);
}

Test(net, the_allow_list_matches_exact_names_and_ports)
{
    rg_error err = RG_ERROR_INIT;
    sandbox_net_gateway gw;

    memset(&gw, 0, sizeof(gw));
    cr_assert_eq(sandbox_net_allow_parse(&gw, "API.Anthropic.com:443,[::1]:8080,10.1.2.3:22", &err),
                 0, "%s", err.msg);
    cr_assert_eq(gw.nallow, 3);
    cr_assert_eq(gw.proxy_port, SANDBOX_NET_PROXY_PORT);
    cr_assert(sandbox_net_allowed(&gw, "api.anthropic.com", 443));
    cr_assert(sandbox_net_allowed(&gw, "API.ANTHROPIC.COM", 443), "names are case-insensitive");
    cr_assert(sandbox_net_allowed(&gw, "::1", 8080));
    cr_assert(sandbox_net_allowed(&gw, "10.1.2.3", 22));
    cr_assert_not(sandbox_net_allowed(&gw, "api.anthropic.com", 80), "another port");
    cr_assert_not(sandbox_net_allowed(&gw, "x.api.anthropic.com", 443), "a subdomain");
    cr_assert_not(sandbox_net_allowed(&gw, "api.anthropic.com.", 443), "a trailing dot");
    cr_assert_not(sandbox_net_allowed(&gw, "anthropic.com", 443), "a parent");
    cr_assert_not(sandbox_net_allowed(&gw, "10.1.2.4", 22), "another literal");
    /* The gateway on the proxy's usual port moves the proxy. */
    memset(&gw, 0, sizeof(gw));
    gw.naddr = 1;
    gw.port = SANDBOX_NET_PROXY_PORT;
    cr_assert_eq(sandbox_net_allow_parse(&gw, "a.example:443", &err), 0, "%s", err.msg);
    cr_assert_eq(gw.proxy_port, SANDBOX_NET_PROXY_PORT + 1);
    /* Refused: empty entries, no port, a URL, too many. */
    memset(&gw, 0, sizeof(gw));
    cr_assert_lt(sandbox_net_allow_parse(&gw, "", &err), 0);
    cr_assert_lt(sandbox_net_allow_parse(&gw, "a.example:443,,b.example:443", &err), 0);
    memset(&gw, 0, sizeof(gw));
    cr_assert_lt(sandbox_net_allow_parse(&gw, "a.example", &err), 0);
    cr_assert_lt(sandbox_net_allow_parse(&gw, "https://a.example/", &err), 0);
    memset(&gw, 0, sizeof(gw));
    {
        char many[SANDBOX_NET_ALLOW_MAX * 16 + 32] = "";
        int i;

        for (i = 0; i <= SANDBOX_NET_ALLOW_MAX; i++)
            snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sh%d.ex:1", i ? "," : "",
                     i);
        cr_assert_eq(sandbox_net_allow_parse(&gw, many, &err), -E2BIG);
    }
}

typedef struct request_case {
    char req[128];
    int want;      /* 0, 1 (incomplete) or RG_E_PROTOCOL */
    char host[32]; /* with want 0 */
    unsigned port;
} request_case;

ParameterizedTestParameters(net, proxy_requests_are_connect_only)
{
    static request_case cases[] = {
        {"CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n", 0, "api.example",
         443},
        {"CONNECT [::1]:8080 HTTP/1.0\r\n\r\n", 0, "::1", 8080},
        {"CONNECT api.example:443 HTTP/1.1\r\nHost: x\r\n", 1, "", 0},
        {"CONN", 1, "", 0},
        {"GET http://api.example/ HTTP/1.1\r\n\r\n", RG_E_PROTOCOL, "", 0},
        {"CONNECT api.example HTTP/1.1\r\n\r\n", RG_E_PROTOCOL, "", 0},
        {"CONNECT http://api.example:443/ HTTP/1.1\r\n\r\n", RG_E_PROTOCOL, "", 0},
        {"CONNECT api.example:443 HTTP/2\r\n\r\n", RG_E_PROTOCOL, "", 0},
        {"CONNECT api.example:443\r\n\r\n", RG_E_PROTOCOL, "", 0},
        {"CONNECT  HTTP/1.1\r\n\r\n", RG_E_PROTOCOL, "", 0},
        {"connect api.example:443 HTTP/1.1\r\n\r\n", RG_E_PROTOCOL, "", 0},
    };
    return cr_make_param_array(request_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(request_case *c, net, proxy_requests_are_connect_only)
{
    char host[SANDBOX_NET_HOST_MAX];
    unsigned port = 0;
    size_t hdr = 0;
    int rc = sandbox_net_proxy_request(host, sizeof(host), &port, &hdr, c->req, strlen(c->req));

    cr_assert_eq(rc, c->want, "'%s': %d", c->req, rc);
    if (rc != 0)
        return;
    cr_assert_str_eq(host, c->host);
    cr_assert_eq(port, c->port);
    cr_assert_eq(hdr, strlen(c->req), "the header ends after its blank line");
}

static void net_addr(struct sockaddr_storage *ss, socklen_t *len, const char *ip, unsigned port)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;

    memset(ss, 0, sizeof(*ss));
    sin->sin_family = AF_INET;
    sin->sin_port = htons((unsigned short)port);
    inet_pton(AF_INET, ip, &sin->sin_addr);
    *len = sizeof(*sin);
}

/* In the child: send `msg` to ip:port inside and expect "pong:" + msg back. */
static int net_child_ask(const char *ip, unsigned port, const char *msg)
{
    struct sockaddr_storage ss;
    socklen_t len;
    char want[64], got[64];
    size_t n = 0;
    ssize_t r;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    net_addr(&ss, &len, ip, port);
    if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0)
        return -1;
    if (write(fd, msg, strlen(msg)) != (ssize_t)strlen(msg) || shutdown(fd, SHUT_WR) < 0)
        return -1;
    /* Bounded: sizeof(got). */
    while (n < sizeof(got) - 1 && (r = read(fd, got + n, sizeof(got) - 1 - n)) > 0)
        n += (size_t)r;
    got[n] = '\0';
    close(fd);
    snprintf(want, sizeof(want), "pong:%s", msg);
    return strcmp(got, want) == 0 ? 0 : -1;
}

Test(net, the_gateway_is_reachable_inside_at_its_address_and_falls_back)
{
    rg_error err = RG_ERROR_INIT;
    sandbox_net_gateway gw;
    sandbox_net_relay *relay = NULL;
    struct sockaddr_storage ss;
    struct sockaddr_in bound;
    socklen_t len = sizeof(bound);
    int sp[2], srv, hole, one = 1, status = 0, served = 0, i;
    unsigned port;
    pid_t pid;

    /* The real gateway listens on 127.0.0.2 only; 127.0.0.1 at the same
     * port is held without listening, so connecting there is refused. */
    srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    net_addr(&ss, &len, "127.0.0.2", 0);
    setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    cr_assert_eq(bind(srv, (struct sockaddr *)&ss, len), 0, "%s", strerror(errno));
    cr_assert_eq(listen(srv, 8), 0);
    len = sizeof(bound);
    getsockname(srv, (struct sockaddr *)&bound, &len);
    port = ntohs(bound.sin_port);
    hole = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    net_addr(&ss, &len, "127.0.0.1", port);
    cr_assert_eq(bind(hole, (struct sockaddr *)&ss, len), 0, "%s", strerror(errno));

    memset(&gw, 0, sizeof(gw));
    snprintf(gw.host, sizeof(gw.host), "test");
    gw.port = port;
    net_addr(&gw.addr[0], &gw.addrlen[0], "127.0.0.1", port);
    net_addr(&gw.addr[1], &gw.addrlen[1], "127.0.0.2", port);
    gw.naddr = 2;

    cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(sp[0]);
        close(srv);
        close(hole);
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
            _exit(77);
        if (sandbox_ns_loopback_up(&err) < 0 || sandbox_net_serve_inside(sp[1], &gw, &err) < 0)
            _exit(10);
        close(sp[1]);
        /* 127.0.0.1 inside: the relay finds nobody at 127.0.0.1 outside
         * and falls back; 127.0.0.2 inside: straight through. */
        _exit((net_child_ask("127.0.0.1", port, "one") < 0) |
              (net_child_ask("127.0.0.2", port, "two") < 0) << 1);
    }
    close(sp[1]);
    cr_assert_eq(sandbox_net_relay_start(&relay, sp[0], &gw, &err), 0, "%s", err.msg);
    /* Bounded: 200 rounds of 50 ms, and two connections. */
    for (i = 0; i < 200 && served < 2; i++) {
        struct pollfd p = {srv, POLLIN, 0};
        char buf[64], out[80];
        ssize_t n;
        int c;

        if (waitpid(pid, &status, WNOHANG) == pid) {
            pid = -1;
            break;
        }
        if (poll(&p, 1, 50) <= 0)
            continue;
        c = accept(srv, NULL, NULL);
        if (c < 0)
            continue;
        n = read(c, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        /* Bounded: the child sends one short word, then its end of file. */
        while (n > 0 && read(c, out, sizeof(out)) > 0)
            ;
        snprintf(out, sizeof(out), "pong:%s", buf);
        cr_assert_eq(write(c, out, strlen(out)), (ssize_t)strlen(out));
        close(c);
        served++;
    }
    if (pid > 0)
        waitpid(pid, &status, 0);
    sandbox_net_relay_free(relay);
    close(srv);
    close(hole);
    cr_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        cr_skip_test("no user and net namespace here");
    cr_assert_neq(WEXITSTATUS(status), 10, "the child could not serve the gateway inside");
    cr_assert_eq(WEXITSTATUS(status), 0, "failed asks (bit mask): %#x", WEXITSTATUS(status));
    cr_assert_eq(served, 2);
}

Test(net, a_relay_that_never_started_fails_the_inside)
{
    rg_error err = RG_ERROR_INIT;
    sandbox_net_gateway gw;
    int sp[2], status;
    pid_t pid;

    memset(&gw, 0, sizeof(gw));
    gw.port = 1;
    net_addr(&gw.addr[0], &gw.addrlen[0], "127.0.0.1", 1);
    gw.naddr = 1;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(sp[0]);
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
            _exit(77);
        if (sandbox_ns_loopback_up(&err) < 0)
            _exit(10);
        _exit(sandbox_net_serve_inside(sp[1], &gw, &err) < 0 ? 0 : 1);
    }
    /* The runner's end closes unread: the command must not start. */
    close(sp[1]);
    close(sp[0]);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        cr_skip_test("no user and net namespace here");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "serving inside succeeded with nobody outside");
}

Test(net, the_relay_holds_at_most_its_connection_cap_and_the_rest_wait)
{
    rg_error err = RG_ERROR_INIT;
    sandbox_net_gateway gw;
    sandbox_net_relay *relay = NULL;
    struct sockaddr_in bound;
    socklen_t len = sizeof(bound);
    int sp[2], go[2], srv, status = 0, accepted = 0, held[SANDBOX_NET_CONNS_MAX + 1], i;
    struct pollfd p;
    unsigned port;
    pid_t pid;

    srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&gw, 0, sizeof(gw));
    net_addr(&gw.addr[0], &gw.addrlen[0], "127.0.0.1", 0);
    cr_assert_eq(bind(srv, (struct sockaddr *)&gw.addr[0], gw.addrlen[0]), 0);
    cr_assert_eq(listen(srv, 128), 0);
    getsockname(srv, (struct sockaddr *)&bound, &len);
    port = ntohs(bound.sin_port);
    net_addr(&gw.addr[0], &gw.addrlen[0], "127.0.0.1", port);
    gw.naddr = 1;
    gw.port = port;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    cr_assert_eq(pipe(go), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct sockaddr_storage ss;
        socklen_t sl;
        int fds[SANDBOX_NET_CONNS_MAX + 1];
        char c;

        close(sp[0]);
        close(srv);
        close(go[1]);
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
            _exit(77);
        if (sandbox_ns_loopback_up(&err) < 0 || sandbox_net_serve_inside(sp[1], &gw, &err) < 0)
            _exit(10);
        /* One past the cap: the last waits in the inside listener's backlog. */
        net_addr(&ss, &sl, "127.0.0.1", port);
        for (i = 0; i <= SANDBOX_NET_CONNS_MAX; i++) {
            fds[i] = socket(AF_INET, SOCK_STREAM, 0);
            if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&ss, sl) < 0)
                _exit(11);
        }
        /* Until told, then one goes, and the waiting one gets its turn. */
        if (read(go[0], &c, 1) != 1)
            _exit(12);
        close(fds[0]);
        if (read(go[0], &c, 1) < 0)
            _exit(13);
        _exit(0);
    }
    close(sp[1]);
    close(go[0]);
    cr_assert_eq(sandbox_net_relay_start(&relay, sp[0], &gw, &err), 0, "%s", err.msg);
    p.fd = srv;
    p.events = POLLIN;
    /* Bounded: 10 s for the cap to fill, then 300 ms in which nothing more
     * may arrive (a negative cannot be polled for), then 10 s for one more. */
    for (i = 0; i < 200 && accepted < SANDBOX_NET_CONNS_MAX; i++)
        if (poll(&p, 1, 50) > 0 && (held[accepted] = accept(srv, NULL, NULL)) >= 0)
            accepted++;
    if (waitpid(pid, &status, WNOHANG) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        sandbox_net_relay_free(relay);
        cr_skip_test("no user and net namespace here");
    }
    cr_assert_eq(accepted, SANDBOX_NET_CONNS_MAX, "%d connections reached the gateway", accepted);
    cr_assert_eq(poll(&p, 1, 300), 0, "a connection past the cap was relayed");
    /* A slot frees once both ends are done: the command closes one
     * connection, the gateway ends all it holds (the others stay
     * half-open inside, and keep their slots). */
    cr_assert_eq(write(go[1], "x", 1), 1);
    for (i = 0; i < accepted; i++)
        close(held[i]);
    accepted = 0;
    cr_assert_gt(poll(&p, 1, 10000), 0, "the waiting connection never got its turn");
    held[accepted++] = accept(srv, NULL, NULL);
    cr_assert_geq(held[accepted - 1], 0);
    close(go[1]);
    waitpid(pid, &status, 0);
    sandbox_net_relay_free(relay);
    for (i = 0; i < accepted; i++)
        close(held[i]);
    close(srv);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: %d",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* The summary's net part: counts per reason, distinct targets named with
 * their counts, the ones past the cap counted but not named. */
Test(net, blocked_summary)
{
    sandbox_net_blocked b;
    char out[1024], name[32];
    int i;

    memset(&b, 0, sizeof(b));
    sandbox_net_blocked_format(out, sizeof(out), &b);
    cr_assert_str_eq(out, "", "nothing refused, nothing said");
    sandbox_net_blocked_add(&b, SANDBOX_NET_REFUSED_LIST, "evil.example:443");
    sandbox_net_blocked_add(&b, SANDBOX_NET_REFUSED_LIST, "evil.example:443");
    sandbox_net_blocked_add(&b, SANDBOX_NET_REFUSED_LIST, "10.0.0.1:80");
    sandbox_net_blocked_add(&b, SANDBOX_NET_REFUSED_LOCAL, "localhost:80");
    sandbox_net_blocked_add(&b, SANDBOX_NET_REFUSED_METHOD, NULL);
    sandbox_net_blocked_format(out, sizeof(out), &b);
    cr_assert_str_eq(out, "3 connections refused by the network allow-list (evil.example:443 x2, "
                          "10.0.0.1:80), 1 connection refused: the name leads to a local address "
                          "(localhost:80), 1 connection refused: not a CONNECT request");
    /* Past SANDBOX_NET_BLOCKED_NAMES distinct targets: counted, "...". */
    memset(&b, 0, sizeof(b));
    for (i = 0; i < SANDBOX_NET_BLOCKED_NAMES + 3; i++) {
        snprintf(name, sizeof(name), "h%d.example:443", i);
        sandbox_net_blocked_add(&b, SANDBOX_NET_REFUSED_LIST, name);
    }
    cr_assert_eq(b.nnames, SANDBOX_NET_BLOCKED_NAMES);
    sandbox_net_blocked_format(out, sizeof(out), &b);
    cr_assert(strstr(out, "11 connections refused") == out, "%s", out);
    cr_assert(strstr(out, ", ...)") != NULL, "%s", out);
    /* A small buffer is cut, never overrun. */
    sandbox_net_blocked_format(out, 10, &b);
    cr_assert_eq(strlen(out), 9);
}
