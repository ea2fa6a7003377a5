/*
 * Talking to an upstream repository: its receive-pack advertisement, and a
 * forwarded push streamed into it with its answer read back. The local
 * upstream runs git's own `git receive-pack --stateless-rpc` on the bare
 * repository, so the real receive-pack (hooks, fsck settings, locking)
 * decides what lands. Remote (HTTP) upstreams slot in behind the same
 * functions.
 */
#ifndef RG_GATEWAY_UPSTREAM_H
#define RG_GATEWAY_UPSTREAM_H

#include <stddef.h>

#include "gateway/route.h"
#include "git/report.h"
#include "policy/config.h"
#include "tokens/credentials.h"
#include "util/buf.h"
#include "util/error.h"

/* The most an advertisement or a report may be before it is refused. */
#define UPSTREAM_ADVERT_MAX   (64u * 1024 * 1024)
#define UPSTREAM_REPORT_MAX   (4u * 1024 * 1024)
#define UPSTREAM_PROGRESS_MAX (1u * 1024 * 1024)

/* One repository on one upstream, and how to reach it. */
typedef struct upstream_target {
    const policy_upstream *up;
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
int upstream_push_start(upstream_push **out, const upstream_target *t, git_sideband_mode mode,
                        unsigned cred_flags, rg_error *err);

/* Send the next bytes of the (rewritten) request. RG_E_UPSTREAM when the
 * upstream stopped reading; call upstream_push_finish for its answer. */
int upstream_push_write(upstream_push *u, const void *data, size_t len, rg_error *err);

/*
 * End the request and collect upstream's answer: its report (parsed) and
 * its band-2 progress. RG_E_UPSTREAM with a message naming what the
 * upstream did when it gave no usable report.
 */
int upstream_push_finish(upstream_push *u, git_report *report, rg_buf *progress, rg_error *err);

/* Abort (killing what runs) and free. Accepts NULL. */
void upstream_push_free(upstream_push *u);

#endif
