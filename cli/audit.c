/*
 * `refgate audit`: read and verify the audit log: the database's records
 * when the config has "state.postgres" (the file is then never looked
 * at, and a database that cannot be reached is an error, not an empty
 * log), else <state_dir>/audit.jsonl.
 *
 * Listing shows one row per ref update, however many records it took: a
 * forwarded ref's decision record is joined to the outcome record that
 * names it (decision_seq), and a decision whose outcome is not in the log
 * shows as pending. Rows are an aligned table for people, or JSON Lines
 * for programs (complete records exactly as stored; joined rows as the
 * decision with the outcome filled in and the outcome record beside it).
 * `--events` lists the gateway's events instead. The log can be large, so
 * it is streamed (twice for a table: once to size the columns, once to
 * print) and only the rows still waiting for their outcome are held, in
 * seq order. Everything shown in the table came from pushes, so it is
 * cleaned for the terminal first: control characters and bidirectional
 * overrides become '?', and a long field is shortened with an ellipsis.
 *
 * `verify` recomputes the hash chain (audit_verify) and says whether the
 * log is intact or where it first breaks; with `--head SEQ:HASH` (a head
 * the gateway logged, kept where its host cannot rewrite it) it also finds
 * records cut from the end. In the database it also checks the chain ends
 * where the audit_head row says. `head` prints the log's head as SEQ:HASH.
 *
 * Exit status: 0 done (verify: intact), 1 failed (verify: broken), 2 usage.
 */
#include "audit/audit.h"
#include "cli/audit_int.h"
#include "cli/cli.h"
#include "config/config.h"
#include "db/pool.h"
#include "util/text.h"

#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define AUDIT_FILE "audit.jsonl"

/* ------------------------------------------------------------------------
 * Times
 * ------------------------------------------------------------------------ */

/* Read exactly n digits at *p into *out and advance; 0 when they are not there. */
int cli_audit_digits(const char **p, int n, int *out)
{
    int v = 0, i;

    for (i = 0; i < n; i++) {
        if ((*p)[i] < '0' || (*p)[i] > '9')
            return 0;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return 1;
}

/*
 * Milliseconds since the epoch from RFC 3339 (`2026-11-30T12:00:00Z`,
 * fractions and `+02:00` offsets allowed, a space for the T), or a bare
 * date taken as midnight UTC. A time without a zone is taken as UTC.
 */
static int parse_time(int64_t *out, const char *s)
{
    int y, mo, d, h = 0, mi = 0, sec = 0, oh = 0, om = 0, sign = 0, ms = 0, scale = 100;
    const char *p = s;
    struct tm tm;
    time_t t;

    if (!cli_audit_digits(&p, 4, &y) || *p++ != '-' || !cli_audit_digits(&p, 2, &mo) ||
        *p++ != '-' || !cli_audit_digits(&p, 2, &d))
        return -1;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!cli_audit_digits(&p, 2, &h) || *p++ != ':' || !cli_audit_digits(&p, 2, &mi))
            return -1;
        if (*p == ':') {
            p++;
            if (!cli_audit_digits(&p, 2, &sec))
                return -1;
            if (*p == '.') {
                p++;
                if (*p < '0' || *p > '9')
                    return -1;
                for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
                    ms += (*p - '0') * scale;
            }
        }
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            sign = *p++ == '-' ? -1 : 1;
            if (!cli_audit_digits(&p, 2, &oh))
                return -1;
            if (*p == ':')
                p++;
            if (!cli_audit_digits(&p, 2, &om))
                return -1;
        }
    }
    if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 ||
        oh > 23 || om > 59)
        return -1;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    t = timegm(&tm);
    if (t == (time_t)-1)
        return -1;
    *out = ((int64_t)t - sign * (oh * 3600 + om * 60)) * 1000 + ms;
    return 0;
}

/* --since: an RFC 3339 time, a date, or an age with its unit: 10m, 2h, 3d, 1w. */
static int parse_since(int64_t *out, const char *s)
{
    size_t len = strlen(s);
    long long age;

    if (parse_time(out, s) == 0)
        return 0;
    /* A bare number is no age: it is more likely a mistyped date. */
    if (len == 0 || s[len - 1] < 'a' || s[len - 1] > 'z')
        return -1;
    age = rg_duration_parse(s);
    if (age < 0)
        return -1;
    *out = ((int64_t)time(NULL) - age) * 1000;
    return 0;
}

/* ------------------------------------------------------------------------
 * Cleaning and shortening fields for the terminal
 * ------------------------------------------------------------------------ */

/* Decode one UTF-8 character at s; *cp is U+FFFD for a malformed one. */
static size_t utf8_next(uint32_t *cp, const unsigned char *s)
{
    size_t len, i;
    uint32_t c;

    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        c = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        c = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        c = s[0] & 0x07;
    } else {
        *cp = 0xfffd;
        return 1;
    }
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *cp = 0xfffd;
            return i;
        }
        c = c << 6 | (s[i] & 0x3f);
    }
    *cp = c;
    return len;
}

static size_t utf8_put(char *out, uint32_t c)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | c >> 12);
        out[1] = (char)(0x80 | (c >> 6 & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | c >> 18);
    out[1] = (char)(0x80 | (c >> 12 & 0x3f));
    out[2] = (char)(0x80 | (c >> 6 & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/*
 * Characters a terminal would act on rather than show: C0 and C1 controls
 * (ESC and CSI start escape sequences) and the bidirectional overrides that
 * make text display in another order than it reads.
 */
static int unsafe_char(uint32_t c)
{
    return c < 0x20 || (c >= 0x7f && c < 0xa0) || (c >= 0x202a && c <= 0x202e) ||
           (c >= 0x2066 && c <= 0x2069) || c == 0x200e || c == 0x200f;
}

enum cut { CUT_END, CUT_MIDDLE };

typedef struct cell {
    char *text;  /* cleaned and shortened, UTF-8 */
    size_t cols; /* characters, taken as columns */
} cell;

/* Clean `s` for the terminal and shorten it to at most `max` columns. */
static int cell_make(cell *out, const char *s, size_t max, enum cut cut)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "-");
    uint32_t *cps = NULL;
    size_t n = 0, i, head, tail, k = 0, len = strlen((const char *)p);
    int rc = -ENOMEM;

    out->text = NULL;
    out->cols = 0;
    cps = malloc((len + 1) * sizeof(*cps));
    if (cps == NULL)
        goto done;
    for (i = 0; p[i] != '\0'; n++) {
        i += utf8_next(&cps[n], p + i);
        if (unsafe_char(cps[n]))
            cps[n] = '?';
    }
    out->text = malloc(max * 4 + 8);
    if (out->text == NULL)
        goto done;
    if (n <= max) {
        head = n;
        tail = 0;
    } else if (cut == CUT_MIDDLE) {
        head = (max - 1) / 2;
        tail = max - 1 - head;
    } else {
        head = max - 1;
        tail = 0;
    }
    for (i = 0; i < head; i++)
        k += utf8_put(out->text + k, cps[i]);
    if (n > max)
        k += utf8_put(out->text + k, 0x2026); /* … */
    for (i = n - tail; i < n; i++)
        k += utf8_put(out->text + k, cps[i]);
    out->text[k] = '\0';
    out->cols = n > max ? max : n;
    rc = 0;
done:
    free(cps);
    return rc;
}

/* ------------------------------------------------------------------------
 * Records and filters
 * ------------------------------------------------------------------------ */

typedef struct filters {
    const char *run, *repo, *ref, *decision;
    int has_since;
    int64_t since_ms;
} filters;

static const char *str_field(json_t *rec, const char *key)
{
    return json_string_value(json_object_get(rec, key)); /* NULL unless a string */
}

static int glob_or_equal(const char *pattern, const char *s)
{
    if (strpbrk(pattern, "*?[") != NULL)
        return fnmatch(pattern, s, 0) == 0;
    return !strcmp(pattern, s);
}

static int ref_matches(const char *want, const char *ref)
{
    char full[1024];

    if (glob_or_equal(want, ref))
        return 1;
    /* `main` names refs/heads/main (or a tag called main), as git does. */
    if (strncmp(want, "refs/", 5) != 0) {
        snprintf(full, sizeof(full), "refs/heads/%s", want);
        if (glob_or_equal(full, ref))
            return 1;
        snprintf(full, sizeof(full), "refs/tags/%s", want);
        if (glob_or_equal(full, ref))
            return 1;
    }
    return 0;
}

static int record_matches(json_t *rec, const filters *f)
{
    const char *v;
    int64_t t;

    if (f->run && !((v = str_field(rec, "run")) && !strcmp(v, f->run)))
        return 0;
    if (f->repo && !((v = str_field(rec, "repo")) && glob_or_equal(f->repo, v)))
        return 0;
    if (f->ref && !((v = str_field(rec, "ref")) && ref_matches(f->ref, v)))
        return 0;
    if (f->decision && !((v = str_field(rec, "decision")) && !strcmp(v, f->decision)))
        return 0;
    if (f->has_since &&
        !((v = str_field(rec, "time")) && parse_time(&t, v) == 0 && t >= f->since_ms))
        return 0;
    return 1;
}

/* ------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------ */

enum { C_TIME, C_RUN, C_REPO, C_REF, C_ACTION, C_DECISION, C_RULE, C_REASON, C_OUTCOME, NCOLS };

static const struct {
    const char *title;
    const char *key;
    size_t max;
    enum cut cut;
} columns[NCOLS] = {
    [C_TIME] = {"TIME", "time", 20, CUT_END},
    [C_RUN] = {"RUN", "run", 20, CUT_END},
    [C_REPO] = {"REPO", "repo", 32, CUT_MIDDLE},
    [C_REF] = {"REF", "ref", 32, CUT_MIDDLE},
    [C_ACTION] = {"ACTION", "action", 12, CUT_END},
    [C_DECISION] = {"DECISION", "decision", 8, CUT_END},
    [C_RULE] = {"RULE", "rule", 24, CUT_END},
    [C_REASON] = {"REASON", "reason", 48, CUT_END},
    [C_OUTCOME] = {"OUTCOME", "outcome", 40, CUT_END},
};

/* The cells of one row; the caller frees them with row_free. */
static int row_make(cell row[NCOLS], json_t *rec, const char *outcome)
{
    char when[32];
    const char *v;
    int c, rc = 0;

    for (c = 0; c < NCOLS; c++)
        row[c].text = NULL;
    for (c = 0; c < NCOLS && rc == 0; c++) {
        v = str_field(rec, columns[c].key);
        if (c == C_TIME && v != NULL && strlen(v) >= 19 && strlen(v) < sizeof(when)) {
            /* Seconds are enough on screen: 2026-11-30T12:00:05Z. */
            snprintf(when, sizeof(when), "%.19sZ", v);
            v = when;
        } else if (c == C_REF && v != NULL && !strncmp(v, "refs/heads/", 11)) {
            v += 11; /* branches as git shows them */
        } else if (c == C_OUTCOME) {
            v = outcome;
        }
        rc = cell_make(&row[c], v, columns[c].max, columns[c].cut);
    }
    return rc;
}

static void row_free(cell row[NCOLS])
{
    int c;

    for (c = 0; c < NCOLS; c++)
        free(row[c].text);
}

static void row_print(const char *const text[NCOLS], const size_t cols[NCOLS],
                      const size_t width[NCOLS])
{
    size_t pad;
    int c;

    for (c = 0; c < NCOLS; c++) {
        fputs(text[c], stdout);
        if (c == NCOLS - 1)
            break;
        for (pad = cols[c]; pad < width[c] + 2; pad++)
            putchar(' ');
    }
    putchar('\n');
}

/* ------------------------------------------------------------------------
 * Rows: a decision joined to its outcome
 * ------------------------------------------------------------------------ */

/*
 * How many rows may wait for their outcome records at once. A push's
 * outcomes follow its decisions (10,000 refs: 10,000 rows); past this a
 * row is shown as pending rather than hold the log in memory.
 */
#define ROWS_WAITING_MAX 100000

typedef struct row {
    json_t *decision; /* the decision record (v1 or v2) */
    char *line;       /* its stored bytes */
    size_t len;
    uint64_t seq;
    int forwarded;   /* a v2 decision written pending: an outcome record completes it */
    json_t *outcome; /* that outcome record, once read */
} row;

typedef int (*row_fn)(void *ctx, const row *r);

/* The rows read but not yet handed out, oldest first (so in seq order). */
typedef struct row_queue {
    row *rows;
    size_t head, n, cap;
    uint64_t forced; /* rows handed out as pending because too many waited */
} row_queue;

static void row_clear(row *r)
{
    json_decref(r->decision);
    json_decref(r->outcome);
    free(r->line);
}

static int queue_push(row_queue *q, json_t *rec, const audit_line *line, int forwarded)
{
    row *grown, *r;

    if (q->head > 0 && q->n == q->cap) {
        memmove(q->rows, q->rows + q->head, (q->n - q->head) * sizeof(*q->rows));
        q->n -= q->head;
        q->head = 0;
    }
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 64;
        grown = realloc(q->rows, q->cap * sizeof(*q->rows));
        if (grown == NULL)
            return -ENOMEM;
        q->rows = grown;
    }
    r = &q->rows[q->n];
    memset(r, 0, sizeof(*r));
    r->line = malloc(line->len + 1);
    if (r->line == NULL)
        return -ENOMEM;
    memcpy(r->line, line->data, line->len + 1);
    r->len = line->len;
    r->seq = (uint64_t)json_integer_value(json_object_get(rec, "seq"));
    r->decision = json_incref(rec);
    r->forwarded = forwarded;
    q->n++;
    return 0;
}

/* The waiting row of decision `seq`, found by bisection (rows are in seq order). */
static row *queue_find(row_queue *q, uint64_t seq)
{
    size_t lo = q->head, hi = q->n, mid;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (q->rows[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < q->n && q->rows[lo].seq == seq && q->rows[lo].forwarded && !q->rows[lo].outcome)
        return &q->rows[lo];
    return NULL;
}

/* Hand out rows from the front that are complete (all of them when `all`). */
static int queue_flush(row_queue *q, int all, row_fn fn, void *ctx)
{
    row *r;
    int rc = 0;

    while (q->head < q->n) {
        r = &q->rows[q->head];
        if (!all && r->forwarded && r->outcome == NULL) {
            if (q->n - q->head <= ROWS_WAITING_MAX)
                break;
            q->forced++;
        }
        if (rc == 0)
            rc = fn(ctx, r);
        row_clear(r);
        q->head++;
    }
    if (q->head == q->n)
        q->head = q->n = 0;
    return rc;
}

static void queue_free(row_queue *q)
{
    for (size_t i = q->head; i < q->n; i++)
        row_clear(&q->rows[i]);
    free(q->rows);
}

/* What the OUTCOME column and the joined JSON say for a row. */
static const char *row_outcome(const row *r)
{
    if (r->outcome != NULL)
        return str_field(r->outcome, "outcome");
    if (r->forwarded)
        return "pending";
    return str_field(r->decision, "outcome");
}

/* ------------------------------------------------------------------------
 * Listing
 * ------------------------------------------------------------------------ */

typedef struct scan_opts {
    const filters *f;
    uint64_t upto; /* stop after this line (0: no limit) */
    int warn;      /* say once per line on stderr that it is not a record */
    int events;    /* hand out event records instead of rows */
} scan_opts;

typedef int (*event_fn)(void *ctx, const audit_line *line, json_t *rec);

/*
 * Call fn for each row (or with o->events, efn for each event) that passes
 * the filters. Lines that are not records are skipped, and said so on
 * stderr when o->warn is set. *last gets the number of the last line read.
 */
static int scan(const audit_source *src, const scan_opts *o, row_fn fn, event_fn efn, void *ctx,
                uint64_t *last)
{
    rg_error err = RG_ERROR_INIT;
    row_queue q = {0};
    audit_reader *r = NULL;
    audit_line line;
    json_t *rec, *d;
    row *waiting;
    int rc, kind, version;

    rc = audit_reader_open(&r, src, &err);
    if (rc < 0) {
        fprintf(stderr, "refgate audit: %s\n", err.msg);
        return -1;
    }
    while ((rc = audit_reader_next(r, &line, &err)) == 1) {
        rc = 0;
        if (last != NULL)
            *last = line.number;
        rec = line.too_long ? NULL : json_loadb(line.data, line.len, 0, NULL);
        kind = audit_json_kind(&version, rec);
        if (kind == 0) {
            if (o->warn)
                fprintf(stderr,
                        "refgate audit: line %llu is not a record; skipped (run "
                        "`refgate audit verify`)\n",
                        (unsigned long long)line.number);
        } else if (o->events) {
            if (kind == AUDIT_EVENT && record_matches(rec, o->f))
                rc = efn(ctx, &line, rec);
        } else if (kind == AUDIT_DECISION) {
            if (record_matches(rec, o->f))
                rc = queue_push(&q, rec, &line,
                                version == 2 && json_is_null(json_object_get(rec, "outcome")));
        } else if (kind == AUDIT_OUTCOME) {
            /* Not found: its decision did not pass the filters. */
            d = json_object_get(rec, "decision_seq");
            waiting = json_is_integer(d) ? queue_find(&q, (uint64_t)json_integer_value(d)) : NULL;
            if (waiting != NULL)
                waiting->outcome = json_incref(rec);
        }
        json_decref(rec);
        if (rc == 0 && !o->events)
            rc = queue_flush(&q, 0, fn, ctx);
        if (rc < 0 || (o->upto && line.number >= o->upto))
            break;
    }
    if (rc >= 0 && !o->events)
        rc = queue_flush(&q, 1, fn, ctx);
    if (rc < 0)
        fprintf(stderr, "refgate audit: %s\n", err.msg[0] ? err.msg : strerror(-rc));
    if (q.forced > 0 && o->warn)
        fprintf(stderr,
                "refgate audit: %llu rows shown as pending: more than %d were waiting for "
                "their outcome records\n",
                (unsigned long long)q.forced, ROWS_WAITING_MAX);
    queue_free(&q);
    audit_reader_free(r);
    return rc < 0 ? -1 : 0;
}

/* --json: a complete record as stored; a forwarded one joined to its outcome. */
static int print_json(void *ctx, const row *r)
{
    json_t *joined;
    char *text;
    const char *outcome = r->outcome ? str_field(r->outcome, "outcome") : NULL;

    (void)ctx;
    if (!r->forwarded) {
        fwrite(r->line, 1, r->len, stdout);
        putchar('\n');
        return 0;
    }
    joined = json_deep_copy(r->decision);
    if (joined == NULL ||
        json_object_set_new(joined, "outcome", outcome ? json_string(outcome) : json_null()) < 0 ||
        json_object_set(joined, "outcome_record", r->outcome ? r->outcome : json_null()) < 0) {
        json_decref(joined);
        return -ENOMEM;
    }
    text = json_dumps(joined, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(joined);
    if (text == NULL)
        return -ENOMEM;
    puts(text);
    free(text);
    return 0;
}

typedef struct table {
    size_t width[NCOLS];
    uint64_t rows;
} table;

static int measure_row(void *ctx, const row *r)
{
    table *t = ctx;
    cell cells[NCOLS];
    int c, rc;

    rc = row_make(cells, r->decision, row_outcome(r));
    for (c = 0; c < NCOLS && rc == 0; c++)
        if (cells[c].cols > t->width[c])
            t->width[c] = cells[c].cols;
    row_free(cells);
    t->rows++;
    return rc;
}

static int print_row(void *ctx, const row *r)
{
    table *t = ctx;
    const char *text[NCOLS];
    size_t cols[NCOLS];
    cell cells[NCOLS];
    int c, rc;

    rc = row_make(cells, r->decision, row_outcome(r));
    if (rc == 0) {
        for (c = 0; c < NCOLS; c++) {
            text[c] = cells[c].text;
            cols[c] = cells[c].cols;
        }
        row_print(text, cols, t->width);
    }
    row_free(cells);
    return rc;
}

/* --events: TIME EVENT DETAIL, or the stored line with --json. */
static int print_event(void *ctx, const audit_line *line, json_t *rec)
{
    const int *json = ctx;
    const char *t = str_field(rec, "time");
    char when[32];
    cell ev, detail;
    int rc;

    if (*json) {
        fwrite(line->data, 1, line->len, stdout);
        putchar('\n');
        return 0;
    }
    if (t != NULL && strlen(t) >= 19) {
        snprintf(when, sizeof(when), "%.19sZ", t);
        t = when;
    }
    /* 16: the longest event name, approval-consume. */
    rc = cell_make(&ev, str_field(rec, "event"), 16, CUT_END);
    if (rc == 0 && (rc = cell_make(&detail, str_field(rec, "detail"), 120, CUT_END)) == 0) {
        printf("%-20s  %s%*s  %s\n", t ? t : "-", ev.text, (int)(16 - ev.cols), "", detail.text);
        free(detail.text);
    }
    free(ev.text);
    return rc;
}

/*
 * Where the log is, from the config: the database "state.postgres" names
 * (*pool, for the caller to close; nothing is connected yet), else the
 * file <state_dir>/audit.jsonl, written into path.
 */
int cli_audit_load_source(audit_source *src, db_pool **pool, char path[PATH_MAX],
                          const char *config_path, const char *cmd)
{
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    int rc = 0;

    *pool = NULL;
    src->path = path;
    src->db = NULL;
    if (config_load(&cfg, config_path, &err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        return -1;
    }
    if (cfg->state.postgres != NULL) {
        if (db_pool_open(pool, &cfg->state, &err) < 0) {
            fprintf(stderr, "%s: %s\n", cmd, err.msg);
            rc = -1;
        }
        src->path = NULL;
        src->db = *pool;
    } else if (snprintf(path, PATH_MAX, "%s/%s", cfg->state_dir, AUDIT_FILE) >= PATH_MAX) {
        fprintf(stderr, "%s: %s: path too long\n", cmd, cfg->state_dir);
        rc = -1;
    }
    config_free(cfg);
    return rc;
}

/*
 * 1 when the log exists, 0 when not, -1 (said on stderr) when that cannot
 * be told. The database's log always exists: reading it says whether it
 * can be reached.
 */
int cli_audit_log_exists(const audit_source *src, const char *cmd)
{
    const char *path = src->path;
    struct stat st;

    if (src->db != NULL || stat(path, &st) == 0)
        return 1;
    if (errno == ENOENT)
        return 0;
    fprintf(stderr, "%s: %s: %s\n", cmd, path, strerror(errno));
    return -1;
}

/* The listing audit_list parsed: events, rows as JSON, or rows as a table. */
static int list_log(const audit_source *src, scan_opts *o, int json)
{
    table t = {{0}, 0};
    const char *titles[NCOLS];
    size_t title_cols[NCOLS];
    uint64_t last = 0;
    int c, exists;

    exists = cli_audit_log_exists(src, "refgate audit");
    if (exists <= 0) {
        if (exists == 0)
            fprintf(json ? stderr : stdout, "no audit log yet\n");
        return exists == 0 ? 0 : 1;
    }

    if (o->events) {
        if (!json)
            printf("%-20s  %-12s  %s\n", "TIME", "EVENT", "DETAIL");
        return scan(src, o, NULL, print_event, &json, NULL) < 0 || fflush(stdout) != 0 ? 1 : 0;
    }
    if (json)
        return scan(src, o, print_json, NULL, NULL, NULL) < 0 || fflush(stdout) != 0 ? 1 : 0;

    /* Two passes: size the columns over the matching rows, then print them. */
    for (c = 0; c < NCOLS; c++) {
        titles[c] = columns[c].title;
        title_cols[c] = strlen(columns[c].title);
        t.width[c] = title_cols[c];
    }
    o->warn = 0;
    if (scan(src, o, measure_row, NULL, &t, &last) < 0)
        return 1;
    if (t.rows == 0) {
        printf("no matching audit records\n");
        return fflush(stdout) != 0 ? 1 : 0;
    }
    row_print(titles, title_cols, t.width);
    /* Stop where the first pass stopped: records appended since are not sized. */
    o->warn = 1;
    o->upto = last;
    if (scan(src, o, print_row, NULL, &t, NULL) < 0)
        return 1;
    return fflush(stdout) != 0 ? 1 : 0;
}

/* refgate audit's options (refgate(1) says what they do). */
typedef struct list_args {
    const char *config, *run, *repo, *ref, *decision, *since;
    int json, events;
} list_args;

static const cli_opt list_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(list_args, config), "FILE"},
    {"--run", CLI_OPT_VALUE, offsetof(list_args, run), "RUN"},
    {"--repo", CLI_OPT_VALUE, offsetof(list_args, repo), "REPO"},
    {"--ref", CLI_OPT_VALUE, offsetof(list_args, ref), "REF"},
    {"--decision", CLI_OPT_VALUE, offsetof(list_args, decision), "allow|deny"},
    {"--since", CLI_OPT_VALUE, offsetof(list_args, since), "TIME"},
    {"--json", CLI_OPT_FLAG, offsetof(list_args, json), NULL},
    {"--events", CLI_OPT_FLAG, offsetof(list_args, events), NULL},
};
const cli_cmd cli_cmd_audit = {"audit", CLI_OPTS(list_opts), 0, NULL};

static int audit_list(int argc, char **argv)
{
    const char *config_path = NULL, *since = NULL;
    list_args a = {0};
    cli_args args;
    filters f = {0};
    char path[PATH_MAX];
    audit_source src;
    db_pool *pool = NULL;
    scan_opts o = {&f, 0, 1, 0};
    int json = 0, m, status;

    m = cli_opts_parse(&cli_cmd_audit, &a, &args, argc, argv);
    if (m != 0)
        return cli_opts_exit(m);
    if (args.n > 0)
        return cli_usage_error(&cli_cmd_audit, "unexpected argument '%s'", args.v[0]);
    if (a.config == NULL)
        return cli_usage_error(&cli_cmd_audit, "--config is required");
    config_path = a.config;
    since = a.since;
    json = a.json;
    o.events = a.events;
    f.run = a.run;
    f.repo = a.repo;
    f.ref = a.ref;
    f.decision = a.decision;
    if (f.decision && strcmp(f.decision, "allow") != 0 && strcmp(f.decision, "deny") != 0) {
        fprintf(stderr, "refgate audit: --decision must be allow or deny\n");
        return EXIT_USAGE;
    }
    if (o.events && (f.run || f.repo || f.ref || f.decision)) {
        fprintf(stderr, "refgate audit: --events takes only --since and --json\n");
        return EXIT_USAGE;
    }
    if (since != NULL) {
        if (parse_since(&f.since_ms, since) < 0) {
            fprintf(stderr,
                    "refgate audit: --since %s: expected 2026-11-30T12:00:00Z, 2026-11-30, or "
                    "an age such as 10m, 2h, 3d\n",
                    since);
            return EXIT_USAGE;
        }
        f.has_since = 1;
    }
    status = cli_audit_load_source(&src, &pool, path, config_path, "refgate audit") < 0
                 ? 1
                 : list_log(&src, &o, json);
    db_pool_close(pool);
    return status;
}

int cli_audit(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "verify"))
        return cli_audit_verify_cmd(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "head"))
        return cli_audit_head_cmd(argc - 1, argv + 1);
    return audit_list(argc, argv);
}
