/*
 * Inside the upstream library: the ops table an upstream implements, for
 * upstream.c to dispatch on. upstream_local_ops runs git on a bare
 * repository (local.c); upstream_http_ops talks smart HTTP(S) with
 * libcurl (http.c). Each op has the contract of its upstream.h
 * counterpart; upstream.c has checked what that header lets it check (a
 * free's NULL, the outputs cleared) before calling one. Not for use
 * outside upstream/.
 */
#ifndef RG_UPSTREAM_OPS_H
#define RG_UPSTREAM_OPS_H

#include "upstream/upstream.h"

typedef struct upstream_ops {
    int (*advertise)(rg_buf *out, const upstream_target *t, rg_error *err);
    int (*push_start)(upstream_push **out, const upstream_target *t, rgit_sideband_mode mode,
                      unsigned cred_flags, rg_error *err);
    int (*push_write)(upstream_push *u, const void *data, size_t len, rg_error *err);
    int (*push_finish)(upstream_push *u, rgit_report *report, rg_buf *progress, rg_error *err);
    void (*push_free)(upstream_push *u); /* never NULL */
    int (*fetch_start)(upstream_fetch **out, const upstream_target *t,
                       const upstream_fetch_request *req, rg_error *err);
    ssize_t (*fetch_read)(upstream_fetch *f, char *buf, size_t max, rg_error *err);
    void (*fetch_free)(upstream_fetch *f); /* never NULL */
} upstream_ops;

/* The head of every implementation's push and fetch, which embeds it first. */
struct upstream_push {
    const upstream_ops *ops;
};

struct upstream_fetch {
    const upstream_ops *ops;
};

/* A target with a repository directory (local.c). */
extern const upstream_ops upstream_local_ops;

/* Any other target: a smart-HTTP(S) remote (http.c). */
extern const upstream_ops upstream_http_ops;

/*
 * Is the client asking for protocol v2? As git's own server decides it
 * (determine_protocol_version_server): a `version=2` key in the
 * colon-separated Git-Protocol value. Accepts NULL.
 */
int upstream_protocol_is_v2(const char *git_protocol);

#endif
