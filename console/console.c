/*
 * The console's HTTP side (console.h): listener, request validation with
 * early returns (Host, method, Authorization, body size, Origin, session,
 * CSRF), routing, and responses that all carry the security headers.
 * Per-request state (a POST's body) lives in *con_cls and is freed in the
 * completed callback.
 */
#include "console/console.h"

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "console/assets.h"
#include "console/pages.h"
#include "console/session.h"
#include "console/throttle.h"
#include "gateway/approve.h"
#include "gateway/http.h"
#include "gateway/reviewers.h"
#include "util/log.h"

#define COOKIE_NAME "refgate_console"

/* A form post is a few fields; nothing the console takes is longer. */
#define BODY_MAX (16 * 1024)

/* The most a page may grow to; a listing page is far below. */
#define PAGE_MAX (8 * 1024 * 1024)

/* A reviewer's browser needs few connections; they idle out quickly. */
#define CONNECTIONS_MAX 64
#define IDLE_SECONDS    30

/* What every response says about itself: no script anywhere, nothing framed. */
#define CSP                                                                                        \
    "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; "                  \
    "form-action 'self'; frame-ancestors 'none'"

struct console {
    const gateway_ctx *ctx;
    gateway_http_listener *http;
    console_sessions *sessions;
    console_throttle *throttle;
    const char *url; /* http://HOST:PORT, also the only Origin a POST may carry */
    char host[128];  /* HOST:PORT, the only Host a request may name */
};

typedef struct console_request {
    rg_buf body;
    int too_big;
} console_request;

/* ------------------------------------------------------------------------
 * Responses
 * ------------------------------------------------------------------------ */

/*
 * Every answer of the console: gateway_http_respond's headers (no-store,
 * nosniff), then what a browser needs told: no script, no framing, no
 * cross-origin use.
 */
static enum MHD_Result send_response(struct MHD_Connection *c, unsigned status, const char *ctype,
                                     const char *body, size_t len, const char *cookie,
                                     const char *location)
{
    gateway_http_header h[8] = {
        {"Content-Security-Policy", CSP},
        {"X-Frame-Options", "DENY"},
        /* Not no-referrer: under it browsers post "Origin: null", which the
         * Origin check must refuse. same-origin keeps URLs from other sites. */
        {"Referrer-Policy", "same-origin"},
        {"Cross-Origin-Opener-Policy", "same-origin"},
        {"Cross-Origin-Resource-Policy", "same-origin"},
    };
    size_t n = 5;

    if (cookie != NULL)
        h[n++] = (gateway_http_header){MHD_HTTP_HEADER_SET_COOKIE, cookie};
    if (location != NULL)
        h[n++] = (gateway_http_header){MHD_HTTP_HEADER_LOCATION, location};
    return gateway_http_respond(c, status, ctype, body, len, h, n);
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char body[600];
    int n = snprintf(body, sizeof(body), "refgate console: %s\n", msg);

    return send_response(c, status, "text/plain; charset=utf-8", body,
                         n < (int)sizeof(body) ? (size_t)n : sizeof(body) - 1, NULL, NULL);
}

static enum MHD_Result redirect(struct MHD_Connection *c, const char *to, const char *cookie)
{
    return send_response(c, 303, "text/plain; charset=utf-8", "", 0, cookie, to);
}

static void session_cookie(char *out, size_t outsz, const char *id)
{
    snprintf(out, outsz, COOKIE_NAME "=%s; HttpOnly; SameSite=Strict; Path=/", id);
}

/* A page: `body` in the layout, answered with `status` (and a cookie). */
static enum MHD_Result send_page(struct MHD_Connection *c, unsigned status, const char *title,
                                 const console_view *v, int rc, rg_buf *body, const char *cookie)
{
    rg_buf page = RG_BUF_INIT(PAGE_MAX);
    enum MHD_Result ret;

    if (rc == 0)
        rc = console_page_wrap(&page, title, v, body->data ? body->data : "");
    if (rc < 0)
        ret = send_text(
            c, 500, rc == RG_E_TOO_BIG ? "the page would be too large" : "the page cannot be made");
    else
        ret =
            send_response(c, status, "text/html; charset=utf-8", page.data, page.len, cookie, NULL);
    rg_buf_free(&page);
    rg_buf_free(body);
    return ret;
}

/* ------------------------------------------------------------------------
 * Forms
 * ------------------------------------------------------------------------ */

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decode application/x-www-form-urlencoded bytes; -1 when malformed or too long. */
static int form_decode(char *out, size_t outsz, const char *s, size_t len)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        char ch = s[i];

        if (ch == '+') {
            ch = ' ';
        } else if (ch == '%') {
            if (i + 2 >= len || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0)
                return -1;
            ch = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        }
        if (ch == '\0' || o + 1 >= outsz)
            return -1;
        out[o++] = ch;
    }
    out[o] = '\0';
    return 0;
}

/* Field `key` of a form body into out: 1 found, 0 absent, -1 malformed. */
static int form_value(char *out, size_t outsz, const char *body, const char *key)
{
    char name[64];

    /* Bounded: one step per field of a capped body. */
    for (const char *p = body; p && *p;) {
        const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));

        if (eq != NULL && form_decode(name, sizeof(name), p, (size_t)(eq - p)) == 0 &&
            !strcmp(name, key))
            return form_decode(out, outsz, eq + 1, (size_t)(end - eq - 1)) < 0 ? -1 : 1;
        p = amp ? amp + 1 : NULL;
    }
    return 0;
}

static int token_equal(const char *a, const char *b)
{
    return strlen(a) == strlen(b) && strlen(a) > 0 && CRYPTO_memcmp(a, b, strlen(a)) == 0;
}

/* ------------------------------------------------------------------------
 * Pages
 * ------------------------------------------------------------------------ */

static enum MHD_Result get_login(console *con, struct MHD_Connection *c, const char *sid)
{
    char user[GATEWAY_REVIEWER_NAME_MAX + 1], csrf[CONSOLE_SESSION_ID_LEN + 1];
    char id[CONSOLE_SESSION_ID_LEN + 1], cookie[256];
    console_view v = {.ctx = con->ctx};
    rg_buf body = RG_BUF_INIT(PAGE_MAX);

    if (console_session_get(con->sessions, sid, user, csrf)) {
        if (user[0])
            return redirect(c, "/pushes", NULL);
        /* The browser's login session already: another tab's (or a
         * favicon's redirect) must not orphan the form's token. */
        v.csrf = csrf;
        return send_page(c, 200, "Log in", &v, console_page_login(&body, &v, NULL), &body, NULL);
    }
    /* The form's CSRF token lives in a session of its own, made here. */
    if (console_session_create(con->sessions, id, csrf, "") < 0)
        return send_text(c, 500, "no randomness for a session");
    session_cookie(cookie, sizeof(cookie), id);
    v.csrf = csrf;
    return send_page(c, 200, "Log in", &v, console_page_login(&body, &v, NULL), &body, cookie);
}

static enum MHD_Result post_login(console *con, struct MHD_Connection *c, const char *sid,
                                  const char *form)
{
    char user[GATEWAY_REVIEWER_NAME_MAX + 1], csrf[CONSOLE_SESSION_ID_LEN + 1];
    char name[GATEWAY_REVIEWER_NAME_MAX + 1], given[CONSOLE_SESSION_ID_LEN + 1];
    char *password = calloc(1, GATEWAY_REVIEWER_PASSWORD_MAX + 1);
    char id[CONSOLE_SESSION_ID_LEN + 1], cookie[256];
    console_view v = {.ctx = con->ctx};
    rg_buf body = RG_BUF_INIT(PAGE_MAX);
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    enum MHD_Result ret;
    int ok;

    if (password == NULL)
        return send_text(c, 500, "out of memory");
    if (!console_session_get(con->sessions, sid, user, csrf) ||
        form_value(given, sizeof(given), form, "csrf") != 1 || !token_equal(given, csrf)) {
        free(password);
        return send_text(c, 403, "the login form has expired or was not ours: reload /login");
    }
    if (form_value(name, sizeof(name), form, "user") != 1)
        name[0] = '\0';
    if (!console_throttle_allows(con->throttle, name, (long long)time(NULL))) {
        explicit_bzero(password, GATEWAY_REVIEWER_PASSWORD_MAX + 1);
        free(password);
        rg_log(RG_LOG_WARNING, "console_login_throttled", "user=%s",
               rg_log_quote(q, sizeof(q), name));
        v.csrf = csrf;
        return send_page(c, 429, "Log in", &v,
                         console_page_login(&body, &v,
                                            "Too many failed logins for this user: try again "
                                            "in 15 minutes."),
                         &body, NULL);
    }
    if (name[0] == '\0' ||
        form_value(password, GATEWAY_REVIEWER_PASSWORD_MAX + 1, form, "password") != 1)
        ok = 0;
    else
        ok = gateway_reviewer_check(con->ctx->cfg->state_dir, name, password, &e);
    explicit_bzero(password, GATEWAY_REVIEWER_PASSWORD_MAX + 1);
    free(password);
    if (ok < 0)
        rg_log(RG_LOG_ERR, "console_login_failed", "error=%s", rg_log_quote(q, sizeof(q), e.msg));
    if (ok != 1) {
        if (name[0])
            console_throttle_failed(con->throttle, name, (long long)time(NULL));
        rg_log(RG_LOG_WARNING, "console_login_refused", "user=%s",
               rg_log_quote(q, sizeof(q), name));
        v.csrf = csrf;
        return send_page(c, 403, "Log in", &v,
                         console_page_login(&body, &v, "Wrong user name or password."), &body,
                         NULL);
    }
    console_throttle_clear(con->throttle, name);
    /* A new id at login: one planted before it is worth nothing. */
    console_session_drop(con->sessions, sid);
    if (console_session_create(con->sessions, id, csrf, name) < 0)
        return send_text(c, 500, "no randomness for a session");
    rg_log(RG_LOG_NOTICE, "console_login", "user=%s", name);
    session_cookie(cookie, sizeof(cookie), id);
    ret = redirect(c, "/pushes", cookie);
    return ret;
}

/* approve or deny, through the control socket's own code path. */
static enum MHD_Result post_approval(console *con, struct MHD_Connection *c, console_view *v,
                                     const char *form)
{
    gateway_approval_peer peer = {.console_user = v->user};
    char id[128], action[16], reason[1024], msg[700];
    rg_buf body = RG_BUF_INIT(PAGE_MAX);
    rg_error e = RG_ERROR_INIT;
    json_t *req, *answer = NULL;
    int deny, has_reason;

    if (form_value(id, sizeof(id), form, "id") != 1 ||
        form_value(action, sizeof(action), form, "action") != 1 ||
        (strcmp(action, "approve") != 0 && strcmp(action, "deny") != 0))
        return send_text(c, 400, "expected an approval id and action approve or deny");
    deny = !strcmp(action, "deny");
    has_reason = form_value(reason, sizeof(reason), form, "reason");
    if (has_reason < 0)
        return send_text(c, 400, "reason: too long or malformed");
    req = deny && has_reason == 1 && reason[0]
              ? json_pack("{s:s, s:s, s:s}", "op", action, "id", id, "reason", reason)
              : json_pack("{s:s, s:s}", "op", action, "id", id);
    if (req == NULL)
        return send_text(c, 500, "out of memory");
    gateway_approval_control(&answer, con->ctx, &peer, action, req, &e);
    json_decref(req);
    if (answer != NULL)
        snprintf(msg, sizeof(msg), "Approval %s %s.", id, deny ? "denied" : "approved");
    else
        snprintf(msg, sizeof(msg), "Approval %s: %s", id, e.msg);
    json_decref(answer);
    return send_page(c, answer ? 200 : 409, "Approvals", v,
                     console_page_approvals(&body, v, msg, answer == NULL), &body, NULL);
}

/* Unsigned decimal page number; 0 when absent, -1 when bad. */
static long page_number(const char *s)
{
    char *end;
    unsigned long n;

    if (s == NULL || *s == '\0')
        return 0;
    n = strtoul(s, &end, 10);
    if (*end != '\0' || s[0] == '-' || n >= CONSOLE_PUSHES_PAGES_MAX)
        return -1;
    return (long)n;
}

static enum MHD_Result get_page(console *con, struct MHD_Connection *c, console_view *v,
                                const char *url)
{
    rg_buf body = RG_BUF_INIT(PAGE_MAX);

    (void)con;
    if (!strcmp(url, "/"))
        return redirect(c, "/pushes", NULL);
    if (!strcmp(url, "/pushes")) {
        console_push_filter f = {
            MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "run"),
            MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "repo"),
            MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ref"),
            MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "decision"),
        };
        long page = page_number(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "page"));

        if (page < 0)
            return send_text(c, 400, "page: expected a number from 0");
        return send_page(c, 200, "Pushes", v, console_page_pushes(&body, v, &f, (size_t)page),
                         &body, NULL);
    }
    if (!strcmp(url, "/runs")) {
        long page = page_number(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "page"));

        if (page < 0)
            return send_text(c, 400, "page: expected a number from 0");
        return send_page(c, 200, "Runs", v, console_page_runs(&body, v, (size_t)page), &body, NULL);
    }
    if (!strcmp(url, "/push")) {
        const char *id = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "id");

        if (id == NULL || *id == '\0' || strlen(id) > 64)
            return send_text(c, 400, "id: expected a push id");
        return send_page(c, 200, "Push", v, console_page_push(&body, v, id), &body, NULL);
    }
    if (!strcmp(url, "/approval")) {
        const char *id = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "id");

        if (id == NULL || *id == '\0' || strlen(id) > 64)
            return send_text(c, 400, "id: expected an approval id");
        return send_page(c, 200, "Approval", v, console_page_approval(&body, v, id), &body, NULL);
    }
    if (!strcmp(url, "/approvals"))
        return send_page(c, 200, "Approvals", v, console_page_approvals(&body, v, NULL, 0), &body,
                         NULL);
    if (!strcmp(url, "/integrity"))
        return send_page(c, 200, "Integrity", v, console_page_integrity(&body, v), &body, NULL);
    return send_text(c, 404, "no such page");
}

/* ------------------------------------------------------------------------
 * Requests
 * ------------------------------------------------------------------------ */

static enum MHD_Result dispatch(console *con, struct MHD_Connection *c, const char *url, int post,
                                const char *form)
{
    const char *sid = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE_NAME);
    char user[GATEWAY_REVIEWER_NAME_MAX + 1] = "", csrf[CONSOLE_SESSION_ID_LEN + 1] = "";
    char given[CONSOLE_SESSION_ID_LEN + 1];
    console_view v = {.ctx = con->ctx};
    int live;

    if (!post && !strcmp(url, "/static/style.css")) {
        const console_asset *css = console_asset_find("style.css");
        return send_response(c, 200, "text/css; charset=utf-8", css->data, css->len, NULL, NULL);
    }
    if (!post && !strcmp(url, "/login"))
        return get_login(con, c, sid);
    if (post) {
        /* Same origin, port included: a page elsewhere cannot post here. */
        const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
        const char *ctype =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);

        if (origin == NULL || strcmp(origin, con->url) != 0)
            return send_text(c, 403, "a form must come from this console's own page (Origin)");
        if (ctype == NULL || strncasecmp(ctype, "application/x-www-form-urlencoded", 33) != 0)
            return send_text(c, 415, "expected a form (application/x-www-form-urlencoded)");
        if (!strcmp(url, "/login"))
            return post_login(con, c, sid, form);
    }
    live = console_session_get(con->sessions, sid, user, csrf) && user[0];
    if (!live)
        return post ? send_text(c, 403, "not logged in") : redirect(c, "/login", NULL);
    v.user = user;
    v.csrf = csrf;
    if (!post)
        return get_page(con, c, &v, url);
    if (form_value(given, sizeof(given), form, "csrf") != 1 || !token_equal(given, csrf))
        return send_text(c, 403, "the form's CSRF token is missing or not this session's");
    if (!strcmp(url, "/logout")) {
        console_session_drop(con->sessions, sid);
        return redirect(c, "/login", COOKIE_NAME "=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    }
    if (!strcmp(url, "/approvals"))
        return post_approval(con, c, &v, form);
    return send_text(c, 404, "no such form");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    console *con = cls;
    console_request *req = *con_cls;
    int post = !strcmp(method, MHD_HTTP_METHOD_POST);

    (void)version;
    if (req == NULL) {
        const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        const char *len =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

        /* Another name for this address is another site's page (DNS rebinding). */
        if (host == NULL || strcasecmp(host, con->host) != 0)
            return send_text(c, 421, "this console answers only to its own address");
        if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION))
            return send_text(c, 403,
                             "the console takes no Authorization header (run tokens are not "
                             "accepted here): log in at /login");
        if (!post && strcmp(method, MHD_HTTP_METHOD_GET) != 0)
            return send_text(c, 405, "only GET and POST");
        if (!post)
            return dispatch(con, c, url, 0, NULL);
        if (len == NULL || strtoull(len, NULL, 10) > BODY_MAX)
            return send_text(c, len ? 413 : 411, "a form body of known, small length is expected");
        req = calloc(1, sizeof(*req));
        if (req == NULL)
            return send_text(c, 500, "out of memory");
        rg_buf_init(&req->body, BODY_MAX);
        *con_cls = req;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        if (!req->too_big && rg_buf_append(&req->body, upload_data, *upload_data_size) < 0)
            req->too_big = 1;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (req->too_big)
        return send_text(c, 413, "form body too large");
    return dispatch(con, c, url, 1, req->body.data ? req->body.data : "");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    console_request *req = *con_cls;

    (void)cls;
    (void)c;
    (void)toe;
    if (req == NULL)
        return;
    /* The body may hold a password. */
    rg_buf_wipe_free(&req->body);
    free(req);
    *con_cls = NULL;
}

/* ------------------------------------------------------------------------
 * Starting and stopping
 * ------------------------------------------------------------------------ */

int console_start(console **out, const gateway_ctx *ctx, rg_error *err)
{
    const config_console *cc = &ctx->cfg->console;
    gateway_http_options o = GATEWAY_HTTP_OPTIONS_INIT;
    console *con;
    char path[4200];
    int rc;

    *out = NULL;
    if (cc->listen_host == NULL)
        return rg_error_set(err, -EINVAL, "no console is configured");
    con = calloc(1, sizeof(*con));
    if (con == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    con->ctx = ctx;
    if (console_sessions_new(&con->sessions) < 0 || console_throttle_new(&con->throttle) < 0) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    snprintf(path, sizeof(path), "%s/console.url", ctx->cfg->state_dir);
    o.what = "console.listen";
    o.host = cc->listen_host;
    o.port = cc->listen_port;
    o.url_file = path;
    o.thread_per_connection = 1;
    o.connections = CONNECTIONS_MAX;
    o.idle_seconds = IDLE_SECONDS;
    o.memory_limit = (size_t)(64 * 1024);
    o.handle = handle;
    o.completed = completed;
    o.arg = con;
    if ((rc = gateway_http_listen(&con->http, &o, err)) < 0)
        goto done;
    con->url = gateway_http_url(con->http);
    /* The Host every request must name: the URL without its scheme. */
    snprintf(con->host, sizeof(con->host), "%s", con->url + strlen("http://"));
    rc = gateway_http_serve(con->http, err);
done:
    if (rc < 0) {
        console_stop(con);
        return rc;
    }
    *out = con;
    return 0;
}

const char *console_url(const console *c)
{
    return c->url;
}

void console_stop(console *con)
{
    if (con == NULL)
        return;
    gateway_http_stop(con->http);
    console_sessions_free(con->sessions);
    console_throttle_free(con->throttle);
    free(con);
}
