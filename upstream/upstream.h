/*
 * Talking to an upstream repository: its receive-pack advertisement, a
 * forwarded push streamed into it with its answer read back, and fetches
 * (upload-pack) relayed with their answer streamed out. A local upstream
 * (t->repo_dir set) runs git's own `git receive-pack` / `git upload-pack
 * --stateless-rpc` on the bare repository, so the real git (hooks, fsck
 * settings, locking) decides what lands; a remote one (t->repo_dir NULL) is
 * a smart-HTTP(S) server reached with libcurl, authenticated with a
 * credential acquired from t->read or t->write for that one request and
 * released as soon as it is answered. upstream.c picks the implementation.
 */
#ifndef RG_UPSTREAM_UPSTREAM_H
#define RG_UPSTREAM_UPSTREAM_H

#include <stddef.h>
#include <sys/types.h>

#include "git/report.h"
#include "git/symref.h"
#include "config/config.h"
#include "tokens/credentials.h"
#include "util/buf.h"
#include "util/error.h"

/* The most an advertisement or a report may be before it is refused. */
#define UPSTREAM_ADVERT_MAX   (64u * 1024 * 1024)
#define UPSTREAM_REPORT_MAX   (4u * 1024 * 1024)
#define UPSTREAM_PROGRESS_MAX (1u * 1024 * 1024)

/* One repository on one upstream, and how to reach it. */
typedef struct upstream_target {
    const config_upstream *up;
    const char *repo_path;  /* the path under the upstream, e.g. "acme/app" (no .git) */
    const char *repo_dir;   /* local upstreams: the bare repository; remote: NULL */
    tokens_provider *read;  /* remote: advertisements, fetches, the mirror */
    tokens_provider *write; /* remote: forwarded pushes */
} upstream_target;

/* Append upstream's raw receive-pack advertisement (no HTTP preamble). */
int upstream_advertise(rg_buf *out, const upstream_target *t, rg_error *err);

typedef struct upstream_push upstream_push;

/*
 * Start a forwarded push; `mode` is the side-band the request asked for.
 * `cred_flags` (TOKENS_CRED_*) shape the write credential of a remote push.
 */
int upstream_push_start(upstream_push **out, const upstream_target *t, rgit_sideband_mode mode,
                        unsigned cred_flags, rg_error *err);

/* Send the next bytes of the (rewritten) request. RG_E_UPSTREAM when the
 * upstream stopped reading; call upstream_push_finish for its answer. */
int upstream_push_write(upstream_push *u, const void *data, size_t len, rg_error *err);

/*
 * End the request and collect upstream's answer: its report (parsed) and
 * its band-2 progress. RG_E_UPSTREAM with a message naming what the
 * upstream did when it gave no usable report.
 */
int upstream_push_finish(upstream_push *u, rgit_report *report, rg_buf *progress, rg_error *err);

/* Abort (killing what runs) and free. Accepts NULL. */
void upstream_push_free(upstream_push *u);

/* ---------------------------------------------------------------- fetches */

/* What the client asked of upload-pack. */
typedef struct upstream_fetch_request {
    int advertise;            /* 1: GET info/refs?service=git-upload-pack; 0: POST */
    const char *git_protocol; /* the client's Git-Protocol header (checked), or NULL */
    int body_fd;              /* POST: the request body, read from offset 0 to EOF; else -1 */
    int body_gzip;            /* remote only: body_fd is gzip, sent as such; local
                                 upstreams take the decoded body */
} upstream_fetch_request;

#define UPSTREAM_FETCH_REQUEST_INIT                                                                \
    {                                                                                              \
        0, NULL, -1, 0                                                                             \
    }

typedef struct upstream_fetch upstream_fetch;

/*
 * Send the request and wait until upstream's answer begins, so that a
 * failure before the first byte (RG_E_UPSTREAM, naming what upstream did)
 * can still become an HTTP error. body_fd is borrowed until
 * upstream_fetch_free.
 */
int upstream_fetch_start(upstream_fetch **out, const upstream_target *t,
                         const upstream_fetch_request *req, rg_error *err);

/*
 * The next bytes of the answer, exactly as the client gets them (a v0/v1
 * advertisement starts with its `# service=` preamble, as http-backend
 * sends it; v2 has none). Returns the count, 0 at the end, or
 * RG_E_UPSTREAM when upstream failed part-way. Memory stays bounded however
 * large the answer: it is read as the caller asks for it.
 */
ssize_t upstream_fetch_read(upstream_fetch *f, char *buf, size_t max, rg_error *err);

/* Abort what still runs and free. Accepts NULL. */
void upstream_fetch_free(upstream_fetch *f);

/* ------------------------------------------------------------ symbolic refs */

/* The most an ls-refs answer may be before it is refused. */
#define UPSTREAM_LSREFS_MAX (4u * 1024 * 1024)

/*
 * The symbolic refs among `refnames` upstream: a local repository is read
 * directly, a remote one asked with protocol v2 ls-refs (with the read
 * credential). `oid_hexlen` is the push's object format. A remote that
 * cannot answer is an error (saying what upstream did): the caller cannot
 * know what a push moves.
 */
int upstream_symrefs(rgit_symrefs **out, const upstream_target *t, const char *const *refnames,
                     size_t n, size_t oid_hexlen, rg_error *err);

#endif
