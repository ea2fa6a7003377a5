/*
 * The gateway's bridge into the sandbox's net namespace; see net.h. Three
 * parts: naming the gateway (parse, resolve outside, loopback only), the
 * inside half (bind, pass the listening sockets out), and the relay in the
 * runner (accept inside, connect outside, copy both ways).
 */
#include "sandbox/net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/fdpass.h"

/* Pending connections the inside listener holds while the relay is full. */
#define NET_BACKLOG 64

/* The index the proxy's listener is sent with (a gateway address's otherwise). */
#define NET_PROXY_IDX 0xff

_Static_assert(SANDBOX_NET_ADDRS_MAX + 1 <= SANDBOX_FDPASS_MAX,
               "the listeners are passed in one message");

/* ------------------------------------------------------------------------ */
/* Naming the gateway                                                        */
/* ------------------------------------------------------------------------ */

static int net_parse_port(unsigned *out, const char *s, const char *arg, rg_error *err)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (*s < '0' || *s > '9' || errno || *end || v == 0 || v > 65535)
        return rg_error_set(err, -EINVAL, "'%s': expected a port from 1 to 65535", arg);
    *out = (unsigned)v;
    return 0;
}

int sandbox_net_parse(char *host, size_t hostsz, unsigned *port, const char *arg, rg_error *err)
{
    const char *p = arg, *hend, *pstart = NULL;
    char portbuf[8];
    size_t hlen, plen;
    unsigned dflt = 0;

    if (strncmp(p, "http://", 7) == 0) {
        p += 7;
        dflt = 80;
    } else if (strncmp(p, "https://", 8) == 0) {
        p += 8;
        dflt = 443;
    }
    if (*p == '[') {
        hend = strchr(p, ']');
        if (hend == NULL)
            return rg_error_set(err, -EINVAL, "'%s': an IPv6 address needs its ']'", arg);
        hlen = (size_t)(hend - p - 1);
        p++;
        if (hend[1] == ':')
            pstart = hend + 2;
        else if (hend[1] != '\0' && hend[1] != '/')
            return rg_error_set(err, -EINVAL, "'%s': expected ':PORT' after ']'", arg);
    } else {
        hlen = strcspn(p, ":/");
        if (p[hlen] == ':')
            pstart = p + hlen + 1;
    }
    if (hlen == 0 || hlen >= hostsz)
        return rg_error_set(err, -EINVAL, "'%s': expected HOST:PORT or a URL", arg);
    memcpy(host, p, hlen);
    host[hlen] = '\0';
    if (pstart == NULL) {
        if (dflt == 0)
            return rg_error_set(err, -EINVAL, "'%s': expected HOST:PORT (the port is missing)",
                                arg);
        *port = dflt;
        return 0;
    }
    /* A URL may go on with a path; HOST:PORT ends at the port. */
    plen = dflt ? strcspn(pstart, "/") : strlen(pstart);
    if (plen == 0 || plen >= sizeof(portbuf))
        return rg_error_set(err, -EINVAL, "'%s': expected a port from 1 to 65535", arg);
    memcpy(portbuf, pstart, plen);
    portbuf[plen] = '\0';
    return net_parse_port(port, portbuf, arg, err);
}

static int net_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return 0;
}

int sandbox_net_resolve(sandbox_net_gateway *out, const char *arg, rg_error *err)
{
    struct addrinfo hints, *res = NULL, *ai;
    char service[8], shown[INET6_ADDRSTRLEN];
    size_t i;
    int rc, dup;

    memset(out, 0, sizeof(*out));
    rc = sandbox_net_parse(out->host, sizeof(out->host), &out->port, arg, err);
    if (rc < 0)
        return rc;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof(service), "%u", out->port);
    rc = getaddrinfo(out->host, service, &hints, &res);
    if (rc != 0)
        return rg_error_set(err, -ENOENT, "the gateway %s: %s", out->host, gai_strerror(rc));
    /* Bounded: getaddrinfo's list, and SANDBOX_NET_ADDRS_MAX kept. */
    for (ai = res; ai != NULL && rc == 0; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(out->addr[0]))
            continue;
        if (!net_is_loopback(ai->ai_addr)) {
            getnameinfo(ai->ai_addr, ai->ai_addrlen, shown, sizeof(shown), NULL, 0, NI_NUMERICHOST);
            rc = rg_error_set(err, RG_E_DENIED,
                              "the gateway %s is %s, not a loopback address: --net gateway "
                              "serves a gateway on this host's loopback only",
                              out->host, shown);
            break;
        }
        for (i = 0, dup = 0; i < out->naddr; i++)
            dup |= out->addrlen[i] == ai->ai_addrlen &&
                   memcmp(&out->addr[i], ai->ai_addr, ai->ai_addrlen) == 0;
        if (dup || out->naddr == SANDBOX_NET_ADDRS_MAX)
            continue;
        memcpy(&out->addr[out->naddr], ai->ai_addr, ai->ai_addrlen);
        out->addrlen[out->naddr++] = ai->ai_addrlen;
    }
    freeaddrinfo(res);
    if (rc == 0 && out->naddr == 0)
        rc = rg_error_set(err, -ENOENT, "the gateway %s has no address", out->host);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The allow-list and the proxy's requests                                   */
/* ------------------------------------------------------------------------ */

/* "host:port" as the allow-list keeps it: lower case, IPv6 in brackets. */
static int net_allow_key(char *out, size_t outsz, const char *host, unsigned port)
{
    size_t i, n;
    int v6 = strchr(host, ':') != NULL;

    n = (size_t)snprintf(out, outsz, v6 ? "[%s]:%u" : "%s:%u", host, port);
    if (n >= outsz)
        return -1;
    for (i = 0; out[i]; i++)
        out[i] = (char)tolower((unsigned char)out[i]);
    return 0;
}

int sandbox_net_allow_parse(sandbox_net_gateway *gw, const char *list, rg_error *err)
{
    char entry[SANDBOX_NET_HOST_MAX + 8], host[SANDBOX_NET_HOST_MAX];
    const char *p = list;
    unsigned port;
    size_t len;
    int rc;

    /* Bounded: the list's length, SANDBOX_NET_ALLOW_MAX entries kept. */
    while (*p) {
        len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(entry))
            return rg_error_set(err, -EINVAL, "--net allow=%s: an empty or overlong entry", list);
        memcpy(entry, p, len);
        entry[len] = '\0';
        if (strchr(entry, '/') != NULL)
            return rg_error_set(err, -EINVAL, "--net allow: '%s': expected HOST:PORT", entry);
        rc = sandbox_net_parse(host, sizeof(host), &port, entry, err);
        if (rc < 0)
            return rg_error_wrap(err, "--net allow");
        if (gw->nallow == SANDBOX_NET_ALLOW_MAX)
            return rg_error_set(err, -E2BIG, "--net allow: more than %d entries",
                                SANDBOX_NET_ALLOW_MAX);
        if (net_allow_key(gw->allow[gw->nallow], sizeof(gw->allow[0]), host, port) < 0)
            return rg_error_set(err, -EINVAL, "--net allow: '%s' is too long", entry);
        gw->nallow++;
        p += len;
        if (*p == ',')
            p++;
    }
    if (gw->nallow == 0)
        return rg_error_set(err, -EINVAL, "--net allow=: expected HOST:PORT,...");
    gw->proxy_port = gw->naddr > 0 && gw->port == SANDBOX_NET_PROXY_PORT
                         ? SANDBOX_NET_PROXY_PORT + 1
                         : SANDBOX_NET_PROXY_PORT;
    return 0;
}

int sandbox_net_allowed(const sandbox_net_gateway *gw, const char *host, unsigned port)
{
    char key[SANDBOX_NET_HOST_MAX + 8];
    size_t i;

    if (net_allow_key(key, sizeof(key), host, port) < 0)
        return 0;
    for (i = 0; i < gw->nallow; i++)
        if (strcmp(gw->allow[i], key) == 0)
            return 1;
    return 0;
}

int sandbox_net_proxy_request(char *host, size_t hostsz, unsigned *port, size_t *hdrlen,
                              const char *buf, size_t len)
{
    char target[SANDBOX_NET_HOST_MAX + 8];
    const char *end = NULL, *sp, *eol;
    rg_error err = RG_ERROR_INIT;
    size_t i, tlen;

    /* Bounded: len, at most SANDBOX_NET_REQUEST_MAX (the caller's buffer). */
    for (i = 3; i < len && end == NULL; i++)
        if (memcmp(buf + i - 3, "\r\n\r\n", 4) == 0)
            end = buf + i + 1;
    if (end == NULL)
        return 1;
    *hdrlen = (size_t)(end - buf);
    eol = memchr(buf, '\r', *hdrlen);
    if (eol == NULL || eol - buf < 8 || memcmp(buf, "CONNECT ", 8) != 0)
        return RG_E_PROTOCOL;
    sp = memchr(buf + 8, ' ', (size_t)(eol - buf - 8));
    if (sp == NULL || (size_t)(eol - sp - 1) != 8 || memcmp(sp + 1, "HTTP/1.", 7) != 0)
        return RG_E_PROTOCOL;
    tlen = (size_t)(sp - buf - 8);
    if (tlen == 0 || tlen >= sizeof(target))
        return RG_E_PROTOCOL;
    memcpy(target, buf + 8, tlen);
    target[tlen] = '\0';
    /* A URL or a missing port is not a CONNECT target. */
    if (strchr(target, '/') != NULL || sandbox_net_parse(host, hostsz, port, target, &err) < 0)
        return RG_E_PROTOCOL;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Inside: the listening sockets                                             */
/* ------------------------------------------------------------------------ */

int sandbox_net_serve_inside(int sock, const sandbox_net_gateway *gw, rg_error *err)
{
    int fds[SANDBOX_NET_ADDRS_MAX + 1];
    unsigned char idx[SANDBOX_NET_ADDRS_MAX + 1];
    size_t i, n = 0;
    ssize_t got;
    int fd, one = 1, rc = 0, first_errno = 0;
    char ack = 0;

    for (i = 0; i < gw->naddr; i++) {
        fd = socket(gw->addr[i].ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && gw->addr[i].ss_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (fd < 0 || bind(fd, (const struct sockaddr *)&gw->addr[i], gw->addrlen[i]) < 0 ||
            listen(fd, NET_BACKLOG) < 0) {
            /* ::1 is missing where IPv6 is off; one address is enough. */
            if (first_errno == 0)
                first_errno = errno;
            if (fd >= 0)
                close(fd);
            continue;
        }
        fds[n] = fd;
        idx[n++] = (unsigned char)i;
    }
    if (gw->naddr > 0 && n == 0) {
        rc = rg_error_set(err, -first_errno, "the gateway's address %s:%u inside: %s", gw->host,
                          gw->port, strerror(first_errno));
        goto done;
    }
    if (gw->proxy_port != 0) {
        struct sockaddr_in sin;

        memset(&sin, 0, sizeof(sin));
        sin.sin_family = AF_INET;
        sin.sin_port = htons((unsigned short)gw->proxy_port);
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (const struct sockaddr *)&sin, sizeof(sin)) < 0 ||
            listen(fd, NET_BACKLOG) < 0) {
            rc = rg_error_set(err, -errno, "the proxy's address 127.0.0.1:%u inside: %s",
                              gw->proxy_port, strerror(errno));
            if (fd >= 0)
                close(fd);
            goto done;
        }
        fds[n] = fd;
        idx[n++] = NET_PROXY_IDX;
    }
    if (n == 0) {
        rc = rg_error_set(err, -EINVAL, "neither a gateway nor a proxy to serve inside");
        goto done;
    }
    got = sandbox_fdpass_send(sock, idx, n, fds, n);
    if (got != (ssize_t)n) {
        rc = rg_error_set(err, -EPIPE, "passing the gateway's socket to the runner: %s",
                          got < 0 ? strerror((int)-got) : "short write");
        goto done;
    }
    /* The runner acknowledges once its relay holds them. */
    do
        got = read(sock, &ack, 1);
    while (got < 0 && errno == EINTR);
    if (got != 1)
        rc = rg_error_set(err, -EPIPE, "the runner's relay to the gateway did not start");
done:
    for (i = 0; i < n; i++)
        close(fds[i]);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The relay                                                                 */
/* ------------------------------------------------------------------------ */

/* One relayed connection: side 0 the command's, side 1 the gateway's. */
typedef struct net_conn {
    int fd[2];
    int connecting; /* side 1's non-blocking connect is under way */
    int proxy;      /* 1: reading the CONNECT request; 2: answering 200 once connected */
    size_t tried;   /* addresses tried for side 1, the first its listener's */
    size_t target;  /* the address being tried */
    struct sockaddr_storage to[SANDBOX_NET_ADDRS_MAX]; /* where side 1 goes */
    socklen_t tolen[SANDBOX_NET_ADDRS_MAX];
    size_t nto;
    int eof[2];  /* side i said end of file */
    int shut[2]; /* side i was shut for writing */
    size_t len[2], off[2];
    char buf[2][SANDBOX_NET_BUF]; /* buf[i]: read from side i, for side 1 - i */
} net_conn;

struct sandbox_net_relay {
    pthread_t thread;
    int started;
    int stop[2]; /* a byte on stop[1] ends the thread */
    int sock;    /* from the sandbox: the listening sockets */
    sandbox_net_gateway gw;
    int listen[SANDBOX_NET_ADDRS_MAX + 1];
    /* listen[i] relays to gw.addr[target[i]], or is the proxy's (NET_PROXY_IDX) */
    unsigned char target[SANDBOX_NET_ADDRS_MAX + 1];
    size_t nlisten;
    net_conn *conns[SANDBOX_NET_CONNS_MAX];
    size_t nconns;
    sandbox_net_blocked blocked; /* the relay thread's own until it stops */
};

void sandbox_net_blocked_add(sandbox_net_blocked *b, sandbox_net_refusal kind, const char *what)
{
    size_t i;

    if ((unsigned)kind >= SANDBOX_NET_REFUSED_KINDS)
        return;
    b->count[kind]++;
    if (what == NULL)
        return;
    /* Bounded: SANDBOX_NET_BLOCKED_NAMES entries. */
    for (i = 0; i < b->nnames; i++)
        if (b->names[i].kind == (unsigned)kind && strcmp(b->names[i].what, what) == 0) {
            b->names[i].n++;
            return;
        }
    if (b->nnames == SANDBOX_NET_BLOCKED_NAMES)
        return;
    snprintf(b->names[b->nnames].what, sizeof(b->names[0].what), "%s", what);
    b->names[b->nnames].kind = (unsigned)kind;
    b->names[b->nnames++].n = 1;
}

/* Append to out[*len..outsz) as snprintf would, never past the end. */
static void __attribute__((format(printf, 4, 5)))
net_append(char *out, size_t outsz, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*len + 1 >= outsz)
        return;
    va_start(ap, fmt);
    n = vsnprintf(out + *len, outsz - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < outsz ? *len + (size_t)n : outsz - 1;
}

void sandbox_net_blocked_format(char *out, size_t outsz, const sandbox_net_blocked *b)
{
    static const char *const what[SANDBOX_NET_REFUSED_KINDS] = {
        "refused by the network allow-list",
        "refused: the name leads to a local address",
        "refused: not a CONNECT request",
    };
    unsigned long named;
    size_t len = 0, i;
    unsigned k;
    int first;

    if (outsz == 0)
        return;
    out[0] = '\0';
    for (k = 0; k < SANDBOX_NET_REFUSED_KINDS; k++) {
        if (b->count[k] == 0)
            continue;
        net_append(out, outsz, &len, "%s%lu connection%s %s", len ? ", " : "", b->count[k],
                   b->count[k] == 1 ? "" : "s", what[k]);
        first = 1;
        named = 0;
        for (i = 0; i < b->nnames; i++) {
            if (b->names[i].kind != k)
                continue;
            net_append(out, outsz, &len, "%s%s", first ? " (" : ", ", b->names[i].what);
            if (b->names[i].n > 1)
                net_append(out, outsz, &len, " x%lu", b->names[i].n);
            named += b->names[i].n;
            first = 0;
        }
        if (!first)
            net_append(out, outsz, &len, "%s)", named < b->count[k] ? ", ..." : "");
    }
}

static void net_conn_close(net_conn *c)
{
    if (c == NULL)
        return;
    if (c->fd[0] >= 0)
        close(c->fd[0]);
    if (c->fd[1] >= 0)
        close(c->fd[1]);
    free(c);
}

/* Receive the listening sockets and acknowledge; 0, or -1 to end. */
static int net_relay_receive(sandbox_net_relay *r)
{
    unsigned char idx[SANDBOX_NET_ADDRS_MAX + 1];
    struct pollfd p[2] = {{r->stop[0], POLLIN, 0}, {r->sock, POLLIN, 0}};
    size_t i, nfds = 0;
    ssize_t n;
    int fds[SANDBOX_NET_ADDRS_MAX + 1];

    while (poll(p, 2, -1) < 0)
        if (errno != EINTR)
            return -1;
    if (p[0].revents)
        return -1;
    n = sandbox_fdpass_recv(r->sock, idx, sizeof(idx), fds, SANDBOX_NET_ADDRS_MAX + 1, &nfds);
    if (n <= 0) {
        for (i = 0; i < nfds; i++)
            close(fds[i]);
        return -1;
    }
    /* One index per socket, each naming an address of ours. */
    for (i = 0; i < nfds; i++) {
        if ((size_t)n != nfds ||
            (idx[i] >= r->gw.naddr && !(idx[i] == NET_PROXY_IDX && r->gw.proxy_port)) ||
            fcntl(fds[i], F_SETFL, O_NONBLOCK) < 0) {
            close(fds[i]);
            continue;
        }
        r->listen[r->nlisten] = fds[i];
        r->target[r->nlisten++] = idx[i];
    }
    if (r->nlisten == 0)
        return -1;
    return write(r->sock, "k", 1) == 1 ? 0 : -1;
}

/* Connected: a tunnel answers 200 first, queued for side 0. */
static void net_conn_up(net_conn *c)
{
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

    c->connecting = 0;
    if (c->proxy == 2) {
        memcpy(c->buf[1], ok, sizeof(ok) - 1);
        c->len[1] = sizeof(ok) - 1;
        c->off[1] = 0;
        c->proxy = 0;
    }
}

/* A proxy's refusal, best effort: the socket is non-blocking and the
 * answer short, so it fits in the send buffer of a fresh connection. */
static void net_conn_answer(net_conn *c, const char *status)
{
    char msg[128];
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status);

    if (send(c->fd[0], msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* The client is gone: nothing to tell. */
    }
}

/*
 * Open side 1: its first address (for the gateway, its listener's own),
 * then the others (a name like localhost may have an address here the
 * gateway does not listen on). Returns 0 once connected or connecting, -1
 * when every address failed. Bounded: SANDBOX_NET_ADDRS_MAX addresses.
 */
static int net_conn_connect(net_conn *c)
{
    const struct sockaddr_storage *to;
    int fd;

    c->connecting = 0;
    for (; c->tried < c->nto; c->tried++) {
        c->target = (c->target + (c->tried > 0)) % c->nto;
        to = &c->to[c->target];
        if (c->fd[1] >= 0)
            close(c->fd[1]);
        fd = c->fd[1] = socket(to->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, (const struct sockaddr *)to, c->tolen[c->target]) == 0) {
            net_conn_up(c);
            return 0;
        }
        if (errno == EINPROGRESS) {
            c->connecting = 1;
            return 0;
        }
    }
    if (c->proxy == 2)
        net_conn_answer(c, "502 Bad Gateway");
    return -1;
}

/* Where a name may lead: not back to this host, its link or nowhere. */
static int net_public(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);

        return (a >> 24) != 127 && (a >> 24) != 0 && (a >> 16) != 0xa9fe && (a >> 28) != 0xe;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

        return !IN6_IS_ADDR_LOOPBACK(a) && !IN6_IS_ADDR_UNSPECIFIED(a) &&
               !IN6_IS_ADDR_LINKLOCAL(a) && !IN6_IS_ADDR_MULTICAST(a) && !IN6_IS_ADDR_V4MAPPED(a);
    }
    return 0;
}

/*
 * The proxy's side 0 while its request comes in: read it, check it against
 * the list, resolve and connect. Returns 0 to keep the connection, -1 to
 * close it (after an answer saying why).
 */
static int net_proxy_step(const sandbox_net_gateway *gw, sandbox_net_blocked *blocked, net_conn *c,
                          short rev0)
{
    struct addrinfo hints, *res = NULL, *ai;
    char host[SANDBOX_NET_HOST_MAX], service[8], target[SANDBOX_NET_HOST_MAX + 8];
    struct in6_addr lit;
    unsigned port;
    size_t hdr = 0;
    ssize_t n;
    int rc, literal;

    if (!(rev0 & (POLLIN | POLLHUP | POLLERR)))
        return 0;
    n = recv(c->fd[0], c->buf[0] + c->len[0], SANDBOX_NET_REQUEST_MAX - c->len[0], 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0)
        return -1;
    c->len[0] += (size_t)n;
    rc = sandbox_net_proxy_request(host, sizeof(host), &port, &hdr, c->buf[0], c->len[0]);
    if (rc == 1 && c->len[0] < SANDBOX_NET_REQUEST_MAX)
        return 0;
    if (rc != 0) {
        net_conn_answer(c, rc == 1 ? "431 Request Header Fields Too Large"
                                   : "405 Method Not Allowed (CONNECT only)");
        sandbox_net_blocked_add(blocked, SANDBOX_NET_REFUSED_METHOD, NULL);
        return -1;
    }
    snprintf(target, sizeof(target), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
    if (!sandbox_net_allowed(gw, host, port)) {
        net_conn_answer(c, "403 Forbidden (not on refgate-run's --net allow list)");
        sandbox_net_blocked_add(blocked, SANDBOX_NET_REFUSED_LIST, target);
        return -1;
    }
    /* Resolved here, outside: the sandbox has no DNS. A listed IP literal
     * goes where it says; a name must not lead back to this host. */
    literal = inet_pton(AF_INET, host, &lit) == 1 || inet_pton(AF_INET6, host, &lit) == 1;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = literal ? AI_NUMERICHOST : 0;
    snprintf(service, sizeof(service), "%u", port);
    if (getaddrinfo(host, service, &hints, &res) != 0) {
        net_conn_answer(c, "502 Bad Gateway (cannot resolve)");
        return -1;
    }
    /* Bounded: getaddrinfo's list, SANDBOX_NET_ADDRS_MAX kept. */
    for (ai = res; ai != NULL && c->nto < SANDBOX_NET_ADDRS_MAX; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(c->to[0]) || (!literal && !net_public(ai->ai_addr)))
            continue;
        memcpy(&c->to[c->nto], ai->ai_addr, ai->ai_addrlen);
        c->tolen[c->nto++] = ai->ai_addrlen;
    }
    freeaddrinfo(res);
    if (c->nto == 0) {
        net_conn_answer(c, "403 Forbidden (the name leads to a local address)");
        sandbox_net_blocked_add(blocked, SANDBOX_NET_REFUSED_LOCAL, target);
        return -1;
    }
    /* What the client sent past its request goes on to the host. */
    memmove(c->buf[0], c->buf[0] + hdr, c->len[0] - hdr);
    c->len[0] -= hdr;
    c->off[0] = 0;
    c->proxy = 2;
    return net_conn_connect(c);
}

/* A connection accepted inside: open its other side to the gateway. */
static void net_relay_accept(sandbox_net_relay *r, size_t li)
{
    net_conn *c;
    int in;

    /* Another listener may have filled the table in this pass. */
    if (r->nconns >= SANDBOX_NET_CONNS_MAX)
        return;
    in = accept4(r->listen[li], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (in < 0)
        return;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(in);
        return;
    }
    c->fd[0] = in;
    c->fd[1] = -1;
    if (r->target[li] == NET_PROXY_IDX) {
        /* Side 1 waits for the request to name it. */
        c->proxy = 1;
        r->conns[r->nconns++] = c;
        return;
    }
    memcpy(c->to, r->gw.addr, sizeof(c->to));
    memcpy(c->tolen, r->gw.addrlen, sizeof(c->tolen));
    c->nto = r->gw.naddr;
    c->target = r->target[li];
    if (net_conn_connect(c) < 0) {
        net_conn_close(c);
        return;
    }
    r->conns[r->nconns++] = c;
}

/* What side i waits for: reading while its buffer is empty, writing
 * while the other side's has data. */
static short net_conn_events(const net_conn *c, int i)
{
    short ev = 0;

    if (c->proxy == 1)
        return i == 0 ? POLLIN : 0;
    if (c->connecting)
        return i == 1 ? POLLOUT : 0;
    if (!c->eof[i] && c->len[i] == 0)
        ev |= POLLIN;
    if (c->len[1 - i] > c->off[1 - i])
        ev |= POLLOUT;
    return ev;
}

/* Move data for one connection; returns 0 to keep it, -1 to close it. */
static int net_conn_step(const sandbox_net_gateway *gw, sandbox_net_blocked *blocked, net_conn *c,
                         const short rev[2])
{
    ssize_t n;
    int i, soerr = 0;
    socklen_t sl = sizeof(soerr);

    if (c->proxy == 1)
        return net_proxy_step(gw, blocked, c, rev[0]);
    if (c->connecting) {
        if (!(rev[1] & (POLLOUT | POLLERR | POLLHUP)))
            return (rev[0] & (POLLERR | POLLHUP)) ? -1 : 0;
        if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0) {
            c->tried++;
            return net_conn_connect(c);
        }
        net_conn_up(c);
        return 0;
    }
    for (i = 0; i < 2; i++) {
        if (rev[i] & POLLERR)
            return -1;
        if ((rev[i] & (POLLIN | POLLHUP)) && !c->eof[i] && c->len[i] == 0) {
            n = recv(c->fd[i], c->buf[i], sizeof(c->buf[i]), 0);
            if (n == 0)
                c->eof[i] = 1;
            else if (n > 0)
                c->len[i] = (size_t)n, c->off[i] = 0;
            else if (errno != EAGAIN && errno != EINTR)
                return -1;
        }
    }
    for (i = 0; i < 2; i++) {
        if (c->len[i] > c->off[i]) {
            n = send(c->fd[1 - i], c->buf[i] + c->off[i], c->len[i] - c->off[i], MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN && errno != EINTR)
                return -1;
            if (n > 0)
                c->off[i] += (size_t)n;
            if (c->off[i] == c->len[i])
                c->len[i] = c->off[i] = 0;
        }
        /* An end of file passes on once what came before it has. */
        if (c->eof[i] && c->len[i] == 0 && !c->shut[1 - i]) {
            shutdown(c->fd[1 - i], SHUT_WR);
            c->shut[1 - i] = 1;
        }
    }
    return c->eof[0] && c->eof[1] && c->len[0] == 0 && c->len[1] == 0 ? -1 : 0;
}

static void *net_relay_main(void *arg)
{
    struct pollfd p[1 + SANDBOX_NET_ADDRS_MAX + 1 + 2 * SANDBOX_NET_CONNS_MAX];
    sandbox_net_relay *r = arg;
    size_t i, k, np, base;
    short rev[2];
    int i2;

    if (net_relay_receive(r) < 0)
        return NULL;
    /* Bounded: each pass handles at most SANDBOX_NET_CONNS_MAX connections
     * and SANDBOX_NET_BUF bytes each way; it ends on the stop byte. */
    for (;;) {
        np = 0;
        p[np++] = (struct pollfd){r->stop[0], POLLIN, 0};
        /* A full relay leaves new connections in the backlog. */
        for (i = 0; i < r->nlisten; i++)
            p[np++] =
                (struct pollfd){r->nconns < SANDBOX_NET_CONNS_MAX ? r->listen[i] : -1, POLLIN, 0};
        base = np;
        for (i = 0; i < r->nconns; i++)
            for (i2 = 0; i2 < 2; i2++) {
                short ev = net_conn_events(r->conns[i], i2);

                /* A side with nothing to wait for is left out, so a
                 * hang-up there cannot make poll spin. */
                p[np++] = (struct pollfd){ev ? r->conns[i]->fd[i2] : -1, ev, 0};
            }
        if (poll(p, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents)
            break;
        for (i = 0; i < r->nconns; i++) {
            rev[0] = p[base + 2 * i].revents;
            rev[1] = p[base + 2 * i + 1].revents;
            if (net_conn_step(&r->gw, &r->blocked, r->conns[i], rev) < 0) {
                net_conn_close(r->conns[i]);
                r->conns[i] = NULL;
            }
        }
        for (i = 0, k = 0; i < r->nconns; i++)
            if (r->conns[i] != NULL)
                r->conns[k++] = r->conns[i];
        r->nconns = k;
        for (i = 0; i < r->nlisten; i++)
            if (p[1 + i].revents & POLLIN)
                net_relay_accept(r, i);
    }
    return NULL;
}

int sandbox_net_relay_start(sandbox_net_relay **out, int sock, const sandbox_net_gateway *gw,
                            rg_error *err)
{
    sandbox_net_relay *r = calloc(1, sizeof(*r));
    sigset_t all, saved;
    int rc = 0;

    *out = NULL;
    if (r == NULL) {
        close(sock);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    r->sock = sock;
    r->gw = *gw;
    r->stop[0] = r->stop[1] = -1;
    if (pipe2(r->stop, O_CLOEXEC) < 0) {
        rc = rg_error_set(err, -errno, "pipe: %s", strerror(errno));
        goto done;
    }
    /* The runner's signals (forwarded to the command) are for its main
     * thread: the relay's thread blocks them all. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved);
    rc = -pthread_create(&r->thread, NULL, net_relay_main, r);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (rc < 0) {
        rg_error_set(err, rc, "starting the gateway relay: %s", strerror(-rc));
        goto done;
    }
    r->started = 1;
done:
    if (rc < 0) {
        sandbox_net_relay_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* End the relay's thread, once. */
static void net_relay_stop(sandbox_net_relay *r)
{
    if (!r->started)
        return;
    if (write(r->stop[1], "x", 1) < 0) {
        /* A full pipe holds a stop byte already. */
    }
    pthread_join(r->thread, NULL);
    r->started = 0;
}

void sandbox_net_relay_blocked(sandbox_net_blocked *out, sandbox_net_relay *r)
{
    memset(out, 0, sizeof(*out));
    if (r == NULL)
        return;
    /* Joined: what the thread counted is ours to read. */
    net_relay_stop(r);
    *out = r->blocked;
}

void sandbox_net_relay_free(sandbox_net_relay *r)
{
    size_t i;

    if (r == NULL)
        return;
    net_relay_stop(r);
    for (i = 0; i < r->nconns; i++)
        net_conn_close(r->conns[i]);
    for (i = 0; i < r->nlisten; i++)
        close(r->listen[i]);
    if (r->stop[0] >= 0)
        close(r->stop[0]);
    if (r->stop[1] >= 0)
        close(r->stop[1]);
    if (r->sock >= 0)
        close(r->sock);
    free(r);
}
