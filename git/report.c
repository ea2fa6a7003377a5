/*
 * report-status and side-band: what receive-pack answers after a push. The
 * gateway demultiplexes upstream's answer, parses the report inside it,
 * merges in its own policy rejections, and writes the result to the client
 * framed the way the client negotiated.
 *
 * The writers make a valid report out of any input: a reason is one line of
 * printable bytes and fits in a packet whatever upstream or a rule said. The
 * readers refuse what git's own client would refuse (a packet without a band
 * designator, an unknown band, a status line it cannot read), so a report
 * the client would misread is never relayed as if it were fine.
 */
#include "git/report.h"
#include "git/pktline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Writing
 */

static int mode_valid(rgit_sideband_mode mode)
{
    return mode == RGIT_SIDEBAND_NONE || mode == RGIT_SIDEBAND_1000 || mode == RGIT_SIDEBAND_64K;
}

int rgit_sideband_write(rg_buf *out, int band, const void *data, size_t len,
                        rgit_sideband_mode mode)
{
    const char *p = data;
    size_t start = out->len, max, off = 0, n;
    char hdr[8];
    int rc = 0;

    if (band < 1 || band > 3 || !mode_valid(mode) || (len > 0 && data == NULL))
        return -EINVAL;
    if (mode == RGIT_SIDEBAND_NONE)
        return 0;
    /* A packet is at most `mode` bytes: 4 of length, 1 of band, the rest. */
    max = (size_t)mode - 5;
    /*
     * do/while so that len 0 still writes one packet: an empty band-1
     * packet is the keepalive git's receive-pack sends on long operations.
     * Bounded by len / max + 1 packets.
     */
    do {
        n = len - off < max ? len - off : max;
        snprintf(hdr, sizeof(hdr), "%04zx%c", n + 5, (char)band);
        rc = rg_buf_append(out, hdr, 5);
        if (rc == 0 && n > 0)
            rc = rg_buf_append(out, p + off, n);
        if (rc < 0)
            goto done;
        off += n;
    } while (off < len);
done:
    if (rc < 0)
        rg_buf_truncate(out, start);
    return rc;
}

/*
 * Append `s` to a status line with every byte git would misread (a LF
 * would end the line, a NUL the string, other controls garble the
 * terminal) replaced by a space, stopping at `room` bytes.
 */
static int append_clean(rg_buf *line, const char *s, size_t room)
{
    size_t i, n = strlen(s);
    char c;
    int rc = 0;

    if (n > room) {
        /* Leave room for "..." so a cut reason says it was cut. */
        n = room > 3 ? room - 3 : 0;
    }
    for (i = 0; rc == 0 && i < n; i++) {
        c = s[i];
        if ((unsigned char)c < 0x20 || c == 0x7f)
            c = ' ';
        rc = rg_buf_append(line, &c, 1);
    }
    if (rc == 0 && n < strlen(s))
        rc = rg_buf_append(line, "...", room >= 3 ? 3 : room);
    return rc;
}

static int refname_writable(const char *name)
{
    const unsigned char *p = (const unsigned char *)name;

    if (name == NULL || *p == '\0')
        return 0;
    for (; *p; p++)
        if (*p <= 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

/* Room left for text in a status line so far `used` bytes long, LF kept. */
static size_t line_room(size_t used)
{
    return used + 1 < RGIT_PKTLINE_DATA_MAX ? RGIT_PKTLINE_DATA_MAX - used - 1 : 0;
}

int rgit_report_write(rg_buf *out, const char *unpack, const rgit_ref_status *refs, size_t nrefs,
                      rgit_sideband_mode mode)
{
    /* The plain report first; side-band then carries it whole in band 1. */
    rg_buf plain = RG_BUF_INIT(out->max);
    rg_buf line = RG_BUF_INIT(RGIT_PKTLINE_DATA_MAX);
    size_t start = out->len, i;
    int rc;

    if (!mode_valid(mode) || (nrefs > 0 && refs == NULL)) {
        rc = -EINVAL;
        goto done;
    }
    for (i = 0; i < nrefs; i++) {
        /* A ref name with a space or LF cannot be written unambiguously. */
        if (!refname_writable(refs[i].refname) ||
            strlen(refs[i].refname) + 4 > RGIT_PKTLINE_DATA_MAX) {
            rc = -EINVAL;
            goto done;
        }
    }

    rc = rg_buf_puts(&line, "unpack ");
    if (rc == 0)
        rc = append_clean(&line, unpack ? unpack : "ok", line_room(line.len));
    if (rc == 0)
        rc = rg_buf_puts(&line, "\n");
    if (rc == 0)
        rc = rgit_pktline_write(&plain, line.data, line.len);
    for (i = 0; rc == 0 && i < nrefs; i++) {
        rg_buf_reset(&line);
        rc = rg_buf_printf(&line, "%s %s", refs[i].error ? "ng" : "ok", refs[i].refname);
        if (rc == 0 && refs[i].error && refs[i].error[0] != '\0') {
            rc = rg_buf_puts(&line, " ");
            if (rc == 0)
                rc = append_clean(&line, refs[i].error, line_room(line.len));
        }
        if (rc == 0)
            rc = rg_buf_puts(&line, "\n");
        if (rc == 0)
            rc = rgit_pktline_write(&plain, line.data, line.len);
    }
    if (rc == 0)
        rc = rgit_pktline_flush(&plain);
    if (rc < 0)
        goto done;

    if (mode == RGIT_SIDEBAND_NONE) {
        rc = rg_buf_append(out, plain.data, plain.len);
    } else {
        rc = rgit_sideband_write(out, 1, plain.data, plain.len, mode);
        if (rc == 0)
            rc = rgit_pktline_flush(out);
    }
done:
    rg_buf_free(&plain);
    rg_buf_free(&line);
    if (rc < 0)
        rg_buf_truncate(out, start);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Parsing a report
 */

void rgit_report_free(rgit_report *r)
{
    size_t i;

    if (r == NULL)
        return;
    free(r->unpack);
    for (i = 0; i < r->nrefs; i++) {
        free(r->refs[i].refname);
        free(r->refs[i].error);
    }
    free(r->refs);
    r->unpack = NULL;
    r->refs = NULL;
    r->nrefs = 0;
}

/* One `ok <ref>` or `ng <ref> [<reason>]` line, LF already stripped. */
static int parse_status(rgit_report *r, size_t *alloc, const char *s, size_t n, rg_error *err)
{
    rgit_ref_status *st;
    const char *name, *sp;
    size_t namelen, i;
    char q[96];
    int ok;

    if (n >= 3 && memcmp(s, "ok ", 3) == 0)
        ok = 1;
    else if (n >= 3 && memcmp(s, "ng ", 3) == 0)
        ok = 0;
    else if (n >= 7 && memcmp(s, "option ", 7) == 0)
        return rg_error_set(err, RG_E_PROTOCOL,
                            "report-status-v2 option lines, which refgate never asks for");
    else
        return rg_error_set(err, RG_E_PROTOCOL, "unexpected report line \"%s\"",
                            rgit_pktline_quote(q, sizeof(q), s, n));
    name = s + 3;
    sp = memchr(name, ' ', n - 3);
    namelen = sp ? (size_t)(sp - name) : n - 3;
    if (ok && sp != NULL)
        namelen = n - 3; /* "ok" has no reason; a space makes the name bad */
    for (i = 0; i < namelen; i++)
        if ((unsigned char)name[i] <= 0x20 || name[i] == 0x7f)
            break;
    if (namelen == 0 || i < namelen)
        return rg_error_set(err, RG_E_PROTOCOL, "bad ref name in report line \"%s\"",
                            rgit_pktline_quote(q, sizeof(q), s, n));
    if (memchr(s, '\0', n) != NULL)
        return rg_error_set(err, RG_E_PROTOCOL, "a NUL in report line \"%s\"",
                            rgit_pktline_quote(q, sizeof(q), s, n));

    if (r->nrefs == *alloc) {
        size_t nalloc = *alloc ? *alloc * 2 : 8;
        rgit_ref_status *p = realloc(r->refs, nalloc * sizeof(*p));

        if (p == NULL)
            return rg_error_set(err, -ENOMEM, "out of memory");
        r->refs = p;
        *alloc = nalloc;
    }
    st = &r->refs[r->nrefs];
    st->refname = strndup(name, namelen);
    st->error = NULL;
    if (st->refname == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    r->nrefs++;
    if (!ok) {
        /* git accepts `ng <ref>` with no reason; keep it as "". */
        st->error = sp ? strndup(sp + 1, n - (size_t)(sp + 1 - s)) : strdup("");
        if (st->error == NULL)
            return rg_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int rgit_report_parse(rgit_report *out, const char *data, size_t len, rg_error *err)
{
    rgit_pktline pkt;
    size_t off = 0, alloc = 0, n;
    char q[96];
    int rc = 0, got_flush = 0;

    memset(out, 0, sizeof(*out));
    /* Bounded: every turn takes a packet of at least 4 bytes. */
    while (off < len && !got_flush) {
        rc = rgit_pktline_parse(&pkt, data + off, len - off, err);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "the report ends inside a packet");
            goto done;
        }
        off += (size_t)rc;
        rc = 0;
        if (pkt.type == RGIT_PKTLINE_FLUSH) {
            got_flush = 1;
            break;
        }
        if (pkt.type != RGIT_PKTLINE_DATA) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "unexpected delim or response-end packet");
            goto done;
        }
        n = pkt.len;
        if (n > 0 && pkt.data[n - 1] == '\n')
            n--;
        if (out->unpack == NULL) {
            if (n < 8 || memcmp(pkt.data, "unpack ", 7) != 0 || memchr(pkt.data, '\0', n) != NULL) {
                rc = rg_error_set(err, RG_E_PROTOCOL, "expected \"unpack <status>\", got \"%s\"",
                                  rgit_pktline_quote(q, sizeof(q), pkt.data, n));
                goto done;
            }
            out->unpack = strndup(pkt.data + 7, n - 7);
            if (out->unpack == NULL) {
                rc = rg_error_set(err, -ENOMEM, "out of memory");
                goto done;
            }
            continue;
        }
        rc = parse_status(out, &alloc, pkt.data, n, err);
        if (rc < 0)
            goto done;
    }
    if (!got_flush) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "the report ends without a flush");
        goto done;
    }
    if (out->unpack == NULL) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "the report has no unpack line");
        goto done;
    }
    if (off != len) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "%zu bytes after the report's flush", len - off);
        goto done;
    }
done:
    if (rc < 0) {
        rgit_report_free(out);
        rg_error_wrap(err, "report-status");
    }
    return rc;
}

/* ---------------------------------------------------------------------------
 * Side-band demultiplexing
 */

struct rgit_sideband_demux {
    rgit_sideband_mode mode;
    rg_buf report;
    rg_buf progress;
    char *fatal;
    int ended;                  /* the outer flush has been seen */
    int failed;                 /* an error ended the stream; nothing more is read */
    rgit_pktline_reader reader; /* last: it holds a whole packet */
};

int rgit_sideband_demux_new(rgit_sideband_demux **out, rgit_sideband_mode mode, size_t report_max,
                            size_t progress_max)
{
    rgit_sideband_demux *d;

    *out = NULL;
    if (!mode_valid(mode))
        return -EINVAL;
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return -ENOMEM;
    d->mode = mode;
    rg_buf_init(&d->report, report_max);
    rg_buf_init(&d->progress, progress_max);
    rgit_pktline_reader_init(&d->reader);
    *out = d;
    return 0;
}

void rgit_sideband_demux_free(rgit_sideband_demux *d)
{
    if (d == NULL)
        return;
    rg_buf_free(&d->report);
    rg_buf_free(&d->progress);
    free(d->fatal);
    free(d);
}

/*
 * Progress is only shown to a person, so when it passes its cap the rest is
 * dropped rather than failing a push that otherwise went through.
 */
static int append_progress(rgit_sideband_demux *d, const char *s, size_t n)
{
    size_t room = d->progress.max - d->progress.len;

    if (n > room)
        n = room;
    return n ? rg_buf_append(&d->progress, s, n) : 0;
}

static int demux_packet(rgit_sideband_demux *d, const rgit_pktline *pkt, rg_error *err)
{
    const char *s;
    size_t n;
    int rc;

    if (d->ended)
        return rg_error_set(err, RG_E_PROTOCOL, "data after the final flush");
    if (pkt->type == RGIT_PKTLINE_FLUSH) {
        d->ended = 1;
        return 0;
    }
    if (pkt->type != RGIT_PKTLINE_DATA)
        return rg_error_set(err, RG_E_PROTOCOL, "unexpected delim or response-end packet");
    if (pkt->len == 0)
        return rg_error_set(err, RG_E_PROTOCOL, "a side-band packet without a band designator");
    if (d->mode == RGIT_SIDEBAND_1000 && pkt->len + 4 > 1000)
        return rg_error_set(err, RG_E_PROTOCOL,
                            "a %zu-byte packet on side-band, whose packets are at most 1000",
                            pkt->len + 4);
    s = pkt->data + 1;
    n = pkt->len - 1;
    switch ((unsigned char)pkt->data[0]) {
    case 1:
        /* An empty band-1 packet is a keepalive and adds nothing. */
        if (n == 0)
            return 0;
        rc = rg_buf_append(&d->report, s, n);
        if (rc == RG_E_TOO_BIG)
            return rg_error_set(err, rc, "the report is over %zu bytes", d->report.max);
        return rc < 0 ? rg_error_set(err, rc, "out of memory") : 0;
    case 2:
        rc = append_progress(d, s, n);
        return rc < 0 ? rg_error_set(err, rc, "out of memory") : 0;
    case 3:
        /* git dies on the first one; later ones add nothing it would show. */
        if (d->fatal != NULL)
            return 0;
        if (n > 0 && s[n - 1] == '\n')
            n--;
        d->fatal = strndup(s, n);
        return d->fatal ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
    default:
        return rg_error_set(err, RG_E_PROTOCOL, "unknown side-band %u",
                            (unsigned)(unsigned char)pkt->data[0]);
    }
}

int rgit_sideband_demux_feed(rgit_sideband_demux *d, const char *data, size_t len, rg_error *err)
{
    rgit_pktline pkt;
    size_t off = 0, used;
    int rc = 0;

    if (d->failed)
        return rg_error_set(err, RG_E_PROTOCOL, "side-band: the stream already failed");
    if (d->mode == RGIT_SIDEBAND_NONE) {
        rc = rg_buf_append(&d->report, data, len);
        if (rc == RG_E_TOO_BIG)
            rc = rg_error_set(err, rc, "the report is over %zu bytes", d->report.max);
        else if (rc < 0)
            rc = rg_error_set(err, rc, "out of memory");
        goto done;
    }
    /* Bounded: each turn takes a whole packet or the rest of the input. */
    while (off < len) {
        rc = rgit_pktline_reader_next(&pkt, &d->reader, data + off, len - off, &used, err);
        if (rc < 0)
            goto done;
        off += used;
        if (rc == 0)
            break;
        rc = demux_packet(d, &pkt, err);
        if (rc < 0)
            goto done;
    }
done:
    if (rc < 0) {
        d->failed = 1;
        rg_error_wrap(err, "side-band");
        return rc;
    }
    return 0;
}

int rgit_sideband_demux_finish(rgit_sideband_demux *d, rg_error *err)
{
    if (d->failed)
        return rg_error_set(err, RG_E_PROTOCOL, "side-band: the stream already failed");
    if (rgit_pktline_reader_pending(&d->reader))
        return rg_error_set(err, RG_E_PROTOCOL, "side-band: the stream ended inside a packet");
    /*
     * receive-pack ends a side-band answer with a flush; without one the
     * report may be cut short. A fatal message explains the end by itself.
     */
    if (d->mode != RGIT_SIDEBAND_NONE && !d->ended && d->fatal == NULL)
        return rg_error_set(err, RG_E_PROTOCOL, "side-band: the stream ended before its flush");
    return 0;
}

const rg_buf *rgit_sideband_demux_report(const rgit_sideband_demux *d)
{
    return &d->report;
}

const rg_buf *rgit_sideband_demux_progress(const rgit_sideband_demux *d)
{
    return &d->progress;
}

const char *rgit_sideband_demux_fatal(const rgit_sideband_demux *d)
{
    return d->fatal;
}
