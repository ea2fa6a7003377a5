/*
 * The file store: `<state_dir>/audit.jsonl`, one line per record.
 *
 * Appends take one write(2) and one fsync(2) per batch under a mutex, on an
 * O_APPEND descriptor that also holds an exclusive flock, so a batch is on
 * disk before the caller goes on and no second writer can fork the chain.
 * A crash can still leave a torn last line: the next open terminates it,
 * keeps it (verify points at it) and chains on from its bytes.
 *
 * Everything that must not grow with the log (opening, the head, finding
 * pending decisions at start) reads the file backwards from its end with
 * one buffer of AUDIT_LINE_MAX plus a block.
 */
#include "audit/store_ops.h"
#include "util/fs.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define SCAN_CHUNK 65536

/* Free space audit_ready wants beyond the records themselves. */
#define AUDIT_READY_MARGIN (1024 * 1024)

typedef struct audit_file {
    audit_log base; /* first: audit_log * and audit_file * convert */
    pthread_mutex_t mu;
    int fd;
    char *path;
    uint64_t seq;                       /* of the last record; 0 when there is none */
    char prev[AUDIT_HASH_HEX + 1];      /* hex SHA-256 of the last line */
    char head_hash[AUDIT_HASH_HEX + 1]; /* hex SHA-256 of the line with `seq` */
    int stale;                          /* a write failed: re-read the tail before appending */
} audit_file;

/* ------------------------------------------------------------------------
 * Reading lines backwards
 * ------------------------------------------------------------------------ */

static ssize_t pread_full(int fd, void *buf, size_t len, off_t off)
{
    size_t got = 0;
    ssize_t n;

    while (got < len) {
        n = pread(fd, (char *)buf + got, len - got, off + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

typedef struct back_reader {
    int fd;
    off_t pos;      /* file offset of data[0] */
    off_t end;      /* data holds the bytes [pos, end) */
    off_t line_end; /* the next line ends here (its newline not included) */
    char *data;
    int dropped;  /* bytes of the current line were dropped: it is too long */
    int at_start; /* the line starting at offset 0 was handed out */
} back_reader;

typedef struct back_line {
    const char *data; /* NULL when too long */
    size_t len;
    off_t start, end;
} back_line;

static int back_open(back_reader *br, int fd, off_t end)
{
    memset(br, 0, sizeof(*br));
    br->fd = fd;
    br->pos = end;
    br->end = end;
    br->line_end = end;
    br->data = malloc(AUDIT_LINE_MAX + SCAN_CHUNK);
    return br->data ? 0 : -ENOMEM;
}

static void back_close(back_reader *br)
{
    free(br->data);
    br->data = NULL;
}

/* The line before the last one handed out: 1, 0 at the start of the file, or negative. */
static int back_next(back_reader *br, back_line *out)
{
    size_t have, n;
    ssize_t got;
    char *nl;

    if (br->at_start)
        return 0;
    /* Bounded: each round reads one more block towards offset 0. */
    for (;;) {
        have = (size_t)(br->end - br->pos);
        nl = have ? memrchr(br->data, '\n', have) : NULL;
        if (nl != NULL || br->pos == 0) {
            out->start = nl ? br->pos + (nl - br->data) + 1 : 0;
            out->end = br->line_end;
            out->data = br->dropped ? NULL : br->data + (out->start - br->pos);
            out->len = (size_t)(out->end - out->start);
            br->dropped = 0;
            if (nl == NULL)
                br->at_start = 1;
            else
                br->end = br->line_end = out->start - 1;
            return 1;
        }
        if (have > AUDIT_LINE_MAX) {
            /* Too long to be a record: keep looking for its start only. */
            br->dropped = 1;
            br->end = br->pos;
            have = 0;
        }
        n = br->pos < SCAN_CHUNK ? (size_t)br->pos : SCAN_CHUNK;
        memmove(br->data + n, br->data, have);
        got = pread_full(br->fd, br->data, n, br->pos - (off_t)n);
        if (got < 0)
            return (int)got;
        if ((size_t)got != n)
            return -EIO;
        br->pos -= (off_t)n;
    }
}

/* Hash the bytes [start, end) of the file, streaming. */
static int hash_range(char out[AUDIT_HASH_HEX + 1], int fd, off_t start, off_t end)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char buf[SCAN_CHUNK];
    EVP_MD_CTX *ctx;
    ssize_t got;
    size_t n;
    int rc = 0;

    ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        rc = -ENOMEM;
        goto done;
    }
    while (start < end) {
        n = end - start < (off_t)sizeof(buf) ? (size_t)(end - start) : sizeof(buf);
        got = pread_full(fd, buf, n, start);
        if (got < 0 || (size_t)got != n) {
            rc = got < 0 ? (int)got : -EIO;
            goto done;
        }
        if (EVP_DigestUpdate(ctx, buf, n) != 1) {
            rc = -EIO;
            goto done;
        }
        start += (off_t)n;
    }
    if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != AUDIT_HASH_LEN) {
        rc = -EIO;
        goto done;
    }
    rg_hex_encode(out, md, AUDIT_HASH_LEN);
done:
    EVP_MD_CTX_free(ctx);
    return rc;
}

static int line_hash(char out[AUDIT_HASH_HEX + 1], int fd, const back_line *l)
{
    if (l->data != NULL)
        return audit_sha256_hex(out, l->data, l->len);
    return hash_range(out, fd, l->start, l->end);
}

/* The parsed object of a line, or NULL when it is no JSON object. */
static json_t *line_json(const back_line *l)
{
    json_t *root;

    if (l->data == NULL || l->len == 0)
        return NULL;
    root = json_loadb(l->data, l->len, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static uint64_t json_seq(const json_t *root)
{
    json_t *v = json_object_get(root, "seq");

    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/*
 * Where the chain stands in the file's bytes [0, end), reading back from
 * `end` (which must be where a line's content ends): the hash of the last
 * line into `last_hash` (may be NULL), and the seq of the last line that
 * has one with that line's hash (0 and zeros when none has).
 */
static int tail_scan(uint64_t *seq, char seq_hash[AUDIT_HASH_HEX + 1],
                     char last_hash[AUDIT_HASH_HEX + 1], int fd, off_t end)
{
    back_reader br;
    back_line l;
    json_t *root;
    int rc, first = 1;

    *seq = 0;
    memcpy(seq_hash, AUDIT_ZERO_HASH, AUDIT_HASH_HEX + 1);
    if (last_hash != NULL)
        memcpy(last_hash, AUDIT_ZERO_HASH, AUDIT_HASH_HEX + 1);
    rc = back_open(&br, fd, end);
    /* Walk back past torn or corrupt lines to the last record with a seq. */
    while (rc == 0 && (rc = back_next(&br, &l)) == 1) {
        rc = 0;
        if (first && last_hash != NULL && (rc = line_hash(last_hash, fd, &l)) < 0)
            break;
        first = 0;
        root = line_json(&l);
        *seq = json_seq(root);
        json_decref(root);
        if (*seq > 0) {
            rc = line_hash(seq_hash, fd, &l);
            break;
        }
    }
    back_close(&br);
    return rc < 0 ? rc : 0;
}

/*
 * Read the chain's state from the end of the file. A last line without a
 * newline (a torn append) is terminated here and kept, so the next record
 * chains on from its bytes and verify still names it.
 */
static int tail_load(audit_file *f, rg_error *err)
{
    struct stat st;
    off_t size, end;
    char last;
    int rc;

    if (fstat(f->fd, &st) < 0)
        return rg_error_set(err, -errno, "%s: %s", f->path, strerror(errno));
    size = st.st_size;
    if (size == 0) {
        f->seq = 0;
        memcpy(f->prev, AUDIT_ZERO_HASH, sizeof(f->prev));
        memcpy(f->head_hash, AUDIT_ZERO_HASH, sizeof(f->head_hash));
        f->stale = 0;
        return 0;
    }
    if (pread_full(f->fd, &last, 1, size - 1) != 1)
        return rg_error_set(err, -EIO, "%s: cannot read its last byte", f->path);
    end = last == '\n' ? size - 1 : size;
    if (last != '\n') {
        rc = rg_fs_write_all(f->fd, "\n", 1);
        if (rc == 0 && fsync(f->fd) < 0)
            rc = -errno;
        if (rc < 0)
            return rg_error_set(err, rc, "%s: terminating a torn last line: %s", f->path,
                                strerror(-rc));
    }
    rc = tail_scan(&f->seq, f->head_hash, f->prev, f->fd, end);
    if (rc < 0)
        return rg_error_set(err, rc, "%s: reading its tail: %s", f->path, strerror(-rc));
    f->stale = 0;
    return 0;
}

int audit_file_read_head(uint64_t *seq, char hash_hex[AUDIT_HASH_HEX + 1], const char *path,
                         rg_error *err)
{
    struct stat st;
    back_reader br;
    back_line l;
    off_t end = -1;
    char last;
    int fd, rc = 0;

    *seq = 0;
    memcpy(hash_hex, AUDIT_ZERO_HASH, AUDIT_HASH_HEX + 1);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    /* An unterminated last line is an append in progress (or torn): the
     * head ends at the last newline. */
    if (st.st_size > 0) {
        rc = pread_full(fd, &last, 1, st.st_size - 1) == 1 ? 0 : -EIO;
        if (rc == 0 && last == '\n') {
            end = st.st_size - 1;
        } else if (rc == 0) {
            rc = back_open(&br, fd, st.st_size);
            if (rc == 0 && (rc = back_next(&br, &l)) == 1) {
                rc = 0;
                end = l.start > 0 ? l.start - 1 : -1;
            }
            back_close(&br);
        }
        if (rc < 0) {
            rc = rg_error_set(err, rc, "%s: %s", path, strerror(-rc));
            goto done;
        }
    }
    if (end >= 0 && (rc = tail_scan(seq, hash_hex, NULL, fd, end)) < 0)
        rc = rg_error_set(err, rc, "%s: reading its tail: %s", path, strerror(-rc));
done:
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------------
 * Appending
 * ------------------------------------------------------------------------ */

static int append_locked(audit_file *f, const audit_record *recs, size_t n, uint64_t *first_seq,
                         rg_error *err)
{
    char now[AUDIT_TIME_LEN], prev[AUDIT_HASH_HEX + 1];
    size_t i, cap = 0, sz;
    uint64_t seq;
    rg_buf out;
    int rc = 0;

    for (i = 0; i < n; i++) {
        sz = audit_record_size_max(&recs[i]);
        cap = cap > SIZE_MAX - sz ? SIZE_MAX : cap + sz;
    }
    rg_buf_init(&out, cap);
    if (f->stale) {
        rc = tail_load(f, err);
        if (rc < 0)
            goto done;
    }
    /* Time, seq and prev are taken under the lock so they agree with file order. */
    audit_time_now(now);
    seq = f->seq;
    memcpy(prev, f->prev, sizeof(prev));
    for (i = 0; i < n; i++) {
        rc = audit_record_check(&recs[i], ++seq, err);
        if (rc < 0) {
            rg_error_wrap(err, "%s: record %zu", f->path, i + 1);
            goto done;
        }
        rc = audit_record_line(&out, &recs[i], now, seq, prev);
        if (rc < 0) {
            rg_error_set(err, rc, "%s: cannot write record %zu: %s", f->path, i + 1,
                         rc == RG_E_TOO_BIG ? "too large" : strerror(-rc));
            goto done;
        }
    }
    rc = rg_fs_write_all(f->fd, out.data, out.len);
    if (rc == 0 && fsync(f->fd) < 0)
        rc = -errno;
    if (rc < 0) {
        /* Part of the batch may be in the file: learn the tail again next time. */
        f->stale = 1;
        rg_error_set(err, rc, "%s: %s", f->path, strerror(-rc));
        goto done;
    }
    if (first_seq != NULL)
        *first_seq = f->seq + 1;
    f->seq = seq;
    memcpy(f->prev, prev, sizeof(prev));
    memcpy(f->head_hash, prev, sizeof(prev));
done:
    rg_buf_free(&out);
    return rc;
}

static int file_append_many(audit_log *log, const audit_record *recs, size_t n, uint64_t *first_seq,
                            rg_error *err)
{
    audit_file *f = (audit_file *)log;
    int rc;

    pthread_mutex_lock(&f->mu);
    rc = append_locked(f, recs, n, first_seq, err);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int file_ready(audit_log *log, size_t nbytes, rg_error *err)
{
    audit_file *f = (audit_file *)log;
    unsigned long long need, avail;
    struct statvfs vfs;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    if (f->stale && (rc = tail_load(f, err)) < 0)
        goto done;
    if (fstatvfs(f->fd, &vfs) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", f->path, strerror(errno));
        goto done;
    }
    /* Room for the records at their largest, and a margin for everything
     * else writing to the same filesystem meanwhile. */
    need = (unsigned long long)nbytes + AUDIT_READY_MARGIN;
    avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    if (avail < need)
        rc = rg_error_set(err, -ENOSPC, "%s: only %llu bytes free, %llu needed", f->path, avail,
                          need);
done:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int file_head(audit_log *log, uint64_t *seq, char hash_hex[AUDIT_HASH_HEX + 1],
                     rg_error *err)
{
    audit_file *f = (audit_file *)log;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    if (f->stale)
        rc = tail_load(f, err);
    if (rc == 0) {
        *seq = f->seq;
        memcpy(hash_hex, f->head_hash, AUDIT_HASH_HEX + 1);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* ------------------------------------------------------------------------
 * Completing pending decisions
 * ------------------------------------------------------------------------ */

/* A set of seqs: open addressing, 0 empty, UINT64_MAX deleted. */
typedef struct seq_set {
    uint64_t *slot;
    size_t cap, used; /* used counts deleted slots too, until a rehash */
} seq_set;

#define SEQ_DELETED UINT64_MAX

static size_t seq_slot(const seq_set *s, uint64_t seq)
{
    return (size_t)((seq * 0x9e3779b97f4a7c15ull) >> 7) & (s->cap - 1);
}

static int seq_set_add(seq_set *s, uint64_t seq)
{
    size_t i, old_cap = s->cap;
    uint64_t *old = s->slot;

    if ((s->used + 1) * 2 > s->cap) {
        s->cap = old_cap ? old_cap * 2 : 64;
        s->slot = calloc(s->cap, sizeof(*s->slot));
        if (s->slot == NULL) {
            s->slot = old;
            s->cap = old_cap;
            return -ENOMEM;
        }
        s->used = 0;
        for (i = 0; i < old_cap; i++)
            if (old[i] != 0 && old[i] != SEQ_DELETED)
                seq_set_add(s, old[i]);
        free(old);
    }
    for (i = seq_slot(s, seq); s->slot[i] != 0; i = (i + 1) & (s->cap - 1))
        if (s->slot[i] == seq)
            return 0;
    s->slot[i] = seq;
    s->used++;
    return 0;
}

/* Remove seq; 1 when it was there. */
static int seq_set_take(seq_set *s, uint64_t seq)
{
    size_t i;

    if (s->cap == 0)
        return 0;
    for (i = seq_slot(s, seq); s->slot[i] != 0; i = (i + 1) & (s->cap - 1))
        if (s->slot[i] == seq) {
            s->slot[i] = SEQ_DELETED;
            return 1;
        }
    return 0;
}

typedef struct pending {
    uint64_t seq;
    char *push_id, *repo, *ref;
} pending;

static char *dup_field(const json_t *root, const char *key)
{
    const char *v = json_string_value(json_object_get(root, key));

    return v ? strdup(v) : NULL;
}

/* What find_pending needs of a line. */
typedef struct line_facts {
    int kind, version;
    uint64_t seq;
    uint64_t decision_seq; /* outcome records */
    int pending;           /* a decision with "outcome": null */
    int stop;              /* everything before this line is complete */
} line_facts;

/* Digits at p (before end) into *out; the first byte after them, or NULL. */
static const char *read_u64(uint64_t *out, const char *p, const char *end)
{
    const char *start = p;
    uint64_t v = 0;

    while (p < end && *p >= '0' && *p <= '9' && p - start < 19)
        v = v * 10 + (uint64_t)(*p++ - '0');
    if (p == start || (p < end && *p >= '0' && *p <= '9'))
        return NULL;
    *out = v;
    return p;
}

#define LIT(s) s, sizeof(s) - 1

/*
 * The facts of a line laid out as record.c writes decisions and outcomes,
 * read without parsing it: after a crash the scan passes every line since
 * the last start, and a JSON parse per line made that the cost of a start.
 * Keys are found by `,"name":` — inside a JSON string a quote is always
 * escaped, so that cannot occur within a value. 0 when the line is laid
 * out otherwise (events, v1, lines written by other tools): parse it.
 */
static int quick_facts(line_facts *out, const back_line *l)
{
    const char *p, *end;
    size_t n;

    if (l->data == NULL || l->len < 16 || memcmp(l->data, LIT("{\"v\":2,\"seq\":")) != 0)
        return 0;
    end = l->data + l->len;
    p = read_u64(&out->seq, l->data + 13, end);
    if (p == NULL || out->seq == 0)
        return 0;
    /* prev (hex) and time (digits and punctuation) hold no quotes. */
    p = memmem(p, (size_t)(end - p), LIT(",\"type\":\""));
    if (p == NULL)
        return 0;
    p += 9;
    out->version = 2;
    n = (size_t)(end - p);
    if (n > 9 && !memcmp(p, LIT("decision\""))) {
        out->kind = AUDIT_DECISION;
        out->pending = l->len > 16 && !memcmp(end - 16, LIT(",\"outcome\":null}"));
        return 1;
    }
    if (n > 8 && !memcmp(p, LIT("outcome\""))) {
        out->kind = AUDIT_OUTCOME;
        p = memmem(p, (size_t)(end - p), LIT(",\"decision_seq\":"));
        return p != NULL && read_u64(&out->decision_seq, p + 16, end) != NULL;
    }
    return 0;
}

/* The facts of a parsed line (the slow path). */
static void json_facts(line_facts *out, const json_t *root)
{
    const char *ev;
    json_t *d;

    out->kind = audit_json_kind(&out->version, root);
    out->seq = json_seq(root);
    if (out->kind != 0 && out->version == 1) {
        out->stop = 1; /* v1 lines are complete, and come before every v2 line */
    } else if (out->kind == AUDIT_EVENT) {
        ev = json_string_value(json_object_get(root, "event"));
        out->stop = ev && (!strcmp(ev, "start") || !strcmp(ev, "stop") || !strcmp(ev, "recovered"));
    } else if (out->kind == AUDIT_OUTCOME) {
        d = json_object_get(root, "decision_seq");
        if (json_is_integer(d) && json_integer_value(d) > 0)
            out->decision_seq = (uint64_t)json_integer_value(d);
    } else if (out->kind == AUDIT_DECISION) {
        out->pending = json_is_null(json_object_get(root, "outcome"));
    }
}

/*
 * Read back from the end to where everything before is known complete,
 * collecting the decisions still pending (newest first). Outcome records
 * come after their decisions, so reading backwards sees an outcome first
 * and its decision later; the set holds only outcomes whose decisions are
 * still ahead.
 */
static int find_pending(pending **out, size_t *nout, audit_file *f, off_t end)
{
    seq_set outcomes = {0};
    pending *list = NULL, *grown;
    size_t n = 0, cap = 0;
    back_reader br;
    back_line l;
    line_facts lf;
    json_t *root = NULL;
    int rc;

    rc = back_open(&br, f->fd, end);
    while (rc == 0 && end > 0 && (rc = back_next(&br, &l)) == 1) {
        rc = 0;
        memset(&lf, 0, sizeof(lf));
        if (!quick_facts(&lf, &l)) {
            root = line_json(&l);
            json_facts(&lf, root);
        }
        if (lf.stop)
            break;
        if (lf.kind == AUDIT_OUTCOME && lf.decision_seq > 0) {
            rc = seq_set_add(&outcomes, lf.decision_seq);
        } else if (lf.kind == AUDIT_DECISION && lf.seq > 0 && lf.pending &&
                   !seq_set_take(&outcomes, lf.seq)) {
            if (root == NULL)
                root = line_json(&l);
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                grown = realloc(list, cap * sizeof(*list));
                if (grown == NULL) {
                    rc = -ENOMEM;
                    break;
                }
                list = grown;
            }
            list[n] = (pending){lf.seq, dup_field(root, "push_id"), dup_field(root, "repo"),
                                dup_field(root, "ref")};
            n++;
        }
        json_decref(root);
        root = NULL;
        if (l.start == 0)
            break;
    }
    json_decref(root);
    back_close(&br);
    free(outcomes.slot);
    *out = list;
    *nout = n;
    return rc < 0 ? rc : 0;
}

static void pending_free(pending *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(list[i].push_id);
        free(list[i].repo);
        free(list[i].ref);
    }
    free(list);
}

static int file_complete_pending(audit_log *log, size_t *completed, rg_error *err)
{
    audit_file *f = (audit_file *)log;
    audit_record *recs = NULL;
    pending *list = NULL;
    char detail[160];
    struct stat st;
    size_t n = 0, i;
    int rc = 0;

    *completed = 0;
    pthread_mutex_lock(&f->mu);
    if (f->stale && (rc = tail_load(f, err)) < 0)
        goto done;
    if (fstat(f->fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", f->path, strerror(errno));
        goto done;
    }
    /* tail_load left the file ending in a newline. */
    rc = find_pending(&list, &n, f, st.st_size > 0 ? st.st_size - 1 : 0);
    if (rc < 0) {
        rg_error_set(err, rc, "%s: looking for pending decisions: %s", f->path, strerror(-rc));
        goto done;
    }
    if (n == 0)
        goto done;
    recs = calloc(n + 1, sizeof(*recs));
    if (recs == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    /* Oldest first, as they were decided. */
    for (i = 0; i < n; i++) {
        const pending *p = &list[n - 1 - i];
        recs[i] = (audit_record){.kind = AUDIT_OUTCOME,
                                 .push_id = p->push_id,
                                 .repo = p->repo,
                                 .ref = p->ref,
                                 .decision_seq = p->seq,
                                 .outcome = AUDIT_UNKNOWN_OUTCOME};
    }
    snprintf(detail, sizeof(detail),
             "%zu forwarded ref update%s had no outcome; completed as unknown", n,
             n == 1 ? "" : "s");
    recs[n] = (audit_record){.kind = AUDIT_EVENT, .event = "recovered", .detail = detail};
    rc = append_locked(f, recs, n + 1, NULL, err);
    if (rc == 0)
        *completed = n;
done:
    pthread_mutex_unlock(&f->mu);
    free(recs);
    pending_free(list, n);
    return rc;
}

/*
 * Outcomes retried after a failed append (audit_append_outcomes). This
 * store is its file's only writer and completes pending decisions only at
 * open, so a decision can have got its outcome only from an earlier try
 * whose bytes reached the file though the call failed (its fsync did).
 * Reading back from the end to the oldest decision named finds those:
 * outcomes come after their decisions, and a retry follows its failure
 * soon, so the read stays short.
 */
static int file_append_outcomes(audit_log *log, const audit_record *recs, size_t n,
                                size_t *appended, rg_error *err)
{
    audit_file *f = (audit_file *)log;
    audit_record *keep = NULL;
    seq_set named = {0};
    uint64_t oldest = UINT64_MAX;
    size_t nkeep = 0;
    back_reader br = {0};
    back_line l;
    line_facts lf;
    struct stat st;
    json_t *root;
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    keep = calloc(n, sizeof(*keep));
    if (keep == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if (f->stale && (rc = tail_load(f, err)) < 0)
        goto done;
    if (fstat(f->fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", f->path, strerror(errno));
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        oldest = recs[i].decision_seq < oldest ? recs[i].decision_seq : oldest;
    /* Bounded: back from the end (tail_load left it a newline) to `oldest`. */
    rc = st.st_size > 0 ? back_open(&br, f->fd, st.st_size - 1) : 0;
    while (rc == 0 && st.st_size > 0 && (rc = back_next(&br, &l)) == 1) {
        rc = 0;
        memset(&lf, 0, sizeof(lf));
        if (!quick_facts(&lf, &l)) {
            root = line_json(&l);
            json_facts(&lf, root);
            json_decref(root);
        }
        if (lf.seq != 0 && lf.seq <= oldest)
            break;
        if (lf.kind == AUDIT_OUTCOME && lf.decision_seq > 0)
            rc = seq_set_add(&named, lf.decision_seq);
        if (l.start == 0)
            break;
    }
    back_close(&br);
    if (rc < 0) {
        rg_error_set(err, rc, "%s: looking for outcomes already written: %s", f->path,
                     strerror(-rc));
        goto done;
    }
    /* A decision named twice in the batch gets the first outcome only. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!seq_set_take(&named, recs[i].decision_seq))
            keep[nkeep++] = recs[i];
        rc = seq_set_add(&named, recs[i].decision_seq);
    }
    if (rc < 0) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if (nkeep > 0 && (rc = append_locked(f, keep, nkeep, NULL, err)) == 0)
        *appended = nkeep;
done:
    pthread_mutex_unlock(&f->mu);
    free(named.slot);
    free(keep);
    return rc;
}

/* ------------------------------------------------------------------------
 * Opening and closing
 * ------------------------------------------------------------------------ */

/* fsync the directory holding `path`, so a newly created log survives a crash. */
static int fsync_parent(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');

    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else if ((size_t)(slash - path) < sizeof(dir))
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    else
        return -ENAMETOOLONG;
    return rg_fs_fsync_dir(dir);
}

static void file_close(audit_log *log)
{
    audit_file *f = (audit_file *)log;

    pthread_mutex_destroy(&f->mu);
    if (f->fd >= 0)
        close(f->fd); /* also releases the flock */
    free(f->path);
    free(f);
}

static const audit_store_ops file_ops = {
    .append_many = file_append_many,
    .append_outcomes = file_append_outcomes,
    .ready = file_ready,
    .head = file_head,
    .complete_pending = file_complete_pending,
    .close = file_close,
};

int audit_file_open(audit_log **out, const char *path, rg_error *err)
{
    audit_file *f = NULL;
    struct stat st;
    int created = 1, rc = 0, mutex = 0;

    *out = NULL;
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    f->base.ops = &file_ops;
    f->fd = -1;
    f->path = strdup(path);
    if (f->path == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    /* O_EXCL first only to learn whether the directory entry is new. */
    f->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f->fd < 0 && errno == EEXIST) {
        created = 0;
        f->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    }
    if (f->fd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (fstat(f->fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: not a regular file", path);
        goto done;
    }
    /* Two writers would each chain from their own idea of the last line. */
    if (flock(f->fd, LOCK_EX | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK
                 ? rg_error_set(err, -EBUSY, "%s: in use by another gateway process", path)
                 : rg_error_set(err, -errno, "%s: lock: %s", path, strerror(errno));
        goto done;
    }
    if (created && (rc = fsync_parent(path)) < 0) {
        rg_error_set(err, rc, "%s: fsync of its directory: %s", path, strerror(-rc));
        goto done;
    }
    if (pthread_mutex_init(&f->mu, NULL) != 0) {
        rc = rg_error_set(err, -ENOMEM, "cannot create a mutex");
        goto done;
    }
    mutex = 1;
    rc = tail_load(f, err);
    if (rc < 0)
        goto done;
    *out = &f->base;
    f = NULL;
done:
    if (f != NULL) {
        if (mutex)
            pthread_mutex_destroy(&f->mu);
        if (f->fd >= 0)
            close(f->fd);
        free(f->path);
        free(f);
    }
    return rc;
}
