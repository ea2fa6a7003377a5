/*
 * The network a sandboxed command sees (--net). With the net namespace the
 * command has only its own loopback; `--net gateway` makes one service of
 * the host, the refgate gateway, reachable there at the very address the
 * run's git uses (say 127.0.0.1:8470), and nothing else.
 *
 * How: the sandbox's first process, inside the new net namespace, binds a
 * listening TCP socket to that address on the inside loopback and passes
 * it out to the runner over a unix socketpair (SCM_RIGHTS). The runner,
 * still in the host's namespace, accepts on it from a thread of its own and
 * relays each connection to the real gateway: a poll loop with bounded
 * buffers and a bounded number of connections, closing both sides on an
 * error and passing an end of file on. The relay lives in the runner, so
 * it ends with the run: no process is left behind.
 *
 * The gateway must be on the host's loopback (refgate listens there only):
 * an address the sandbox's loopback cannot hold would need routes inside,
 * which is what the namespace is there to avoid.
 *
 * `--net allow=HOST:PORT,...` adds an HTTP CONNECT proxy the same way: a
 * second listening socket inside (127.0.0.1:SANDBOX_NET_PROXY_PORT), whose
 * connections the relay reads a `CONNECT host:port HTTP/1.1` request from,
 * checks host:port against the list (exact names, case-insensitive; an IP
 * literal only when listed as such), resolves the name outside (there is
 * no DNS inside), refuses a name that resolves to a loopback, link-local,
 * unspecified or multicast address (the host's own services, the cloud
 * metadata endpoint), connects and relays.
 */
#ifndef RG_SANDBOX_NET_H
#define RG_SANDBOX_NET_H

#include <stddef.h>
#include <sys/socket.h>

#include "util/error.h"

/* Addresses one gateway name resolves to, at most (localhost: 2). */
#define SANDBOX_NET_ADDRS_MAX 4
/* Connections relayed at once, at most; more wait in the listen backlog. A
 * connection holds its slot until both ends are done (an end of file from
 * one side is passed on, and the other may still answer). */
#define SANDBOX_NET_CONNS_MAX 64
/* Bytes buffered per direction of a connection. */
#define SANDBOX_NET_BUF 16384
/* A host name, at most (RFC 1035's 253, and room). */
#define SANDBOX_NET_HOST_MAX 256
/* --net allow entries, at most. */
#define SANDBOX_NET_ALLOW_MAX 32
/* The CONNECT proxy's port on the inside loopback (the next one when the
 * gateway has it). */
#define SANDBOX_NET_PROXY_PORT 3128
/* A CONNECT request and its headers, at most. */
#define SANDBOX_NET_REQUEST_MAX 4096

typedef enum sandbox_net_mode {
    SANDBOX_NET_NONE = 0, /* loopback only */
    SANDBOX_NET_GATEWAY,  /* loopback, and the gateway at its own address */
    SANDBOX_NET_HOST,     /* no net namespace: the caller's network */
    SANDBOX_NET_ALLOW,    /* loopback, the gateway if named, and a CONNECT proxy */
} sandbox_net_mode;

/*
 * What the bridge serves: the gateway (its name as given, and the loopback
 * addresses it has; naddr 0: none) and, with --net allow, the proxy's port
 * inside and the host:port entries it lets through. Plain data: copied
 * into the relay.
 */
typedef struct sandbox_net_gateway {
    char host[SANDBOX_NET_HOST_MAX];
    unsigned port;
    struct sockaddr_storage addr[SANDBOX_NET_ADDRS_MAX];
    socklen_t addrlen[SANDBOX_NET_ADDRS_MAX];
    size_t naddr;
    unsigned proxy_port;                                         /* 0: no proxy */
    char allow[SANDBOX_NET_ALLOW_MAX][SANDBOX_NET_HOST_MAX + 8]; /* "host:port", lower case */
    size_t nallow;
} sandbox_net_gateway;

/* The relay, in the runner (opaque). */
typedef struct sandbox_net_relay sandbox_net_relay;

/*
 * Split `arg` into host and port: HOST:PORT, [V6]:PORT, or a URL
 * http://HOST[:PORT][/...] or https://... (ports 80 and 443 by default).
 * Pure: no lookup.
 */
int sandbox_net_parse(char *host, size_t hostsz, unsigned *port, const char *arg, rg_error *err);

/*
 * Parse `arg` (see sandbox_net_parse) and resolve the host here, outside:
 * every address must be a loopback one (127.0.0.0/8, ::1), or the gateway
 * could not be given the same address inside.
 */
int sandbox_net_resolve(sandbox_net_gateway *out, const char *arg, rg_error *err);

/*
 * Add the comma-separated HOST:PORT entries of `list` to gw's allow-list
 * (names lower-cased; [V6]:PORT for IPv6 literals) and give it the proxy,
 * on SANDBOX_NET_PROXY_PORT or the next port when the gateway has that one.
 */
int sandbox_net_allow_parse(sandbox_net_gateway *gw, const char *list, rg_error *err);

/* 1 when host:port is on gw's allow-list (exact, case-insensitive), else 0. */
int sandbox_net_allowed(const sandbox_net_gateway *gw, const char *host, unsigned port);

/*
 * Parse a proxy request in buf[0..len): 1 while the header is incomplete,
 * 0 with the target in host and port and the header's length in *hdrlen
 * for `CONNECT host:port HTTP/1.x`, RG_E_PROTOCOL for anything else (an
 * absolute-URI GET included: only tunnels pass). Pure.
 */
int sandbox_net_proxy_request(char *host, size_t hostsz, unsigned *port, size_t *hdrlen,
                              const char *buf, size_t len);

/*
 * Inside the new net namespace, loopback up: bind a listening socket to
 * each of the gateway's addresses (those this kernel can hold: ::1 may be
 * missing), send them out over `sock`, and wait for the runner to say it
 * took them, so the command never starts with nobody serving them. Closes
 * the listening sockets here either way.
 */
int sandbox_net_serve_inside(int sock, const sandbox_net_gateway *gw, rg_error *err);
/* (and, with a proxy, a listening socket on 127.0.0.1:proxy_port) */

/*
 * In the runner: start the relay thread, which takes the listening sockets
 * from `sock` (consumed) and relays their connections to `gw` (and, for
 * the proxy's, to the allowed host each asks for) until
 * sandbox_net_relay_free, or the runner's exit. The proxy resolves names
 * in the relay's thread (getaddrinfo blocks: a slow resolver delays the
 * run's other connections for as long, bounded by its own timeouts).
 */
int sandbox_net_relay_start(sandbox_net_relay **out, int sock, const sandbox_net_gateway *gw,
                            rg_error *err);

/* Distinct refused targets named in a summary, at most (the rest are
 * counted only). */
#define SANDBOX_NET_BLOCKED_NAMES 8

/* Why the proxy refused a connection. */
typedef enum sandbox_net_refusal {
    SANDBOX_NET_REFUSED_LIST = 0, /* host:port not on the --net allow list */
    SANDBOX_NET_REFUSED_LOCAL,    /* a listed name that leads to a local address */
    SANDBOX_NET_REFUSED_METHOD,   /* not a CONNECT request, or one too long */
    SANDBOX_NET_REFUSED_KINDS,
} sandbox_net_refusal;

/*
 * What the relay refused during the run, for the summary at its end:
 * counts per reason, and the first SANDBOX_NET_BLOCKED_NAMES distinct
 * targets with their own counts. Plain data.
 */
typedef struct sandbox_net_blocked {
    unsigned long count[SANDBOX_NET_REFUSED_KINDS];
    struct {
        char what[SANDBOX_NET_HOST_MAX + 8]; /* "host:port" */
        unsigned kind;                       /* sandbox_net_refusal */
        unsigned long n;
    } names[SANDBOX_NET_BLOCKED_NAMES];
    size_t nnames;
} sandbox_net_blocked;

/* Count one refusal of `what` (NULL: no target to name) in b. Pure. */
void sandbox_net_blocked_add(sandbox_net_blocked *b, sandbox_net_refusal kind, const char *what);

/*
 * Say what b holds in out, e.g. "2 connections refused by the network
 * allow-list (evil.example:443 x2)"; "" when nothing was refused. Cut to
 * outsz. Pure.
 */
void sandbox_net_blocked_format(char *out, size_t outsz, const sandbox_net_blocked *b);

/*
 * Stop the relay (its thread ends; connections stay open until
 * sandbox_net_relay_free) and copy what it refused into *out (zeroed for a
 * NULL relay). Once stopped, it relays nothing more: call it after the
 * command.
 */
void sandbox_net_relay_blocked(sandbox_net_blocked *out, sandbox_net_relay *r);

/* Stop the relay, close every connection and free it. Accepts NULL. */
void sandbox_net_relay_free(sandbox_net_relay *r);

#endif
