/*
 * The gateway's bridge into the sandbox's net namespace; see net.h. Three
 * parts: naming the gateway (parse, resolve outside, loopback only), the
 * inside half (bind, pass the listening sockets out), and the relay in the
 * runner (accept inside, connect outside, copy both ways).
 */
#include "sandbox/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Pending connections the inside listener holds while the relay is full. */
#define NET_BACKLOG 64

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
/* Inside: the listening sockets                                             */
/* ------------------------------------------------------------------------ */

int sandbox_net_serve_inside(int sock, const sandbox_net_gateway *gw, rg_error *err)
{
    int fds[SANDBOX_NET_ADDRS_MAX];
    unsigned char idx[SANDBOX_NET_ADDRS_MAX];
    union {
        char buf[CMSG_SPACE(sizeof(fds))];
        struct cmsghdr align;
    } u;
    struct msghdr msg;
    struct cmsghdr *cm;
    struct iovec iov;
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
    if (n == 0) {
        rc = rg_error_set(err, -first_errno, "the gateway's address %s:%u inside: %s", gw->host,
                          gw->port, strerror(first_errno));
        goto done;
    }
    memset(&msg, 0, sizeof(msg));
    memset(&u, 0, sizeof(u));
    iov.iov_base = idx;
    iov.iov_len = n;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = u.buf;
    msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
    do
        got = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (got < 0 && errno == EINTR);
    if (got != (ssize_t)n) {
        rc = rg_error_set(err, -EPIPE, "passing the gateway's socket to the runner: %s",
                          got < 0 ? strerror(errno) : "short write");
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
    size_t tried;   /* gateway addresses tried for side 1, the first its listener's */
    size_t target;  /* the address being tried */
    int eof[2];     /* side i said end of file */
    int shut[2];    /* side i was shut for writing */
    size_t len[2], off[2];
    char buf[2][SANDBOX_NET_BUF]; /* buf[i]: read from side i, for side 1 - i */
} net_conn;

struct sandbox_net_relay {
    pthread_t thread;
    int started;
    int stop[2]; /* a byte on stop[1] ends the thread */
    int sock;    /* from the sandbox: the listening sockets */
    sandbox_net_gateway gw;
    int listen[SANDBOX_NET_ADDRS_MAX];
    unsigned char target[SANDBOX_NET_ADDRS_MAX]; /* listen[i] relays to gw.addr[target[i]] */
    size_t nlisten;
    net_conn *conns[SANDBOX_NET_CONNS_MAX];
    size_t nconns;
};

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
    unsigned char idx[SANDBOX_NET_ADDRS_MAX];
    union {
        char buf[CMSG_SPACE(SANDBOX_NET_ADDRS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct pollfd p[2] = {{r->stop[0], POLLIN, 0}, {r->sock, POLLIN, 0}};
    struct msghdr msg;
    struct cmsghdr *cm;
    struct iovec iov = {idx, sizeof(idx)};
    size_t i, nfds = 0;
    ssize_t n;
    int fds[SANDBOX_NET_ADDRS_MAX];

    while (poll(p, 2, -1) < 0)
        if (errno != EINTR)
            return -1;
    if (p[0].revents)
        return -1;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = u.buf;
    msg.msg_controllen = sizeof(u.buf);
    do
        n = recvmsg(r->sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && nfds == 0) {
            nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            if (nfds > SANDBOX_NET_ADDRS_MAX)
                nfds = SANDBOX_NET_ADDRS_MAX;
            memcpy(fds, CMSG_DATA(cm), nfds * sizeof(int));
        }
    /* One index per socket, each naming an address of ours. */
    for (i = 0; i < nfds; i++) {
        if ((size_t)n != nfds || idx[i] >= r->gw.naddr || fcntl(fds[i], F_SETFL, O_NONBLOCK) < 0) {
            close(fds[i]);
            continue;
        }
        r->listen[r->nlisten] = fds[i];
        r->target[r->nlisten++] = idx[i];
    }
    if (r->nlisten == 0 || (msg.msg_flags & MSG_CTRUNC))
        return -1;
    return write(r->sock, "k", 1) == 1 ? 0 : -1;
}

/*
 * Open side 1 to the gateway: its listener's own address first, then the
 * others (a name like localhost may have an address here the gateway does
 * not listen on). Returns 0 once connected or connecting, -1 when every
 * address failed. Bounded: SANDBOX_NET_ADDRS_MAX addresses.
 */
static int net_conn_connect(const sandbox_net_gateway *gw, net_conn *c)
{
    const struct sockaddr_storage *to;
    int fd;

    c->connecting = 0;
    for (; c->tried < gw->naddr; c->tried++) {
        c->target = (c->target + (c->tried > 0)) % gw->naddr;
        to = &gw->addr[c->target];
        if (c->fd[1] >= 0)
            close(c->fd[1]);
        fd = c->fd[1] = socket(to->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, (const struct sockaddr *)to, gw->addrlen[c->target]) == 0)
            return 0;
        if (errno == EINPROGRESS) {
            c->connecting = 1;
            return 0;
        }
    }
    return -1;
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
    c->target = r->target[li];
    if (net_conn_connect(&r->gw, c) < 0) {
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

    if (c->connecting)
        return i == 1 ? POLLOUT : 0;
    if (!c->eof[i] && c->len[i] == 0)
        ev |= POLLIN;
    if (c->len[1 - i] > c->off[1 - i])
        ev |= POLLOUT;
    return ev;
}

/* Move data for one connection; returns 0 to keep it, -1 to close it. */
static int net_conn_step(const sandbox_net_gateway *gw, net_conn *c, const short rev[2])
{
    ssize_t n;
    int i, soerr = 0;
    socklen_t sl = sizeof(soerr);

    if (c->connecting) {
        if (!(rev[1] & (POLLOUT | POLLERR | POLLHUP)))
            return (rev[0] & (POLLERR | POLLHUP)) ? -1 : 0;
        if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0) {
            c->tried++;
            return net_conn_connect(gw, c);
        }
        c->connecting = 0;
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
    struct pollfd p[1 + SANDBOX_NET_ADDRS_MAX + 2 * SANDBOX_NET_CONNS_MAX];
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
            if (net_conn_step(&r->gw, r->conns[i], rev) < 0) {
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

void sandbox_net_relay_free(sandbox_net_relay *r)
{
    size_t i;

    if (r == NULL)
        return;
    if (r->started) {
        if (write(r->stop[1], "x", 1) < 0) {
            /* A full pipe holds a stop byte already. */
        }
        pthread_join(r->thread, NULL);
    }
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
