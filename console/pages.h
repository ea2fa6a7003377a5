/*
 * The console's pages, server-rendered: each writes its body's markup into
 * a buffer, and console_page_wrap puts a body in the layout template. Every
 * string from the audit log, the approvals or the request goes through
 * html.h's escaping.
 */
#ifndef RG_CONSOLE_PAGES_H
#define RG_CONSOLE_PAGES_H

#include "console/pushes.h"
#include "gateway/context.h"
#include "util/buf.h"

/* Pushes on one page of the listing. */
#define CONSOLE_PUSHES_PER_PAGE 50

/* Who looks, for the pages that show or post forms. */
typedef struct console_view {
    const gateway_ctx *ctx;
    const char *user; /* NULL: not logged in (the login page) */
    const char *csrf; /* the session's CSRF token */
} console_view;

/*
 * Where the pages read the audit log: the gateway's database when it has
 * one (config "state.postgres"), else `path`, filled with
 * <state_dir>/audit.jsonl (pathsz bytes at most).
 */
audit_source console_log_source(char *path, size_t pathsz, const console_view *v);

/* `body` in the layout, titled `title` (plain text), with the menu when v->user is set. */
int console_page_wrap(rg_buf *out, const char *title, const console_view *v, const char *body);

/* The login form; `error` (plain text, may be NULL) above it. */
int console_page_login(rg_buf *body, const console_view *v, const char *error);

/* The pushes listing (filters in a form, newest first, paged). */
int console_page_pushes(rg_buf *body, const console_view *v, const console_push_filter *f,
                        size_t page);

/* The runs that pushed, the most recent first, each linking to its pushes. */
int console_page_runs(rg_buf *body, const console_view *v, size_t page);

/*
 * One push: its refs with decision, rule, reason and outcome, then per ref
 * its rule trace and the commits and changed paths it brought, read from
 * upstream (page_push.c).
 */
int console_page_push(rg_buf *body, const console_view *v, const char *push_id);

/* Pending approvals with approve and deny forms; `message` (plain text, may be NULL) on top. */
int console_page_approvals(rg_buf *body, const console_view *v, const char *message, int is_error);

/* One approval, the commits its kept pack would land, and its approve and deny forms. */
int console_page_approval(rg_buf *body, const console_view *v, const char *id);

/* The audit log's verification result and head. */
int console_page_integrity(rg_buf *body, const console_view *v);

#endif
