/*
 * The file store of approvals (approvals.h): one JSON file per approval,
 * <dir>/<id>.json, its kept pack beside it as <dir>/<id>.pack, and an
 * exclusive flock on <dir>/lock held while open.
 *
 * Every approval is also kept in memory: the lock makes this process the
 * only writer, so the memory copy is the truth and lookups do not read the
 * disk. A change is written first (a temporary file fsynced and renamed
 * over the old one, then the directory fsynced; a removal is an unlink and
 * a directory fsync) and only then made in memory, so a failed write
 * changes nothing and a crash leaves the old or the new file, never a part.
 * Files that do not parse (a hand edit, a full disk before the rename
 * existed) are not loaded: an approval that cannot be read grants nothing.
 */
#include "approvals/store_ops.h"
#include "util/fs.h"
#include "util/text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest approval file read back; ours stay far below. */
#define FILE_MAX (64 * 1024)

#define ID_ALPHABET "abcdefghijklmnopqrstuvwxyz234567"

typedef struct approvals_file {
    approvals_store base; /* first: approvals_store * and approvals_file * convert */
    pthread_mutex_t mu;
    char *dir;
    int dir_fd;
    int lock_fd;
    int64_t expire;
    approvals_entry *items; /* live (or not yet swept) approvals, in creation order */
    size_t n, cap;
    uint64_t pack_total; /* of the kept packs */
} approvals_file;

/* What a kept pack is copied in. */
#define COPY_CHUNK (1u << 20)

/* ------------------------------------------------------------------------
 * Entries as files
 * ------------------------------------------------------------------------ */

/* A JSON string of `s`; bytes that are not UTF-8 become '?' rather than fail. */
static json_t *text_value(const char *s)
{
    json_t *v = json_string(s);
    char *copy;

    if (v != NULL)
        return v;
    copy = strdup(s);
    if (copy == NULL)
        return NULL;
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    v = json_string(copy);
    free(copy);
    return v;
}

static int entry_path(char *out, size_t size, const approvals_file *f, const char *id)
{
    if ((size_t)snprintf(out, size, "%s/%s.json", f->dir, id) >= size)
        return -ENAMETOOLONG;
    return 0;
}

static int pack_path(char *out, size_t size, const approvals_file *f, const char *id,
                     const char *suffix)
{
    if ((size_t)snprintf(out, size, "%s/%s.pack%s", f->dir, id, suffix) >= size)
        return -ENAMETOOLONG;
    return 0;
}

static int sync_dir(approvals_file *f, rg_error *err)
{
    if (fsync(f->dir_fd) < 0)
        return rg_error_set(err, -errno, "approvals %s: fsync: %s", f->dir, strerror(errno));
    return 0;
}

/* Write `e` to its file, durably. */
static int entry_write(approvals_file *f, const approvals_entry *e, rg_error *err)
{
    char path[PATH_MAX];
    json_t *obj;
    char *text = NULL;
    int rc = -ENOMEM;

    obj = json_object();
    if (obj == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    /* The key must round-trip exactly: a ref that is not UTF-8 cannot be stored. */
    if (json_object_set_new(obj, "id", json_string(e->id)) < 0 ||
        json_object_set_new(obj, "state", json_string(approvals_state_name(e->state))) < 0 ||
        json_object_set_new(obj, "repo", json_string(e->repo)) < 0 ||
        json_object_set_new(obj, "ref", json_string(e->ref)) < 0 ||
        json_object_set_new(obj, "old", json_string(e->old_id)) < 0 ||
        json_object_set_new(obj, "new", json_string(e->new_id)) < 0) {
        rc = rg_error_set(err, -EINVAL, "the repo or ref name is not UTF-8: it cannot be approved");
        goto done;
    }
    if (json_object_set_new(obj, "run", text_value(e->run)) < 0 ||
        json_object_set_new(obj, "rule", text_value(e->rule)) < 0 ||
        json_object_set_new(obj, "reason", text_value(e->reason)) < 0 ||
        json_object_set_new(obj, "by", text_value(e->by)) < 0 ||
        json_object_set_new(obj, "note", text_value(e->note)) < 0 ||
        json_object_set_new(obj, "created", json_integer(e->created)) < 0 ||
        json_object_set_new(obj, "decided", json_integer(e->decided)) < 0 ||
        json_object_set_new(obj, "expires", json_integer(e->expires)) < 0) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    text = json_dumps(obj, JSON_COMPACT);
    if (text == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if (entry_path(path, sizeof(path), f, e->id) < 0) {
        rc = rg_error_set(err, -ENAMETOOLONG, "approvals %s: path too long", f->dir);
        goto done;
    }
    rc = rg_fs_write_atomic(path, text, strlen(text), 0600, err);
    if (rc == 0)
        rc = sync_dir(f, err);
done:
    free(text);
    json_decref(obj);
    return rc;
}

/* Remove `id`'s file, durably. */
static int entry_unlink(approvals_file *f, const char *id, rg_error *err)
{
    char path[PATH_MAX];

    if (entry_path(path, sizeof(path), f, id) < 0)
        return rg_error_set(err, -ENAMETOOLONG, "approvals %s: path too long", f->dir);
    if (unlink(path) < 0 && errno != ENOENT)
        return rg_error_set(err, -errno, "approvals %s: %s", path, strerror(errno));
    return sync_dir(f, err);
}

static int state_parse(approvals_state *out, const char *s)
{
    if (s == NULL)
        return -1;
    if (!strcmp(s, "pending"))
        *out = APPROVALS_PENDING;
    else if (!strcmp(s, "approved"))
        *out = APPROVALS_APPROVED;
    else if (!strcmp(s, "denied"))
        *out = APPROVALS_DENIED;
    else
        return -1;
    return 0;
}

/* Read one approval file; -1 when it is not a well-formed approval named `id`. */
static int entry_read(approvals_entry *out, const char *path, const char *id)
{
    rg_buf buf = RG_BUF_INIT(FILE_MAX);
    json_error_t jerr;
    json_t *obj = NULL;
    const char *s;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (rg_fs_read_file(&buf, path, NULL) < 0)
        goto done;
    obj = json_loadb(buf.data, buf.len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(obj))
        goto done;
#define STR(key, field)                                                                            \
    do {                                                                                           \
        s = json_string_value(json_object_get(obj, key));                                          \
        if (s == NULL || strlen(s) >= sizeof(out->field))                                          \
            goto done;                                                                             \
        memcpy(out->field, s, strlen(s) + 1);                                                      \
    } while (0)
    STR("id", id);
    STR("repo", repo);
    STR("ref", ref);
    STR("old", old_id);
    STR("new", new_id);
    STR("run", run);
    STR("rule", rule);
    STR("reason", reason);
    STR("by", by);
    STR("note", note);
#undef STR
    if (strcmp(out->id, id) != 0 ||
        state_parse(&out->state, json_string_value(json_object_get(obj, "state"))) < 0 ||
        !json_is_integer(json_object_get(obj, "created")) ||
        !json_is_integer(json_object_get(obj, "decided")) ||
        !json_is_integer(json_object_get(obj, "expires")))
        goto done;
    out->created = json_integer_value(json_object_get(obj, "created"));
    out->decided = json_integer_value(json_object_get(obj, "decided"));
    out->expires = json_integer_value(json_object_get(obj, "expires"));
    rc = 0;
done:
    json_decref(obj);
    rg_buf_free(&buf);
    return rc;
}

/* ------------------------------------------------------------------------
 * The memory copy
 * ------------------------------------------------------------------------ */

static approvals_entry *find_id(approvals_file *f, const char *id)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->items[i].id, id))
            return &f->items[i];
    return NULL;
}

static int same_key(const approvals_entry *e, const approvals_key *k)
{
    return !strcmp(e->repo, k->repo) && !strcmp(e->ref, k->ref) && !strcmp(e->old_id, k->old_id) &&
           !strcmp(e->new_id, k->new_id);
}

/* Remove e's kept pack, if any, and give its bytes back. */
static void remove_pack(approvals_file *f, approvals_entry *e)
{
    char path[PATH_MAX];

    if (e->pack_bytes == 0)
        return;
    if (pack_path(path, sizeof(path), f, e->id, "") == 0)
        unlink(path);
    f->pack_total -= e->pack_bytes;
    if (f->base.released)
        f->base.released(f->base.released_arg, e->pack_bytes);
    e->pack_bytes = 0;
}

/* Drop item i from memory (its pack from the disk), keeping creation order. */
static void drop(approvals_file *f, approvals_entry *e)
{
    size_t i = (size_t)(e - f->items);

    remove_pack(f, e);
    memmove(&f->items[i], &f->items[i + 1], (f->n - i - 1) * sizeof(*f->items));
    f->n--;
}

/*
 * Remove what expired at `now`. From memory whatever happens: an expired
 * approval is never live again; a file whose unlink failed is expired
 * when it is loaded next, and removed then.
 */
static size_t sweep(approvals_file *f, int64_t now)
{
    size_t removed = 0;

    for (size_t i = f->n; i-- > 0;) {
        /* A claimed one goes when its push settles it or the claim lapses. */
        if (f->items[i].expires > now || f->items[i].claim_until > now)
            continue;
        entry_unlink(f, f->items[i].id, NULL);
        drop(f, &f->items[i]);
        removed++;
    }
    return removed;
}

static int grow(approvals_file *f)
{
    approvals_entry *items;
    size_t cap;

    if (f->n < f->cap)
        return 0;
    cap = f->cap ? f->cap * 2 : 16;
    items = realloc(f->items, cap * sizeof(*items));
    if (items == NULL)
        return -ENOMEM;
    f->items = items;
    f->cap = cap;
    return 0;
}

static int new_id(approvals_file *f, char out[APPROVALS_ID_LEN + 1], rg_error *err)
{
    unsigned char rnd[7]; /* 56 bits, of which the id keeps 50 */
    uint64_t bits;

    /* Bounded: a collision among at most APPROVALS_LIVE_MAX ids of 2^50 is rare. */
    for (int tries = 0; tries < 8; tries++) {
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
            return rg_error_set(err, -EIO, "no randomness for an approval id");
        bits = 0;
        for (size_t i = 0; i < sizeof(rnd); i++)
            bits = bits << 8 | rnd[i];
        for (int i = 0; i < APPROVALS_ID_LEN; i++, bits >>= 5)
            out[i] = ID_ALPHABET[bits & 31];
        out[APPROVALS_ID_LEN] = '\0';
        if (find_id(f, out) == NULL)
            return 0;
    }
    return rg_error_set(err, -EIO, "no unused approval id found");
}

/* ------------------------------------------------------------------------
 * Ops
 * ------------------------------------------------------------------------ */

static int file_ask(approvals_store *s, approvals_entry *out, int *created,
                    const approvals_key *key, const approvals_ask_info *info, int64_t now,
                    rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    approvals_entry e = {0};
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    sweep(f, now);
    for (size_t i = 0; i < f->n; i++) {
        /* Expired but claimed, it waits for its push and is live no more. */
        if (same_key(&f->items[i], key) && f->items[i].expires > now) {
            *out = f->items[i];
            goto done;
        }
    }
    if (f->n >= APPROVALS_LIVE_MAX) {
        rc = rg_error_set(err, -ENOSPC,
                          "%d approvals are waiting already: decide or let some expire first",
                          APPROVALS_LIVE_MAX);
        goto done;
    }
    if ((rc = new_id(f, e.id, err)) < 0)
        goto done;
    e.state = APPROVALS_PENDING;
    approvals_text_copy(e.repo, sizeof(e.repo), key->repo);
    approvals_text_copy(e.ref, sizeof(e.ref), key->ref);
    approvals_text_copy(e.old_id, sizeof(e.old_id), key->old_id);
    approvals_text_copy(e.new_id, sizeof(e.new_id), key->new_id);
    approvals_text_copy(e.run, sizeof(e.run), info->run);
    approvals_text_copy(e.rule, sizeof(e.rule), info->rule);
    approvals_text_copy(e.reason, sizeof(e.reason), info->reason);
    e.created = now;
    e.expires = now + f->expire;
    if (grow(f) < 0) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = entry_write(f, &e, err)) < 0)
        goto done;
    f->items[f->n++] = e;
    *out = e;
    if (created)
        *created = 1;
done:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* The live approval `id`, under the lock; NULL with err set when there is none. */
static approvals_entry *live(approvals_file *f, const char *id, int64_t now, rg_error *err)
{
    approvals_entry *e = find_id(f, id);

    if (e != NULL && e->expires <= now) {
        rg_error_set(err, -ETIME, "approval %s expired", id);
        /* A claimed one stays for its push to settle (sweep). */
        if (e->claim_until <= now) {
            entry_unlink(f, id, NULL);
            drop(f, e);
        }
        return NULL;
    }
    if (e == NULL)
        rg_error_set(err, -ENOENT, "no approval %s: unknown, already used, or expired", id);
    return e;
}

static int file_get(approvals_store *s, approvals_entry *out, const char *id, int64_t now,
                    rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    approvals_entry *e;
    rg_error e2 = RG_ERROR_INIT;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    e = live(f, id, now, &e2);
    if (e != NULL)
        *out = *e;
    else
        rc = rg_error_set(err, e2.code, "%s", e2.msg);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int file_list(approvals_store *s, approvals_entry **out, size_t *n, int64_t now,
                     rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    sweep(f, now);
    if (f->n > 0) {
        *out = malloc(f->n * sizeof(**out));
        if (*out == NULL) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
        memcpy(*out, f->items, f->n * sizeof(**out));
        *n = f->n;
    }
done:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int file_decide(approvals_store *s, approvals_entry *out, const char *id, int deny,
                       const char *by, const char *note, int64_t now, rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    approvals_entry *e, next;
    rg_error e2 = RG_ERROR_INIT;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    e = live(f, id, now, &e2);
    if (e == NULL) {
        rc = rg_error_set(err, e2.code, "%s", e2.msg);
        goto done;
    }
    /* Approving is for pending ones; denying also revokes an approval. */
    if (e->state == APPROVALS_DENIED || (!deny && e->state == APPROVALS_APPROVED)) {
        rc = rg_error_set(err, -EALREADY, "approval %s is already %s by %s", id,
                          approvals_state_name(e->state), e->by[0] ? e->by : "someone");
        goto done;
    }
    next = *e;
    next.state = deny ? APPROVALS_DENIED : APPROVALS_APPROVED;
    approvals_text_copy(next.by, sizeof(next.by), by);
    approvals_text_copy(next.note, sizeof(next.note), deny ? note : NULL);
    next.decided = now;
    next.expires = now + f->expire;
    if ((rc = entry_write(f, &next, err)) < 0)
        goto done;
    *e = next;
    /* Nobody needs to see what a denied push would have landed. */
    if (deny)
        remove_pack(f, e);
    if (out)
        *out = *e;
done:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/*
 * Claims live in memory only: the lock makes this process the only user
 * of the store, and a restart ends every push that could hold one.
 */
static int file_claim(approvals_store *s, approvals_entry *out, const char *id,
                      const approvals_key *key, const char *holder, int64_t now, rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    approvals_entry *e;
    rg_error e2 = RG_ERROR_INIT;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    e = live(f, id, now, &e2);
    if (e == NULL) {
        rc = rg_error_set(err, e2.code, "%s", e2.msg);
        goto done;
    }
    if (e->state != APPROVALS_APPROVED || !same_key(e, key)) {
        rc = rg_error_set(err, -ENOENT, "approval %s is not an approval of this update", id);
        goto done;
    }
    if (e->claim[0] && strcmp(e->claim, holder) != 0 && e->claim_until > now) {
        rc = rg_error_set(err, -EBUSY, "approval %s is being used by another push", id);
        goto done;
    }
    approvals_text_copy(e->claim, sizeof(e->claim), holder);
    e->claim_until = now + APPROVALS_CLAIM_SECONDS;
    *out = *e;
done:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int file_unclaim(approvals_store *s, const char *id, const char *holder, rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    approvals_entry *e;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    e = find_id(f, id);
    if (e == NULL || strcmp(e->claim, holder) != 0) {
        rc = rg_error_set(err, -ENOENT, "approval %s is not claimed by this push", id);
    } else {
        e->claim[0] = '\0';
        e->claim_until = 0;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* The claim is what counts, not the expiry: a claimed approval may expire while its push forwards.
 */
static int file_consume(approvals_store *s, const char *id, const approvals_key *key,
                        const char *holder, int64_t now, rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    approvals_entry *e;
    int rc = 0;

    (void)now;
    pthread_mutex_lock(&f->mu);
    e = find_id(f, id);
    if (e == NULL || e->state != APPROVALS_APPROVED || !same_key(e, key) ||
        strcmp(e->claim, holder) != 0) {
        rc = rg_error_set(err, -ENOENT, "approval %s is not claimed for this update by this push",
                          id);
        goto done;
    }
    if ((rc = entry_unlink(f, id, err)) < 0)
        goto done;
    drop(f, e);
done:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int file_expire(approvals_store *s, size_t *removed, int64_t now, rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    size_t n;

    (void)err;
    pthread_mutex_lock(&f->mu);
    n = sweep(f, now);
    pthread_mutex_unlock(&f->mu);
    if (removed)
        *removed = n;
    return 0;
}

/* Copy len bytes of fd (from offset 0) to a new file at `path`, durably. */
static int copy_to(const char *path, int fd, uint64_t len, rg_error *err)
{
    char *chunk = malloc(COPY_CHUNK);
    uint64_t off = 0;
    int out = -1, rc = 0;
    ssize_t n;

    if (chunk == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (out < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    /* Bounded: len bytes, each round at least one or the end. */
    while (off < len) {
        n = pread(fd, chunk, len - off < COPY_CHUNK ? (size_t)(len - off) : COPY_CHUNK, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = rg_error_set(err, n < 0 ? -errno : -EIO, "reading the pack to keep: %s",
                              n < 0 ? strerror(errno) : "it ended early");
            goto done;
        }
        if ((rc = rg_fs_write_all(out, chunk, (size_t)n)) < 0) {
            rg_error_set(err, rc, "%s: %s", path, strerror(-rc));
            goto done;
        }
        off += (uint64_t)n;
    }
    if (fsync(out) < 0)
        rc = rg_error_set(err, -errno, "%s: fsync: %s", path, strerror(errno));
done:
    if (out >= 0)
        close(out);
    if (rc < 0)
        unlink(path);
    free(chunk);
    return rc;
}

/* The live pending approval `id` without a pack yet, under the lock; 0 or an error. */
static int packless_pending(approvals_entry **out, approvals_file *f, const char *id, int64_t now,
                            rg_error *err)
{
    rg_error e2 = RG_ERROR_INIT;

    *out = live(f, id, now, &e2);
    if (*out == NULL)
        return rg_error_set(err, e2.code, "%s", e2.msg);
    if ((*out)->state != APPROVALS_PENDING)
        return rg_error_set(err, -ENOENT, "approval %s is not pending", id);
    if ((*out)->pack_bytes != 0)
        return rg_error_set(err, -EEXIST, "approval %s has a kept pack already", id);
    return 0;
}

/*
 * The copy is made outside the lock (a pack may be large and other pushes
 * ask meanwhile), then renamed into place under it if the approval is
 * still pending and packless.
 */
static int file_keep_pack(approvals_store *s, const char *id, int fd, uint64_t len, int64_t now,
                          rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    char tmp[PATH_MAX], path[PATH_MAX];
    approvals_entry *e;
    int rc = 0;

    if (pack_path(tmp, sizeof(tmp), f, id, ".tmp") < 0 ||
        pack_path(path, sizeof(path), f, id, "") < 0)
        return rg_error_set(err, -ENAMETOOLONG, "approvals %s: path too long", f->dir);
    if (len == 0)
        return rg_error_set(err, -EINVAL, "no pack to keep");
    pthread_mutex_lock(&f->mu);
    rc = packless_pending(&e, f, id, now, err);
    pthread_mutex_unlock(&f->mu);
    if (rc < 0 || (rc = copy_to(tmp, fd, len, err)) < 0)
        return rc;
    pthread_mutex_lock(&f->mu);
    if ((rc = packless_pending(&e, f, id, now, err)) < 0) {
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if ((rc = sync_dir(f, err)) < 0) {
        unlink(path);
        goto done;
    }
    e->pack_bytes = len;
    f->pack_total += len;
done:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int file_open_pack(int *fd_out, approvals_store *s, const char *id, int64_t now,
                          rg_error *err)
{
    approvals_file *f = (approvals_file *)s;
    char path[PATH_MAX];
    approvals_entry *e;
    rg_error e2 = RG_ERROR_INIT;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    e = live(f, id, now, &e2);
    if (e == NULL)
        rc = rg_error_set(err, e2.code, "%s", e2.msg);
    else if (e->pack_bytes == 0)
        rc = rg_error_set(err, -ENOENT, "approval %s has no kept pack", id);
    else if (pack_path(path, sizeof(path), f, id, "") < 0)
        rc = rg_error_set(err, -ENAMETOOLONG, "approvals %s: path too long", f->dir);
    else if ((*fd_out = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static uint64_t file_pack_total(approvals_store *s)
{
    approvals_file *f = (approvals_file *)s;
    uint64_t total;

    pthread_mutex_lock(&f->mu);
    total = f->pack_total;
    pthread_mutex_unlock(&f->mu);
    return total;
}

static void file_close(approvals_store *s)
{
    approvals_file *f = (approvals_file *)s;

    if (f->dir_fd >= 0)
        close(f->dir_fd);
    if (f->lock_fd >= 0)
        close(f->lock_fd); /* releases the flock */
    pthread_mutex_destroy(&f->mu);
    free(f->items);
    free(f->dir);
    free(f);
}

static const approvals_store_ops file_ops = {
    .ask = file_ask,
    .get = file_get,
    .list = file_list,
    .decide = file_decide,
    .claim = file_claim,
    .unclaim = file_unclaim,
    .consume = file_consume,
    .expire = file_expire,
    .keep_pack = file_keep_pack,
    .open_pack = file_open_pack,
    .pack_total = file_pack_total,
    .packs_local = 1,
    .close = file_close,
};

/* ------------------------------------------------------------------------
 * Opening
 * ------------------------------------------------------------------------ */

/*
 * Give each loaded approval its kept pack; remove packs whose approval is
 * gone or denied (a crash between the removal or denial of an approval and
 * the removal of its pack).
 */
static int attach_packs(approvals_file *f, rg_error *err)
{
    DIR *d = opendir(f->dir);
    struct dirent *de;
    char path[PATH_MAX], id[APPROVALS_ID_LEN + 1];
    approvals_entry *e;
    struct stat st;

    if (d == NULL)
        return rg_error_set(err, -errno, "approvals %s: %s", f->dir, strerror(errno));
    /* Bounded: the directory's entries. */
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;

        if (strlen(name) != APPROVALS_ID_LEN + 5 || strcmp(name + APPROVALS_ID_LEN, ".pack") != 0)
            continue;
        memcpy(id, name, APPROVALS_ID_LEN);
        id[APPROVALS_ID_LEN] = '\0';
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", f->dir, name) >= sizeof(path))
            continue;
        e = approvals_id_ok(id) ? find_id(f, id) : NULL;
        if (e == NULL || e->state == APPROVALS_DENIED || lstat(path, &st) < 0 ||
            !S_ISREG(st.st_mode) || st.st_size == 0) {
            unlink(path);
            continue;
        }
        e->pack_bytes = (uint64_t)st.st_size;
        f->pack_total += e->pack_bytes;
    }
    closedir(d);
    return 0;
}

/* Load every <id>.json; remove temporaries a crash left before their rename. */
static int load_all(approvals_file *f, rg_error *err)
{
    DIR *d = opendir(f->dir);
    struct dirent *de;
    char path[PATH_MAX], id[APPROVALS_ID_LEN + 1];
    approvals_entry e;
    int rc = 0;

    if (d == NULL)
        return rg_error_set(err, -errno, "approvals %s: %s", f->dir, strerror(errno));
    /* Bounded: the directory's entries; at most APPROVALS_LIVE_MAX are loaded. */
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        size_t len = strlen(name);

        if ((size_t)snprintf(path, sizeof(path), "%s/%s", f->dir, name) >= sizeof(path))
            continue;
        if (strstr(name, ".json.tmp.") != NULL ||
            (len > 9 && !strcmp(name + len - 9, ".pack.tmp"))) {
            unlink(path);
            continue;
        }
        if (len != APPROVALS_ID_LEN + 5 || strcmp(name + APPROVALS_ID_LEN, ".json") != 0)
            continue;
        memcpy(id, name, APPROVALS_ID_LEN);
        id[APPROVALS_ID_LEN] = '\0';
        if (!approvals_id_ok(id) || f->n >= APPROVALS_LIVE_MAX || entry_read(&e, path, id) < 0)
            continue;
        if (grow(f) < 0) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        f->items[f->n++] = e;
    }
    closedir(d);
    return rc < 0 ? rc : attach_packs(f, err);
}

static int by_created(const void *a, const void *b)
{
    const approvals_entry *x = a, *y = b;

    if (x->created != y->created)
        return x->created < y->created ? -1 : 1;
    return strcmp(x->id, y->id);
}

int approvals_file_open(approvals_store **out, const char *dir, int64_t expire_seconds,
                        rg_error *err)
{
    approvals_file *f;
    char path[PATH_MAX];
    int rc;

    *out = NULL;
    if (expire_seconds <= 0)
        return rg_error_set(err, -EINVAL, "approvals expire after a positive number of seconds");
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    f->base.ops = &file_ops;
    f->dir_fd = f->lock_fd = -1;
    f->expire = expire_seconds;
    pthread_mutex_init(&f->mu, NULL);
    f->dir = strdup(dir);
    if (f->dir == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = rg_fs_mkdir_p(dir, 0700, err)) < 0)
        goto done;
    f->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->dir_fd < 0) {
        rc = rg_error_set(err, -errno, "approvals %s: %s", dir, strerror(errno));
        goto done;
    }
    if ((size_t)snprintf(path, sizeof(path), "%s/lock", dir) >= sizeof(path)) {
        rc = rg_error_set(err, -ENAMETOOLONG, "approvals %s: path too long", dir);
        goto done;
    }
    f->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (f->lock_fd < 0) {
        rc = rg_error_set(err, -errno, "approvals %s: %s", path, strerror(errno));
        goto done;
    }
    if (flock(f->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK
                 ? rg_error_set(err, -EBUSY, "approvals %s: in use by another gateway", dir)
                 : rg_error_set(err, -errno, "approvals %s: flock: %s", path, strerror(errno));
        goto done;
    }
    if ((rc = load_all(f, err)) < 0)
        goto done;
    if (f->n > 1)
        qsort(f->items, f->n, sizeof(*f->items), by_created);
done:
    if (rc < 0) {
        file_close(&f->base);
        return rc;
    }
    *out = &f->base;
    return 0;
}
