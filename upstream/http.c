/*
 * Remote upstreams: smart HTTP(S) git servers, reached with libcurl.
 *
 * Every request gets its own curl handle and its own credential, acquired
 * from the upstream's provider just before the request and released (for a
 * GitHub App: revoked) as soon as it is answered, so a credential lives for
 * one request only. The credential goes as HTTP Basic through curl's
 * user/password options, never in a URL, and only the gateway's own
 * credential is ever sent: nothing of the client's request headers is
 * copied.
 *
 * A push streams both ways: curl runs in its own thread and reads the
 * request body from a pipe that http_push_write fills (a full pipe
 * holds the writer back, so memory stays bounded), while upstream's answer
 * is demultiplexed as it arrives, as for a local upstream. A fetch reads
 * its request body from the spooled file it is given and writes the answer
 * into a pipe that the caller drains as its client takes it.
 *
 * Fail closed: TLS verification is always on (the system CAs, or the
 * upstream's ca_file), redirects are never followed (a 3xx is an error
 * naming where it pointed), a status other than 200 or a content type that
 * is not git's is an error, and every error names what upstream did without
 * anything secret in it.
 *
 * upstream.c reaches it through upstream_http_ops (ops.h), its one export.
 */
#include "upstream/ops.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "git/advert.h"
#include "git/pktline.h"
#include "util/fs.h"
#include "util/version.h"

/* Pipe capacity asked for between the request and curl's thread: enough to
 * keep a fast upstream busy, small enough to bound memory per push. */
#define PIPE_BYTES (1024 * 1024)

/* ----------------------------------------------------------------- calls */

/* One HTTP request to upstream, from its credential to its checked status. */
typedef struct http_call {
    CURL *curl;
    struct curl_slist *headers;
    tokens_provider *provider;
    tokens_credential *cred;
    const char *expect_type; /* the Content-Type a 200 must have */
    int checked;             /* status and type were looked at */
    int refused;             /* ... and found wrong: err says why */
    rg_error err;
    atomic_int abort; /* set by whoever frees the call: stop now */
    char errbuf[CURL_ERROR_SIZE];
} http_call;

/* The host part of a URL, for messages (never the user info or path). */
static void url_host(char *out, size_t outsz, const char *url)
{
    CURLU *u = curl_url();
    char *host = NULL;

    snprintf(out, outsz, "an unparsable location");
    if (u && url && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK)
        snprintf(out, outsz, "%s", host);
    curl_free(host);
    curl_url_cleanup(u);
}

/* Look at the status and type once upstream has answered. */
static void call_check(http_call *c)
{
    long code = 0;
    const char *type = NULL;
    char *location = NULL, host[256];
    size_t n;

    if (c->checked)
        return;
    c->checked = 1;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(c->curl, CURLINFO_CONTENT_TYPE, &type);
    if (code >= 300 && code < 400) {
        curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_URL, &location);
        url_host(host, sizeof(host), location);
        /* Even a redirect to the same host is refused: a credential for one
         * URL is not to be replayed at another one upstream chose. */
        rg_error_set(&c->err, RG_E_UPSTREAM,
                     "upstream redirected to %s (HTTP %ld); redirects are not followed", host,
                     code);
    } else if (code == 401 || code == 403) {
        rg_error_set(&c->err, RG_E_UPSTREAM, "upstream refused the credential (HTTP %ld)", code);
    } else if (code == 404) {
        rg_error_set(&c->err, RG_E_UPSTREAM, "upstream has no such repository (HTTP 404)");
    } else if (code != 200) {
        rg_error_set(&c->err, RG_E_UPSTREAM, "upstream answered HTTP %ld", code);
    } else {
        n = type ? strcspn(type, "; \t") : 0;
        if (type != NULL && n == strlen(c->expect_type) &&
            strncasecmp(type, c->expect_type, n) == 0)
            return;
        rg_error_set(&c->err, RG_E_UPSTREAM,
                     "upstream answered with Content-Type %.80s, not %s (not a smart-HTTP git "
                     "server?)",
                     type ? type : "(none)", c->expect_type);
    }
    c->refused = 1;
}

/* What a failed transfer means, in words a pusher can act on. */
static int call_error(http_call *c, CURLcode res, rg_error *err)
{
    const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(res);

    if (c->refused)
        return rg_error_set(err, RG_E_UPSTREAM, "%s", c->err.msg);
    switch (res) {
    case CURLE_COULDNT_CONNECT:
        return rg_error_set(err, RG_E_UPSTREAM, "connection to upstream refused (%s)", why);
    case CURLE_COULDNT_RESOLVE_HOST:
        return rg_error_set(err, RG_E_UPSTREAM, "upstream host not found (%s)", why);
    case CURLE_OPERATION_TIMEDOUT:
        return rg_error_set(err, RG_E_UPSTREAM, "upstream timed out (%s)", why);
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_USE_SSL_FAILED:
        return rg_error_set(err, RG_E_UPSTREAM, "upstream TLS: %s", why);
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return rg_error_set(err, RG_E_UPSTREAM, "upstream connection broke (%s)", why);
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_READ_ERROR:
        return rg_error_set(err, RG_E_UPSTREAM, "the request to upstream was aborted");
    default:
        return rg_error_set(err, RG_E_UPSTREAM, "upstream request failed (%s)", why);
    }
}

static int call_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                         curl_off_t ulnow)
{
    http_call *c = arg;

    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return atomic_load(&c->abort) ? 1 : 0;
}

/*
 * Prepare a request to `<url>/<repo_path>.git/<suffix>` with a fresh
 * credential from `p` (NULL: none). `git_protocol` and `extra` (NULL-ended
 * header lines) are added. The answer must have `expect_type`.
 */
static int call_init(http_call *c, const upstream_target *t, tokens_provider *p,
                     tokens_access access, unsigned cred_flags, const char *suffix,
                     const char *expect_type, const char *git_protocol, const char *const *extra,
                     rg_error *err)
{
    const config_upstream *up = t->up;
    struct curl_slist *h;
    char url[2048], line[320];
    int rc = 0;

    memset(c, 0, sizeof(*c));
    c->expect_type = expect_type;
    if ((size_t)snprintf(url, sizeof(url), "%s/%s.git/%s", up->url, t->repo_path, suffix) >=
        sizeof(url))
        return rg_error_set(err, -EINVAL, "upstream URL too long");
    c->curl = curl_easy_init();
    if (c->curl == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if (p != NULL) {
        c->provider = p;
        rc = tokens_provider_acquire(&c->cred, p, t->repo_path, access, cred_flags, err);
        if (rc < 0)
            return rg_error_wrap(err, "upstream credential");
    }
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
    /* HTTP/1.1 as git speaks it: a push body of unknown length goes
     * chunked, which HTTP/2 has no header for. */
    curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (up->ca_file)
        curl_easy_setopt(c->curl, CURLOPT_CAINFO, up->ca_file);
    if (up->connect_timeout > 0)
        curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, up->connect_timeout);
    /* The idle timeout: less than a byte a second for that long. */
    if (up->idle_timeout > 0) {
        curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, up->idle_timeout);
    }
    curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, call_progress);
    curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
    curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "git/2 (refgate)");
    if (c->cred && c->cred->username && c->cred->password) {
        /* Basic only, so it is sent at once: a streamed body cannot be
         * replayed after a 401 challenge. */
        curl_easy_setopt(c->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c->curl, CURLOPT_USERNAME, c->cred->username);
        curl_easy_setopt(c->curl, CURLOPT_PASSWORD, c->cred->password);
    }
    /* No "Expect: 100-continue": it only adds a round trip (or a second's
     * wait on servers that ignore it) before the body. */
    h = curl_slist_append(NULL, "Expect:");
    if (h && git_protocol) {
        snprintf(line, sizeof(line), "Git-Protocol: %s", git_protocol);
        h = curl_slist_append(h, line) ? h : NULL;
    }
    for (size_t i = 0; h && extra && extra[i]; i++)
        if (curl_slist_append(h, extra[i]) == NULL)
            h = NULL;
    if (h == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    c->headers = h;
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
    return 0;
}

/* Release the credential (revoking it) now that upstream has answered. */
static void call_release(http_call *c)
{
    if (c->cred == NULL)
        return;
    /* curl keeps its own copy of the password: point it away first. */
    curl_easy_setopt(c->curl, CURLOPT_PASSWORD, "");
    tokens_provider_release(c->provider, c->cred);
    c->cred = NULL;
}

static void call_free(http_call *c)
{
    call_release(c);
    if (c->curl)
        curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
    c->curl = NULL;
    c->headers = NULL;
}

/* ------------------------------------------------------- advertisements */

typedef struct sink_buf {
    http_call *call;
    rg_buf *out;
    int too_big;
} sink_buf;

static size_t sink_to_buf(char *data, size_t size, size_t nmemb, void *arg)
{
    sink_buf *s = arg;
    size_t n = size * nmemb;

    call_check(s->call);
    if (s->call->refused)
        return 0;
    if (rg_buf_append(s->out, data, n) < 0) {
        s->too_big = 1;
        return 0;
    }
    return n;
}

/* The gateway's name in the advertisement it builds: the version `refgate
 * --version` prints, from the one definition (util/version.h). */
#define UPSTREAM_AGENT "refgate/" RG_VERSION

/*
 * Upstream's receive-pack advertisement cannot be asked for: it needs a
 * credential that may push (GitHub and the test stand-in answer 403 to a
 * contents:read token), and a write credential is minted only for a push
 * that policy allowed, so a denied push mints nothing. The advertisement
 * is built instead from upload-pack's protocol v0 one (no Git-Protocol
 * header), fetched with the read credential: the same refs, in
 * receive-pack's shape (rgit_advert_for_push).
 */
static int http_advertise(rg_buf *out, const upstream_target *t, rg_error *err)
{
    rg_buf raw = RG_BUF_INIT(UPSTREAM_ADVERT_MAX);
    http_call c;
    sink_buf sink = {&c, &raw, 0};
    CURLcode res;
    int rc;

    rc = call_init(&c, t, t->read, TOKENS_ACCESS_READ, 0, "info/refs?service=git-upload-pack",
                   "application/x-git-upload-pack-advertisement", NULL, NULL, err);
    if (rc < 0)
        goto done;
    curl_easy_setopt(c.curl, CURLOPT_WRITEFUNCTION, sink_to_buf);
    curl_easy_setopt(c.curl, CURLOPT_WRITEDATA, &sink);
    res = curl_easy_perform(c.curl);
    call_release(&c);
    if (res == CURLE_OK)
        call_check(&c);
    if (sink.too_big) {
        rc = rg_error_set(err, RG_E_UPSTREAM, "upstream's advertisement is over its cap");
        goto done;
    }
    if (res != CURLE_OK || c.refused) {
        rc = call_error(&c, res, err);
        goto done;
    }
    rc = rgit_advert_for_push(out, raw.data ? raw.data : "", raw.len, UPSTREAM_AGENT, err);
    if (rc == RG_E_PROTOCOL) {
        /* Malformed wire data from upstream is upstream's failure. */
        rg_error_wrap(err, "upstream's answer");
        rc = RG_E_UPSTREAM;
        if (err != NULL)
            err->code = rc;
    }
done:
    call_free(&c);
    rg_buf_free(&raw);
    return rc;
}

/* ---------------------------------------------------------------- pushes */

typedef struct upstream_http_push upstream_http_push;
typedef struct upstream_http_fetch upstream_http_fetch;

static void http_push_free(upstream_push *base);
static void http_fetch_free(upstream_fetch *base);

struct upstream_http_push {
    upstream_push base; /* first: upstream.c dispatches on its ops */
    http_call call;
    int body_r, body_w; /* the request body: written by the gateway, read by curl */
    atomic_int ending;  /* set before body_w closes: EOF is the end, not an abort */
    pthread_t thread;
    int thread_started;
    CURLcode result;
    rgit_sideband_demux *demux;
    int demux_failed;
    rg_error demux_err;
};

static size_t push_read(char *buf, size_t size, size_t nitems, void *arg)
{
    upstream_http_push *u = arg;
    ssize_t n;

    do
        n = read(u->body_r, buf, size * nitems);
    while (n < 0 && errno == EINTR);
    if (n > 0)
        return (size_t)n;
    /* A body that ends without http_push_finish was cut off: abort
     * rather than let upstream see a complete-looking request. */
    if (n == 0 && atomic_load(&u->ending))
        return 0;
    return CURL_READFUNC_ABORT;
}

static size_t push_answer(char *data, size_t size, size_t nmemb, void *arg)
{
    upstream_http_push *u = arg;
    size_t n = size * nmemb;

    call_check(&u->call);
    if (u->call.refused)
        return 0;
    /* Keep reading past a malformed answer so upstream finishes, but keep
     * nothing of it. */
    if (!u->demux_failed && rgit_sideband_demux_feed(u->demux, data, n, &u->demux_err) < 0)
        u->demux_failed = 1;
    return n;
}

static void *push_main(void *arg)
{
    upstream_http_push *u = arg;

    u->result = curl_easy_perform(u->call.curl);
    /* Writers learn at once (EPIPE) that upstream takes no more. */
    close(u->body_r);
    u->body_r = -1;
    return NULL;
}

static int http_push_start(upstream_push **out, const upstream_target *t, rgit_sideband_mode mode,
                           unsigned cred_flags, rg_error *err)
{
    static const char *const extra[] = {
        "Content-Type: application/x-git-receive-pack-request",
        "Accept: application/x-git-receive-pack-result",
        "Transfer-Encoding: chunked",
        NULL,
    };
    upstream_http_push *u;
    int fds[2], rc;

    *out = NULL;
    u = calloc(1, sizeof(*u));
    if (u == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    u->body_r = u->body_w = -1;
    rc = rgit_sideband_demux_new(&u->demux, mode, UPSTREAM_REPORT_MAX, UPSTREAM_PROGRESS_MAX);
    if (rc < 0) {
        rc = rg_error_set(err, rc, "out of memory");
        goto done;
    }
    if (pipe2(fds, O_CLOEXEC) < 0) {
        rc = rg_error_set(err, -errno, "pipe: %s", strerror(errno));
        goto done;
    }
    u->body_r = fds[0];
    u->body_w = fds[1];
    fcntl(u->body_w, F_SETPIPE_SZ, PIPE_BYTES); /* best effort */
    /* The write credential is made now, after the policy decision, and
     * only for a push that forwards something. */
    rc = call_init(&u->call, t, t->write, TOKENS_ACCESS_WRITE, cred_flags, "git-receive-pack",
                   "application/x-git-receive-pack-result", NULL, extra, err);
    if (rc < 0)
        goto done;
    curl_easy_setopt(u->call.curl, CURLOPT_POST, 1L);
    curl_easy_setopt(u->call.curl, CURLOPT_READFUNCTION, push_read);
    curl_easy_setopt(u->call.curl, CURLOPT_READDATA, u);
    curl_easy_setopt(u->call.curl, CURLOPT_WRITEFUNCTION, push_answer);
    curl_easy_setopt(u->call.curl, CURLOPT_WRITEDATA, u);
    rc = pthread_create(&u->thread, NULL, push_main, u);
    if (rc != 0) {
        rc = rg_error_set(err, -rc, "cannot start the upstream thread");
        goto done;
    }
    u->thread_started = 1;
    u->base.ops = &upstream_http_ops;
    *out = &u->base;
    u = NULL;
done:
    http_push_free((upstream_push *)u);
    return rc;
}

/*
 * End the body, wait for curl's thread, release (revoke) the write
 * credential — upstream has answered, it is of no more use — and learn how
 * the transfer went: 0, or the error that names what upstream did.
 */
static int push_conclude(upstream_http_push *u, rg_error *err)
{
    if (u->body_w >= 0) {
        close(u->body_w);
        u->body_w = -1;
    }
    if (u->thread_started) {
        pthread_join(u->thread, NULL);
        u->thread_started = 0;
    }
    call_release(&u->call);
    if (u->result == CURLE_OK)
        call_check(&u->call);
    if (u->result != CURLE_OK || u->call.refused)
        return call_error(&u->call, u->result, err);
    return 0;
}

static int http_push_write(upstream_push *base, const void *data, size_t len, rg_error *err)
{
    upstream_http_push *u = (upstream_http_push *)base;
    int rc;

    if (u->body_w < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream stopped reading the push");
    rc = rg_fs_write_all(u->body_w, data, len);
    if (rc < 0) {
        /* The pipe breaks only once curl's thread has ended the transfer,
         * so its outcome is known now and says more than EPIPE would: the
         * caller keeps the first error it is given. */
        rc = push_conclude(u, err);
        return rc < 0 ? rc : rg_error_set(err, RG_E_UPSTREAM, "upstream stopped reading the push");
    }
    return 0;
}

static int http_push_finish(upstream_push *base, rgit_report *report, rg_buf *progress,
                            rg_error *err)
{
    upstream_http_push *u = (upstream_http_push *)base;
    const rg_buf *rep, *prog;
    int rc;

    memset(report, 0, sizeof(*report));
    atomic_store(&u->ending, 1);
    rc = push_conclude(u, err);
    if (rc < 0)
        return rc;
    prog = rgit_sideband_demux_progress(u->demux);
    if (progress && prog && prog->len)
        rg_buf_append(progress, prog->data, prog->len);
    if (u->demux_failed)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream sent a malformed answer: %s",
                            u->demux_err.msg);
    if (rgit_sideband_demux_finish(u->demux, err) < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream's answer was cut short");
    if (rgit_sideband_demux_fatal(u->demux))
        return rg_error_set(err, RG_E_UPSTREAM, "upstream failed: %s",
                            rgit_sideband_demux_fatal(u->demux));
    rep = rgit_sideband_demux_report(u->demux);
    if (rep == NULL || rep->len == 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream gave no report");
    rc = rgit_report_parse(report, rep->data, rep->len, err);
    if (rc < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream sent a malformed report");
    return 0;
}

static void http_push_free(upstream_push *base)
{
    upstream_http_push *u = (upstream_http_push *)base;

    if (u == NULL)
        return;
    /* An unfinished push is aborted: the progress callback stops curl and
     * the closed pipe ends a read waiting for more body. */
    atomic_store(&u->call.abort, 1);
    if (u->body_w >= 0)
        close(u->body_w);
    if (u->thread_started)
        pthread_join(u->thread, NULL);
    if (u->body_r >= 0)
        close(u->body_r);
    call_free(&u->call);
    rgit_sideband_demux_free(u->demux);
    free(u);
}

/* --------------------------------------------------------------- fetches */

struct upstream_http_fetch {
    upstream_fetch base; /* first: upstream.c dispatches on its ops */
    http_call call;
    int body_fd;      /* borrowed: the request body, or -1 */
    int out_r, out_w; /* the answer: written by curl, read by the caller */
    pthread_t thread;
    int thread_started;
    CURLcode result;
    char first[65536]; /* answer bytes read while waiting for the first */
    size_t first_len, first_off;
    int ended;
};

static size_t fetch_body(char *buf, size_t size, size_t nitems, void *arg)
{
    upstream_http_fetch *f = arg;
    ssize_t n;

    do
        n = read(f->body_fd, buf, size * nitems);
    while (n < 0 && errno == EINTR);
    return n < 0 ? CURL_READFUNC_ABORT : (size_t)n;
}

static size_t fetch_answer(char *data, size_t size, size_t nmemb, void *arg)
{
    upstream_http_fetch *f = arg;
    size_t n = size * nmemb;

    call_check(&f->call);
    if (f->call.refused)
        return 0;
    /* A full pipe waits for the client: that is the memory bound. A closed
     * one (the client went away) ends the transfer. */
    return rg_fs_write_all(f->out_w, data, n) < 0 ? 0 : n;
}

static void *fetch_main(void *arg)
{
    upstream_http_fetch *f = arg;

    f->result = curl_easy_perform(f->call.curl);
    call_release(&f->call);
    if (f->result == CURLE_OK)
        call_check(&f->call);
    close(f->out_w);
    f->out_w = -1;
    return NULL;
}

/* The reader reached EOF: collect how the transfer ended. */
static int fetch_end(upstream_http_fetch *f, rg_error *err)
{
    if (!f->ended) {
        f->ended = 1;
        if (f->thread_started) {
            pthread_join(f->thread, NULL);
            f->thread_started = 0;
        }
    }
    if (f->result != CURLE_OK || f->call.refused)
        return call_error(&f->call, f->result, err);
    return 0;
}

static int http_fetch_start(upstream_fetch **out, const upstream_target *t,
                            const upstream_fetch_request *req, rg_error *err)
{
    static const char *const post_headers[] = {
        "Content-Type: application/x-git-upload-pack-request",
        "Accept: application/x-git-upload-pack-result",
        NULL,
    };
    static const char *const gzip_headers[] = {
        "Content-Type: application/x-git-upload-pack-request",
        "Accept: application/x-git-upload-pack-result",
        "Content-Encoding: gzip",
        NULL,
    };
    upstream_http_fetch *f;
    struct stat st;
    int fds[2], rc;
    ssize_t n;

    *out = NULL;
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    f->out_r = f->out_w = -1;
    f->body_fd = req->body_fd;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        rc = rg_error_set(err, -errno, "pipe: %s", strerror(errno));
        goto done;
    }
    f->out_r = fds[0];
    f->out_w = fds[1];
    fcntl(f->out_w, F_SETPIPE_SZ, PIPE_BYTES); /* best effort */
    if (req->advertise)
        rc = call_init(&f->call, t, t->read, TOKENS_ACCESS_READ, 0,
                       "info/refs?service=git-upload-pack",
                       "application/x-git-upload-pack-advertisement", req->git_protocol, NULL, err);
    else
        rc = call_init(&f->call, t, t->read, TOKENS_ACCESS_READ, 0, "git-upload-pack",
                       "application/x-git-upload-pack-result", req->git_protocol,
                       req->body_gzip ? gzip_headers : post_headers, err);
    if (rc < 0)
        goto done;
    if (!req->advertise) {
        /* The spooled body has a known length: no chunking needed. */
        if (fstat(req->body_fd, &st) < 0) {
            rc = rg_error_set(err, -errno, "cannot read the request body");
            goto done;
        }
        curl_easy_setopt(f->call.curl, CURLOPT_POST, 1L);
        curl_easy_setopt(f->call.curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)st.st_size);
        curl_easy_setopt(f->call.curl, CURLOPT_READFUNCTION, fetch_body);
        curl_easy_setopt(f->call.curl, CURLOPT_READDATA, f);
    }
    curl_easy_setopt(f->call.curl, CURLOPT_WRITEFUNCTION, fetch_answer);
    curl_easy_setopt(f->call.curl, CURLOPT_WRITEDATA, f);
    rc = pthread_create(&f->thread, NULL, fetch_main, f);
    if (rc != 0) {
        rc = rg_error_set(err, -rc, "cannot start the upstream thread");
        goto done;
    }
    f->thread_started = 1;
    /* Wait for the first bytes, so that a refusal is still an HTTP error. */
    do
        n = read(f->out_r, f->first, sizeof(f->first));
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        rc = rg_error_set(err, -errno, "reading upstream's answer: %s", strerror(errno));
        goto done;
    }
    f->first_len = (size_t)n;
    if (n == 0) {
        rc = fetch_end(f, err);
        if (rc == 0)
            rc = rg_error_set(err, RG_E_UPSTREAM, "upstream's answer was empty");
        if (rc < 0)
            goto done;
    }
    f->base.ops = &upstream_http_ops;
    *out = &f->base;
    f = NULL;
    rc = 0;
done:
    http_fetch_free((upstream_fetch *)f);
    return rc;
}

static ssize_t http_fetch_read(upstream_fetch *base, char *buf, size_t max, rg_error *err)
{
    upstream_http_fetch *f = (upstream_http_fetch *)base;
    ssize_t n;
    int rc;

    if (f->first_off < f->first_len) {
        n = (ssize_t)(f->first_len - f->first_off < max ? f->first_len - f->first_off : max);
        memcpy(buf, f->first + f->first_off, (size_t)n);
        f->first_off += (size_t)n;
        return n;
    }
    if (f->ended)
        return fetch_end(f, err);
    do
        n = read(f->out_r, buf, max);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "reading upstream's answer: %s", strerror(errno));
    if (n > 0)
        return n;
    rc = fetch_end(f, err);
    return rc < 0 ? rc : 0;
}

static void http_fetch_free(upstream_fetch *base)
{
    upstream_http_fetch *f = (upstream_http_fetch *)base;

    if (f == NULL)
        return;
    /* Closing the answer's read end fails curl's next write (EPIPE), and
     * the progress callback stops it between writes. */
    atomic_store(&f->call.abort, 1);
    if (f->out_r >= 0)
        close(f->out_r);
    if (f->thread_started)
        pthread_join(f->thread, NULL);
    if (f->out_w >= 0)
        close(f->out_w);
    call_free(&f->call);
    free(f);
}

const upstream_ops upstream_http_ops = {
    .advertise = http_advertise,
    .push_start = http_push_start,
    .push_write = http_push_write,
    .push_finish = http_push_finish,
    .push_free = http_push_free,
    .fetch_start = http_fetch_start,
    .fetch_read = http_fetch_read,
    .fetch_free = http_fetch_free,
};
