/*
 * The back-to-front line reader (audit.h). From the file: blocks read from
 * the end with pread, a window that holds the current line and what
 * precedes it in its block. A line that would pass AUDIT_LINE_MAX is
 * dropped as it is found, so memory stays capped whatever the file holds.
 * From the database: the rows by seq descending, through store_pg_read.c, whose
 * pages are capped the same way.
 */
#include "audit/store_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BACK_CHUNK (64 * 1024)
#define WINDOW_MAX (AUDIT_LINE_MAX + BACK_CHUNK)

struct audit_back_reader {
    audit_pg_read *pg; /* reading the database; the fields below are the file's */
    int fd;
    off_t pos;    /* file offset of buf[0] */
    char *buf;    /* file bytes [pos, pos + end), and room for a NUL */
    size_t end;   /* bytes of buf not yet handed over */
    int skipping; /* inside a line too long to keep: drop until its start */
};

int audit_back_reader_open(audit_back_reader **out, const audit_source *src, rg_error *err)
{
    const char *path = src->path;
    audit_back_reader *r;
    struct stat st;
    int rc;

    *out = NULL;
    if (src->db == NULL && path == NULL)
        return rg_error_set(err, -EINVAL, "audit_back_reader_open: no log");
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    r->fd = -1;
    if (src->db != NULL) {
        if ((rc = audit_pg_read_open(&r->pg, src->db, 1, NULL, err)) < 0) {
            free(r);
            return rc;
        }
        *out = r;
        return 0;
    }
    if ((r->buf = malloc(WINDOW_MAX + 1)) == NULL) {
        free(r);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0 || fstat(r->fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        audit_back_reader_free(r);
        return rc;
    }
    r->pos = st.st_size;
    *out = r;
    return 0;
}

/* Read the block before buf[0] in front of the window; 0 at the start of the file. */
static int read_before(audit_back_reader *r, rg_error *err)
{
    size_t n = r->pos < BACK_CHUNK ? (size_t)r->pos : BACK_CHUNK, got = 0;
    ssize_t k;

    if (n == 0)
        return 0;
    if (r->end + n > WINDOW_MAX) {
        /* The line in the window is too long to keep: drop what we have of it. */
        r->end = 0;
        r->skipping = 1;
    }
    memmove(r->buf + n, r->buf, r->end);
    /* Bounded: each round reads at least one byte of n, or fails. */
    while (got < n) {
        k = pread(r->fd, r->buf + got, n - got, r->pos - (off_t)n + (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return rg_error_set(err, k < 0 ? -errno : -EIO, "reading the audit log: %s",
                                k < 0 ? strerror(errno) : "it shrank");
        got += (size_t)k;
    }
    r->pos -= (off_t)n;
    r->end += n;
    return 1;
}

/* audit_back_reader_prev from the database: rows too long to keep are passed over. */
static int prev_row(audit_back_reader *r, const char **data, size_t *len, rg_error *err)
{
    audit_pg_row row;
    int rc;

    /* Bounded: each round hands over a row or moves one row towards the start. */
    while ((rc = audit_pg_read_next(r->pg, &row, err)) == 1) {
        if (row.full_len > row.len || row.len == 0)
            continue;
        *data = row.data;
        *len = row.len;
        return 1;
    }
    return rc;
}

int audit_back_reader_prev(audit_back_reader *r, const char **data, size_t *len, rg_error *err)
{
    int rc;

    if (r->pg != NULL)
        return prev_row(r, data, len, err);

    /* Bounded: each round hands over a line or moves one block towards the start. */
    for (;;) {
        char *nl = r->end ? memrchr(r->buf, '\n', r->end) : NULL;

        if (nl != NULL || (r->pos == 0 && r->end > 0)) {
            size_t start = nl ? (size_t)(nl - r->buf) + 1 : 0;
            size_t n = r->end - start;
            int skip = r->skipping;

            r->skipping = 0;
            r->end = nl ? (size_t)(nl - r->buf) : 0;
            if (n == 0 || skip)
                continue;
            r->buf[start + n] = '\0';
            *data = r->buf + start;
            *len = n;
            return 1;
        }
        if (r->pos == 0)
            return 0;
        if ((rc = read_before(r, err)) <= 0)
            return rc;
    }
}

void audit_back_reader_free(audit_back_reader *r)
{
    if (r == NULL)
        return;
    audit_pg_read_free(r->pg);
    if (r->fd >= 0)
        close(r->fd);
    free(r->buf);
    free(r);
}
