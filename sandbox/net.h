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
 */
#ifndef RG_SANDBOX_NET_H
#define RG_SANDBOX_NET_H

#include <stddef.h>
#include <sys/socket.h>

#include "util/error.h"

/* Addresses one gateway name resolves to, at most (localhost: 2). */
#define SANDBOX_NET_ADDRS_MAX 4
/* Connections relayed at once, at most; more wait in the listen backlog. */
#define SANDBOX_NET_CONNS_MAX 64
/* Bytes buffered per direction of a connection. */
#define SANDBOX_NET_BUF 16384
/* A host name, at most (RFC 1035's 253, and room). */
#define SANDBOX_NET_HOST_MAX 256

typedef enum sandbox_net_mode {
    SANDBOX_NET_NONE = 0, /* loopback only */
    SANDBOX_NET_GATEWAY,  /* loopback, and the gateway at its own address */
    SANDBOX_NET_HOST,     /* no net namespace: the caller's network */
} sandbox_net_mode;

/* The gateway: its name as given, and the loopback addresses it has. */
typedef struct sandbox_net_gateway {
    char host[SANDBOX_NET_HOST_MAX];
    unsigned port;
    struct sockaddr_storage addr[SANDBOX_NET_ADDRS_MAX];
    socklen_t addrlen[SANDBOX_NET_ADDRS_MAX];
    size_t naddr;
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
 * Inside the new net namespace, loopback up: bind a listening socket to
 * each of the gateway's addresses (those this kernel can hold: ::1 may be
 * missing), send them out over `sock`, and wait for the runner to say it
 * took them, so the command never starts with nobody serving them. Closes
 * the listening sockets here either way.
 */
int sandbox_net_serve_inside(int sock, const sandbox_net_gateway *gw, rg_error *err);

/*
 * In the runner: start the relay thread, which takes the listening sockets
 * from `sock` (consumed) and relays their connections to `gw` until
 * sandbox_net_relay_free, or the runner's exit.
 */
int sandbox_net_relay_start(sandbox_net_relay **out, int sock, const sandbox_net_gateway *gw,
                            rg_error *err);

/* Stop the relay, close every connection and free it. Accepts NULL. */
void sandbox_net_relay_free(sandbox_net_relay *r);

#endif
