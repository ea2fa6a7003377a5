/*
 * The console's pages (pages.h). Markup is built with rg_buf_puts for
 * fixed text and console_html_text for everything else; each function's
 * buffer is capped by its caller, so a huge log or hostile names make an
 * error, not a runaway page.
 */
#include "console/pages.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "console/assets.h"
#include "console/html.h"
#include "console/markup.h"
#include "gateway/approve.h"

audit_source console_log_source(char *path, size_t pathsz, const console_view *v)
{
    audit_source src = {path, v->ctx->db};

    snprintf(path, pathsz, "%s/audit.jsonl", v->ctx->cfg->state_dir);
    return src;
}

/* The CSRF field every form carries. */
static int csrf_field(rg_buf *b, const console_view *v)
{
    int rc = 0;

    PUT(b, "<input type=\"hidden\" name=\"csrf\" value=\"");
    TEXT(b, v->csrf);
    PUT(b, "\">");
    return rc;
}

int console_page_wrap(rg_buf *out, const char *title, const console_view *v, const char *body)
{
    static const char *const keys[] = {"title", "nav", "body"};
    const console_asset *layout = console_asset_find("layout.html");
    rg_buf t = RG_BUF_INIT(4096), nav = RG_BUF_INIT(4096);
    const char *vals[3];
    int rc = 0;

    if (layout == NULL)
        return -ENOENT;
    TEXT(&t, title);
    if (v->user != NULL) {
        PUT(&nav, "<a href=\"/pushes\">Pushes</a><a href=\"/runs\">Runs</a>"
                  "<a href=\"/approvals\">Approvals</a>"
                  "<a href=\"/integrity\">Integrity</a>"
                  "<form class=\"inline\" method=\"post\" action=\"/logout\">");
        if (rc == 0)
            rc = csrf_field(&nav, v);
        PUT(&nav, "<span class=\"note\">");
        TEXT(&nav, v->user);
        PUT(&nav, "</span> <button type=\"submit\">Log out</button></form>");
    }
    vals[0] = t.data;
    vals[1] = nav.data;
    vals[2] = body;
    if (rc == 0)
        rc = console_html_render(out, layout->data, keys, vals, 3);
    rg_buf_free(&t);
    rg_buf_free(&nav);
    return rc;
}

int console_page_login(rg_buf *body, const console_view *v, const char *error)
{
    static const char *const keys[] = {"csrf", "error"};
    const console_asset *form = console_asset_find("login.html");
    rg_buf csrf = RG_BUF_INIT(256), msg = RG_BUF_INIT(1024);
    const char *vals[2];
    int rc = 0;

    if (form == NULL)
        return -ENOENT;
    TEXT(&csrf, v->csrf);
    if (error != NULL) {
        PUT(&msg, "<p class=\"error\">");
        TEXT(&msg, error);
        PUT(&msg, "</p>");
    }
    vals[0] = csrf.data;
    vals[1] = msg.data;
    if (rc == 0)
        rc = console_html_render(body, form->data, keys, vals, 2);
    rg_buf_free(&csrf);
    rg_buf_free(&msg);
    return rc;
}

/* ------------------------------------------------------------------------
 * Pushes
 * ------------------------------------------------------------------------ */

static int filter_input(rg_buf *b, const char *name, const char *value)
{
    int rc = 0;

    PUT(b, "<label>");
    PUT(b, name);
    PUT(b, " <input name=\"");
    PUT(b, name);
    PUT(b, "\" value=\"");
    TEXT(b, value);
    PUT(b, "\"></label> ");
    return rc;
}

/* The listing's query string for `page`, keeping the filters. */
static int page_link(rg_buf *b, const console_push_filter *f, size_t page, const char *label)
{
    char num[32];
    int rc = 0;

    snprintf(num, sizeof(num), "%zu", page);
    PUT(b, "<a href=\"/pushes?page=");
    PUT(b, num);
    const char *names[] = {"run", "repo", "ref", "decision"};
    const char *vals[] = {f->run, f->repo, f->ref, f->decision};
    for (size_t i = 0; i < 4; i++) {
        if (vals[i] == NULL || *vals[i] == '\0')
            continue;
        PUT(b, "&amp;");
        PUT(b, names[i]);
        PUT(b, "=");
        QUERY(b, vals[i]);
    }
    PUT(b, "\">");
    PUT(b, label);
    PUT(b, "</a>");
    return rc;
}

int console_page_pushes(rg_buf *body, const console_view *v, const console_push_filter *f,
                        size_t page)
{
    console_push_row *rows = NULL;
    rg_error e = RG_ERROR_INIT;
    char path[4200], num[64];
    audit_source src;
    size_t n = 0;
    int more = 0, rc = 0;

    src = console_log_source(path, sizeof(path), v);
    PUT(body, "<form class=\"filter\" method=\"get\" action=\"/pushes\">");
    if (rc == 0)
        rc = filter_input(body, "run", f->run);
    if (rc == 0)
        rc = filter_input(body, "repo", f->repo);
    if (rc == 0)
        rc = filter_input(body, "ref", f->ref);
    if (rc == 0)
        rc = filter_input(body, "decision", f->decision);
    PUT(body, "<button type=\"submit\">Filter</button></form>");
    if (rc == 0 &&
        console_pushes_list(&rows, &n, &more, &src, f, page, CONSOLE_PUSHES_PER_PAGE, &e) < 0) {
        PUT(body, "<p class=\"error\">The audit log cannot be read: ");
        TEXT(body, e.msg);
        PUT(body, "</p>");
        return rc;
    }
    if (n == 0)
        snprintf(num, sizeof(num), "No push%s.", page ? " this far back" : "");
    else
        snprintf(num, sizeof(num), "Pushes %zu to %zu, newest first.",
                 page * CONSOLE_PUSHES_PER_PAGE + 1, page * CONSOLE_PUSHES_PER_PAGE + n);
    PUT(body, "<p class=\"note count\">");
    PUT(body, num);
    PUT(body, "</p><table class=\"pushes\"><thead><tr><th>Time</th>"
              "<th>Run</th><th>Repository</th><th>Refs</th><th>Decisions</th></tr></thead><tbody>");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const console_push_row *r = &rows[i];

        PUT(body, "<tr><td><a href=\"/push?id=");
        QUERY(body, r->push_id);
        PUT(body, "\">");
        TEXT(body, r->time);
        PUT(body, "</a></td><td>");
        TEXT(body, r->run);
        PUT(body, "</td><td>");
        TEXT(body, r->repo);
        PUT(body, "</td><td><code>");
        TEXT(body, r->first_ref);
        PUT(body, "</code>");
        if (r->refs > 1) {
            snprintf(num, sizeof(num), " +%u", r->refs - 1);
            PUT(body, num);
        }
        snprintf(num, sizeof(num), "%u", r->allowed);
        PUT(body, "</td><td><span class=\"allow\">");
        PUT(body, num);
        snprintf(num, sizeof(num), "%u", r->denied);
        PUT(body, " allowed</span> <span class=\"deny\">");
        PUT(body, num);
        PUT(body, " denied</span></td></tr>");
    }
    PUT(body, "</tbody></table><p class=\"pager\">");
    if (page > 0 && rc == 0)
        rc = page_link(body, f, page - 1, "Newer");
    if (more && page + 1 < CONSOLE_PUSHES_PAGES_MAX && rc == 0)
        rc = page_link(body, f, page + 1, "Older");
    PUT(body, "</p>");
    free(rows);
    return rc;
}

int console_page_runs(rg_buf *body, const console_view *v, size_t page)
{
    console_run_row *rows = NULL;
    rg_error e = RG_ERROR_INIT;
    char path[4200], num[64];
    audit_source src;
    size_t n = 0;
    int more = 0, rc = 0;

    src = console_log_source(path, sizeof(path), v);
    if (console_runs_list(&rows, &n, &more, &src, page, CONSOLE_PUSHES_PER_PAGE, &e) < 0) {
        PUT(body, "<p class=\"error\">The audit log cannot be read: ");
        TEXT(body, e.msg);
        PUT(body, "</p>");
        return rc;
    }
    PUT(body, "<table class=\"runs\"><thead><tr><th>Run</th><th>Last push</th>"
              "<th>Repository</th></tr></thead><tbody>");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        PUT(body, "<tr><td><a href=\"/pushes?run=");
        QUERY(body, rows[i].run);
        PUT(body, "\">");
        TEXT(body, rows[i].run);
        PUT(body, "</a></td><td>");
        TEXT(body, rows[i].time);
        PUT(body, "</td><td>");
        TEXT(body, rows[i].repo);
        PUT(body, "</td></tr>");
    }
    PUT(body, "</tbody></table><p class=\"pager\">");
    if (page > 0) {
        snprintf(num, sizeof(num), "<a href=\"/runs?page=%zu\">Newer</a>", page - 1);
        PUT(body, num);
    }
    if (more && page + 1 < CONSOLE_PUSHES_PAGES_MAX) {
        snprintf(num, sizeof(num), "<a href=\"/runs?page=%zu\">Older</a>", page + 1);
        PUT(body, num);
    }
    PUT(body, "</p>");
    free(rows);
    return rc;
}

/* ------------------------------------------------------------------------
 * Approvals
 * ------------------------------------------------------------------------ */

static const char *str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));

    return s ? s : "";
}

/* The approve and deny forms of approval `id`. */
static int decide_forms(rg_buf *b, const console_view *v, const char *id)
{
    int rc = 0;

    PUT(b, "<form class=\"inline approve\" method=\"post\" action=\"/approvals\">");
    if (rc == 0)
        rc = csrf_field(b, v);
    PUT(b, "<input type=\"hidden\" name=\"id\" value=\"");
    TEXT(b, id);
    PUT(b, "\"><input type=\"hidden\" name=\"action\" value=\"approve\">"
           "<button type=\"submit\">Approve</button></form> "
           "<form class=\"inline deny\" method=\"post\" action=\"/approvals\">");
    if (rc == 0)
        rc = csrf_field(b, v);
    PUT(b, "<input type=\"hidden\" name=\"id\" value=\"");
    TEXT(b, id);
    PUT(b, "\"><input type=\"hidden\" name=\"action\" value=\"deny\">"
           "<input name=\"reason\" placeholder=\"reason\" required>"
           "<button type=\"submit\">Deny</button></form>");
    return rc;
}

static int approval_row(rg_buf *b, const console_view *v, const json_t *a)
{
    int rc = 0;

    PUT(b, "<tr><td><a href=\"/approval?id=");
    QUERY(b, str(a, "id"));
    PUT(b, "\"><code>");
    TEXT(b, str(a, "id"));
    PUT(b, "</code></a></td><td>");
    TEXT(b, str(a, "repo"));
    PUT(b, "</td><td><code>");
    TEXT(b, str(a, "ref"));
    PUT(b, "</code><br><code class=\"note\">");
    TEXT(b, str(a, "old"));
    PUT(b, "..");
    TEXT(b, str(a, "new"));
    PUT(b, "</code></td><td>");
    TEXT(b, str(a, "run"));
    PUT(b, "</td><td>");
    TEXT(b, str(a, "reason"));
    PUT(b, "</td><td>");
    TEXT(b, str(a, "expires"));
    PUT(b, "</td><td>");
    if (rc == 0)
        rc = decide_forms(b, v, str(a, "id"));
    PUT(b, "</td></tr>");
    return rc;
}

int console_page_approvals(rg_buf *body, const console_view *v, const char *message, int is_error)
{
    gateway_approval_peer peer = {.console_user = v->user};
    json_t *req = json_pack("{s:s}", "op", "approvals"), *answer = NULL, *list;
    rg_error e = RG_ERROR_INIT;
    int rc = 0;

    if (message != NULL) {
        PUT(body, is_error ? "<p class=\"error\">" : "<p class=\"note\">");
        TEXT(body, message);
        PUT(body, "</p>");
    }
    if (req == NULL)
        return -ENOMEM;
    gateway_approval_control(&answer, v->ctx, &peer, "approvals", req, &e);
    json_decref(req);
    if (answer == NULL) {
        PUT(body, "<p class=\"error\">The approvals cannot be read: ");
        TEXT(body, e.msg);
        PUT(body, "</p>");
        return rc;
    }
    list = json_object_get(answer, "approvals");
    if (json_array_size(list) == 0)
        PUT(body, "<p class=\"note\">No approval is pending.</p>");
    else
        PUT(body, "<table class=\"approvals\"><thead><tr><th>Id</th><th>Repository</th>"
                  "<th>Update</th><th>Run</th><th>Why</th><th>Expires</th><th></th></tr>"
                  "</thead><tbody>");
    for (size_t i = 0; rc == 0 && i < json_array_size(list); i++)
        rc = approval_row(body, v, json_array_get(list, i));
    if (json_array_size(list) > 0)
        PUT(body, "</tbody></table>");
    json_decref(answer);
    return rc;
}

int console_page_approval(rg_buf *body, const console_view *v, const char *id)
{
    gateway_approval_peer peer = {.console_user = v->user};
    json_t *req = json_pack("{s:s, s:s, s:b}", "op", "approval", "id", id, "commits", 1);
    json_t *answer = NULL, *a, *commits;
    rg_error e = RG_ERROR_INIT;
    int rc = 0;

    if (req == NULL)
        return -ENOMEM;
    gateway_approval_control(&answer, v->ctx, &peer, "approval", req, &e);
    json_decref(req);
    if (answer == NULL) {
        PUT(body, "<p class=\"error\">");
        TEXT(body, e.msg);
        PUT(body, "</p>");
        return rc;
    }
    a = json_object_get(answer, "approval");
    PUT(body, "<dl><dt>Approval</dt><dd><code>");
    TEXT(body, str(a, "id"));
    PUT(body, "</code> (");
    TEXT(body, str(a, "state"));
    PUT(body, ")</dd><dt>Repository</dt><dd>");
    TEXT(body, str(a, "repo"));
    PUT(body, "</dd><dt>Update</dt><dd><code>");
    TEXT(body, str(a, "ref"));
    PUT(body, " ");
    TEXT(body, str(a, "old"));
    PUT(body, "..");
    TEXT(body, str(a, "new"));
    PUT(body, "</code></dd><dt>Run</dt><dd>");
    TEXT(body, str(a, "run"));
    PUT(body, "</dd><dt>Why</dt><dd>");
    TEXT(body, str(a, "reason"));
    PUT(body, "</dd></dl>");
    commits = json_object_get(answer, "commits");
    if (commits == NULL) {
        PUT(body, "<p class=\"note\">What would land cannot be shown: ");
        TEXT(body, str(answer, "commits_error"));
        PUT(body, "</p>");
    } else {
        PUT(body, "<table class=\"commits\"><thead><tr><th>Commit</th><th>Date</th>"
                  "<th>Author</th><th>Subject</th></tr></thead><tbody>");
        for (size_t i = 0; rc == 0 && i < json_array_size(commits); i++) {
            const json_t *c = json_array_get(commits, i);

            PUT(body, "<tr><td><code>");
            TEXT(body, str(c, "id"));
            PUT(body, "</code></td><td>");
            TEXT(body, str(c, "date"));
            PUT(body, "</td><td>");
            TEXT(body, str(c, "author"));
            PUT(body, "</td><td>");
            TEXT(body, str(c, "subject"));
            PUT(body, "</td></tr>");
        }
        PUT(body, "</tbody></table>");
        if (json_is_true(json_object_get(answer, "more_commits")))
            PUT(body, "<p class=\"note\">And more.</p>");
    }
    if (!strcmp(str(a, "state"), "pending") && rc == 0)
        rc = decide_forms(body, v, str(a, "id"));
    json_decref(answer);
    return rc;
}

/* ------------------------------------------------------------------------
 * Integrity
 * ------------------------------------------------------------------------ */

int console_page_integrity(rg_buf *body, const console_view *v)
{
    audit_verify_result res = {0};
    rg_error e = RG_ERROR_INIT;
    char path[4200], hash[65], num[160];
    audit_source src;
    uint64_t seq = 0;
    int rc = 0;

    src = console_log_source(path, sizeof(path), v);
    if (audit_verify(&res, &src, &e) < 0) {
        PUT(body, "<p class=\"error\">The audit log cannot be verified: ");
        TEXT(body, e.msg);
        PUT(body, "</p>");
        return rc;
    }
    if (res.db_head_bad) {
        PUT(body, "<p class=\"deny verify\">The chain does not end at the database's head: ");
        TEXT(body, res.why);
        PUT(body, "</p>");
    } else if (res.bad_line == 0) {
        snprintf(num, sizeof(num), "%llu", (unsigned long long)res.lines);
        PUT(body, "<p class=\"allow verify\">The chain is intact: ");
        PUT(body, num);
        PUT(body, " lines verified.</p>");
    } else {
        snprintf(num, sizeof(num), "line %llu: ", (unsigned long long)res.bad_line);
        PUT(body, "<p class=\"deny verify\">The chain is broken at ");
        PUT(body, num);
        TEXT(body, res.why);
        PUT(body, "</p>");
    }
    if (audit_read_head(&seq, hash, &src, &e) < 0) {
        PUT(body, "<p class=\"error\">");
        TEXT(body, e.msg);
        PUT(body, "</p>");
        return rc;
    }
    snprintf(num, sizeof(num), "%llu", (unsigned long long)seq);
    PUT(body, "<dl><dt>Head seq</dt><dd class=\"head-seq\">");
    PUT(body, num);
    PUT(body, "</dd><dt>Head hash</dt><dd><code class=\"head-hash\">");
    TEXT(body, hash);
    PUT(body, "</code></dd></dl><p class=\"note\">Keep the head apart from this host and check "
              "the log against it with <code>refgate audit verify --head SEQ:HASH</code>: a "
              "chain alone cannot show records cut from its end.</p>");
    return rc;
}
