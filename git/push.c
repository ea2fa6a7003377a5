/*
 * The receive-pack request: an incremental parser for what a git client
 * POSTs before its pack, and a writer that re-emits such a request with only
 * the commands the gateway lets through.
 *
 * The parser is strict where a lenient reading would let the gateway and
 * upstream see different requests: capabilities only on the first command,
 * shallow lines only before it, one id length throughout, each ref named
 * once, ref names that git's check-ref-format would accept. Everything it
 * keeps is capped by rgit_push_limits, and it never takes a byte of the pack.
 */
#include "git/push.h"
#include "git/refname.h"
#include "git/pktline.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * git sends about ten capabilities; the cap keeps a hostile first line from
 * becoming thousands of tiny allocations.
 */
#define PUSH_MAX_CAPS 256

typedef enum push_state {
    PUSH_EXPECT_FIRST,   /* shallow lines, the first command, or a flush */
    PUSH_EXPECT_COMMAND, /* further commands until the flush */
    PUSH_EXPECT_OPTION,  /* push options until the flush */
    PUSH_DONE,
    PUSH_FAILED,
} push_state;

struct rgit_push_parser {
    rgit_push_limits limits;
    rgit_push_request req;
    push_state state;
    int fail_code;
    size_t header_bytes;
    int hexlen_from_format; /* req.oid_hexlen was set by object-format= */
    size_t updates_alloc, caps_alloc, options_alloc, shallow_alloc;
    rgit_pktline_reader reader; /* last: it holds a whole packet */
};

/* ---------------------------------------------------------------------------
 * Small helpers
 */

/*
 * Make room for one more element in the array whose pointer is at `arrp`
 * (read and written with memcpy, so any element pointer type is fine).
 * Counts are bounded by the limits, far below where doubling overflows.
 */
static int grow(void *arrp, size_t *alloc, size_t n, size_t elem)
{
    size_t nalloc;
    void *old, *p;

    if (n < *alloc)
        return 0;
    nalloc = *alloc ? *alloc * 2 : 8;
    if (nalloc > SIZE_MAX / elem)
        return -ENOMEM;
    memcpy(&old, arrp, sizeof(old));
    p = realloc(old, nalloc * elem);
    if (p == NULL)
        return -ENOMEM;
    memcpy(arrp, &p, sizeof(p));
    *alloc = nalloc;
    return 0;
}

static int is_lower_hex(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static const char *quote(char *q, size_t qsize, const char *s, size_t n)
{
    return rgit_pktline_quote(q, qsize, s, n);
}

int rgit_oid_hex_is_zero(const char *id)
{
    size_t i;

    if (id == NULL || id[0] == '\0')
        return 0;
    for (i = 0; id[i]; i++)
        if (id[i] != '0')
            return 0;
    return 1;
}

int rgit_push_has_cap(const rgit_push_request *req, const char *name)
{
    size_t i, n;

    if (req == NULL || name == NULL)
        return 0;
    n = strlen(name);
    for (i = 0; i < req->ncaps; i++) {
        const char *c = req->caps[i];

        if (strncmp(c, name, n) == 0 && (c[n] == '\0' || c[n] == '='))
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Parsing
 */

/*
 * Every id in a request must have the length of the first one seen, and of
 * object-format= when the client sent it; otherwise the gateway could check
 * one object while upstream stores another.
 */
static int check_hexlen(rgit_push_parser *p, size_t n, const char *what, rg_error *err)
{
    if (p->req.oid_hexlen == 0) {
        p->req.oid_hexlen = n;
        return 0;
    }
    if (p->req.oid_hexlen == n)
        return 0;
    if (p->hexlen_from_format)
        return rg_error_set(err, RG_E_PROTOCOL,
                            "%s has %zu hex digits but object-format=%s wants %zu", what, n,
                            p->req.oid_hexlen == 64 ? "sha256" : "sha1", p->req.oid_hexlen);
    return rg_error_set(err, RG_E_PROTOCOL,
                        "%s has %zu hex digits but an earlier id has %zu: ids of mixed lengths",
                        what, n, p->req.oid_hexlen);
}

/* Parse a 40- or 64-digit id at the start of s[0..n) ending at a space or at n. */
static size_t oid_length(const char *s, size_t n)
{
    size_t len;

    for (len = 0; len < n && s[len] != ' '; len++)
        if (len > RGIT_OID_HEX_MAX)
            return 0;
    if ((len != 40 && len != 64) || !is_lower_hex(s, len))
        return 0;
    return len;
}

static int parse_caps(rgit_push_parser *p, const char *s, size_t n, rg_error *err)
{
    char q[96];
    size_t i = 0, start, len;
    int rc;

    if (memchr(s, '\0', n) != NULL)
        return rg_error_set(err, RG_E_PROTOCOL, "a second NUL in the capability list");
    /* git itself puts a space before the first capability; skip any run. */
    while (i < n) {
        while (i < n && s[i] == ' ')
            i++;
        if (i == n)
            break;
        start = i;
        while (i < n && s[i] != ' ') {
            unsigned char c = (unsigned char)s[i];

            if (c < 0x21 || c > 0x7e)
                return rg_error_set(err, RG_E_PROTOCOL,
                                    "capability \"%s\" contains a non-printable byte",
                                    quote(q, sizeof(q), s + start, n - start));
            i++;
        }
        len = i - start;
        if (p->req.ncaps >= PUSH_MAX_CAPS)
            return rg_error_set(err, RG_E_TOO_BIG, "more than %d capabilities", PUSH_MAX_CAPS);
        if (len > 14 && memcmp(s + start, "object-format=", 14) == 0) {
            size_t want;

            if (len == 14 + 4 && memcmp(s + start + 14, "sha1", 4) == 0)
                want = 40;
            else if (len == 14 + 6 && memcmp(s + start + 14, "sha256", 6) == 0)
                want = 64;
            else
                return rg_error_set(err, RG_E_PROTOCOL, "unknown %s",
                                    quote(q, sizeof(q), s + start, len));
            if (p->req.oid_hexlen != 0 && p->req.oid_hexlen != want)
                return rg_error_set(err, RG_E_PROTOCOL, "%s contradicts %s",
                                    quote(q, sizeof(q), s + start, len),
                                    p->hexlen_from_format ? "an earlier object-format"
                                                          : "the length of a shallow id");
            p->req.oid_hexlen = want;
            p->hexlen_from_format = 1;
        }
        rc = grow(&p->req.caps, &p->caps_alloc, p->req.ncaps, sizeof(char *));
        if (rc < 0)
            return rg_error_set(err, rc, "out of memory");
        p->req.caps[p->req.ncaps] = strndup(s + start, len);
        if (p->req.caps[p->req.ncaps] == NULL)
            return rg_error_set(err, -ENOMEM, "out of memory");
        p->req.ncaps++;
    }
    return 0;
}

static int add_shallow(rgit_push_parser *p, const char *s, size_t n, rg_error *err)
{
    char q[96];
    int rc;

    if ((n != 40 && n != 64) || !is_lower_hex(s, n))
        return rg_error_set(err, RG_E_PROTOCOL, "expected \"shallow <id>\", got \"shallow %s\"",
                            quote(q, sizeof(q), s, n));
    rc = check_hexlen(p, n, "a shallow id", err);
    if (rc < 0)
        return rc;
    rc = grow(&p->req.shallow, &p->shallow_alloc, p->req.nshallow, sizeof(char *));
    if (rc < 0)
        return rg_error_set(err, rc, "out of memory");
    p->req.shallow[p->req.nshallow] = strndup(s, n);
    if (p->req.shallow[p->req.nshallow] == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    p->req.nshallow++;
    return 0;
}

static int add_command(rgit_push_parser *p, const char *s, size_t n, rg_error *err)
{
    rgit_ref_update *u;
    const char *why;
    char q[160];
    size_t idlen;
    int rc;

    idlen = oid_length(s, n);
    if (idlen == 0 || n < 2 * idlen + 3 || s[idlen] != ' ' || s[2 * idlen + 1] != ' ' ||
        !is_lower_hex(s + idlen + 1, idlen))
        return rg_error_set(err, RG_E_PROTOCOL, "expected \"<old-id> <new-id> <ref>\", got \"%s\"",
                            quote(q, sizeof(q), s, n));
    rc = check_hexlen(p, idlen, "a command's id", err);
    if (rc < 0)
        return rc;
    why = rgit_refname_problem(s + 2 * idlen + 2, n - 2 * idlen - 2);
    if (why != NULL)
        return rg_error_set(err, RG_E_PROTOCOL, "bad ref name \"%s\": %s",
                            quote(q, sizeof(q), s + 2 * idlen + 2, n - 2 * idlen - 2), why);
    if (p->req.nupdates >= p->limits.max_updates)
        return rg_error_set(err, RG_E_TOO_BIG, "more than %zu commands in one push",
                            p->limits.max_updates);
    rc = grow(&p->req.updates, &p->updates_alloc, p->req.nupdates, sizeof(rgit_ref_update));
    if (rc < 0)
        return rg_error_set(err, rc, "out of memory");
    u = &p->req.updates[p->req.nupdates];
    memcpy(u->old_id, s, idlen);
    u->old_id[idlen] = '\0';
    memcpy(u->new_id, s + idlen + 1, idlen);
    u->new_id[idlen] = '\0';
    u->refname = strndup(s + 2 * idlen + 2, n - 2 * idlen - 2);
    if (u->refname == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    p->req.nupdates++;
    return 0;
}

static int add_option(rgit_push_parser *p, const char *s, size_t n, rg_error *err)
{
    int rc;

    /* git push refuses to send either, and a NUL would cut the C string. */
    if (memchr(s, '\0', n) != NULL || memchr(s, '\n', n) != NULL)
        return rg_error_set(err, RG_E_PROTOCOL, "a push option contains a NUL or a newline");
    if (p->req.npush_options >= p->limits.max_push_options)
        return rg_error_set(err, RG_E_TOO_BIG, "more than %zu push options",
                            p->limits.max_push_options);
    rc = grow(&p->req.push_options, &p->options_alloc, p->req.npush_options, sizeof(char *));
    if (rc < 0)
        return rg_error_set(err, rc, "out of memory");
    p->req.push_options[p->req.npush_options] = strndup(s, n);
    if (p->req.push_options[p->req.npush_options] == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    p->req.npush_options++;
    return 0;
}

/* A shallow line or a command; the caller has stripped one trailing LF. */
static int handle_line(rgit_push_parser *p, const char *s, size_t n, rg_error *err)
{
    const char *nul;
    int rc;

    if (n == 0)
        return rg_error_set(err, RG_E_PROTOCOL, "an empty pkt-line in the command list");
    if (n >= 8 && memcmp(s, "shallow ", 8) == 0) {
        /*
         * The grammar puts shallow lines first; git's receive-pack reads
         * them anywhere, but the writer moves them first, so accepting them
         * later would change the request it forwards.
         */
        if (p->state != PUSH_EXPECT_FIRST)
            return rg_error_set(err, RG_E_PROTOCOL, "a shallow line after a command");
        return add_shallow(p, s + 8, n - 8, err);
    }
    if (n >= 9 && memcmp(s, "push-cert", 9) == 0 && (n == 9 || s[9] == '\0'))
        return rg_error_set(err, RG_E_PROTOCOL, "signed pushes (push-cert) are not supported");
    nul = memchr(s, '\0', n);
    if (nul != NULL) {
        /*
         * Only the first command carries capabilities. Accepting them later
         * would let the client negotiate something the forwarded request
         * (whose capabilities come from the first command) does not say.
         */
        if (p->state != PUSH_EXPECT_FIRST)
            return rg_error_set(err, RG_E_PROTOCOL, "capabilities after the first command");
        rc = parse_caps(p, nul + 1, n - (size_t)(nul + 1 - s), err);
        if (rc < 0)
            return rc;
        n = (size_t)(nul - s);
    }
    rc = add_command(p, s, n, err);
    if (rc < 0)
        return rc;
    p->state = PUSH_EXPECT_COMMAND;
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * A ref named twice would be decided twice and reported ambiguously; git's
 * receive-pack refuses such a push too, so refuse it before evaluating.
 */
static int check_duplicates(const rgit_push_request *req, rg_error *err)
{
    const char **names = NULL;
    char q[160];
    size_t i;
    int rc = 0;

    if (req->nupdates < 2)
        return 0;
    names = malloc(req->nupdates * sizeof(*names));
    if (names == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    for (i = 0; i < req->nupdates; i++)
        names[i] = req->updates[i].refname;
    qsort(names, req->nupdates, sizeof(*names), compare_names);
    for (i = 1; i < req->nupdates; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "ref %s appears in more than one command",
                              quote(q, sizeof(q), names[i], strlen(names[i])));
            goto done;
        }
    }
done:
    free(names);
    return rc;
}

static int handle_packet(rgit_push_parser *p, const rgit_pktline *pkt, rg_error *err)
{
    const char *s = pkt->data;
    size_t n = pkt->len;

    if (pkt->type == RGIT_PKTLINE_DELIM || pkt->type == RGIT_PKTLINE_RESPONSE_END)
        return rg_error_set(err, RG_E_PROTOCOL, "unexpected %s packet (push is protocol v0/v1)",
                            pkt->type == RGIT_PKTLINE_DELIM ? "delim" : "response-end");
    if (pkt->type == RGIT_PKTLINE_FLUSH) {
        /*
         * Push options follow only when the client asked for them; without
         * commands there are no capabilities, so a lone flush (git's probe)
         * or shallow lines and a flush complete the request.
         */
        if (p->state == PUSH_EXPECT_COMMAND && rgit_push_has_cap(&p->req, "push-options"))
            p->state = PUSH_EXPECT_OPTION;
        else
            p->state = PUSH_DONE;
        return 0;
    }
    if (n > 0 && s[n - 1] == '\n')
        n--;
    if (p->state == PUSH_EXPECT_OPTION)
        return add_option(p, s, n, err);
    return handle_line(p, s, n, err);
}

/* ---------------------------------------------------------------------------
 * Public interface
 */

int rgit_push_parser_new(rgit_push_parser **out, const rgit_push_limits *limits)
{
    static const rgit_push_limits defaults = RGIT_PUSH_LIMITS_INIT;
    rgit_push_parser *p;

    *out = NULL;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->limits = limits ? *limits : defaults;
    p->state = PUSH_EXPECT_FIRST;
    rgit_pktline_reader_init(&p->reader);
    *out = p;
    return 0;
}

static void free_strings(char **v, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void rgit_push_parser_free(rgit_push_parser *p)
{
    size_t i;

    if (p == NULL)
        return;
    for (i = 0; i < p->req.nupdates; i++)
        free(p->req.updates[i].refname);
    free(p->req.updates);
    free_strings(p->req.caps, p->req.ncaps);
    free_strings(p->req.push_options, p->req.npush_options);
    free_strings(p->req.shallow, p->req.nshallow);
    free(p);
}

int rgit_push_parser_feed(rgit_push_parser *p, const char *data, size_t len, size_t *consumed,
                          rg_error *err)
{
    rgit_pktline pkt;
    size_t off = 0, used;
    int rc = 0;

    if (consumed)
        *consumed = 0;
    if (p->state == PUSH_DONE)
        return rg_error_set(err, -EINVAL,
                            "push request: the header is complete; what follows is the pack");
    if (p->state == PUSH_FAILED)
        return rg_error_set(err, p->fail_code, "push request: parsing already failed");
    /* Bounded: each turn either takes a whole packet (>= 4 bytes) or ends. */
    while (off < len) {
        rc = rgit_pktline_reader_next(&pkt, &p->reader, data + off, len - off, &used, err);
        if (rc < 0)
            goto done;
        off += used;
        p->header_bytes += used;
        if (p->header_bytes > p->limits.max_header_bytes) {
            rc = rg_error_set(err, RG_E_TOO_BIG, "the commands are over %zu bytes",
                              p->limits.max_header_bytes);
            goto done;
        }
        if (rc == 0)
            break;
        rc = handle_packet(p, &pkt, err);
        if (rc < 0)
            goto done;
        if (p->state == PUSH_DONE) {
            rc = check_duplicates(&p->req, err);
            if (rc < 0)
                goto done;
            /* SHA-1 is the protocol's default when nothing names an id. */
            if (p->req.oid_hexlen == 0)
                p->req.oid_hexlen = 40;
            rc = 1;
            break;
        }
    }
done:
    if (consumed)
        *consumed = off;
    if (rc < 0) {
        p->state = PUSH_FAILED;
        p->fail_code = rc;
        rg_error_wrap(err, "push request");
    }
    return rc;
}

const rgit_push_request *rgit_push_parser_request(const rgit_push_parser *p)
{
    /* Half a request must not be mistaken for the whole one. */
    if (p == NULL || p->state != PUSH_DONE)
        return NULL;
    return &p->req;
}

/* ---------------------------------------------------------------------------
 * Writing
 */

int rgit_push_request_write(rg_buf *out, const rgit_push_request *req, const size_t *keep,
                            size_t nkeep, const char *ensure_cap)
{
    rg_buf line = RG_BUF_INIT(RGIT_PKTLINE_DATA_MAX);
    unsigned char *seen = NULL;
    size_t start = out->len, i, j;
    int rc = 0;

    if (req == NULL || (nkeep > 0 && keep == NULL)) {
        rc = -EINVAL;
        goto done;
    }
    /* Each command at most once, so a ref is never sent twice upstream. */
    seen = calloc(req->nupdates ? req->nupdates : 1, 1);
    if (seen == NULL) {
        rc = -ENOMEM;
        goto done;
    }
    for (i = 0; i < nkeep; i++) {
        if (keep[i] >= req->nupdates || seen[keep[i]]) {
            rc = -EINVAL;
            goto done;
        }
        seen[keep[i]] = 1;
    }

    /* git's own send-pack writes shallow lines with a LF, commands without. */
    for (i = 0; i < req->nshallow; i++) {
        rc = rgit_pktline_printf(out, "shallow %s\n", req->shallow[i]);
        if (rc < 0)
            goto done;
    }
    for (i = 0; i < nkeep; i++) {
        const rgit_ref_update *u = &req->updates[keep[i]];

        rg_buf_reset(&line);
        rc = rg_buf_printf(&line, "%s %s %s", u->old_id, u->new_id, u->refname);
        if (rc < 0)
            goto done;
        /*
         * The capabilities go on whichever command is now first. git puts a
         * space before the first one; mirror that byte for byte, since
         * upstream servers are tested against git's own output.
         */
        if (i == 0 && (req->ncaps > 0 || ensure_cap)) {
            rc = rg_buf_append(&line, "\0", 1);
            for (j = 0; rc == 0 && j < req->ncaps; j++) {
                rc = rg_buf_append(&line, " ", 1);
                if (rc == 0)
                    rc = rg_buf_puts(&line, req->caps[j]);
            }
            if (rc == 0 && ensure_cap && !rgit_push_has_cap(req, ensure_cap)) {
                rc = rg_buf_append(&line, " ", 1);
                if (rc == 0)
                    rc = rg_buf_puts(&line, ensure_cap);
            }
            if (rc < 0)
                goto done;
        }
        rc = rgit_pktline_write(out, line.data, line.len);
        if (rc < 0)
            goto done;
    }
    rc = rgit_pktline_flush(out);
    if (rc < 0)
        goto done;
    /* Without a command there are no capabilities to announce options. */
    if (nkeep > 0 && rgit_push_has_cap(req, "push-options")) {
        for (i = 0; i < req->npush_options; i++) {
            rc = rgit_pktline_write(out, req->push_options[i], strlen(req->push_options[i]));
            if (rc < 0)
                goto done;
        }
        rc = rgit_pktline_flush(out);
    }
done:
    free(seen);
    rg_buf_free(&line);
    if (rc < 0)
        rg_buf_truncate(out, start);
    return rc;
}
