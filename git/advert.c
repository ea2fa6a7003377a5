/*
 * Filtering the ref advertisement. A client only asks for capabilities the
 * server advertised, so removing one here (push-cert, report-status-v2, ...)
 * is how the gateway keeps a push inside what it can check and relay.
 *
 * The advertisement is relayed packet by packet; only the capability list
 * after the NUL of the first ref line is rewritten. Capabilities after a NUL
 * on a later line, which git ignores with a warning, are cut off so that no
 * line can smuggle a capability past the filter.
 */
#include "git/advert.h"
#include "git/pktline.h"

#include <string.h>

static int dropped(const char *cap, size_t len, const char *const *drop)
{
    size_t i, n;

    for (i = 0; drop != NULL && drop[i] != NULL; i++) {
        n = strlen(drop[i]);
        if (len >= n && memcmp(cap, drop[i], n) == 0 && (len == n || cap[n] == '='))
            return 1;
    }
    return 0;
}

/*
 * Write the first ref line with its capability list filtered. `nul` points
 * at the NUL inside line[0..len); a trailing LF is kept after the list.
 */
static int write_first_line(rg_buf *out, const char *line, size_t len, const char *nul,
                            const char *const *drop)
{
    rg_buf buf = RG_BUF_INIT(GIT_PKTLINE_DATA_MAX);
    size_t i, start, end = len;
    int rc, any = 0;

    if (end > 0 && line[end - 1] == '\n')
        end--;
    rc = rg_buf_append(&buf, line, (size_t)(nul - line) + 1);
    /* Bounded by the line: each turn moves i past one capability. */
    for (i = (size_t)(nul - line) + 1; rc == 0 && i < end;) {
        while (i < end && line[i] == ' ')
            i++;
        start = i;
        while (i < end && line[i] != ' ')
            i++;
        if (i == start || dropped(line + start, i - start, drop))
            continue;
        if (any)
            rc = rg_buf_append(&buf, " ", 1);
        if (rc == 0)
            rc = rg_buf_append(&buf, line + start, i - start);
        any = 1;
    }
    if (rc == 0 && end < len)
        rc = rg_buf_append(&buf, "\n", 1);
    if (rc == 0)
        rc = git_pktline_write(out, buf.data, buf.len);
    rg_buf_free(&buf);
    return rc;
}

/* A later line with a NUL: keep what precedes it, and its trailing LF. */
static int write_cut_line(rg_buf *out, const char *line, size_t len, const char *nul)
{
    rg_buf buf = RG_BUF_INIT(GIT_PKTLINE_DATA_MAX);
    int rc;

    rc = rg_buf_append(&buf, line, (size_t)(nul - line));
    if (rc == 0 && line[len - 1] == '\n')
        rc = rg_buf_append(&buf, "\n", 1);
    if (rc == 0)
        rc = git_pktline_write(out, buf.data ? buf.data : "", buf.len);
    rg_buf_free(&buf);
    return rc;
}

/* Give a failed write to `out` a message; protocol errors already have one. */
static int output_error(rg_error *err, int rc)
{
    if (rc == RG_E_TOO_BIG)
        return rg_error_set(err, rc, "the filtered advertisement is over its cap");
    if (rc == -ENOMEM)
        return rg_error_set(err, rc, "out of memory");
    return rg_error_set(err, rc, "a line does not fit in a pkt-line");
}

int git_advert_filter(rg_buf *out, const char *in, size_t len, const char *const *drop,
                      const char *service, rg_error *err)
{
    git_pktline pkt;
    size_t start = out->len, off = 0;
    const char *nul;
    char q[96];
    int rc = 0, first = 1, got_flush = 0;

    if (service != NULL) {
        rc = git_pktline_printf(out, "# service=%s\n", service);
        if (rc == 0)
            rc = git_pktline_flush(out);
        if (rc < 0) {
            rc = output_error(err, rc);
            goto done;
        }
    }
    /*
     * Upstream's smart-HTTP answer starts with its own preamble and flush;
     * drop them so the output has exactly the one asked for (or none).
     */
    rc = git_pktline_parse(&pkt, in, len, err);
    if (rc > 0 && pkt.type == GIT_PKTLINE_DATA && pkt.len >= 10 &&
        memcmp(pkt.data, "# service=", 10) == 0) {
        off = (size_t)rc;
        rc = git_pktline_parse(&pkt, in + off, len - off, err);
        if (rc <= 0 || pkt.type != GIT_PKTLINE_FLUSH) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "no flush after the # service= line");
            goto done;
        }
        off += (size_t)rc;
    }
    rc = 0;

    /* Bounded: every turn takes a packet of at least 4 bytes. */
    while (off < len) {
        rc = git_pktline_parse(&pkt, in + off, len - off, err);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "the advertisement ends inside a packet");
            goto done;
        }
        off += (size_t)rc;
        if (pkt.type == GIT_PKTLINE_FLUSH) {
            rc = git_pktline_flush(out);
            if (rc < 0) {
                rc = output_error(err, rc);
                goto done;
            }
            got_flush = 1;
            break;
        }
        if (pkt.type != GIT_PKTLINE_DATA || pkt.len == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "unexpected %s packet",
                              pkt.type == GIT_PKTLINE_DATA ? "empty" : "delim or response-end");
            goto done;
        }
        nul = memchr(pkt.data, '\0', pkt.len);
        if (nul == pkt.data) {
            /* Cutting the capabilities would leave an empty packet. */
            rc = rg_error_set(err, RG_E_PROTOCOL, "a line with capabilities but no ref");
            goto done;
        }
        if (first && pkt.len >= 9 && memcmp(pkt.data, "version ", 8) == 0) {
            /* "version 1" precedes the refs in protocol v1; v2 has no push. */
            if (pkt.len > 9 && !(pkt.len == 10 && pkt.data[9] == '\n')) {
                rc = rg_error_set(err, RG_E_PROTOCOL, "bad version line \"%s\"",
                                  git_pktline_quote(q, sizeof(q), pkt.data, pkt.len));
                goto done;
            }
            if (pkt.data[8] != '1') {
                rc = rg_error_set(err, RG_E_PROTOCOL,
                                  "upstream answered with protocol version %c, which has no push",
                                  pkt.data[8]);
                goto done;
            }
            rc = git_pktline_write(out, pkt.data, pkt.len);
        } else if (first && nul != NULL) {
            rc = write_first_line(out, pkt.data, pkt.len, nul, drop);
            first = 0;
        } else if (nul != NULL) {
            rc = write_cut_line(out, pkt.data, pkt.len, nul);
        } else {
            /* A ref line without capabilities, a shallow line or an ERR. */
            rc = git_pktline_write(out, pkt.data, pkt.len);
            first = 0;
        }
        if (rc < 0) {
            rc = output_error(err, rc);
            goto done;
        }
    }
    if (!got_flush) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "the advertisement ends without a flush");
        goto done;
    }
    if (off != len) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "%zu bytes after the advertisement's flush",
                          len - off);
        goto done;
    }
done:
    if (rc < 0) {
        if (out->data != NULL && out->len > start) {
            out->len = start;
            out->data[start] = '\0';
        }
        rg_error_wrap(err, "advertisement");
    }
    return rc < 0 ? rc : 0;
}
