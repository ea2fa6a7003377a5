/*
 * Starting, reloading and stopping the gateway's HTTP server (server.h):
 * what a start sets up before the first request (the token key, the audit
 * log and what a previous gateway left pending in it, the approvals, the
 * listener), the published policy a database supplies, the thread that
 * logs the audit head, and a stop that lets in-flight pushes finish.
 */
#include "gateway/server_int.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gateway/admin.h"
#include "gateway/conns.h"
#include "gateway/control.h"
#include "gateway/lease.h"
#include "gateway/http.h"
#include "gateway/published.h"
#include "gateway/snapshot.h"
#include "gateway/spool.h"
#include "util/fs.h"
#include "util/log.h"

/* How long shutdown waits for in-flight pushes. */
#define DRAIN_SECONDS 120

/* How often the audit log's head is logged between start and stop. */
#define AUDIT_HEAD_SECONDS 3600

/*
 * The stack of each connection's thread. A thread per connection lets a
 * push block on upstream and index-pack without stalling others, and an
 * idle connection costs only the stack pages it touched (a few KiB of RSS),
 * but the default 8 MiB of address space each would make thousands of
 * parked connections reserve tens of GiB. Measured: every integration
 * test (TLS upstreams, GitHub App JWTs, gzip bodies) passes under ASan
 * with 256 KiB, and 64 KiB is too little (inflate's 64 KiB buffer); this
 * is four times what was seen to be enough.
 */
#define CONNECTION_STACK_BYTES ((size_t)1024 * 1024)

/*
 * Each connection is a descriptor: raise the soft limit to the hard one so
 * the connection limit, not RLIMIT_NOFILE, is what holds.
 */
static void raise_fd_limit(const config_limits *lim)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Beyond its own socket, a connection may hold a spool, a pipe pair
     * to a local git and an upstream socket. */
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)lim->connections + 64)
        rg_log(RG_LOG_WARNING, "fd_limit_low",
               "nofile=%llu connections=%u (raise LimitNOFILE= or limits.connections)",
               (unsigned long long)rl.rlim_cur, lim->connections);
}

/* --------------------------------------------------------------- server */

/* Spool files and quarantines a crashed gateway left behind: the directory
 * stays (it may be a mount or have its own permissions), its contents go. */
static void clear_tmp(const char *dir)
{
    rg_fs_remove_tree(dir, RG_FS_KEEP_TOP, NULL);
}

/*
 * The file audit log's flock made its gateway the only one on state_dir
 * (clear_tmp and the approvals file rely on it). With the audit log in the
 * database, gateways share the chain, so state_dir gets a lock of its own.
 */
static int lock_state_dir(int *fd, const char *state_dir, rg_error *err)
{
    char path[4200];

    snprintf(path, sizeof(path), "%s/gateway.lock", state_dir);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*fd < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    return errno == EWOULDBLOCK
               ? rg_error_set(err, -EBUSY, "%s: in use by another gateway process", state_dir)
               : rg_error_set(err, -errno, "%s: lock: %s", path, strerror(errno));
}

/* ------------------------------------------------------------------------
 * The audit log's head
 * ------------------------------------------------------------------------ */

/*
 * Log where the audit chain stands. A chain cannot tell that records were
 * cut from its end; the heads logged here (journald, kept off this host)
 * can: `refgate audit verify --head SEQ:HASH` checks the log against one.
 */
static void log_audit_head(gateway_server *s)
{
    rg_error e = RG_ERROR_INIT;
    char hash[65], q[RG_LOG_VALUE_MAX];
    uint64_t seq;

    if (audit_head(s->ctx.audit, &seq, hash, &e) < 0)
        rg_log(RG_LOG_ERR, "audit_head_failed", "error=%s", rg_log_quote(q, sizeof(q), e.msg));
    else
        rg_log(RG_LOG_NOTICE, "audit_head", "seq=%llu hash=%s", (unsigned long long)seq, hash);
}

static int audit_event(gateway_server *s, const char *event, const char *detail)
{
    audit_record rec = {.kind = AUDIT_EVENT, .event = event, .detail = detail};
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    int rc;

    rc = audit_append(s->ctx.audit, &rec, &e);
    if (rc < 0)
        rg_log(RG_LOG_ERR, "audit_append_failed", "event=%s error=%s", event,
               rg_log_quote(q, sizeof(q), e.msg));
    return rc;
}

/* Every AUDIT_HEAD_SECONDS: log the audit head, and expire approvals. */
static void *head_thread_main(void *arg)
{
    gateway_server *s = arg;
    struct timespec until;

    pthread_mutex_lock(&s->head_mu);
    while (!s->head_stop) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += AUDIT_HEAD_SECONDS;
        /* Bounded: wakes at the deadline or when stop asks it to end. */
        while (!s->head_stop &&
               pthread_cond_timedwait(&s->head_cv, &s->head_mu, &until) != ETIMEDOUT)
            ;
        if (s->head_stop)
            break;
        pthread_mutex_unlock(&s->head_mu);
        log_audit_head(s);
        /* Expired approvals go when a push or a reviewer looks; at the
         * latest here, so their kept packs leave the spool budget. */
        approvals_expire(s->ctx.approvals, NULL, (int64_t)time(NULL), NULL);
        pthread_mutex_lock(&s->head_mu);
    }
    pthread_mutex_unlock(&s->head_mu);
    return NULL;
}

static int head_thread_start(gateway_server *s, rg_error *err)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return rg_error_set(err, -ENOMEM, "cannot create a condition variable");
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&s->head_cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return rg_error_set(err, -ENOMEM, "cannot create a condition variable");
    pthread_mutex_init(&s->head_mu, NULL);
    rc = pthread_create(&s->head_thread, NULL, head_thread_main, s);
    if (rc != 0) {
        pthread_cond_destroy(&s->head_cv);
        pthread_mutex_destroy(&s->head_mu);
        return rg_error_set(err, -rc, "cannot start the audit head thread: %s", strerror(rc));
    }
    s->head_thread_running = 1;
    return 0;
}

static void head_thread_stop(gateway_server *s)
{
    if (!s->head_thread_running)
        return;
    pthread_mutex_lock(&s->head_mu);
    s->head_stop = 1;
    pthread_cond_signal(&s->head_cv);
    pthread_mutex_unlock(&s->head_mu);
    pthread_join(s->head_thread, NULL);
    pthread_cond_destroy(&s->head_cv);
    pthread_mutex_destroy(&s->head_mu);
    s->head_thread_running = 0;
}

/* ------------------------------------------------------------------------
 * The published policy (with a database)
 * ------------------------------------------------------------------------ */

/* The rule that refuses every push while no published policy is in force. */
#define NO_POLICY_RULE      "no-policy"
#define NO_POLICY_PUBLISHED "no policy has been published: run refgate policy publish"
#define NO_POLICY_READ                                                                             \
    "the published policy could not be read from the database yet (it is unreachable)"

/*
 * The host's config `local` under a policy of one rule that denies every
 * push with `reason` (fail closed): no policy decided, so its records name
 * no digest.
 */
static int refusal_config(config_model **out, const config_model *local, const char *reason,
                          rg_error *err)
{
    json_t *policy = json_pack("{s:s, s:[{s:s, s:s, s:s}]}", "default", "deny", "rules", "name",
                               NO_POLICY_RULE, "effect", "deny", "reason", reason);
    int rc;

    if (policy == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    rc = config_with_policy(out, local, policy, "the refusal policy", 0, err);
    if (rc == 0)
        (*out)->policy_digest[0] = '\0';
    json_decref(policy);
    return rc;
}

/* `local` under the policy in force, or the refusal while there is none. */
static int enforced_config(config_model **out, const gateway_server *s, const config_model *local,
                           rg_error *err)
{
    char label[64];

    if (s->policy == NULL)
        return refusal_config(out, local, s->refusal, err);
    snprintf(label, sizeof(label), "published policy v%lld", s->policy_version);
    return config_with_policy(out, local, s->policy, label, s->policy_version, err);
}

/* Make `snap` the snapshot new requests begin under. */
static void install(gateway_server *s, gateway_snapshot *snap)
{
    gateway_snapshot *old;

    pthread_mutex_lock(&s->lock);
    old = s->current;
    s->current = snap;
    pthread_mutex_unlock(&s->lock);
    /* Requests that began under the old snapshot keep it until they end. */
    gateway_snapshot_unref(old);
}

/* Still none published: the refusal says so rather than "unreachable". */
static void policy_none(gateway_server *s)
{
    gateway_snapshot *snap = NULL;
    config_model *cfg = NULL;
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];

    if (s->policy != NULL || !strcmp(s->refusal, NO_POLICY_PUBLISHED))
        return;
    s->refusal = NO_POLICY_PUBLISHED;
    if (refusal_config(&cfg, s->local, s->refusal, &e) < 0 ||
        gateway_snapshot_new(&snap, cfg, 1, &e) < 0) {
        rg_log(RG_LOG_ERR, "policy_refusal_failed", "error=%s", rg_log_quote(q, sizeof(q), e.msg));
        return;
    }
    install(s, snap);
    rg_log(RG_LOG_WARNING, "policy_none", "reason=%s",
           rg_log_quote(q, sizeof(q), NO_POLICY_PUBLISHED));
}

/*
 * A new current policy from the follower: merged over the host's config
 * and swapped in as a reload would, after a "policy" audit event, so every
 * decision it makes follows the event that names it. One that does not
 * load on this host changes nothing, and the log says why.
 */
static void policy_arrived(void *arg, long long version, const char *digest, const json_t *policy)
{
    gateway_server *s = arg;
    gateway_snapshot *snap = NULL;
    config_model *cfg = NULL;
    rg_error e = RG_ERROR_INIT;
    char label[64], q[RG_LOG_VALUE_MAX], detail[300];
    json_t *copy = NULL;

    pthread_mutex_lock(&s->policy_mu);
    if (version == 0) {
        policy_none(s);
        goto done;
    }
    snprintf(label, sizeof(label), "published policy v%lld", version);
    if (config_with_policy(&cfg, s->local, policy, label, version, &e) < 0 ||
        gateway_snapshot_new(&snap, cfg, 1, &e) < 0 || (copy = json_deep_copy(policy)) == NULL) {
        if (e.msg[0] == '\0')
            rg_error_set(&e, -ENOMEM, "out of memory");
        rg_log(RG_LOG_ERR, "policy_load_failed", "version=%lld digest=%s kept=%s error=%s", version,
               digest, s->policy ? s->policy_digest : "none", rg_log_quote(q, sizeof(q), e.msg));
        gateway_snapshot_unref(snap);
        goto done;
    }
    if (s->policy != NULL)
        snprintf(detail, sizeof(detail), "version %lld %s (was version %lld %s)", version, digest,
                 s->policy_version, s->policy_digest);
    else
        snprintf(detail, sizeof(detail), "version %lld %s (was none)", version, digest);
    /* The pushes it decides are refused anyway when the log cannot take
     * records, so a failed event (logged) does not keep the old rules. */
    audit_event(s, "policy", detail);
    install(s, snap);
    json_decref(s->policy);
    s->policy = copy;
    s->policy_version = version;
    snprintf(s->policy_digest, sizeof(s->policy_digest), "%s", digest);
    rg_log(RG_LOG_NOTICE, "policy_loaded", "version=%lld digest=%s rules=%zu", version, digest,
           snap->cfg->nrules);
done:
    pthread_mutex_unlock(&s->policy_mu);
}

/*
 * Read the current policy before serving, so a gateway whose database
 * answers enforces it from its first push, then follow it from a thread.
 * A database that does not answer now is not an error: pushes are
 * refused until it does.
 */
static int follow_start(gateway_server *s, rg_error *err)
{
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    int rc;

    rc = gateway_published_new(&s->published, s->ctx.db, policy_arrived, s, err);
    if (rc < 0)
        return rc;
    if (gateway_published_poll(s->published, &e) < 0)
        rg_log(RG_LOG_WARNING, "policy_unavailable",
               "reason=%s until it is read, pushes are refused", rg_log_quote(q, sizeof(q), e.msg));
    return gateway_published_run(s->published, err);
}

/* ------------------------------------------------------------------------
 * Starting and stopping
 * ------------------------------------------------------------------------ */

/* What a scrape of /metrics copies in: connections and the spool. */
static void admin_state(void *arg, gateway_metrics_state *out)
{
    gateway_server *s = arg;
    gateway_conns_stats st;

    gateway_conns_get_stats(&st, s->conns);
    out->connections_open = st.open;
    out->connections_waiting = st.waiting;
    out->cut_header_deadline = st.cut_deadline;
    out->cut_unauthenticated = st.cut_evicted;
    out->refused_per_token = st.per_token_refused;
    out->spool_bytes = gateway_spool_used(s->spool);
    out->spool_cap = s->ctx.cfg->limits.spool_bytes;
}

/* Every audit append is timed, whoever makes it. */
static void audit_timed(void *arg, double seconds, int ok)
{
    gateway_metrics_audit_append(arg, seconds, ok);
}

/* The approvals store removed kept packs: their bytes are free again. */
static void give_back(void *arg, uint64_t bytes)
{
    gateway_spool_give_back(arg, bytes);
}

/* Process-wide setup before any thread: libcurl, the metrics, this
 * gateway's id, and the shared database when config names one. */
static int open_process(gateway_server *s, const config_model *cfg, rg_error *err)
{
    char q[sizeof(err->msg) * 2];
    int reachable, rc;

    /* Before any thread: libcurl's global state is set up once, here. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return rg_error_set(err, -EIO, "cannot initialise libcurl");
    s->curl_ready = 1;
    rc = gateway_metrics_new(&s->ctx.metrics, err);
    if (rc == 0)
        rc = db_gateway_id_new(s->ctx.gateway_id, err);
    if (rc < 0 || cfg->state.postgres == NULL)
        return rc;
    rc = db_pool_open(&s->ctx.db, &cfg->state, err);
    if (rc == 0)
        rc = db_startup_check(s->ctx.db, &reachable, err);
    if (rc < 0)
        return rc;
    if (!reachable)
        rg_log(RG_LOG_WARNING, "db_unreachable",
               "reason=%s until the database answers, pushes are refused",
               rg_log_quote(q, sizeof(q), err->msg));
    return 0;
}

/* <state_dir>/tmp, the token key and the token store, the key published. */
static int open_keys(gateway_server *s, const config_model *cfg, rg_error *err)
{
    char path[4200];
    int rc;

    snprintf(s->ctx.tmp_dir, sizeof(s->ctx.tmp_dir), "%s/tmp", cfg->state_dir);
    rc = rg_fs_mkdir_p(s->ctx.tmp_dir, 0700, err);
    if (rc < 0)
        return rc;
    rc = tokens_key_load(&s->ctx.key, cfg->state_dir, err);
    if (rc == 0)
        rc = tokens_store_open(&s->ctx.tokens, cfg->state_dir, s->ctx.db, err);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof(path), "%s/token.key", cfg->state_dir);
    if (access(path, F_OK) == 0)
        rg_log(RG_LOG_WARNING, "token_key_obsolete",
               "path=%s reason=\"run tokens are Ed25519 now: rg1 tokens no longer verify and "
               "this HMAC key is unused; delete it\"",
               path);
    /* Every gateway on the store verifies this one's tokens from here on.
     * A database away now only delays it: each mint publishes first. */
    rc = tokens_key_publish(s->ctx.key, s->ctx.tokens, s->ctx.gateway_id, err);
    if (rc == RG_E_STATE) {
        char q[sizeof(err->msg) * 2];
        rg_log(RG_LOG_WARNING, "token_key_unpublished", "reason=%s",
               rg_log_quote(q, sizeof(q), err->msg));
        rc = 0;
    }
    return rc;
}

/* The snapshot of the config at start, and the one requests begin under. */
static int make_snapshots(gateway_server *s, const config_model *cfg, rg_error *err)
{
    config_model *refusal = NULL;
    int rc;

    /* The providers are made now, so a bad key or token file refuses
     * startup rather than a push. */
    rc = gateway_snapshot_new(&s->base, cfg, 0, err);
    if (rc < 0)
        return rc;
    s->ctx.read_creds = s->base->read_creds;
    s->ctx.write_creds = s->base->write_creds;
    if (s->ctx.db == NULL) {
        s->current = gateway_snapshot_ref(s->base);
        return 0;
    }
    /* On a database only a published policy decides: none until read. */
    rc = refusal_config(&refusal, cfg, s->refusal, err);
    if (rc == 0)
        rc = gateway_snapshot_new(&s->current, refusal, 1, err);
    return rc;
}

/* What holds strangers to config's limits: connections and the spool. */
static int make_limits(gateway_server *s, const config_model *cfg, rg_error *err)
{
    int rc;

    raise_fd_limit(&cfg->limits);
    rc = gateway_conns_new(&s->conns, &cfg->limits, err);
    if (rc < 0)
        return rc;
    if (gateway_spool_new(&s->spool, cfg->limits.spool_bytes) < 0)
        return rg_error_set(err, -ENOMEM, "out of memory");
    return 0;
}

/* The audit log and its outbox, with what a previous gateway left pending completed. */
static int open_audit(gateway_server *s, const config_model *cfg, rg_error *err)
{
    char path[4200];
    size_t recovered = 0;
    int rc;

    if (s->ctx.db != NULL) {
        rc = lock_state_dir(&s->dir_lock_fd, cfg->state_dir, err);
        if (rc == 0)
            rc = audit_pg_open(&s->ctx.audit, s->ctx.db, s->ctx.gateway_id, err);
    } else {
        snprintf(path, sizeof(path), "%s/audit.jsonl", cfg->state_dir);
        rc = audit_open(&s->ctx.audit, path, err);
    }
    if (rc < 0)
        return rc;
    audit_on_append(s->ctx.audit, audit_timed, s->ctx.metrics);
    rc = gateway_outbox_new(&s->ctx.outbox, s->ctx.audit, GATEWAY_OUTBOX_MAX,
                            GATEWAY_OUTBOX_MAX_BYTES, err);
    if (rc < 0)
        return rc;
    /* Before serving, and before the start event: a push the last gateway
     * forwarded without learning its outcome gets one ("unknown"), so
     * every start event closes what came before it. In the database, the
     * lease says which gateways are dead, and its thread sweeps again. */
    if (s->ctx.db != NULL)
        rc = gateway_lease_start(&s->lease, s->ctx.db, s->ctx.gateway_id, s->ctx.audit,
                                 s->ctx.outbox, &recovered, err);
    else
        rc = audit_complete_pending(s->ctx.audit, &recovered, err);
    if (rc < 0)
        return rc;
    if (recovered > 0)
        rg_log(RG_LOG_WARNING, "audit_recovered", "completed=%zu", recovered);
    return 0;
}

/* The approvals store, with what has expired gone. */
static int open_approvals(gateway_server *s, const config_model *cfg, rg_error *err)
{
    char path[4200];
    int rc;

    if (s->ctx.db != NULL) {
        /* Shared with every gateway on the database; kept packs live there. */
        rc = approvals_pg_open(&s->ctx.approvals, s->ctx.db, cfg->approvals.expire, err);
        if (rc < 0)
            return rc;
    } else {
        /* Behind the audit log's (or state_dir's) lock, as the only writer of the approvals. */
        snprintf(path, sizeof(path), "%s/approvals", cfg->state_dir);
        rc = approvals_file_open(&s->ctx.approvals, path, cfg->approvals.expire, err);
        if (rc < 0)
            return rc;
        /* Kept packs count against the spool budget for as long as they are kept. */
        gateway_spool_hold(s->spool, approvals_pack_total(s->ctx.approvals));
        approvals_on_release(s->ctx.approvals, give_back, s->spool);
    }
    approvals_expire(s->ctx.approvals, NULL, (int64_t)time(NULL), NULL);
    return 0;
}

/*
 * Bind the push listener (served later, by gateway_server_start's end): a
 * thread per connection, since a push blocks in its handler on upstream
 * and index-pack. The idle timeout is the time allowed between bytes; the
 * header deadline is gateway_conns's.
 */
static int listen_push(gateway_server *s, const config_model *cfg, rg_error *err)
{
    gateway_http_options o = GATEWAY_HTTP_OPTIONS_INIT;
    char path[4200];

    snprintf(path, sizeof(path), "%s/url", cfg->state_dir);
    o.what = "listen";
    o.host = cfg->listen_host;
    o.port = cfg->listen_port;
    o.url_file = path;
    o.thread_per_connection = 1;
    o.connections = cfg->limits.connections;
    o.idle_seconds = cfg->limits.idle_seconds;
    o.memory_limit = (size_t)(256 * 1024);
    o.stack_bytes = CONNECTION_STACK_BYTES;
    o.handle = gateway_server_handle;
    o.completed = gateway_server_completed;
    o.notify = gateway_server_connection_event;
    o.arg = s;
    return gateway_http_listen(&s->http, &o, err);
}

/* The start event in the audit log, naming the listener, and the head after it. */
static int log_start(gateway_server *s, rg_error *err)
{
    char detail[200];
    int rc;

    snprintf(detail, sizeof(detail), "%s%s%spid %ld, listening on %s", s->ctx.db ? "gateway " : "",
             s->ctx.db ? s->ctx.gateway_id : "", s->ctx.db ? ", " : "", (long)getpid(),
             gateway_http_url(s->http));
    rc = audit_event(s, "start", detail);
    /* A database that cannot be reached at start is no reason not to
     * serve: pushes are refused until it answers (audit_ready). */
    if (rc < 0 && s->ctx.db == NULL)
        return rg_error_set(err, rc, "cannot append the start event to the audit log");
    s->audit_started = 1;
    log_audit_head(s);
    return 0;
}

/* What runs beside the requests, each after the start event: the policy
 * follower, the audit head thread and the control socket. */
static int start_threads(gateway_server *s, const config_model *cfg, rg_error *err)
{
    int rc;

    /* After the start event, so the policy event that names it follows. */
    if (s->ctx.db != NULL && (rc = follow_start(s, err)) < 0)
        return rc;
    rc = head_thread_start(s, err);
    if (rc < 0)
        return rc;
    /* After the start event, so every token-mint event follows it. */
    if (cfg->control.socket != NULL)
        return gateway_control_start(&s->control, &s->ctx, gateway_http_url(s->http), err);
    rg_log(RG_LOG_WARNING, "control_disabled",
           "reason=\"<state_dir>/control.sock is too long for a unix socket; set "
           "control.socket\"");
    return 0;
}

int gateway_server_start(gateway_server **out, const config_model *cfg, rg_error *err)
{
    gateway_server *s;
    int rc;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    s->ctx.cfg = cfg;
    s->ctx.stopping = &s->stopping;
    s->dir_lock_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->policy_mu, NULL);
    s->local = cfg;
    s->refusal = NO_POLICY_READ;
    rc = open_process(s, cfg, err);
    if (rc == 0)
        rc = open_keys(s, cfg, err);
    if (rc == 0)
        rc = make_snapshots(s, cfg, err);
    if (rc == 0)
        rc = make_limits(s, cfg, err);
    if (rc == 0)
        rc = open_audit(s, cfg, err);
    if (rc == 0)
        rc = open_approvals(s, cfg, err);
    if (rc < 0)
        goto done;
    /* The audit log's lock (state_dir's, with the database) makes this the
     * only gateway on state_dir, so whatever tmp/ holds is left from a
     * crash: quarantines, half-made mirror clones. Spools are O_TMPFILE
     * and never have names. */
    clear_tmp(s->ctx.tmp_dir);
    rc = listen_push(s, cfg, err);
    if (rc == 0)
        rc = log_start(s, err);
    if (rc == 0)
        rc = start_threads(s, cfg, err);
    if (rc == 0)
        rc = gateway_http_serve(s->http, err);
    if (rc == 0 && cfg->admin.listen_host != NULL)
        rc = gateway_admin_start(&s->admin, &s->ctx, s->ctx.metrics, admin_state, s, err);
done:
    if (rc < 0) {
        gateway_server_stop(s);
        return rc;
    }
    *out = s;
    return 0;
}

const gateway_ctx *gateway_server_ctx(const gateway_server *s)
{
    return &s->ctx;
}

const char *gateway_server_url(const gateway_server *s)
{
    return gateway_http_url(s->http);
}

int gateway_server_reload(gateway_server *s, config_model *cfg, rg_error *err)
{
    gateway_snapshot *snap = NULL;
    config_model *merged = NULL;
    char keys[200], q[RG_LOG_VALUE_MAX];
    int rc;

    pthread_mutex_lock(&s->policy_mu);
    /* Revocations, the audit log, the key and spools live there: another
     * directory would be another gateway. */
    if (strcmp(cfg->state_dir, s->ctx.cfg->state_dir) != 0) {
        rc =
            rg_error_set(err, RG_E_CONFIG, "state_dir cannot change without a restart (%s, now %s)",
                         s->ctx.cfg->state_dir, cfg->state_dir);
        config_free(cfg);
    } else if (s->published != NULL) {
        /* On a database the host's file changes, the policy in force stays. */
        rc = enforced_config(&merged, s, cfg, err);
        if (rc == 0)
            rc = gateway_snapshot_new(&snap, merged, 1, err);
        if (rc == 0) {
            config_free(s->local_owned);
            s->local = s->local_owned = cfg;
        } else {
            config_free(cfg);
        }
    } else {
        rc = gateway_snapshot_new(&snap, cfg, 1, err);
    }
    if (rc < 0) {
        pthread_mutex_unlock(&s->policy_mu);
        rg_log(RG_LOG_ERR, "reload_failed", "config=%s error=%s", s->ctx.cfg->path,
               rg_log_quote(q, sizeof(q), err->msg));
        return rc;
    }
    /* What only a restart applies is said, and the rest applies now. */
    gateway_snapshot_restart_keys(keys, sizeof(keys), s->ctx.cfg, snap->cfg);
    if (keys[0])
        rg_log(RG_LOG_WARNING, "reload_needs_restart", "keys=%s", keys);
    /* Said before the swap: once it is in, a new policy may replace it. */
    rg_log(RG_LOG_NOTICE, "reloaded", "config=%s rules=%zu upstreams=%zu", snap->cfg->path,
           snap->cfg->nrules, snap->cfg->nupstreams);
    install(s, snap);
    pthread_mutex_unlock(&s->policy_mu);
    /* A published version this host could not load may load now. */
    gateway_published_recheck(s->published);
    return 0;
}

void gateway_server_stop(gateway_server *s)
{
    unsigned active;

    if (s == NULL)
        return;
    if (gateway_http_serving(s->http)) {
        /* Held pushes stop waiting and are answered. */
        atomic_store(&s->stopping, 1);
        gateway_http_quiesce(s->http);
        for (int i = 0; i < DRAIN_SECONDS * 20; i++) {
            pthread_mutex_lock(&s->lock);
            active = s->active;
            pthread_mutex_unlock(&s->lock);
            if (active == 0)
                break;
            usleep(50 * 1000);
        }
    }
    /* Removes <state_dir>/url: it must never point scripts at a gateway
     * that is gone. */
    gateway_http_stop(s->http);
    /* After the drain, during which /healthz says the gateway is stopping. */
    gateway_admin_stop(s->admin);
    /* After the listener: every connection is closed and untracked by now. */
    gateway_conns_free(s->conns);
    head_thread_stop(s);
    /* Before the stop event: a policy event in progress is appended first. */
    gateway_published_free(s->published);
    /* Before the stop event and audit_close: a mint or revoke in progress
     * finishes its record first. */
    gateway_control_stop(s->control);
    /* Every request has ended: nothing forwarded is left without an
     * outcome once the outbox is empty. When it cannot be emptied there is
     * no stop event, which would say so: the file store's next start then
     * completes those decisions, and with the database another gateway
     * does once this one's lease is stopped. */
    if (gateway_outbox_flush(s->ctx.outbox, NULL, NULL, NULL) < 0)
        s->audit_started = 0;
    if (s->audit_started) {
        char detail[96];
        snprintf(detail, sizeof(detail), "%s%s%spid %ld", s->ctx.db ? "gateway " : "",
                 s->ctx.db ? s->ctx.gateway_id : "", s->ctx.db ? ", " : "", (long)getpid());
        audit_event(s, "stop", detail);
        log_audit_head(s);
    }
    /* After the stop event: from now on what this gateway forwarded all
     * has its outcome, so it may be taken for dead. */
    gateway_lease_stop(s->lease);
    approvals_close(s->ctx.approvals);
    /* After the control thread and the approvals: a denial gives kept bytes back. */
    gateway_spool_free(s->spool);
    /* Before audit_close: it logs what it could not retry. */
    gateway_outbox_free(s->ctx.outbox);
    audit_close(s->ctx.audit);
    gateway_metrics_free(s->ctx.metrics);
    tokens_store_free(s->ctx.tokens);
    tokens_key_free(s->ctx.key);
    /* After every store that holds its connections. */
    db_pool_close(s->ctx.db);
    if (s->dir_lock_fd >= 0)
        close(s->dir_lock_fd);
    /* Every request has ended: these are the last references. */
    gateway_snapshot_unref(s->current);
    gateway_snapshot_unref(s->base);
    json_decref(s->policy);
    config_free(s->local_owned);
    pthread_mutex_destroy(&s->policy_mu);
    if (s->curl_ready)
        curl_global_cleanup();
    pthread_mutex_destroy(&s->lock);
    free(s);
}
