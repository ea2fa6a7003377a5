/*
 * The two upstream implementations behind upstream.h, for upstream.c only:
 * upstream_local_* runs git on a bare repository (local.c),
 * upstream_http_* talks smart HTTP(S) with libcurl (http.c). Each
 * function has the contract of its upstream.h counterpart.
 */
#ifndef RG_UPSTREAM_OPS_H
#define RG_UPSTREAM_OPS_H

#include "upstream/upstream.h"

typedef struct upstream_local_push upstream_local_push;
typedef struct upstream_local_fetch upstream_local_fetch;
typedef struct upstream_http_push upstream_http_push;
typedef struct upstream_http_fetch upstream_http_fetch;

int upstream_local_advertise(rg_buf *out, const upstream_target *t, rg_error *err);
int upstream_local_push_start(upstream_local_push **out, const upstream_target *t,
                              rgit_sideband_mode mode, rg_error *err);
int upstream_local_push_write(upstream_local_push *u, const void *data, size_t len, rg_error *err);
int upstream_local_push_finish(upstream_local_push *u, rgit_report *report, rg_buf *progress,
                               rg_error *err);
void upstream_local_push_free(upstream_local_push *u);
int upstream_local_fetch_start(upstream_local_fetch **out, const upstream_target *t,
                               const upstream_fetch_request *req, rg_error *err);
ssize_t upstream_local_fetch_read(upstream_local_fetch *f, char *buf, size_t max, rg_error *err);
void upstream_local_fetch_free(upstream_local_fetch *f);

int upstream_http_advertise(rg_buf *out, const upstream_target *t, rg_error *err);
int upstream_http_push_start(upstream_http_push **out, const upstream_target *t,
                             rgit_sideband_mode mode, unsigned cred_flags, rg_error *err);
int upstream_http_push_write(upstream_http_push *u, const void *data, size_t len, rg_error *err);
int upstream_http_push_finish(upstream_http_push *u, rgit_report *report, rg_buf *progress,
                              rg_error *err);
void upstream_http_push_free(upstream_http_push *u);
int upstream_http_fetch_start(upstream_http_fetch **out, const upstream_target *t,
                              const upstream_fetch_request *req, rg_error *err);
ssize_t upstream_http_fetch_read(upstream_http_fetch *f, char *buf, size_t max, rg_error *err);
void upstream_http_fetch_free(upstream_http_fetch *f);

/*
 * Is the client asking for protocol v2? As git's own server decides it
 * (determine_protocol_version_server): a `version=2` key in the
 * colon-separated Git-Protocol value. Accepts NULL.
 */
int upstream_protocol_is_v2(const char *git_protocol);

#endif
