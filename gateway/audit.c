/*
 * The tamper-evident audit log (see audit.h): writing records, reading the
 * log back line by line, and verifying its hash chain.
 *
 * Every line's `prev` is the SHA-256 of the previous line's exact bytes, so
 * verification never re-serialises JSON and any changed, removed or
 * inserted line breaks the chain where it happened. Appends take one
 * write(2) and one fsync(2) per call under a mutex, on an O_APPEND
 * descriptor that also holds an exclusive flock, so a record is on disk
 * before the client is answered and no second writer can fork the chain.
 * A crash can still leave a torn last line: the next open terminates it,
 * keeps it (verify points at it) and chains on from its bytes.
 */
#include "gateway/audit.h"
#include "util/text.h"
#include "util/buf.h"
#include "util/fs.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define HASH_LEN   32
#define HASH_HEX   (HASH_LEN * 2)
#define FIELD_MAX  4096 /* bytes of one string field, after escaping */
#define SCAN_CHUNK 65536
#define TIME_LEN   48
#define ZERO_HASH  "0000000000000000000000000000000000000000000000000000000000000000"

/* Free space audit_ready wants beyond the records themselves. */
#define AUDIT_READY_MARGIN (1024 * 1024)

struct audit_log {
    pthread_mutex_t mu;
    int fd;
    char *path;
    uint64_t seq;            /* of the last record; 0 when there is none */
    char prev[HASH_HEX + 1]; /* hex SHA-256 of the last line */
    int stale;               /* a write failed: re-read the tail before appending */
};

struct audit_reader {
    int fd;
    char *path;
    EVP_MD_CTX *md;
    rg_buf line;
    uint64_t number;
    size_t pos, fill;
    int eof;
    char chunk[SCAN_CHUNK];
};

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

static int sha256_hex(char out[HASH_HEX + 1], const void *data, size_t len)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != HASH_LEN)
        return -EIO;
    rg_hex_encode(out, md, HASH_LEN);
    return 0;
}

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

/* RFC 3339 UTC with milliseconds: 2026-11-30T12:00:05.123Z */
static void format_now(char out[TIME_LEN])
{
    struct timespec ts;
    struct tm tm;
    char base[TIME_LEN - 8];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    if (strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        base[0] = '\0';
    snprintf(out, TIME_LEN, "%s.%03uZ", base, (unsigned)(ts.tv_nsec / 1000000) % 1000);
}

/*
 * Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0.
 * Overlong forms and surrogates count as malformed, as jansson sees them.
 */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len, i;
    unsigned cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/*
 * A JSON string for an audit field: NULL becomes null; malformed UTF-8
 * becomes \xHH text (a ref name may be any bytes, and jansson refuses
 * them); anything longer than FIELD_MAX is cut on a character boundary and
 * ends in "...".
 */
static json_t *field_value(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len, i, k, cut = 0;
    json_t *v = NULL;
    char *tmp;

    if (s == NULL)
        return json_null();
    len = strnlen(s, FIELD_MAX + 1);
    /* Each input byte becomes at most 4 output bytes. */
    tmp = malloc(len * 4 + 4);
    if (tmp == NULL)
        return NULL;
    for (i = 0, k = 0; i < len;) {
        size_t n = utf8_seq(p + i, len - i);
        if (n == 0) {
            k += (size_t)sprintf(tmp + k, "\\x%02X", p[i]);
            i++;
            continue;
        }
        memcpy(tmp + k, p + i, n);
        i += n;
        k += n;
    }
    if (k > FIELD_MAX || s[len] != '\0') {
        cut = FIELD_MAX - 3;
        if (cut > k)
            cut = k;
        /* Back up to the start of a character: never split a sequence. */
        while (cut > 0 && ((unsigned char)tmp[cut] & 0xc0) == 0x80)
            cut--;
        memcpy(tmp + cut, "...", 4);
    } else {
        tmp[k] = '\0';
    }
    v = json_string(tmp);
    free(tmp);
    return v;
}

/* ------------------------------------------------------------------------
 * Finding where the chain stands
 * ------------------------------------------------------------------------ */

/* The offset where the line whose content ends at `end` starts. */
static int line_start(off_t *out, int fd, off_t end)
{
    char buf[SCAN_CHUNK];
    off_t pos = end;
    size_t n;
    ssize_t got;
    char *nl;

    while (pos > 0) {
        n = pos < (off_t)sizeof(buf) ? (size_t)pos : sizeof(buf);
        got = pread_full(fd, buf, n, pos - (off_t)n);
        if (got < 0)
            return (int)got;
        if ((size_t)got != n)
            return -EIO;
        nl = memrchr(buf, '\n', n);
        if (nl != NULL) {
            *out = pos - (off_t)n + (nl - buf) + 1;
            return 0;
        }
        pos -= (off_t)n;
    }
    *out = 0;
    return 0;
}

/* Hash the bytes [start, end) of the file, streaming. */
static int hash_range(char out[HASH_HEX + 1], int fd, off_t start, off_t end)
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
    if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != HASH_LEN) {
        rc = -EIO;
        goto done;
    }
    rg_hex_encode(out, md, HASH_LEN);
done:
    EVP_MD_CTX_free(ctx);
    return rc;
}

/* *seq from the line [start, end) when it is a record with a seq, else 0. */
static int line_seq(uint64_t *seq, int fd, off_t start, off_t end)
{
    json_t *root = NULL, *v;
    char *buf = NULL;
    ssize_t got;
    int rc = 0;

    *seq = 0;
    if (end - start > AUDIT_LINE_MAX || end == start)
        return 0;
    buf = malloc((size_t)(end - start));
    if (buf == NULL)
        return -ENOMEM;
    got = pread_full(fd, buf, (size_t)(end - start), start);
    if (got < 0 || got != end - start) {
        rc = got < 0 ? (int)got : -EIO;
        goto done;
    }
    root = json_loadb(buf, (size_t)got, 0, NULL);
    v = json_object_get(root, "seq");
    if (json_is_integer(v) && json_integer_value(v) > 0)
        *seq = (uint64_t)json_integer_value(v);
done:
    json_decref(root);
    free(buf);
    return rc;
}

/*
 * Read the chain's state from the end of the file: the hash of the last
 * line, and the seq of the last line that has one. A last line without a
 * newline (a torn append) is terminated here and kept, so the next record
 * chains on from its bytes and verify still names it.
 */
static int tail_load(audit_log *log, rg_error *err)
{
    off_t size, start, end;
    struct stat st;
    uint64_t seq = 0;
    char last;
    int rc;

    if (fstat(log->fd, &st) < 0)
        return rg_error_set(err, -errno, "%s: %s", log->path, strerror(errno));
    size = st.st_size;
    if (size == 0) {
        log->seq = 0;
        memcpy(log->prev, ZERO_HASH, sizeof(log->prev));
        log->stale = 0;
        return 0;
    }
    if (pread_full(log->fd, &last, 1, size - 1) != 1)
        return rg_error_set(err, -EIO, "%s: cannot read its last byte", log->path);
    end = last == '\n' ? size - 1 : size;
    if (last != '\n') {
        rc = rg_fs_write_all(log->fd, "\n", 1);
        if (rc == 0 && fsync(log->fd) < 0)
            rc = -errno;
        if (rc < 0)
            return rg_error_set(err, rc, "%s: terminating a torn last line: %s", log->path,
                                strerror(-rc));
    }
    rc = line_start(&start, log->fd, end);
    if (rc == 0)
        rc = hash_range(log->prev, log->fd, start, end);
    /* Walk back past torn or corrupt lines to the last record with a seq. */
    while (rc == 0) {
        rc = line_seq(&seq, log->fd, start, end);
        if (rc < 0 || seq > 0 || start == 0)
            break;
        end = start - 1;
        rc = line_start(&start, log->fd, end);
    }
    if (rc < 0)
        return rg_error_set(err, rc, "%s: reading its tail: %s", log->path, strerror(-rc));
    log->seq = seq;
    log->stale = 0;
    return 0;
}

/* ------------------------------------------------------------------------
 * Opening and appending
 * ------------------------------------------------------------------------ */

/* fsync the directory holding `path`, so a newly created log survives a crash. */
static int fsync_parent(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int fd, rc = 0;

    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else if ((size_t)(slash - path) < sizeof(dir))
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    else
        return -ENAMETOOLONG;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

int audit_open(audit_log **out, const char *path, rg_error *err)
{
    audit_log *log = NULL;
    struct stat st;
    int created = 1, rc = 0, mutex = 0;

    *out = NULL;
    log = calloc(1, sizeof(*log));
    if (log == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    log->fd = -1;
    log->path = strdup(path);
    if (log->path == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    /* O_EXCL first only to learn whether the directory entry is new. */
    log->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (log->fd < 0 && errno == EEXIST) {
        created = 0;
        log->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    }
    if (log->fd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (fstat(log->fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: not a regular file", path);
        goto done;
    }
    /* Two writers would each chain from their own idea of the last line. */
    if (flock(log->fd, LOCK_EX | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK
                 ? rg_error_set(err, -EBUSY, "%s: in use by another gateway process", path)
                 : rg_error_set(err, -errno, "%s: lock: %s", path, strerror(errno));
        goto done;
    }
    if (created && (rc = fsync_parent(path)) < 0) {
        rg_error_set(err, rc, "%s: fsync of its directory: %s", path, strerror(-rc));
        goto done;
    }
    if (pthread_mutex_init(&log->mu, NULL) != 0) {
        rc = rg_error_set(err, -ENOMEM, "cannot create a mutex");
        goto done;
    }
    mutex = 1;
    rc = tail_load(log, err);
    if (rc < 0)
        goto done;
    *out = log;
    log = NULL;
done:
    if (log != NULL) {
        if (mutex)
            pthread_mutex_destroy(&log->mu);
        if (log->fd >= 0)
            close(log->fd);
        free(log->path);
        free(log);
    }
    return rc;
}

/* Serialise one record into `out` (with its newline) and hash it into `prev`. */
static int record_line(rg_buf *out, const audit_record *rec, const char *time, uint64_t seq,
                       char prev[HASH_HEX + 1])
{
    static const char *const names[] = {"push_id", "run",    "token",  "remote", "repo",
                                        "ref",     "old",    "new",    "action", "decision",
                                        "rule",    "reason", "outcome"};
    const char *values[] = {rec->push_id, rec->run,    rec->token_hash, rec->remote, rec->repo,
                            rec->ref,     rec->old_id, rec->new_id,     rec->action, rec->decision,
                            rec->rule,    rec->reason, rec->outcome};
    json_t *obj;
    char *line = NULL;
    size_t i, len;
    int rc = -ENOMEM;

    obj = json_object();
    if (obj == NULL)
        return -ENOMEM;
    if (json_object_set_new(obj, "v", json_integer(2)) < 0 ||
        json_object_set_new(obj, "type",
                            json_string(rec->kind == AUDIT_OUTCOME ? "outcome"
                                        : rec->kind == AUDIT_EVENT ? "event"
                                                                   : "decision")) < 0 ||
        (rec->kind == AUDIT_OUTCOME &&
         json_object_set_new(obj, "decision_seq", json_integer((json_int_t)rec->decision_seq)) <
             0) ||
        json_object_set_new(obj, "time", json_string(time)) < 0 ||
        json_object_set_new(obj, "seq", json_integer((json_int_t)seq)) < 0 ||
        json_object_set_new(obj, "prev", json_string(prev)) < 0)
        goto done;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (json_object_set_new(obj, names[i], field_value(values[i])) < 0)
            goto done;
    if (rec->evaluate != NULL &&
        json_object_set_new(obj, "evaluate", field_value(rec->evaluate)) < 0)
        goto done;
    line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (line == NULL)
        goto done;
    len = strlen(line);
    if (len > AUDIT_LINE_MAX) {
        rc = RG_E_TOO_BIG;
        goto done;
    }
    rc = sha256_hex(prev, line, len);
    if (rc == 0)
        rc = rg_buf_append(out, line, len);
    if (rc == 0)
        rc = rg_buf_append(out, "\n", 1);
done:
    free(line);
    json_decref(obj);
    return rc;
}

size_t audit_record_size_max(const audit_record *rec)
{
    (void)rec;
    return 16 * FIELD_MAX;
}

int audit_append_many(audit_log *log, const audit_record *recs, size_t n, uint64_t *first_seq,
                      rg_error *err)
{
    rg_buf out;
    char now[TIME_LEN], prev[HASH_HEX + 1];
    uint64_t seq;
    size_t i;
    int rc = 0;

    if (log == NULL || (recs == NULL && n > 0))
        return rg_error_set(err, -EINVAL, "audit_append: missing argument");
    if (n == 0)
        return 0;
    rg_buf_init(&out, n > SIZE_MAX / (AUDIT_LINE_MAX + 1) ? SIZE_MAX : n * (AUDIT_LINE_MAX + 1));
    pthread_mutex_lock(&log->mu);
    if (log->stale) {
        rc = tail_load(log, err);
        if (rc < 0)
            goto done;
    }
    /* Time, seq and prev are taken under the lock so they agree with file order. */
    format_now(now);
    seq = log->seq;
    memcpy(prev, log->prev, sizeof(prev));
    for (i = 0; i < n; i++) {
        rc = record_line(&out, &recs[i], now, ++seq, prev);
        if (rc < 0) {
            rg_error_set(err, rc, "%s: cannot write record %zu: %s", log->path, i + 1,
                         rc == RG_E_TOO_BIG ? "too large" : strerror(-rc));
            goto done;
        }
    }
    rc = rg_fs_write_all(log->fd, out.data, out.len);
    if (rc == 0 && fsync(log->fd) < 0)
        rc = -errno;
    if (rc < 0) {
        /* Part of the batch may be in the file: learn the tail again next time. */
        log->stale = 1;
        rg_error_set(err, rc, "%s: %s", log->path, strerror(-rc));
        goto done;
    }
    if (first_seq)
        *first_seq = log->seq + 1;
    log->seq = seq;
    memcpy(log->prev, prev, sizeof(prev));
done:
    pthread_mutex_unlock(&log->mu);
    rg_buf_free(&out);
    return rc;
}

int audit_ready(audit_log *log, size_t nbytes, rg_error *err)
{
    struct statvfs vfs;
    unsigned long long need, avail;
    int rc = 0;

    pthread_mutex_lock(&log->mu);
    if (log->stale && (rc = tail_load(log, err)) < 0)
        goto done;
    if (fstatvfs(log->fd, &vfs) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", log->path, strerror(errno));
        goto done;
    }
    /* Room for the records at their largest, and a margin for everything
     * else writing to the same filesystem meanwhile. */
    need = (unsigned long long)nbytes + AUDIT_READY_MARGIN;
    avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    if (avail < need)
        rc = rg_error_set(err, -ENOSPC, "%s: only %llu bytes free", log->path, avail);
done:
    pthread_mutex_unlock(&log->mu);
    return rc;
}

int audit_append(audit_log *log, const audit_record *rec, rg_error *err)
{
    return audit_append_many(log, rec, 1, NULL, err);
}

void audit_close(audit_log *log)
{
    if (log == NULL)
        return;
    pthread_mutex_destroy(&log->mu);
    if (log->fd >= 0)
        close(log->fd); /* also releases the flock */
    free(log->path);
    free(log);
}

/* ------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------ */

int audit_reader_open(audit_reader **out, const char *path, rg_error *err)
{
    audit_reader *r;
    int rc = 0;

    *out = NULL;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    r->fd = -1;
    rg_buf_init(&r->line, AUDIT_LINE_MAX);
    r->path = strdup(path);
    r->md = EVP_MD_CTX_new();
    if (r->path == NULL || r->md == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    *out = r;
    r = NULL;
done:
    audit_reader_free(r);
    return rc;
}

int audit_reader_next(audit_reader *r, audit_line *out, rg_error *err)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int started = 0, too_long = 0, done_line = 0;
    size_t seg, room;
    ssize_t n;
    char *nl;

    memset(out, 0, sizeof(*out));
    rg_buf_reset(&r->line);
    if (EVP_DigestInit_ex(r->md, EVP_sha256(), NULL) != 1)
        return rg_error_set(err, -ENOMEM, "cannot start SHA-256");
    while (!done_line) {
        if (r->pos == r->fill) {
            if (r->eof)
                break;
            n = read(r->fd, r->chunk, sizeof(r->chunk));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return rg_error_set(err, -errno, "%s: %s", r->path, strerror(errno));
            r->pos = 0;
            r->fill = (size_t)n;
            if (n == 0) {
                r->eof = 1;
                break;
            }
        }
        nl = memchr(r->chunk + r->pos, '\n', r->fill - r->pos);
        seg = nl ? (size_t)(nl - (r->chunk + r->pos)) : r->fill - r->pos;
        started = 1;
        if (EVP_DigestUpdate(r->md, r->chunk + r->pos, seg) != 1)
            return rg_error_set(err, -EIO, "SHA-256 failed");
        /* Keep what fits; the hash still covers the whole line. */
        room = AUDIT_LINE_MAX - r->line.len;
        if (seg > room)
            too_long = 1;
        if (rg_buf_append(&r->line, r->chunk + r->pos, seg < room ? seg : room) < 0)
            return rg_error_set(err, -ENOMEM, "out of memory");
        r->pos += seg + (nl ? 1 : 0);
        done_line = nl != NULL;
    }
    if (!started)
        return 0;
    if (EVP_DigestFinal_ex(r->md, md, &mdlen) != 1 || mdlen != HASH_LEN)
        return rg_error_set(err, -EIO, "SHA-256 failed");
    memcpy(out->sha256, md, HASH_LEN);
    out->data = r->line.data ? r->line.data : "";
    out->len = r->line.len;
    out->number = ++r->number;
    out->torn = !done_line;
    out->too_long = too_long;
    return 1;
}

void audit_reader_free(audit_reader *r)
{
    if (r == NULL)
        return;
    if (r->fd >= 0)
        close(r->fd);
    EVP_MD_CTX_free(r->md);
    rg_buf_free(&r->line);
    free(r->path);
    free(r);
}

/* ------------------------------------------------------------------------
 * Verification
 * ------------------------------------------------------------------------ */

__attribute__((format(printf, 3, 4))) static void bad(audit_verify_result *out, uint64_t line,
                                                      const char *fmt, ...)
{
    va_list ap;

    out->bad_line = line;
    va_start(ap, fmt);
    vsnprintf(out->why, sizeof(out->why), fmt, ap);
    va_end(ap);
}

int audit_verify(audit_verify_result *out, const char *path, rg_error *err)
{
    char want_prev[HASH_HEX + 1] = ZERO_HASH;
    audit_reader *r = NULL;
    json_t *root = NULL, *seq, *prev;
    uint64_t last_seq = 0;
    audit_line line;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = audit_reader_open(&r, path, err);
    if (rc < 0)
        return rc;
    while ((rc = audit_reader_next(r, &line, err)) == 1) {
        out->lines = line.number;
        if (line.too_long) {
            bad(out, line.number, "longer than %d bytes: not a record", AUDIT_LINE_MAX);
            break;
        }
        if (line.torn) {
            bad(out, line.number,
                "torn: the file ends without a newline (an append was cut "
                "short)");
            break;
        }
        json_decref(root);
        root = json_loadb(line.data, line.len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(root)) {
            bad(out, line.number, "not a JSON object (a torn or corrupted record)");
            break;
        }
        seq = json_object_get(root, "seq");
        prev = json_object_get(root, "prev");
        if (!json_is_integer(seq) || (uint64_t)json_integer_value(seq) != last_seq + 1) {
            if (!json_is_integer(seq))
                bad(out, line.number, "no integer seq");
            else if (line.number == 1)
                bad(out, line.number, "seq is %lld, but the first record has seq 1",
                    (long long)json_integer_value(seq));
            else
                bad(out, line.number,
                    "seq %lld does not follow seq %llu of line %llu (a record is missing, "
                    "repeated or out of order)",
                    (long long)json_integer_value(seq), (unsigned long long)last_seq,
                    (unsigned long long)(line.number - 1));
            break;
        }
        if (!json_is_string(prev) || strcmp(json_string_value(prev), want_prev) != 0) {
            if (line.number == 1)
                bad(out, line.number,
                    "prev is not 64 zeros: the log does not start with its "
                    "first record");
            else
                bad(out, line.number,
                    "prev does not match line %llu (line %llu was changed, or records "
                    "between them removed)",
                    (unsigned long long)(line.number - 1), (unsigned long long)(line.number - 1));
            break;
        }
        last_seq = (uint64_t)json_integer_value(seq);
        rg_hex_encode(want_prev, line.sha256, HASH_LEN);
    }
    if (rc > 0)
        rc = 0;
    json_decref(root);
    audit_reader_free(r);
    return rc;
}
