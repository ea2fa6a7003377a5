/*
 * Filtering the ref advertisement. A client only asks for capabilities the
 * server advertised, so removing one here (push-cert, report-status-v2, ...)
 * is how the gateway keeps a push inside what it can check and relay.
 *
 * The advertisement is relayed packet by packet; only the capability list
 * after the NUL of the first ref line is rewritten. Capabilities after a NUL
 * on a later line, which git ignores with a warning, are cut off so that no
 * line can smuggle a capability past the filter.
 *
 * A remote upstream's receive-pack advertisement needs a credential that
 * may push (GitHub refuses it to a contents:read token), and the gateway
 * mints a write credential only for a push that policy allowed. So for a
 * remote upstream the advertisement is built from upload-pack's, which the
 * read credential may fetch: the same refs, with receive-pack's shape.
 */
#include "git/advert.h"
#include "git/pktline.h"
#include "git/refname.h"

#include <stdio.h>
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
    rg_buf buf = RG_BUF_INIT(RGIT_PKTLINE_DATA_MAX);
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
        rc = rgit_pktline_write(out, buf.data, buf.len);
    rg_buf_free(&buf);
    return rc;
}

/* A later line with a NUL: keep what precedes it, and its trailing LF. */
static int write_cut_line(rg_buf *out, const char *line, size_t len, const char *nul)
{
    rg_buf buf = RG_BUF_INIT(RGIT_PKTLINE_DATA_MAX);
    int rc;

    rc = rg_buf_append(&buf, line, (size_t)(nul - line));
    if (rc == 0 && line[len - 1] == '\n')
        rc = rg_buf_append(&buf, "\n", 1);
    if (rc == 0)
        rc = rgit_pktline_write(out, buf.data ? buf.data : "", buf.len);
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

/* An advertisement ends with its flush, and nothing follows it. */
static int check_end(int got_flush, size_t off, size_t len, rg_error *err)
{
    if (!got_flush)
        return rg_error_set(err, RG_E_PROTOCOL, "the advertisement ends without a flush");
    if (off != len)
        return rg_error_set(err, RG_E_PROTOCOL, "%zu bytes after the advertisement's flush",
                            len - off);
    return 0;
}

/*
 * A smart-HTTP answer starts with `# service=<name>` and a flush: step
 * *off past them when present. With `expect` set, a preamble for another
 * service is refused.
 */
static int skip_preamble(size_t *off, const char *in, size_t len, const char *expect, rg_error *err)
{
    rgit_pktline pkt;
    size_t end, elen = expect ? strlen(expect) : 0;
    char q[96];
    int rc;

    *off = 0;
    rc = rgit_pktline_parse(&pkt, in, len, err);
    if (rc <= 0 || pkt.type != RGIT_PKTLINE_DATA || pkt.len < 10 ||
        memcmp(pkt.data, "# service=", 10) != 0)
        return 0;
    end = pkt.len - (pkt.data[pkt.len - 1] == '\n');
    if (expect && (end != 10 + elen || memcmp(pkt.data + 10, expect, elen) != 0))
        return rg_error_set(err, RG_E_PROTOCOL, "not a %s advertisement: \"%s\"", expect,
                            rgit_pktline_quote(q, sizeof(q), pkt.data, pkt.len));
    *off = (size_t)rc;
    rc = rgit_pktline_parse(&pkt, in + *off, len - *off, err);
    if (rc <= 0 || pkt.type != RGIT_PKTLINE_FLUSH)
        return rg_error_set(err, RG_E_PROTOCOL, "no flush after the # service= line");
    *off += (size_t)rc;
    return 0;
}

int rgit_advert_filter(rg_buf *out, const char *in, size_t len, const char *const *drop,
                       const char *service, rg_error *err)
{
    rgit_pktline pkt;
    size_t start = out->len, off = 0;
    const char *nul;
    char q[96];
    int rc = 0, first = 1, got_flush = 0;

    if (service != NULL) {
        rc = rgit_pktline_printf(out, "# service=%s\n", service);
        if (rc == 0)
            rc = rgit_pktline_flush(out);
        if (rc < 0) {
            rc = output_error(err, rc);
            goto done;
        }
    }
    /*
     * Upstream's smart-HTTP answer starts with its own preamble and flush;
     * drop them so the output has exactly the one asked for (or none).
     */
    rc = skip_preamble(&off, in, len, NULL, err);
    if (rc < 0)
        goto done;

    /* Bounded: every turn takes a packet of at least 4 bytes. */
    while (off < len) {
        rc = rgit_pktline_parse(&pkt, in + off, len - off, err);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "the advertisement ends inside a packet");
            goto done;
        }
        off += (size_t)rc;
        if (pkt.type == RGIT_PKTLINE_FLUSH) {
            rc = rgit_pktline_flush(out);
            if (rc < 0) {
                rc = output_error(err, rc);
                goto done;
            }
            got_flush = 1;
            break;
        }
        if (pkt.type != RGIT_PKTLINE_DATA || pkt.len == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "unexpected %s packet",
                              pkt.type == RGIT_PKTLINE_DATA ? "empty" : "delim or response-end");
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
                                  rgit_pktline_quote(q, sizeof(q), pkt.data, pkt.len));
                goto done;
            }
            if (pkt.data[8] != '1') {
                rc = rg_error_set(err, RG_E_PROTOCOL,
                                  "upstream answered with protocol version %c, which has no push",
                                  pkt.data[8]);
                goto done;
            }
            rc = rgit_pktline_write(out, pkt.data, pkt.len);
        } else if (first && nul != NULL) {
            rc = write_first_line(out, pkt.data, pkt.len, nul, drop);
            first = 0;
        } else if (nul != NULL) {
            rc = write_cut_line(out, pkt.data, pkt.len, nul);
        } else {
            /* A ref line without capabilities, a shallow line or an ERR. */
            rc = rgit_pktline_write(out, pkt.data, pkt.len);
            first = 0;
        }
        if (rc < 0) {
            rc = output_error(err, rc);
            goto done;
        }
    }
    rc = check_end(got_flush, off, len, err);
    if (rc < 0)
        goto done;
done:
    if (rc < 0) {
        rg_buf_truncate(out, start);
        rg_error_wrap(err, "advertisement");
    }
    return rc < 0 ? rc : 0;
}

/* -------------------------------------- receive-pack from upload-pack */

/*
 * What a push through the gateway may ask of upstream. Offering these
 * without knowing what upstream's receive-pack offers is safe: the gateway
 * relays upstream's own report and progress, so a capability upstream
 * lacks only makes upstream refuse the push with its own error, which
 * reaches the client as any other upstream answer does; and GitHub, GitLab
 * and Gitea support all of them. push-cert and report-status-v2 stay out
 * for the reasons the filter drops them.
 */
#define PUSH_CAPS "report-status delete-refs side-band-64k quiet atomic ofs-delta push-options"

static int is_hex(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/*
 * Upstream's object format from the capability list caps[0..len): "sha1"
 * when it names none, as git assumes.
 */
static int caps_object_format(const char **out, const char *caps, size_t len, rg_error *err)
{
    static const char key[] = "object-format=";
    const size_t klen = sizeof(key) - 1;
    size_t i, start, n;
    char q[96];

    *out = "sha1";
    /* Bounded by the list: each turn moves i past one capability. */
    for (i = 0; i < len;) {
        while (i < len && caps[i] == ' ')
            i++;
        start = i;
        while (i < len && caps[i] != ' ')
            i++;
        n = i - start;
        if (n < klen || memcmp(caps + start, key, klen) != 0)
            continue;
        if (n == klen + 4 && memcmp(caps + start + klen, "sha1", 4) == 0) {
            *out = "sha1";
        } else if (n == klen + 6 && memcmp(caps + start + klen, "sha256", 6) == 0) {
            *out = "sha256";
        } else {
            return rg_error_set(err, RG_E_PROTOCOL, "unknown %s",
                                rgit_pktline_quote(q, sizeof(q), caps + start, n));
        }
    }
    return 0;
}

/* The capability list offered for a push to an upstream of `format`. */
static int build_caps(rg_buf *caps, const char *format, const char *agent, rg_error *err)
{
    int rc;

    rc = rg_buf_printf(caps, "%s object-format=%s", PUSH_CAPS, format);
    if (rc == 0 && agent != NULL)
        rc = rg_buf_printf(caps, " agent=%s", agent);
    if (rc < 0)
        return rg_error_set(err, rc, "the capability list is too long");
    return 0;
}

/* The capability line of receive-pack's advertisement for a repository
 * without refs. */
static int write_no_refs(rg_buf *out, size_t hexsz, const char *caps)
{
    static const char zeros[] = "0000000000000000000000000000000000000000"
                                "000000000000000000000000";

    return rgit_pktline_printf(out, "%.*s capabilities^{}%c%s\n", (int)hexsz, zeros, 0, caps);
}

int rgit_advert_for_push(rg_buf *out, const char *in, size_t len, const char *agent, rg_error *err)
{
    rg_buf caps = RG_BUF_INIT(RGIT_PKTLINE_DATA_MAX);
    rgit_pktline pkt;
    size_t start = out->len, off = 0, end, hexsz = 40, name_len, lines = 0;
    const char *format = "sha1", *nul, *sp, *name;
    char q[96];
    int rc = 0, first = 1, caps_sent = 0, got_flush = 0;

    rc = skip_preamble(&off, in, len, "git-upload-pack", err);
    if (rc < 0)
        goto done;

    /* Bounded: every turn takes a packet of at least 4 bytes. */
    while (off < len) {
        rc = rgit_pktline_parse(&pkt, in + off, len - off, err);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "the advertisement ends inside a packet");
            goto done;
        }
        off += (size_t)rc;
        rc = 0;
        if (pkt.type == RGIT_PKTLINE_FLUSH) {
            got_flush = 1;
            break;
        }
        if (pkt.type != RGIT_PKTLINE_DATA || pkt.len == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "unexpected %s packet",
                              pkt.type == RGIT_PKTLINE_DATA ? "empty" : "delim or response-end");
            goto done;
        }
        lines++;
        end = pkt.len - (pkt.data[pkt.len - 1] == '\n');
        if (end >= 4 && memcmp(pkt.data, "ERR ", 4) == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "ERR %s",
                              rgit_pktline_quote(q, sizeof(q), pkt.data + 4, end - 4));
            goto done;
        }
        if (first && lines == 1 && end >= 8 && memcmp(pkt.data, "version ", 8) == 0) {
            /* Only v0 was asked for; v1 differs from it by this line alone. */
            if (end != 9 || pkt.data[8] != '1') {
                rc = rg_error_set(err, RG_E_PROTOCOL, "upstream answered with \"%s\", not v0",
                                  rgit_pktline_quote(q, sizeof(q), pkt.data, end));
                goto done;
            }
            continue;
        }
        nul = memchr(pkt.data, '\0', end);
        if (first) {
            /* upload-pack's capabilities come on its first line, HEAD's
             * when HEAD resolves: read them before that line is dropped. */
            if (nul != NULL) {
                rc = caps_object_format(&format, nul + 1, end - (size_t)(nul + 1 - pkt.data), err);
                if (rc < 0)
                    goto done;
            }
            hexsz = strcmp(format, "sha256") == 0 ? 64 : 40;
            rc = build_caps(&caps, format, agent, err);
            if (rc < 0)
                goto done;
            first = 0;
        }
        if (nul != NULL)
            end = (size_t)(nul - pkt.data); /* a later line's capabilities are ignored */
        if (end >= 8 && memcmp(pkt.data, "shallow ", 8) == 0 && end - 8 == hexsz &&
            is_hex(pkt.data + 8, hexsz)) {
            /* receive-pack also advertises shallow lines after its refs. */
            if (!caps_sent)
                rc = write_no_refs(out, hexsz, caps.data);
            caps_sent = 1;
            if (rc == 0)
                rc = rgit_pktline_printf(out, "%.*s\n", (int)end, pkt.data);
            if (rc < 0) {
                rc = output_error(err, rc);
                goto done;
            }
            continue;
        }
        sp = memchr(pkt.data, ' ', end);
        if (sp == NULL || (size_t)(sp - pkt.data) != hexsz || !is_hex(pkt.data, hexsz) ||
            end == hexsz + 1) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "not a %s ref line: \"%s\"", format,
                              rgit_pktline_quote(q, sizeof(q), pkt.data, end));
            goto done;
        }
        name = sp + 1;
        name_len = end - hexsz - 1;
        /*
         * receive-pack shows neither HEAD nor peeled tags: neither is a
         * ref a push can update. `capabilities^{}` (an empty repository,
         * newer git) ends in ^{} as well. Nor a name git would refuse
         * (`refs/tags/v1^{}R` from a broken upstream): no push may name
         * it (push.c refuses it), so the client is not shown it.
         */
        if ((name_len == 4 && memcmp(name, "HEAD", 4) == 0) ||
            (name_len >= 3 && memcmp(name + name_len - 3, "^{}", 3) == 0) ||
            rgit_refname_problem(name, name_len) != NULL)
            continue;
        if (!caps_sent)
            rc = rgit_pktline_printf(out, "%.*s%c%s\n", (int)end, pkt.data, 0, caps.data);
        else
            rc = rgit_pktline_printf(out, "%.*s\n", (int)end, pkt.data);
        caps_sent = 1;
        if (rc < 0) {
            rc = output_error(err, rc);
            goto done;
        }
    }
    rc = check_end(got_flush, off, len, err);
    if (rc < 0)
        goto done;
    /* Older git sends only a flush for an empty repository: no
     * capabilities, so sha1 is all that can be assumed. */
    if (first) {
        rc = build_caps(&caps, format, agent, err);
        if (rc < 0)
            goto done;
    }
    if (!caps_sent)
        rc = write_no_refs(out, hexsz, caps.data);
    if (rc == 0)
        rc = rgit_pktline_flush(out);
    if (rc < 0)
        rc = output_error(err, rc);
done:
    if (rc < 0) {
        rg_buf_truncate(out, start);
        rg_error_wrap(err, "upload-pack advertisement");
    }
    rg_buf_free(&caps);
    return rc < 0 ? rc : 0;
}
