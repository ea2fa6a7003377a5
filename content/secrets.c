/*
 * The secret scanner (see secrets.h): one Hyperscan streaming database for
 * the built-in detectors and the configuration's patterns, and the C that
 * turns its matches into findings.
 *
 * Why Hyperscan: all patterns run in one pass over the input whatever their
 * number, with literal prefilters (ghp_, AKIA, -----BEGIN ...) doing most
 * of the work; its compiled database is data, not generated code, so it
 * runs under the systemd unit's MemoryDenyWriteExecute=yes, which PCRE2's
 * JIT (the only way PCRE2 would be fast enough) cannot. Streaming mode
 * keeps the matcher's state between chunks, so a secret split across two
 * chunks of a large blob is still found and no chunk is rescanned.
 *
 * Hyperscan reports where a match starts and ends (HS_FLAG_SOM_LEFTMOST);
 * the bytes themselves are read from the current chunk or from a window of
 * the bytes before it, which is at least as long as the longest possible
 * match (every pattern's width is bounded: extra patterns that are not are
 * refused). Line numbers come from a cursor that moves with the matches,
 * counting newlines over at most the window backwards.
 */
#include "content/secrets.h"
#include "content/detect.h"

#include <hs.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

/* The most bytes one match can span: built-in or extra. */
#define MATCH_MAX                                                                                  \
    (CONTENT_DETECT_WIDTH_MAX > CONTENT_SECRETS_WIDTH_MAX ? CONTENT_DETECT_WIDTH_MAX               \
                                                          : CONTENT_SECRETS_WIDTH_MAX)
/* Bytes kept from before the current chunk; twice this is allocated so the
 * window slides once per WINDOW bytes fed, not once per chunk. */
#define WINDOW (4 * MATCH_MAX)
/* hs_scan_stream takes an unsigned int length. */
#define PIECE_MAX (1u << 30)
#define FP_HEX    16

struct pattern {
    char name[CONTENT_SECRETS_NAME_MAX + 1];
    const content_detector *det; /* NULL for an extra pattern */
};

struct content_secrets {
    hs_database_t *db;
    struct pattern *patterns;
    size_t npatterns;
    char (*allow)[CONTENT_SECRETS_FINGERPRINT_MAX]; /* sorted */
    size_t nallow;
};

/* An AWS key id whose secret may still follow it. */
struct aws_pending {
    uint64_t offset, line, end;
    unsigned char id[20];
};

struct content_secrets_scan {
    const content_secrets *s;
    content_secrets_found_fn fn;
    void *arg;
    hs_scratch_t *scratch;
    hs_stream_t *stream;

    /* The bytes a match may be read from: hist holds the hist_len bytes
     * before offset `base`, cur the cur_len bytes from it. */
    unsigned char *hist;
    size_t hist_len;
    const unsigned char *cur;
    size_t cur_len;
    uint64_t base;

    /* Line cursor: byte `line_pos` is on line `line_no`. */
    uint64_t line_pos, line_no;

    uint64_t *last_start; /* per pattern: one finding per match start */
    content_detect_key key;
    int key_active;
    uint64_t key_offset, key_line;
    struct aws_pending aws; /* the last key id, when aws_pending */
    int aws_pending;
    uint64_t aws_claimed; /* secrets end after this to be a later id's */

    int stopped;   /* the callback asked to stop */
    int error;     /* a negative code once the scan failed */
    rg_error *err; /* where the current call reports */
};

/* ------------------------------------------------------------------------
 * Names and fingerprints
 * ------------------------------------------------------------------------ */

static int valid_name(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n > CONTENT_SECRETS_NAME_MAX)
        return 0;
    return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int valid_fingerprint(const char *fp)
{
    const char *colon = fp != NULL ? strrchr(fp, ':') : NULL;
    char name[CONTENT_SECRETS_NAME_MAX + 1];
    size_t n;

    if (colon == NULL || (size_t)(colon - fp) > CONTENT_SECRETS_NAME_MAX)
        return 0;
    n = (size_t)(colon - fp);
    memcpy(name, fp, n);
    name[n] = '\0';
    return valid_name(name) && strlen(colon + 1) == FP_HEX &&
           strspn(colon + 1, "0123456789abcdef") == FP_HEX;
}

static int cmp_fingerprint(const void *a, const void *b)
{
    return strcmp(a, b);
}

static int fingerprint(char out[CONTENT_SECRETS_FINGERPRINT_MAX], const char *kind,
                       const unsigned char *value, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char digits[FP_HEX + 1];

    if (EVP_Digest(value, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < FP_HEX / 2)
        return -ENOMEM;
    for (size_t i = 0; i < FP_HEX / 2; i++) {
        digits[2 * i] = hex[md[i] >> 4];
        digits[2 * i + 1] = hex[md[i] & 15];
    }
    digits[FP_HEX] = '\0';
    snprintf(out, CONTENT_SECRETS_FINGERPRINT_MAX, "%s:%s", kind, digits);
    return 0;
}

/* ------------------------------------------------------------------------
 * Compiling
 * ------------------------------------------------------------------------ */

static int name_taken(const content_secrets *s, size_t n, const char *name)
{
    if (strcmp(name, CONTENT_DETECT_AWS_PAIR) == 0)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(s->patterns[i].name, name) == 0)
            return 1;
    return 0;
}

/* Refuse a regex that does not compile, matches empty text or has no bound. */
static int check_width(const char *name, const char *regex, unsigned flags, unsigned max,
                       rg_error *err)
{
    hs_expr_info_t *info = NULL;
    hs_compile_error_t *cerr = NULL;
    int rc = 0;

    if (hs_expression_info(regex, flags, &info, &cerr) != HS_SUCCESS) {
        rc = rg_error_set(err, RG_E_CONFIG, "secret pattern \"%s\": %s", name,
                          cerr != NULL ? cerr->message : "does not compile");
        goto done;
    }
    if (info->min_width == 0)
        rc = rg_error_set(err, RG_E_CONFIG, "secret pattern \"%s\" can match empty text", name);
    else if (info->max_width > max)
        rc = rg_error_set(err, RG_E_CONFIG,
                          "secret pattern \"%s\" can match more than %u bytes: bound its "
                          "repeats (e.g. {1,64} instead of + or *)",
                          name, max);
done:
    free(info);
    hs_free_compile_error(cerr);
    return rc;
}

static int compile(content_secrets *s, const content_secret_pattern *extra, rg_error *err)
{
    const char **exprs = NULL;
    unsigned *flags = NULL, *ids = NULL;
    hs_compile_error_t *cerr = NULL;
    int rc = 0;

    exprs = calloc(s->npatterns, sizeof(*exprs));
    flags = calloc(s->npatterns, sizeof(*flags));
    ids = calloc(s->npatterns, sizeof(*ids));
    if (exprs == NULL || flags == NULL || ids == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < s->npatterns; i++) {
        const content_detector *d = s->patterns[i].det;

        exprs[i] = d != NULL ? d->regex : extra[i - content_ndetectors].regex;
        flags[i] = HS_FLAG_SOM_LEFTMOST | (d != NULL && d->caseless ? HS_FLAG_CASELESS : 0);
        ids[i] = (unsigned)i;
        rc = check_width(s->patterns[i].name, exprs[i], flags[i],
                         d != NULL ? CONTENT_DETECT_WIDTH_MAX : CONTENT_SECRETS_WIDTH_MAX, err);
        if (rc < 0)
            goto done;
    }
    if (hs_compile_multi(exprs, flags, ids, (unsigned)s->npatterns,
                         HS_MODE_STREAM | HS_MODE_SOM_HORIZON_LARGE, NULL, &s->db,
                         &cerr) != HS_SUCCESS) {
        if (cerr != NULL && cerr->expression >= 0 && (size_t)cerr->expression < s->npatterns)
            rc = rg_error_set(err, RG_E_CONFIG, "secret pattern \"%s\": %s",
                              s->patterns[cerr->expression].name, cerr->message);
        else
            rc = rg_error_set(err, RG_E_CONFIG, "secret patterns: %s",
                              cerr != NULL ? cerr->message : "do not compile");
    }
done:
    hs_free_compile_error(cerr);
    free(exprs);
    free(flags);
    free(ids);
    return rc;
}

int content_secrets_new(content_secrets **out, const content_secret_pattern *extra, size_t nextra,
                        const char *const *allow_fingerprints, size_t nallow, rg_error *err)
{
    content_secrets *s = NULL;
    int rc = 0;

    *out = NULL;
    if (hs_valid_platform() != HS_SUCCESS)
        return rg_error_set(err, -ENOTSUP, "secret scanning: this CPU lacks what Hyperscan needs");
    if (nextra > UINT_MAX - content_ndetectors)
        return rg_error_set(err, RG_E_CONFIG, "too many secret patterns");
    s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->patterns = calloc(content_ndetectors + nextra, sizeof(*s->patterns));
        s->allow = calloc(nallow > 0 ? nallow : 1, sizeof(*s->allow));
    }
    if (s == NULL || s->patterns == NULL || s->allow == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < content_ndetectors; i++) {
        snprintf(s->patterns[i].name, sizeof(s->patterns[i].name), "%s", content_detectors[i].name);
        s->patterns[i].det = &content_detectors[i];
    }
    s->npatterns = content_ndetectors;
    for (size_t i = 0; i < nextra; i++) {
        const char *name = extra[i].name;

        if (!valid_name(name)) {
            rc = rg_error_set(err, RG_E_CONFIG,
                              "secret pattern %zu: its name must be 1..%d of [A-Za-z0-9_.-]", i + 1,
                              CONTENT_SECRETS_NAME_MAX);
            goto done;
        }
        if (name_taken(s, s->npatterns, name)) {
            rc = rg_error_set(err, RG_E_CONFIG, "secret pattern \"%s\": the name is taken", name);
            goto done;
        }
        if (extra[i].regex == NULL || extra[i].regex[0] == '\0') {
            rc = rg_error_set(err, RG_E_CONFIG, "secret pattern \"%s\" has no regex", name);
            goto done;
        }
        snprintf(s->patterns[s->npatterns].name, sizeof(s->patterns[0].name), "%s", name);
        s->npatterns++;
    }
    for (size_t i = 0; i < nallow; i++) {
        if (!valid_fingerprint(allow_fingerprints[i])) {
            rc = rg_error_set(err, RG_E_CONFIG,
                              "allowed secret fingerprint %zu is not <detector>:<16 lowercase "
                              "hex digits>",
                              i + 1);
            goto done;
        }
        snprintf(s->allow[i], sizeof(s->allow[i]), "%s", allow_fingerprints[i]);
    }
    s->nallow = nallow;
    qsort(s->allow, s->nallow, sizeof(*s->allow), cmp_fingerprint);
    rc = compile(s, extra, err);
done:
    if (rc < 0)
        content_secrets_free(s);
    else
        *out = s;
    return rc;
}

void content_secrets_free(content_secrets *s)
{
    if (s == NULL)
        return;
    hs_free_database(s->db);
    free(s->patterns);
    free(s->allow);
    free(s);
}

/* ------------------------------------------------------------------------
 * The bytes around a match
 * ------------------------------------------------------------------------ */

/* Copy bytes [from, to) out of the window and the current chunk. */
static int view_copy(const content_secrets_scan *sc, uint64_t from, uint64_t to, unsigned char *out)
{
    uint64_t lo = sc->base - sc->hist_len;

    if (from < lo || to < from || to > sc->base + sc->cur_len)
        return -1;
    if (from < sc->base) {
        uint64_t n = (to < sc->base ? to : sc->base) - from;

        memcpy(out, sc->hist + (from - lo), n);
        out += n;
        from += n;
    }
    if (to > from)
        memcpy(out, sc->cur + (from - sc->base), to - from);
    return 0;
}

static uint64_t count_newlines(const unsigned char *p, size_t n)
{
    const unsigned char *end = p + n;
    uint64_t count = 0;

    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        count++;
        p++;
    }
    return count;
}

/* Newlines in [from, to), which lie within the window and the chunk. */
static uint64_t view_newlines(const content_secrets_scan *sc, uint64_t from, uint64_t to)
{
    uint64_t lo = sc->base - sc->hist_len, count = 0;

    if (from < sc->base) {
        uint64_t e = to < sc->base ? to : sc->base;

        count += count_newlines(sc->hist + (from - lo), e - from);
        from = e;
    }
    if (to > from)
        count += count_newlines(sc->cur + (from - sc->base), to - from);
    return count;
}

/* The line of byte `at`; moves the cursor there. */
static uint64_t line_at(content_secrets_scan *sc, uint64_t at)
{
    if (at >= sc->line_pos)
        sc->line_no += view_newlines(sc, sc->line_pos, at);
    else
        sc->line_no -= view_newlines(sc, at, sc->line_pos);
    sc->line_pos = at;
    return sc->line_no;
}

/* Keep the last WINDOW bytes before the next chunk. */
static void window_push(content_secrets_scan *sc, const unsigned char *p, size_t n)
{
    if (n >= WINDOW) {
        memcpy(sc->hist, p + n - WINDOW, WINDOW);
        sc->hist_len = WINDOW;
        return;
    }
    if (sc->hist_len + n > 2 * WINDOW) {
        size_t keep = WINDOW - n;

        memmove(sc->hist, sc->hist + sc->hist_len - keep, keep);
        sc->hist_len = keep;
    }
    memcpy(sc->hist + sc->hist_len, p, n);
    sc->hist_len += n;
}

/* ------------------------------------------------------------------------
 * Findings
 * ------------------------------------------------------------------------ */

/* Report one secret unless allowed; 1 when the callback says stop. */
static int emit(content_secrets_scan *sc, const char *kind, uint64_t offset, uint64_t line,
                const unsigned char *value, size_t len)
{
    content_secret_finding f;

    memset(&f, 0, sizeof(f));
    f.kind = kind;
    f.offset = offset;
    f.line = line;
    if (fingerprint(f.fingerprint, kind, value, len) < 0) {
        sc->error = rg_error_set(sc->err, -ENOMEM, "secret scanning: cannot hash a finding");
        return 1;
    }
    if (sc->s->nallow > 0 && bsearch(f.fingerprint, sc->s->allow, sc->s->nallow,
                                     sizeof(*sc->s->allow), cmp_fingerprint) != NULL)
        return 0;
    if (sc->fn(&f, sc->arg) != 0) {
        sc->stopped = 1;
        return 1;
    }
    return 0;
}

/* Wipe the body's characters, then the rest (one explicit_bzero over the
 * whole struct trips GCC's -Wstringop-overflow, which sees only `value`). */
static void key_wipe(content_detect_key *k)
{
    explicit_bzero(k->value, sizeof(k->value));
    *k = (content_detect_key){.n = 0};
}

static int key_finish(content_secrets_scan *sc)
{
    int stop = 0;

    if (sc->key_active && sc->key.n >= CONTENT_DETECT_KEY_LEAD)
        stop = emit(sc, "private-key", sc->key_offset, sc->key_line, sc->key.value, sc->key.n);
    key_wipe(&sc->key);
    sc->key_active = 0;
    return stop;
}

/* Feed a pending private key body the current chunk from `at` on. */
static int key_continue(content_secrets_scan *sc, uint64_t at)
{
    if (!sc->key_active || at < sc->base || at >= sc->base + sc->cur_len)
        return 0;
    content_detect_key_feed(&sc->key, sc->cur + (at - sc->base), sc->cur_len - (at - sc->base));
    return sc->key.done ? key_finish(sc) : 0;
}

static int aws_emit(content_secrets_scan *sc, const struct aws_pending *id,
                    const unsigned char *secret, uint64_t secret_end)
{
    unsigned char pair[sizeof(id->id) + 1 + CONTENT_DETECT_AWS_SECRET_LEN];
    int stop;

    memcpy(pair, id->id, sizeof(id->id));
    pair[sizeof(id->id)] = ':';
    memcpy(pair + sizeof(id->id) + 1, secret, CONTENT_DETECT_AWS_SECRET_LEN);
    stop = emit(sc, CONTENT_DETECT_AWS_PAIR, id->offset, id->line, pair, sizeof(pair));
    explicit_bzero(pair, sizeof(pair));
    sc->aws_claimed = secret_end;
    return stop;
}

/*
 * Look for the pending key id's secret in [its end, `until`): the first
 * one there is its own. `closed`: the object ends at `until`.
 */
static int aws_forward(content_secrets_scan *sc, uint64_t until, int closed)
{
    unsigned char buf[CONTENT_DETECT_AWS_RANGE];
    struct aws_pending *p = &sc->aws;
    uint64_t end =
        p->end + CONTENT_DETECT_AWS_RANGE < until ? p->end + CONTENT_DETECT_AWS_RANGE : until;
    size_t off;
    int stop = 0;

    if (view_copy(sc, p->end, end, buf) == 0 &&
        content_detect_aws_secret_find(&off, buf, (size_t)(end - p->end), 1,
                                       !(closed && end == until), 0))
        stop = aws_emit(sc, p, buf + off, p->end + off + CONTENT_DETECT_AWS_SECRET_LEN);
    explicit_bzero(p, sizeof(*p));
    explicit_bzero(buf, sizeof(buf));
    sc->aws_pending = 0;
    return stop;
}

/* At a chunk's end (or the object's, `final`): decide the pending key id
 * once all of its range is here. */
static int aws_resolve(content_secrets_scan *sc, int final)
{
    uint64_t avail = sc->base + sc->cur_len;

    if (!sc->aws_pending || (!final && avail < sc->aws.end + CONTENT_DETECT_AWS_RANGE))
        return 0;
    return aws_forward(sc, avail, final);
}

/*
 * A key id pairs with the nearest secret: the first after it, unless
 * another key id comes first, else the last before it that no earlier id
 * took. So each row of a credentials file pairs its own key.
 */
static int aws_id(content_secrets_scan *sc, uint64_t from, uint64_t to, const unsigned char *id)
{
    unsigned char buf[CONTENT_DETECT_AWS_RANGE];
    uint64_t lo = sc->base - sc->hist_len, b;
    size_t off;
    int stop = 0;

    if (to - from != sizeof(sc->aws.id))
        return 0;
    if (sc->aws_pending && (stop = aws_forward(sc, from, 0)) != 0)
        return stop;
    sc->aws.offset = from;
    sc->aws.line = line_at(sc, from);
    sc->aws.end = to;
    memcpy(sc->aws.id, id, sizeof(sc->aws.id));
    b = from - lo > CONTENT_DETECT_AWS_RANGE ? from - CONTENT_DETECT_AWS_RANGE : lo;
    if (b < sc->aws_claimed)
        b = sc->aws_claimed;
    if (b < from && view_copy(sc, b, from, buf) == 0 &&
        content_detect_aws_secret_find(&off, buf, (size_t)(from - b), b > 0, 1, 1)) {
        stop = aws_emit(sc, &sc->aws, buf + off, b + off + CONTENT_DETECT_AWS_SECRET_LEN);
        explicit_bzero(&sc->aws, sizeof(sc->aws));
    } else {
        sc->aws_pending = 1;
    }
    /* Secrets before this id are not for later ids. */
    if (sc->aws_claimed < to)
        sc->aws_claimed = to;
    explicit_bzero(buf, sizeof(buf));
    return stop;
}

/*
 * `aws_secret_access_key = <secret>` after its key id is both an
 * assignment and the id's secret: report it once, as the pair.
 */
static int aws_pending_before(const content_secrets_scan *sc, uint64_t offset,
                              const unsigned char *value, size_t len)
{
    return sc->aws_pending && content_detect_aws_secret(value, len) && offset >= sc->aws.end &&
           offset - sc->aws.end <= CONTENT_DETECT_AWS_WINDOW;
}

static int on_match(unsigned int id, unsigned long long from, unsigned long long to,
                    unsigned int flags, void *ctx)
{
    content_secrets_scan *sc = ctx;
    const struct pattern *p = &sc->s->patterns[id];
    unsigned char m[MATCH_MAX];
    size_t mlen = (size_t)(to - from), off = 0, len = 0;
    int stop = 0;

    (void)flags;
    if (from == sc->last_start[id])
        return 0;
    sc->last_start[id] = from;
    if (to - from > MATCH_MAX || view_copy(sc, from, to, m) < 0) {
        sc->error = rg_error_set(sc->err, -EFAULT,
                                 "secret scanning: a match of %s fell outside the window", p->name);
        return 1;
    }
    if (p->det == NULL) {
        stop = emit(sc, p->name, from, line_at(sc, from), m, mlen);
        goto done;
    }
    if (!content_detect_value(&off, &len, p->det, m, mlen))
        goto done;
    switch (p->det->kind) {
    case CONTENT_DETECT_PRIVATE_KEY:
        if (sc->key_active && (stop = key_finish(sc)) != 0)
            goto done;
        sc->key_active = 1;
        sc->key_offset = from;
        sc->key_line = line_at(sc, from);
        sc->key.headers = len == 0;
        content_detect_key_feed(&sc->key, m + off, len);
        stop = sc->key.done ? key_finish(sc) : key_continue(sc, to);
        break;
    case CONTENT_DETECT_AWS_ID:
        stop = aws_id(sc, from + off, from + off + len, m + off);
        break;
    case CONTENT_DETECT_ASSIGNMENT:
        if (aws_pending_before(sc, from + off, m + off, len))
            break;
        /* fall through */
    case CONTENT_DETECT_TOKEN:
        stop = emit(sc, p->name, from + off, line_at(sc, from + off), m + off, len);
        break;
    }
done:
    explicit_bzero(m, mlen);
    return stop;
}

/* ------------------------------------------------------------------------
 * Scanning
 * ------------------------------------------------------------------------ */

static void scan_reset(content_secrets_scan *sc)
{
    /* Only what this object put there: no more than it fed. */
    explicit_bzero(sc->hist, sc->base < 2 * WINDOW ? (size_t)sc->base : 2 * WINDOW);
    sc->hist_len = 0;
    sc->cur = NULL;
    sc->cur_len = 0;
    sc->base = 0;
    sc->line_pos = 0;
    sc->line_no = 1;
    for (size_t i = 0; i < sc->s->npatterns; i++)
        sc->last_start[i] = UINT64_MAX;
    key_wipe(&sc->key);
    sc->key_active = 0;
    explicit_bzero(&sc->aws, sizeof(sc->aws));
    sc->aws_pending = 0;
    sc->aws_claimed = 0;
    sc->stopped = 0;
    sc->error = 0;
}

int content_secrets_scan_new(content_secrets_scan **out, const content_secrets *s,
                             content_secrets_found_fn fn, void *arg, rg_error *err)
{
    content_secrets_scan *sc;
    int rc = 0;

    *out = NULL;
    if (s == NULL || fn == NULL)
        return rg_error_set(err, -EINVAL, "secret scan: no scanner or no callback");
    sc = calloc(1, sizeof(*sc));
    if (sc == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    sc->s = s;
    sc->fn = fn;
    sc->arg = arg;
    sc->hist = malloc(2 * WINDOW);
    sc->last_start = calloc(s->npatterns, sizeof(*sc->last_start));
    if (sc->hist == NULL || sc->last_start == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if (hs_alloc_scratch(s->db, &sc->scratch) != HS_SUCCESS ||
        hs_open_stream(s->db, 0, &sc->stream) != HS_SUCCESS) {
        rc = rg_error_set(err, -ENOMEM, "secret scan: cannot allocate Hyperscan's state");
        goto done;
    }
    scan_reset(sc);
done:
    if (rc < 0)
        content_secrets_scan_free(sc);
    else
        *out = sc;
    return rc;
}

void content_secrets_scan_free(content_secrets_scan *sc)
{
    if (sc == NULL)
        return;
    if (sc->stream != NULL)
        hs_close_stream(sc->stream, NULL, NULL, NULL);
    hs_free_scratch(sc->scratch);
    if (sc->hist != NULL)
        scan_reset(sc);
    free(sc->hist);
    free(sc->last_start);
    free(sc);
}

static int result(const content_secrets_scan *sc)
{
    return sc->error < 0 ? sc->error : sc->stopped ? 1 : 0;
}

static int feed_piece(content_secrets_scan *sc, const unsigned char *p, unsigned n)
{
    hs_error_t hrc;

    sc->cur = p;
    sc->cur_len = n;
    if (sc->key_active && key_continue(sc, sc->base) != 0)
        goto done;
    hrc = hs_scan_stream(sc->stream, (const char *)p, n, 0, sc->scratch, on_match, sc);
    if (hrc != HS_SUCCESS && hrc != HS_SCAN_TERMINATED && sc->error == 0)
        sc->error = rg_error_set(sc->err, -EIO, "secret scan: Hyperscan failed (%d)", hrc);
    if (result(sc) == 0)
        aws_resolve(sc, 0);
done:
    if (result(sc) == 0) {
        line_at(sc, sc->base + n);
        window_push(sc, p, n);
        sc->base += n;
    }
    sc->cur = NULL;
    sc->cur_len = 0;
    return result(sc);
}

int content_secrets_scan_feed(content_secrets_scan *sc, const void *data, size_t len, rg_error *err)
{
    const unsigned char *p = data;

    sc->err = err;
    if (result(sc) != 0)
        return sc->error < 0 ? rg_error_set(err, sc->error, "secret scan failed earlier") : 1;
    while (len > 0 && result(sc) == 0) {
        unsigned n = len > PIECE_MAX ? PIECE_MAX : (unsigned)len;

        feed_piece(sc, p, n);
        p += n;
        len -= n;
    }
    return result(sc);
}

int content_secrets_scan_end(content_secrets_scan *sc, rg_error *err)
{
    int rc;

    sc->err = err;
    if (result(sc) == 0 && key_finish(sc) == 0 && aws_resolve(sc, 1) == 0) {
        hs_error_t hrc = hs_reset_stream(sc->stream, 0, sc->scratch, on_match, sc);

        if (hrc != HS_SUCCESS && hrc != HS_SCAN_TERMINATED && sc->error == 0)
            sc->error =
                rg_error_set(err, -EIO, "secret scan: Hyperscan failed at the end (%d)", hrc);
    }
    rc = result(sc);
    if (sc->stopped || sc->error < 0)
        hs_reset_stream(sc->stream, 0, NULL, NULL, NULL);
    scan_reset(sc);
    return rc;
}

int content_secrets_scan_buffer(content_secrets_scan *sc, const void *data, size_t len,
                                rg_error *err)
{
    int rc = content_secrets_scan_feed(sc, data, len, err);

    if (rc != 0) {
        content_secrets_scan_end(sc, err);
        return rc;
    }
    return content_secrets_scan_end(sc, err);
}
