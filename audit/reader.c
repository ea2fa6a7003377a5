/*
 * Reading the log front to back: a streaming line reader that hashes each
 * line's exact bytes as it goes (from the file, or from the database's
 * rows through store_pg_read.c), the chain verification built on it (with an
 * optional head kept apart from the log, which is what finds a cut tail,
 * and in the database the audit_head row), and the head.
 */
#include "audit/store_ops.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCAN_CHUNK 65536

struct audit_reader {
    audit_pg_read *pg; /* reading the database; the fields below are the file's */
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
 * Reading
 * ------------------------------------------------------------------------ */

int audit_reader_open(audit_reader **out, const audit_source *src, rg_error *err)
{
    return audit_reader_open_containing(out, src, NULL, err);
}

int audit_reader_open_containing(audit_reader **out, const audit_source *src, const char *needle,
                                 rg_error *err)
{
    const char *path = src->path;
    audit_reader *r;
    int rc = 0;

    *out = NULL;
    if (src->db == NULL && path == NULL)
        return rg_error_set(err, -EINVAL, "audit_reader_open: no log");
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    r->fd = -1;
    rg_buf_init(&r->line, AUDIT_LINE_MAX);
    if (src->db != NULL) {
        if ((rc = audit_pg_read_open(&r->pg, src->db, 0, needle, err)) < 0)
            goto done;
        *out = r;
        return 0;
    }
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

/* audit_reader_next from the database: a row is a line, never torn. */
static int next_row(audit_reader *r, audit_line *out, rg_error *err)
{
    audit_pg_row row;
    int rc = audit_pg_read_next(r->pg, &row, err);

    if (rc <= 0)
        return rc;
    out->data = row.data;
    out->len = row.len;
    out->number = ++r->number;
    out->stored_seq = row.seq;
    out->too_long = row.full_len > row.len;
    memcpy(out->sha256, row.sha256, AUDIT_HASH_LEN);
    return 1;
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
    if (r->pg != NULL)
        return next_row(r, out, err);
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
    if (EVP_DigestFinal_ex(r->md, md, &mdlen) != 1 || mdlen != AUDIT_HASH_LEN)
        return rg_error_set(err, -EIO, "SHA-256 failed");
    memcpy(out->sha256, md, AUDIT_HASH_LEN);
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
    audit_pg_read_free(r->pg);
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

/*
 * In the database, whether the audit_head row names the last record of an
 * intact chain (seq `last_seq`, hash `last_hash`); when not, why.
 */
static int check_db_head(audit_verify_result *out, audit_pg_read *pg, uint64_t last_seq,
                         const char *last_hash, rg_error *err)
{
    char hash[AUDIT_HASH_HEX + 1];
    uint64_t seq;
    int rc;

    if ((rc = audit_pg_read_head(pg, &seq, hash, err)) < 0)
        return rc;
    if (seq > last_seq) {
        out->db_head_bad = 1;
        snprintf(out->why, sizeof(out->why),
                 "the records end at seq %llu, before the database's head at seq %llu: records "
                 "were cut from the end",
                 (unsigned long long)last_seq, (unsigned long long)seq);
    } else if (seq < last_seq) {
        out->db_head_bad = 1;
        snprintf(out->why, sizeof(out->why),
                 "the database's head names seq %llu, but the records go on to seq %llu: the head "
                 "was moved back",
                 (unsigned long long)seq, (unsigned long long)last_seq);
    } else if (strcmp(hash, last_hash) != 0) {
        out->db_head_bad = 1;
        snprintf(out->why, sizeof(out->why),
                 "the record with seq %llu does not hash to the database's head hash: that record "
                 "or the head was changed",
                 (unsigned long long)seq);
    }
    return 0;
}

/* The chain check, and the head check when head_hash is not NULL. */
static int verify(audit_verify_result *out, const audit_source *src, uint64_t head_seq,
                  const char *head_hash, rg_error *err)
{
    char line_hex[AUDIT_HASH_HEX + 1];
    int head_seen = 0, head_differs = 0;
    char want_prev[AUDIT_HASH_HEX + 1] = AUDIT_ZERO_HASH;
    audit_reader *r = NULL;
    json_t *root = NULL, *seq, *prev;
    uint64_t last_seq = 0;
    audit_line line;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = audit_reader_open(&r, src, err);
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
        if (r->pg != NULL && line.stored_seq != (uint64_t)json_integer_value(seq)) {
            bad(out, line.number,
                "the row with seq %llu holds the record with seq %lld (the row was renumbered)",
                (unsigned long long)line.stored_seq, (long long)json_integer_value(seq));
            break;
        }
        last_seq = (uint64_t)json_integer_value(seq);
        out->last_seq = last_seq;
        rg_hex_encode(line_hex, line.sha256, AUDIT_HASH_LEN);
        if (head_hash != NULL && last_seq == head_seq) {
            head_seen = 1;
            head_differs = strcmp(line_hex, head_hash) != 0;
        }
        memcpy(want_prev, line_hex, sizeof(want_prev));
    }
    if (rc > 0)
        rc = 0;
    /* A broken chain is reported as such; the head is checked on an intact one. */
    if (rc == 0 && out->bad_line == 0 && head_hash != NULL && head_seq > 0) {
        if (!head_seen) {
            out->head_bad = 1;
            snprintf(out->why, sizeof(out->why),
                     "the log ends at seq %llu (line %llu), before the head's seq %llu: "
                     "records were cut from its end",
                     (unsigned long long)last_seq, (unsigned long long)out->lines,
                     (unsigned long long)head_seq);
        } else if (head_differs) {
            out->head_bad = 1;
            snprintf(out->why, sizeof(out->why),
                     "the record with seq %llu does not hash to the head's hash: the log was "
                     "cut and written again from there",
                     (unsigned long long)head_seq);
        }
    }
    if (rc == 0 && out->bad_line == 0 && !out->head_bad && r->pg != NULL)
        rc = check_db_head(out, r->pg, last_seq, want_prev, err);
    json_decref(root);
    audit_reader_free(r);
    return rc;
}

int audit_verify(audit_verify_result *out, const audit_source *src, rg_error *err)
{
    return verify(out, src, 0, NULL, err);
}

int audit_verify_head(audit_verify_result *out, const audit_source *src, uint64_t head_seq,
                      const char *head_hash, rg_error *err)
{
    if (head_hash == NULL || strlen(head_hash) != AUDIT_HASH_HEX)
        return rg_error_set(err, -EINVAL, "a head's hash is 64 hex digits");
    return verify(out, src, head_seq, head_hash, err);
}

/* ------------------------------------------------------------------------
 * The head
 * ------------------------------------------------------------------------ */

int audit_read_head(uint64_t *seq, char hash_hex[65], const audit_source *src, rg_error *err)
{
    char last_hash[AUDIT_HASH_HEX + 1] = AUDIT_ZERO_HASH;
    audit_pg_read *pg = NULL;
    audit_pg_row row;
    uint64_t last_seq = 0;
    int rc;

    if (src->db == NULL)
        return audit_file_read_head(seq, hash_hex, src->path, err);
    *seq = 0;
    memcpy(hash_hex, AUDIT_ZERO_HASH, AUDIT_HASH_HEX + 1);
    if ((rc = audit_pg_read_open(&pg, src->db, 1, NULL, err)) < 0)
        return rc;
    if ((rc = audit_pg_read_head(pg, seq, hash_hex, err)) < 0 ||
        (rc = audit_pg_read_next(pg, &row, err)) < 0)
        goto done;
    if (rc == 1) {
        last_seq = row.seq;
        rg_hex_encode(last_hash, row.sha256, AUDIT_HASH_LEN);
    }
    rc = 0;
    if (*seq != last_seq || strcmp(hash_hex, last_hash) != 0)
        rc = rg_error_set(err, RG_E_STATE,
                          "the database's audit head (seq %llu) does not name its last record "
                          "(seq %llu): run `refgate audit verify`",
                          (unsigned long long)*seq, (unsigned long long)last_seq);
done:
    audit_pg_read_free(pg);
    return rc;
}
