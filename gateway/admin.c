/* The admin listener: /healthz and /metrics; see admin.h. */
#include "gateway/admin.h"

#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/http.h"
#include "util/log.h"

/* A scrape of every family fits in far less; the cap bounds a mistake. */
#define METRICS_MAX (1024 * 1024)

/* Scrapers and probes are few: a handful of connections, a short timeout. */
#define ADMIN_CONNECTIONS 32
#define ADMIN_TIMEOUT     10

/* Room the audit check asks for: one record at its largest. */
#define AUDIT_CHECK_BYTES 8192

struct gateway_admin {
    const gateway_ctx *ctx;
    gateway_metrics *metrics;
    gateway_admin_state_fn state;
    void *state_arg;
    gateway_http_listener *http;
};

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *ctype,
                               const char *body, size_t len)
{
    return gateway_http_respond(c, status, ctype, body, len, NULL, 0);
}

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return respond(c, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

/* ------------------------------------------------------------ /healthz */

/* One check's verdict: "ok", or "fail: why". Returns whether it passed. */
static int check(json_t *checks, const char *name, int rc, const rg_error *e)
{
    char text[700];

    if (rc == 0) {
        json_object_set_new(checks, name, json_string("ok"));
        return 1;
    }
    snprintf(text, sizeof(text), "fail: %s", e->msg[0] ? e->msg : "unknown error");
    json_object_set_new(checks, name, json_string(text));
    return 0;
}

/* The state directory takes a new file: an unnamed one, gone on close. */
static int state_dir_writable(const char *dir, rg_error *err)
{
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

    if (fd < 0)
        return rg_error_set(err, -errno, "%s: %s", dir, strerror(errno));
    if (write(fd, "x", 1) != 1) {
        int rc = rg_error_set(err, -errno, "%s: %s", dir, strerror(errno));
        close(fd);
        return rc;
    }
    close(fd);
    return 0;
}

static enum MHD_Result healthz(gateway_admin *a, struct MHD_Connection *c)
{
    const gateway_ctx *ctx = a->ctx;
    json_t *body = NULL, *checks = json_object();
    rg_error e = RG_ERROR_INIT;
    enum MHD_Result ret;
    char *text = NULL;
    int ready = 1, rc;

    if (checks == NULL)
        return respond_text(c, 500, "out of memory\n");
    /* The server serves only with a config; a reload that fails keeps it. */
    ready &= check(checks, "config", 0, &e);
    ready &= check(checks, "state_dir", state_dir_writable(ctx->cfg->state_dir, &e), &e);
    e = (rg_error)RG_ERROR_INIT;
    ready &= check(checks, "audit_log", audit_ready(ctx->audit, AUDIT_CHECK_BYTES, &e), &e);
    if (ctx->db != NULL) {
        e = (rg_error)RG_ERROR_INIT;
        ready &= check(checks, "database", db_health(ctx->db, &e), &e);
    }
    e = (rg_error)RG_ERROR_INIT;
    rc = atomic_load(ctx->stopping) ? rg_error_set(&e, -ESHUTDOWN, "the gateway is stopping") : 0;
    ready &= check(checks, "serving", rc, &e);
    body = json_pack("{s:b, s:b, s:o}", "live", 1, "ready", ready, "checks", checks);
    if (body)
        text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(body);
    if (text == NULL)
        return respond_text(c, 500, "out of memory\n");
    ret = respond(c, ready ? 200 : 503, "application/json", text, strlen(text));
    free(text);
    return ret;
}

/* ------------------------------------------------------------ /metrics */

static enum MHD_Result metrics(gateway_admin *a, struct MHD_Connection *c)
{
    gateway_metrics_state st = {0};
    rg_buf out = RG_BUF_INIT(METRICS_MAX);
    enum MHD_Result ret;

    if (a->state)
        a->state(a->state_arg, &st);
    if (gateway_metrics_write(&out, a->metrics, &st) < 0) {
        rg_buf_free(&out);
        return respond_text(c, 500, "cannot write the metrics\n");
    }
    ret = respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", out.data ? out.data : "",
                  out.len);
    rg_buf_free(&out);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    gateway_admin *a = cls;

    (void)version;
    (void)upload_data;
    (void)con_cls;
    /* Answered on the first call: these requests carry no body. */
    if (*upload_data_size > 0)
        return MHD_NO;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return respond_text(c, 405, "only GET\n");
    if (!strcmp(url, "/healthz"))
        return healthz(a, c);
    if (!strcmp(url, "/metrics"))
        return metrics(a, c);
    return respond_text(c, 404, "not found: the admin listener serves /healthz and /metrics\n");
}

/* --------------------------------------------------------------- server */

int gateway_admin_start(gateway_admin **out, const gateway_ctx *ctx, gateway_metrics *metrics,
                        gateway_admin_state_fn state, void *state_arg, rg_error *err)
{
    const config_model *cfg = ctx->cfg;
    gateway_http_options o = GATEWAY_HTTP_OPTIONS_INIT;
    gateway_admin *a;
    char url_path[4200];
    int rc;

    *out = NULL;
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    a->ctx = ctx;
    a->metrics = metrics;
    a->state = state;
    a->state_arg = state_arg;
    snprintf(url_path, sizeof(url_path), "%s/admin.url", cfg->state_dir);
    o.what = "admin.listen";
    o.host = cfg->admin.listen_host;
    o.port = cfg->admin.listen_port;
    o.url_file = url_path;
    o.connections = ADMIN_CONNECTIONS;
    o.idle_seconds = ADMIN_TIMEOUT;
    o.memory_limit = (size_t)(64 * 1024);
    o.handle = handle;
    o.arg = a;
    rc = gateway_http_listen(&a->http, &o, err);
    if (rc == 0)
        rc = gateway_http_serve(a->http, err);
    if (rc == 0)
        rg_log(RG_LOG_NOTICE, "admin_listening", "url=%s", gateway_http_url(a->http));
    if (rc < 0) {
        gateway_admin_stop(a);
        return rc;
    }
    *out = a;
    return 0;
}

const char *gateway_admin_url(const gateway_admin *a)
{
    return gateway_http_url(a->http);
}

void gateway_admin_stop(gateway_admin *a)
{
    if (a == NULL)
        return;
    gateway_http_stop(a->http);
    free(a);
}
