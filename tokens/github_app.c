/*
 * GitHub App installation tokens (see github_app.h).
 *
 * Per request: sign an app JWT (iat 60 s in the past against clock drift,
 * exp 9 minutes after iat, inside GitHub's 10-minute limit), find the
 * installation that covers the repository (configured, or looked up once
 * and cached), and ask for a token limited to that repository and to the
 * permissions the request needs. Rate-limit answers are honoured by
 * waiting when the wait is short and failing with the time to retry when
 * it is not: a push should not hang for an hour, nor hammer the API.
 *
 * Secrets here are the JWT and the installation token. Both are kept in
 * buffers this file wipes; neither appears in an error message. API error
 * messages carry the HTTP status and GitHub's own "message" field.
 */
#include "tokens/github_app.h"
#include "tokens/jwt.h"
#include "tokens/token.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* An API answer we read is a small JSON object; 64 KiB is far past one. */
#define ANSWER_MAX (64u * 1024)
/* Fixed, not per upstream: these calls are small and GitHub is fast. */
#define API_CONNECT_TIMEOUT 10L
#define API_TOTAL_TIMEOUT   30L
/* The longest rate-limit wait worth holding a push for. */
#define RATE_WAIT_MAX 30
/* Back-dating and lifetime of the app JWT, as GitHub recommends. */
#define JWT_BACKDATE 60
#define JWT_LIFETIME 540
/* Installation ids looked up, remembered per repository. */
#define CACHE_SIZE 256
#define REPO_MAX   201 /* owner (39) "/" name (100), with room to spare */
#define MSG_MAX    200 /* of GitHub's "message" in our errors */

typedef struct cache_entry {
    char repo[REPO_MAX + 1];
    long long id;
} cache_entry;

struct tokens_github_app {
    char iss[24]; /* the app id as a decimal string */
    char *api_url;
    char *ca_file;
    long long installation_id; /* configured, or 0 */
    tokens_jwt_key *key;
    pthread_mutex_t lock; /* guards the cache */
    cache_entry cache[CACHE_SIZE];
    size_t cache_next;  /* ring: the slot the next entry replaces */
    tokens_clock clock; /* the system's, or a test's */
};

/* ------------------------------------------------------------------------
 * libcurl setup
 * ------------------------------------------------------------------------ */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe in every libcurl; do it once. */
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ------------------------------------------------------------------------
 * One API call
 * ------------------------------------------------------------------------ */

typedef struct api_answer {
    long status;
    char *body; /* ANSWER_MAX + 1 bytes, fixed, so no realloc leaves copies */
    size_t len;
    int overflow;
    long retry_after;     /* seconds, or -1 */
    int rate_exhausted;   /* x-ratelimit-remaining: 0 */
    long long rate_reset; /* x-ratelimit-reset (unix seconds), or -1 */
} api_answer;

static size_t answer_write(char *data, size_t size, size_t n, void *arg)
{
    api_answer *a = arg;
    size_t len = size * n;

    if (len > ANSWER_MAX - a->len) {
        a->overflow = 1;
        return 0; /* makes curl fail with CURLE_WRITE_ERROR */
    }
    memcpy(a->body + a->len, data, len);
    a->len += len;
    a->body[a->len] = '\0';
    return len;
}

/* The header's value as a non-negative integer, or -1 (absent or not one). */
static long long header_number(CURL *c, const char *name)
{
    struct curl_header *h = NULL;
    long long v = 0;
    const char *p;

    if (curl_easy_header(c, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || h == NULL)
        return -1;
    p = h->value;
    while (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > 1000000000000LL)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/*
 * Copy GitHub's "message" out of an error answer, cut to one short line
 * of printable text; "" when there is none.
 */
static void answer_message(char out[MSG_MAX + 1], const api_answer *a)
{
    json_t *root = a->len ? json_loadb(a->body, a->len, 0, NULL) : NULL;
    const char *m = root ? json_string_value(json_object_get(root, "message")) : NULL;
    size_t i = 0;

    out[0] = '\0';
    for (; m != NULL && m[i] != '\0' && i < MSG_MAX; i++)
        out[i] = ((unsigned char)m[i] < 0x20 || m[i] == 0x7f) ? ' ' : m[i];
    out[i] = '\0';
    json_decref(root);
}

/*
 * Send one request to `path` under the API URL with `Authorization:
 * Bearer <secret>` and, when `body` is not NULL, a JSON body. Any HTTP
 * status is a success here; the caller judges it.
 */
static int api_call(api_answer *a, const tokens_github_app *app, const char *method,
                    const char *path, const char *secret, const char *body, rg_error *err)
{
    const char *const fixed[] = {
        "Accept: application/vnd.github+json",
        "X-GitHub-Api-Version: 2022-11-28",
        body ? "Content-Type: application/json" : NULL,
        "Expect:",
    };
    struct curl_slist *hdrs = NULL, *h;
    char errbuf[CURL_ERROR_SIZE] = "";
    char *url = NULL, *auth = NULL;
    size_t authlen;
    CURLcode cc;
    CURL *c = NULL;
    int rc = 0;

    a->status = 0;
    a->len = 0;
    a->overflow = 0;
    a->body[0] = '\0';
    a->retry_after = -1;
    a->rate_exhausted = 0;
    a->rate_reset = -1;
    authlen = strlen("Authorization: Bearer ") + strlen(secret) + 1;
    url = malloc(strlen(app->api_url) + strlen(path) + 1);
    auth = malloc(authlen);
    c = curl_easy_init();
    if (url == NULL || auth == NULL || c == NULL) {
        rc = rg_error_set(err, -ENOMEM, "github-app: out of memory");
        goto done;
    }
    sprintf(url, "%s%s", app->api_url, path);
    snprintf(auth, authlen, "Authorization: Bearer %s", secret);
    /* curl copies each header; the copies are freed by curl_slist_free_all. */
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        if (fixed[i] == NULL)
            continue;
        h = curl_slist_append(hdrs, fixed[i]);
        if (h == NULL)
            goto oom;
        hdrs = h;
    }
    h = curl_slist_append(hdrs, auth);
    if (h == NULL)
        goto oom;
    hdrs = h;

    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "refgate");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    /* Threads: no signals for timeouts. */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* A redirect would carry the JWT somewhere nobody configured. */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (app->ca_file != NULL)
        curl_easy_setopt(c, CURLOPT_CAINFO, app->ca_file);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, API_CONNECT_TIMEOUT);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, API_TOTAL_TIMEOUT);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, answer_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);

    cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        if (a->overflow)
            rc = rg_error_set(err, RG_E_UPSTREAM, "github-app: %s %s: answer larger than %u bytes",
                              method, url, ANSWER_MAX);
        else
            rc = rg_error_set(err, RG_E_UPSTREAM, "github-app: %s %s: %s", method, url,
                              errbuf[0] ? errbuf : curl_easy_strerror(cc));
        goto done;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    a->retry_after = (long)header_number(c, "retry-after");
    a->rate_exhausted = header_number(c, "x-ratelimit-remaining") == 0;
    a->rate_reset = header_number(c, "x-ratelimit-reset");
    goto done;
oom:
    rc = rg_error_set(err, -ENOMEM, "github-app: out of memory");
done:
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    if (auth != NULL) {
        explicit_bzero(auth, authlen);
        free(auth);
    }
    free(url);
    return rc;
}

/*
 * How long a rate-limited answer asks us to wait, in seconds, or -1 when
 * the answer is not a rate limit. GitHub answers 403 or 429 with
 * retry-after (secondary limits) or remaining 0 and a reset time (primary).
 */
static long rate_limit_wait(const api_answer *a, time_t now)
{
    if (a->status != 403 && a->status != 429)
        return -1;
    if (a->retry_after >= 0)
        return a->retry_after;
    if (a->rate_exhausted && a->rate_reset >= 0)
        return a->rate_reset > (long long)now ? (long)(a->rate_reset - (long long)now) : 0;
    return -1;
}

/*
 * api_call, once more after a short rate-limit wait. A longer wait fails
 * at once with the time to retry, since a held push would time out anyway.
 */
static int api_call_patient(api_answer *a, const tokens_github_app *app, const char *method,
                            const char *path, const char *secret, const char *body, rg_error *err)
{
    char when[32];
    struct tm tm;
    time_t now, at;
    long wait;
    int rc, attempt;

    for (attempt = 0;; attempt++) {
        rc = api_call(a, app, method, path, secret, body, err);
        if (rc < 0)
            return rc;
        now = (time_t)tokens_clock_now(&app->clock);
        wait = rate_limit_wait(a, now);
        if (wait < 0)
            return 0;
        if (attempt == 0 && wait <= RATE_WAIT_MAX) {
            tokens_clock_sleep(&app->clock, wait + (a->retry_after >= 0 ? 0 : 1));
            continue;
        }
        at = now + wait;
        if (gmtime_r(&at, &tm) == NULL || strftime(when, sizeof(when), "%H:%M:%S UTC", &tm) == 0)
            snprintf(when, sizeof(when), "later");
        return rg_error_set(err, RG_E_UPSTREAM,
                            "github-app: %s %s%s: rate limited by GitHub (HTTP %ld); retry after "
                            "%s (in %ld s)",
                            method, app->api_url, path, a->status, when, wait);
    }
}

/* An error for an answer with an unexpected status, naming GitHub's message. */
static int answer_error(const api_answer *a, const tokens_github_app *app, const char *method,
                        const char *path, const char *hint, rg_error *err)
{
    char msg[MSG_MAX + 1];

    answer_message(msg, a);
    return rg_error_set(err, a->status == 401 || a->status == 403 ? RG_E_AUTH : RG_E_UPSTREAM,
                        "github-app: %s %s%s: HTTP %ld%s%s%s%s", method, app->api_url, path,
                        a->status, msg[0] ? ": " : "", msg, hint ? " " : "", hint ? hint : "");
}

/* ------------------------------------------------------------------------
 * Provider
 * ------------------------------------------------------------------------ */

int tokens_github_app_new(tokens_github_app **out, const config_credentials *cfg, const char *pem,
                          size_t len, const char *key_name, const char *ca_file, rg_error *err)
{
    tokens_github_app *app = NULL;
    int rc = 0;

    *out = NULL;
    if (cfg == NULL || cfg->type != CONFIG_CRED_GITHUB_APP || cfg->app_id <= 0)
        return rg_error_set(err, -EINVAL, "github-app: no app id configured");
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return rg_error_set(err, RG_E_UPSTREAM, "github-app: libcurl failed to initialise: %s",
                            curl_easy_strerror(curl_init_rc));
    app = calloc(1, sizeof(*app));
    if (app == NULL)
        return rg_error_set(err, -ENOMEM, "github-app: out of memory");
    app->clock = tokens_clock_system;
    if (pthread_mutex_init(&app->lock, NULL) != 0) {
        free(app);
        return rg_error_set(err, -ENOMEM, "github-app: cannot create a lock");
    }
    snprintf(app->iss, sizeof(app->iss), "%lld", cfg->app_id);
    app->installation_id = cfg->installation_id;
    app->api_url = strdup(cfg->api_url ? cfg->api_url : "https://api.github.com");
    app->ca_file = ca_file ? strdup(ca_file) : NULL;
    if (app->api_url == NULL || (ca_file != NULL && app->ca_file == NULL)) {
        rc = rg_error_set(err, -ENOMEM, "github-app: out of memory");
        goto done;
    }
    rc = tokens_jwt_key_parse(&app->key, pem, len, key_name, err);
    if (rc < 0)
        goto done;
    *out = app;
    app = NULL;
done:
    tokens_github_app_free(app);
    return rc;
}

void tokens_github_app_set_clock(tokens_github_app *app, const tokens_clock *clock)
{
    app->clock = *clock;
}

void tokens_github_app_free(tokens_github_app *app)
{
    if (app == NULL)
        return;
    tokens_jwt_key_free(app->key);
    pthread_mutex_destroy(&app->lock);
    free(app->api_url);
    free(app->ca_file);
    free(app);
}

/*
 * GitHub repository names: owner letters, digits and '-'; name letters,
 * digits, '.', '_' and '-'. Checking here keeps the path we build free of
 * anything that would need escaping or could walk to another endpoint.
 */
static int repo_split(char owner[REPO_MAX + 1], char name[REPO_MAX + 1], const char *repo,
                      rg_error *err)
{
    const char *slash = strchr(repo, '/');
    size_t olen, nlen, i;

    if (slash == NULL || strchr(slash + 1, '/') != NULL)
        return rg_error_set(err, -EINVAL,
                            "github-app: \"%.100s\" is not a GitHub repository (owner/name)", repo);
    olen = (size_t)(slash - repo);
    nlen = strlen(slash + 1);
    if (olen == 0 || olen > 100 || nlen == 0 || nlen > 100)
        goto bad;
    for (i = 0; i < olen; i++)
        if (!((repo[i] >= 'a' && repo[i] <= 'z') || (repo[i] >= 'A' && repo[i] <= 'Z') ||
              (repo[i] >= '0' && repo[i] <= '9') || repo[i] == '-' || repo[i] == '_'))
            goto bad;
    for (i = 0; i < nlen; i++) {
        char ch = slash[1 + i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            goto bad;
    }
    if (!strcmp(slash + 1, ".") || !strcmp(slash + 1, ".."))
        goto bad;
    memcpy(owner, repo, olen);
    owner[olen] = '\0';
    memcpy(name, slash + 1, nlen + 1);
    return 0;
bad:
    return rg_error_set(err, -EINVAL, "github-app: \"%.100s\" is not a valid GitHub owner/name",
                        repo);
}

static long long cache_get(tokens_github_app *app, const char *repo)
{
    long long id = 0;
    size_t i;

    pthread_mutex_lock(&app->lock);
    for (i = 0; i < CACHE_SIZE; i++)
        if (app->cache[i].id > 0 && !strcmp(app->cache[i].repo, repo)) {
            id = app->cache[i].id;
            break;
        }
    pthread_mutex_unlock(&app->lock);
    return id;
}

static void cache_put(tokens_github_app *app, const char *repo, long long id)
{
    size_t i;

    pthread_mutex_lock(&app->lock);
    for (i = 0; i < CACHE_SIZE; i++)
        if (!strcmp(app->cache[i].repo, repo))
            break;
    if (i == CACHE_SIZE) {
        i = app->cache_next;
        app->cache_next = (app->cache_next + 1) % CACHE_SIZE;
    }
    snprintf(app->cache[i].repo, sizeof(app->cache[i].repo), "%s", repo);
    app->cache[i].id = id;
    pthread_mutex_unlock(&app->lock);
}

/* Forget a lookup that led to a refusal: the app may have been reinstalled. */
static void cache_drop(tokens_github_app *app, const char *repo)
{
    size_t i;

    pthread_mutex_lock(&app->lock);
    for (i = 0; i < CACHE_SIZE; i++)
        if (!strcmp(app->cache[i].repo, repo))
            app->cache[i].id = 0;
    pthread_mutex_unlock(&app->lock);
}

/* GET /repos/{owner}/{repo}/installation → its "id". */
static int installation_lookup(long long *out, tokens_github_app *app, api_answer *a,
                               const char *owner, const char *name, const char *jwt, rg_error *err)
{
    char path[2 * REPO_MAX + 32];
    json_t *root = NULL, *id;
    int rc;

    *out = 0;
    snprintf(path, sizeof(path), "/repos/%s/%s/installation", owner, name);
    rc = api_call_patient(a, app, "GET", path, jwt, NULL, err);
    if (rc < 0)
        return rc;
    if (a->status == 404)
        return answer_error(a, app, "GET", path, "(is the App installed on this repository?)", err);
    if (a->status != 200)
        return answer_error(a, app, "GET", path, NULL, err);
    root = json_loadb(a->body, a->len, 0, NULL);
    id = root ? json_object_get(root, "id") : NULL;
    if (!json_is_integer(id) || json_integer_value(id) <= 0)
        rc = rg_error_set(err, RG_E_UPSTREAM, "github-app: GET %s%s: answer has no installation id",
                          app->api_url, path);
    else
        *out = (long long)json_integer_value(id);
    json_decref(root);
    return rc;
}

/*
 * A token is sent in an HTTP Basic header, so it must be visible ASCII.
 * Nothing else is assumed: GitHub's tokens have grown from 40 characters
 * to hundreds, with dots.
 */
static int token_usable(const char *t)
{
    if (t == NULL || *t == '\0')
        return 0;
    for (; *t; t++)
        if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f)
            return 0;
    return 1;
}

/* Pull "token" out of the access_tokens answer into a string of our own. */
static int token_from_answer(char **out, const tokens_github_app *app, const api_answer *a,
                             const char *path, rg_error *err)
{
    json_t *root = json_loadb(a->body, a->len, 0, NULL);
    json_t *tok = root ? json_object_get(root, "token") : NULL;
    char *value;
    int rc = 0;

    *out = NULL;
    if (!json_is_string(tok) || !token_usable(json_string_value(tok))) {
        rc = rg_error_set(err, RG_E_UPSTREAM,
                          "github-app: POST %s%s: answer has no usable \"token\"", app->api_url,
                          path);
        goto done;
    }
    *out = strdup(json_string_value(tok));
    if (*out == NULL)
        rc = rg_error_set(err, -ENOMEM, "github-app: out of memory");
    /* jansson frees without wiping; wipe its copy first. */
    value = (char *)json_string_value(tok);
    explicit_bzero(value, strlen(value));
done:
    json_decref(root);
    return rc;
}

int tokens_github_app_mint(char **out, tokens_github_app *app, const char *repo_path,
                           tokens_access access, unsigned flags, rg_error *err)
{
    char owner[REPO_MAX + 1], name[REPO_MAX + 1], path[64];
    api_answer a = {0};
    json_t *req = NULL, *perms = NULL;
    char *jwt = NULL, *body = NULL;
    long long inst;
    int64_t now;
    int rc, looked_up = 0;

    *out = NULL;
    if (app == NULL || repo_path == NULL)
        return rg_error_set(err, -EINVAL, "github-app: no provider or repository");
    rc = repo_split(owner, name, repo_path, err);
    if (rc < 0)
        return rc;
    a.body = malloc(ANSWER_MAX + 1);
    if (a.body == NULL)
        return rg_error_set(err, -ENOMEM, "github-app: out of memory");
    now = tokens_clock_now(&app->clock);
    rc = tokens_jwt_sign_rs256(&jwt, app->key, app->iss, now - JWT_BACKDATE,
                               now - JWT_BACKDATE + JWT_LIFETIME, err);
    if (rc < 0)
        goto done;

    inst = app->installation_id;
    if (inst == 0)
        inst = cache_get(app, repo_path);
    if (inst == 0) {
        rc = installation_lookup(&inst, app, &a, owner, name, jwt, err);
        if (rc < 0)
            goto done;
        cache_put(app, repo_path, inst);
        looked_up = 1;
    }

    /* The token covers this one repository (GitHub wants the bare name)
     * and only what the request needs. */
    perms = json_pack("{ss}", "contents", access == TOKENS_ACCESS_WRITE ? "write" : "read");
    if (perms != NULL && access == TOKENS_ACCESS_WRITE && (flags & TOKENS_CRED_WORKFLOWS) &&
        json_object_set_new(perms, "workflows", json_string("write")) < 0) {
        json_decref(perms);
        perms = NULL;
    }
    req = perms ? json_pack("{s[s]sO}", "repositories", name, "permissions", perms) : NULL;
    body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    if (body == NULL) {
        rc = rg_error_set(err, -ENOMEM, "github-app: out of memory");
        goto done;
    }
    snprintf(path, sizeof(path), "/app/installations/%lld/access_tokens", inst);
    rc = api_call_patient(&a, app, "POST", path, jwt, body, err);
    if (rc == 0 && a.status != 201)
        rc = answer_error(&a, app, "POST", path,
                          a.status == 401 ? "(does the private key belong to this App id?)"
                          : a.status == 422 || a.status == 404
                              ? "(is the repository in the installation, and does the App have "
                                "these permissions?)"
                              : NULL,
                          err);
    if (rc == 0)
        rc = token_from_answer(out, app, &a, path, err);
    if (rc < 0 && !looked_up && app->installation_id == 0 && a.status != 0)
        cache_drop(app, repo_path);
done:
    explicit_bzero(a.body, ANSWER_MAX + 1);
    free(a.body);
    tokens_secret_free(jwt);
    free(body);
    json_decref(req);
    json_decref(perms);
    return rc;
}

int tokens_github_app_revoke(tokens_github_app *app, const char *token, rg_error *err)
{
    api_answer a = {0};
    int rc;

    if (app == NULL || token == NULL)
        return 0;
    a.body = malloc(ANSWER_MAX + 1);
    if (a.body == NULL)
        return rg_error_set(err, -ENOMEM, "github-app: out of memory");
    rc = api_call_patient(&a, app, "DELETE", "/installation/token", token, NULL, err);
    if (rc == 0 && a.status != 204)
        rc = answer_error(&a, app, "DELETE", "/installation/token",
                          "(the token stays valid until it expires)", err);
    free(a.body);
    return rc;
}
