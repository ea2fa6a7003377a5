/*
 * The mirror cache; see mirror.h.
 *
 * Each remote repository gets a bare mirror at
 * <state_dir>/mirrors/<host>/<path>.git, made the first time by
 * `git clone --mirror` into a temporary sibling that is renamed into place
 * (so a crash never leaves a half-made mirror, and the mirror takes the
 * upstream's object format, which `git init --bare` would have to guess),
 * then kept current with a forced, pruning fetch of every ref under refs/
 * (the refspec "+refs/ *:refs/ *" without the spaces). The real git does
 * the transfer, so thin packs, protocol v2 and every transport it
 * knows behave as they do for a developer's clone.
 *
 * Locking, with flock(2) so a crashed gateway never leaves a lock held,
 * on two files beside the mirror:
 *  - <path>.git.lock serialises updates: held exclusively while one
 *    fetches. It also records when the last successful fetch started, so
 *    pushes that arrive together fetch once, not once each.
 *  - <path>.git.use is held shared from the end of the update until
 *    release, while the push is inspected. Only housekeeping (git gc,
 *    which deletes packs and objects) needs it exclusively, and takes it
 *    only when no inspection is in progress, never waiting for one.
 * A fetch only adds objects (written to temporary files and renamed) and
 * moves refs atomically, which is what git guarantees concurrent readers;
 * with automatic gc switched off it can therefore run while other pushes
 * are inspected, so an update never waits for inspections and pushes to
 * one repository serialise only on the fetch itself. Waits are bounded
 * and poll with LOCK_NB, because flock(2) has no timeout and the alarm()
 * trick is process-wide in a threaded server; a wait that runs out fails
 * closed with a message.
 *
 * Object ids name content, so a mirror that is a little behind never gives
 * a wrong ancestry answer: at worst an id the pusher saw is missing and the
 * quarantine fails, which the push treats as a force (fail closed).
 */
#include "upstream/mirror.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "git/odb.h"
#include "util/fs.h"
#include "util/gitenv.h"
#include "util/proc.h"
#include "util/text.h"

/* How long one clone, fetch or gc may run, whatever progress it makes. */
#define MIRROR_FETCH_SECONDS 600

/* How long an acquire waits for a lock: long enough to outlast one update
 * (a fetch and its gc) by another push, then it gives up. */
#define MIRROR_LOCK_SECONDS (2 * MIRROR_FETCH_SECONDS + 60)

/* A remote that sends less than one byte a second for this long is given
 * up (http.lowSpeedTime), unless the upstream sets its own idle timeout. */
#define MIRROR_IDLE_SECONDS_DEFAULT 60

struct upstream_mirror {
    char *dir;  /* the mirror's git directory */
    int use_fd; /* <dir>.use, held shared until release */
    int fresh;  /* fetched (or found fetched) by this acquire */
};

/* ---------------------------------------------------------------------------
 * Paths
 * ------------------------------------------------------------------------- */

/*
 * Every segment must be a plain name (the rule route.c applies to URL
 * paths). Checked again here because the path becomes a directory the
 * gateway writes to.
 */
static int mirror_check_segments(const char *path, int allow_slash)
{
    for (;;) {
        size_t n = strcspn(path, "/");

        if (!rg_name_segment_ok(path, n))
            return -EINVAL;
        if (path[n] == '\0')
            return 0;
        if (!allow_slash)
            return -EINVAL;
        path += n + 1;
    }
}

static int mirror_paths(char **dir, const char *state_dir, const upstream_target *t, rg_error *err)
{
    *dir = NULL;
    if (mirror_check_segments(t->up->host, 0) < 0 || mirror_check_segments(t->repo_path, 1) < 0)
        return rg_error_set(err, -EINVAL, "upstream %s: \"%s\" is not a valid repository path",
                            t->up->host, t->repo_path);
    if (asprintf(dir, "%s/mirrors/%s/%s.git", state_dir, t->up->host, t->repo_path) < 0) {
        *dir = NULL;
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    /* Room for the suffixes of the lock files and the temporary clone. */
    if (strlen(*dir) + 32 > PATH_MAX) {
        free(*dir);
        *dir = NULL;
        return rg_error_set(err, -ENAMETOOLONG, "upstream %s: repository path too long",
                            t->up->host);
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Locking
 * ------------------------------------------------------------------------- */

static int64_t mirror_now_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * flock(fd, op) with a deadline. Converting a held lock is not atomic in
 * Linux (the old lock is dropped, then the new one requested), so a
 * conversion that finds a waiter in between simply waits here like a new
 * request.
 */
static int mirror_lock(int fd, int op, const char *what, rg_error *err)
{
    int64_t deadline = mirror_now_ns(CLOCK_MONOTONIC) + (int64_t)MIRROR_LOCK_SECONDS * 1000000000;
    struct timespec pause = {0, 5 * 1000 * 1000};

    while (flock(fd, op | LOCK_NB) < 0) {
        int e = errno;

        if (e != EWOULDBLOCK && e != EINTR)
            return rg_error_set(err, -e, "mirror of %s: locking: %s", what, strerror(e));
        if (mirror_now_ns(CLOCK_MONOTONIC) > deadline)
            return rg_error_set(err, RG_E_UPSTREAM,
                                "mirror of %s: still being updated by another push after %d s",
                                what, MIRROR_LOCK_SECONDS);
        nanosleep(&pause, NULL);
        /* Back off to 100 ms: a waiter must not spin against a long fetch. */
        if (pause.tv_nsec < 100 * 1000 * 1000)
            pause.tv_nsec *= 2;
    }
    return 0;
}

/*
 * The lock file's content is the wall-clock start time (ns) of the last
 * fetch that succeeded. Only read and written under LOCK_EX.
 */
static int64_t mirror_stamp_read(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strtoll(buf, NULL, 10);
}

static void mirror_stamp_write(int fd, int64_t stamp)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%020lld\n", (long long)stamp);

    /* A failure only costs a redundant fetch next time. */
    if (pwrite(fd, buf, (size_t)n, 0) != n)
        return;
}

/* ---------------------------------------------------------------------------
 * The git child
 * ------------------------------------------------------------------------- */

/*
 * "Authorization: Basic base64(user:password)". The credential is handed to
 * git as http.extraHeader in the child's environment, never in argv (which
 * any local user can read in /proc) or the URL (which git may print and
 * stores in a clone's config). The environment of a process can be read by
 * the same user and root only, and this one lives for a single fetch; the
 * alternative, a credential helper reading from an inherited descriptor,
 * would need a descriptor without close-on-exec, which in a threaded server
 * leaks into every child spawned meanwhile. libcurl sends a custom
 * Authorization header to the first host only, and redirects are refused
 * anyway (http.followRedirects=false).
 */
static int mirror_auth_header(char **out, const tokens_credential *c)
{
    char *plain = NULL, *b64 = NULL;
    size_t plen, blen;
    int rc = -ENOMEM;

    *out = NULL;
    if (c == NULL || c->password == NULL)
        return 0;
    if (asprintf(&plain, "%s:%s", c->username ? c->username : "x-access-token", c->password) < 0)
        return -ENOMEM;
    plen = strlen(plain);
    blen = 4 * ((plen + 2) / 3) + 1;
    b64 = malloc(blen);
    if (b64 == NULL)
        goto done;
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)plain, (int)plen);
    if (asprintf(out, "Authorization: Basic %s", b64) < 0) {
        *out = NULL;
        goto done;
    }
    rc = 0;
done:
    explicit_bzero(plain, plen);
    free(plain);
    if (b64 != NULL) {
        explicit_bzero(b64, blen);
        free(b64);
    }
    return rc;
}

/*
 * The gateway's git environment (util/gitenv) with the settings a mirror
 * needs, passed as GIT_CONFIG_* so nothing is written to the mirror's
 * config; `auth`, when given, is the read credential.
 */
static int mirror_env_build(rg_gitenv **out, const upstream_target *t, const char *auth,
                            rg_error *err)
{
    char num[32];
    int rc;

    rc = rg_gitenv_new(out, NULL, err);
    if (rc < 0)
        return rc;
    snprintf(num, sizeof(num), "%ld",
             t->up->idle_timeout > 0 ? t->up->idle_timeout : (long)MIRROR_IDLE_SECONDS_DEFAULT);
    /* gc deletes packs that inspections may be reading: it runs only when
     * mirror_housekeeping says so, never automatically, never detached. */
    if ((rc = rg_gitenv_config(*out, "gc.autoDetach", "false", err)) < 0 ||
        (rc = rg_gitenv_config(*out, "maintenance.auto", "false", err)) < 0 ||
        /* A remote that redirects is misconfigured; following it would send
         * the fetch (not the header: libcurl drops it) somewhere unexpected. */
        (rc = rg_gitenv_config(*out, "http.followRedirects", "false", err)) < 0 ||
        (rc = rg_gitenv_config(*out, "http.lowSpeedLimit", "1", err)) < 0 ||
        (rc = rg_gitenv_config(*out, "http.lowSpeedTime", num, err)) < 0 ||
        (t->up->ca_file != NULL &&
         (rc = rg_gitenv_config(*out, "http.sslCAInfo", t->up->ca_file, err)) < 0) ||
        (auth != NULL && (rc = rg_gitenv_config(*out, "http.extraHeader", auth, err)) < 0)) {
        rg_gitenv_free(*out);
        *out = NULL;
        return rc;
    }
    return 0;
}

/*
 * Make a message safe to show the pusher: anything that could be the
 * credential is cut off. git does not print headers, but the message
 * reaches the pusher and must not become the way one leaks.
 */
static void mirror_redact(char *msg, size_t msgsz, const char *secret)
{
    char *hit;

    if ((hit = strcasestr(msg, "authorization")) != NULL ||
        (hit = strcasestr(msg, "basic ")) != NULL || (hit = strcasestr(msg, "bearer ")) != NULL ||
        (secret != NULL && *secret != '\0' && (hit = strstr(msg, secret)) != NULL))
        snprintf(hit, msgsz - (size_t)(hit - msg), "[redacted]");
}

/*
 * Run git to completion within MIRROR_FETCH_SECONDS. A nonzero exit is an
 * error naming what git said (see rg_proc_why), redacted.
 */
static int mirror_run_git(const char *const *argv, const rg_gitenv *env, const char *secret,
                          rg_error *err)
{
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    int rc;

    s.argv = argv;
    s.envp = rg_gitenv_envp(env);
    s.flags = RG_PROC_GROUP;
    rc = rg_proc_run(NULL, NULL, &s, rg_proc_deadline(MIRROR_FETCH_SECONDS), err);
    if (err != NULL)
        mirror_redact(err->msg, sizeof(err->msg), secret);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Clone and fetch
 * ------------------------------------------------------------------------- */

/* Clone or fetch, under LOCK_EX. */
static int mirror_update(const char *dir, const upstream_target *t, const char *what, rg_error *err)
{
    tokens_credential *cred = NULL;
    rg_gitenv *env = NULL;
    char *url = NULL, *auth = NULL, *tmp = NULL, gitdir[PATH_MAX + 16];
    struct stat st;
    int rc, fresh;

    if (asprintf(&url, "%s/%s.git", t->up->url, t->repo_path) < 0) {
        url = NULL;
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    fresh = stat(dir, &st) < 0;
    if (fresh && errno != ENOENT) {
        rc = rg_error_set(err, -errno, "%s: %s", dir, strerror(errno));
        goto done;
    }
    if (t->read != NULL) {
        rc = tokens_provider_acquire(&cred, t->read, t->repo_path, TOKENS_ACCESS_READ, 0, err);
        if (rc < 0) {
            rg_error_wrap(err, "mirror of %s: read credential", what);
            goto done;
        }
    }
    rc = mirror_auth_header(&auth, cred);
    if (rc < 0) {
        rc = rg_error_set(err, rc, "out of memory");
        goto done;
    }
    rc = mirror_env_build(&env, t, auth, err);
    if (rc < 0)
        goto done;
    if (fresh) {
        const char *argv[] = {"git", "clone", "--mirror", "--quiet", "--", url, NULL, NULL};

        /* mkdtemp makes it 0700; clone accepts an empty directory. */
        if (asprintf(&tmp, "%s.tmp-XXXXXX", dir) < 0) {
            tmp = NULL;
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
        if (mkdtemp(tmp) == NULL) {
            rc = rg_error_set(err, -errno, "mirror of %s: %s: %s", what, tmp, strerror(errno));
            free(tmp);
            tmp = NULL;
            goto done;
        }
        argv[6] = tmp;
        rc = mirror_run_git(argv, env, cred ? cred->password : NULL, err);
    } else {
        const char *argv[] = {"git",
                              gitdir,
                              "fetch",
                              "--quiet",
                              "--prune",
                              "--no-tags",
                              "--no-write-fetch-head",
                              "--no-auto-maintenance",
                              "--no-write-commit-graph",
                              "--",
                              url,
                              "+refs/*:refs/*",
                              NULL};

        snprintf(gitdir, sizeof(gitdir), "--git-dir=%s", dir);
        rc = mirror_run_git(argv, env, cred ? cred->password : NULL, err);
    }
    /* The credential is needed for this one transfer only. */
    tokens_provider_release(t->read, cred);
    cred = NULL;
    if (rc < 0) {
        rg_error_wrap(err, "mirror of %s", what);
        rc = RG_E_UPSTREAM;
        if (err != NULL)
            err->code = rc;
        goto done;
    }
    if (fresh && rename(tmp, dir) < 0) {
        rc = rg_error_set(err, -errno, "mirror of %s: %s: %s", what, dir, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (tmp != NULL) {
        /* A failed clone's leftovers; links in it are not followed. */
        if (rc < 0)
            rg_fs_remove_tree(tmp, 0, NULL);
        free(tmp);
    }
    tokens_provider_release(t->read, cred);
    rg_gitenv_free(env);
    if (auth != NULL) {
        explicit_bzero(auth, strlen(auth));
        free(auth);
    }
    free(url);
    return rc;
}

/*
 * git gc --auto (which does nothing until loose objects or packs pile up),
 * under the use lock held exclusively. Called with the update lock held,
 * so no other gc can run; it takes the use lock only when no inspection
 * holds it, and leaves it held (exclusive or not at all) for the caller to
 * turn into a shared one. A failure only postpones housekeeping.
 */
static void mirror_housekeeping(const char *dir, int use_fd, const upstream_target *t)
{
    char gitdir[PATH_MAX + 16];
    const char *argv[] = {"git", gitdir, "gc", "--auto", "--quiet", NULL};
    rg_gitenv *env = NULL;

    if (flock(use_fd, LOCK_EX | LOCK_NB) < 0)
        return;
    snprintf(gitdir, sizeof(gitdir), "--git-dir=%s", dir);
    if (mirror_env_build(&env, t, NULL, NULL) == 0)
        mirror_run_git(argv, env, NULL, NULL);
    rg_gitenv_free(env);
}

/* ---------------------------------------------------------------------------
 * Acquire and release
 * ------------------------------------------------------------------------- */

static int mirror_open_lock(int *fd, const char *dir, const char *suffix, rg_error *err)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s%s", dir, suffix);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*fd < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    return 0;
}

/* Whether the mirror holds every id (a failure to tell is a no). */
static int mirror_has_all(const char *dir, const char *const *ids, size_t n)
{
    int has = 0;

    return rgit_odb_has_all(&has, dir, ids, n, NULL) == 0 && has;
}

int upstream_mirror_acquire(upstream_mirror **out, const char *state_dir, const upstream_target *t,
                            const char *const *have, size_t n, rg_error *err)
{
    int64_t asked = mirror_now_ns(CLOCK_REALTIME), started, stamp;
    upstream_mirror *m = NULL;
    char *slash, what[700];
    int update_fd = -1, rc;
    struct stat st;

    *out = NULL;
    snprintf(what, sizeof(what), "%s/%s", t->up->host, t->repo_path ? t->repo_path : "");
    if (t->up->url == NULL || t->repo_path == NULL)
        return rg_error_set(err, -EINVAL, "mirror of %s: no upstream URL", what);
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    m->use_fd = -1;
    rc = mirror_paths(&m->dir, state_dir, t, err);
    if (rc < 0)
        goto done;

    /* Directories 0700: mirrors hold private repositories' contents. */
    slash = strrchr(m->dir, '/');
    *slash = '\0';
    rc = rg_fs_mkdir_p(m->dir, 0700, err);
    *slash = '/';
    if (rc < 0 || (rc = mirror_open_lock(&update_fd, m->dir, ".lock", err)) < 0 ||
        (rc = mirror_open_lock(&m->use_fd, m->dir, ".use", err)) < 0 ||
        (rc = mirror_lock(update_fd, LOCK_EX, what, err)) < 0)
        goto done;

    /*
     * A fetch that started after this acquire was asked for has seen at
     * least what this one would, so pushes that arrive together share it.
     * A stamp from the future (the clock went back) is not trusted.
     */
    stamp = mirror_stamp_read(update_fd);
    started = mirror_now_ns(CLOCK_REALTIME);
    m->fresh = stamp >= asked && stamp <= started && stat(m->dir, &st) == 0;
    if (!m->fresh && !(n > 0 && stat(m->dir, &st) == 0 && mirror_has_all(m->dir, have, n))) {
        rc = mirror_update(m->dir, t, what, err);
        if (rc < 0)
            goto done;
        mirror_stamp_write(update_fd, started);
        mirror_housekeeping(m->dir, m->use_fd, t);
        m->fresh = 1;
    }

    /*
     * Shared until release. Nobody else can hold it exclusively while this
     * acquire holds the update lock, so this does not wait; converting from
     * the exclusive lock housekeeping may have taken is not atomic, which
     * is harmless for the same reason.
     */
    rc = mirror_lock(m->use_fd, LOCK_SH, what, err);
    if (rc < 0)
        goto done;
    *out = m;
    m = NULL;
done:
    /* Closing the only descriptor of the open file drops its flock. */
    if (update_fd >= 0)
        close(update_fd);
    upstream_mirror_release(m);
    return rc;
}

int upstream_mirror_fresh(const upstream_mirror *m)
{
    return m->fresh;
}

int upstream_mirror_refresh(upstream_mirror *m, const upstream_target *t, rg_error *err)
{
    int64_t started = mirror_now_ns(CLOCK_REALTIME);
    char what[700];
    int update_fd = -1, rc;

    snprintf(what, sizeof(what), "%s/%s", t->up->host, t->repo_path ? t->repo_path : "");
    /* The update lock only: the shared use lock stays held, and a fetch
     * never disturbs readers (only housekeeping needs them gone). */
    rc = mirror_open_lock(&update_fd, m->dir, ".lock", err);
    if (rc == 0)
        rc = mirror_lock(update_fd, LOCK_EX, what, err);
    if (rc == 0)
        rc = mirror_update(m->dir, t, what, err);
    if (rc == 0) {
        mirror_stamp_write(update_fd, started);
        m->fresh = 1;
    }
    if (update_fd >= 0)
        close(update_fd);
    return rc;
}

const char *upstream_mirror_dir(const upstream_mirror *m)
{
    return m->dir;
}

void upstream_mirror_release(upstream_mirror *m)
{
    if (m == NULL)
        return;
    if (m->use_fd >= 0)
        close(m->use_fd);
    free(m->dir);
    free(m);
}
