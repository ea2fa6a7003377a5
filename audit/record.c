/*
 * Records as lines: the v2 serialisation every store shares, its size
 * bound, the checks a record passes before it is appended, and telling a
 * parsed line's kind and version apart.
 *
 * The bytes matter, not just the values: the next line's `prev` is the
 * hash of these exact bytes, so the field order is fixed here and jansson
 * writes compact JSON in insertion order.
 */
#include "audit/store_ops.h"
#include "util/text.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FIELD_MAX 4096 /* bytes of one string field as written: after \xHH and JSON escaping */

/* Bound of everything in a line that is not a string field: braces, v,
 * seq, prev, time, type, decision_seq and the newline. */
#define LINE_FIXED_MAX 256

static const char *const event_names[] = {
    "start",
    "stop",
    "recovered",
    "token-mint",
    "token-revoke",
    "approval-request",
    "approval-grant",
    "approval-deny",
    "approval-consume",
    "console-user-add",
    "policy", /* a gateway began enforcing a published policy */
    "token-key-rotate",
};

int audit_sha256_hex(char out[AUDIT_HASH_HEX + 1], const void *data, size_t len)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != AUDIT_HASH_LEN)
        return -EIO;
    rg_hex_encode(out, md, AUDIT_HASH_LEN);
    return 0;
}

/* 2026-11-30T12:00:05.123Z */
void audit_time_now(char out[AUDIT_TIME_LEN])
{
    struct timespec ts;
    struct tm tm;
    char base[AUDIT_TIME_LEN - 8];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    if (strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        base[0] = '\0';
    snprintf(out, AUDIT_TIME_LEN, "%s.%03uZ", base, (unsigned)(ts.tv_nsec / 1000000) % 1000);
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
 * The bytes jansson writes for the character of n bytes at p: quote and
 * backslash get a backslash, the common controls a letter, other controls
 * \u00XX; everything else (no JSON_ENSURE_ASCII) as it is.
 */
static size_t json_char_len(const unsigned char *p, size_t n)
{
    if (n > 1)
        return n;
    if (p[0] == '"' || p[0] == '\\' || p[0] == '\b' || p[0] == '\f' || p[0] == '\n' ||
        p[0] == '\r' || p[0] == '\t')
        return 2;
    return p[0] < 0x20 ? 6 : 1;
}

/*
 * A JSON string for an audit field: NULL becomes null; malformed UTF-8
 * becomes \xHH text (a ref name may be any bytes, and jansson refuses
 * them); a value whose written form (with JSON's escapes) would pass
 * FIELD_MAX bytes is cut on a character boundary and ends in "...". The
 * cap is on the written bytes, so a field of control characters takes no
 * more room in the line than a plain one: audit_record_size_max, and so
 * the room a push asks audit_ready for, stays close to the real size.
 */
static json_t *field_value(const char *s)
{
    const unsigned char *p = (const unsigned char *)s, *t;
    size_t len, i, k, n, jlen = 0, cut = 0;
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
        n = utf8_seq(p + i, len - i);
        if (n == 0) {
            k += (size_t)sprintf(tmp + k, "\\x%02X", p[i]);
            i++;
            continue;
        }
        memcpy(tmp + k, p + i, n);
        i += n;
        k += n;
    }
    tmp[k] = '\0';
    /* Bounded: k is at most 4 * (FIELD_MAX + 1). */
    t = (const unsigned char *)tmp;
    for (i = 0; i < k; i += n) {
        n = utf8_seq(t + i, k - i);
        if (n == 0)
            n = 1; /* cannot happen: tmp is UTF-8 by now */
        jlen += json_char_len(t + i, n);
        if (jlen <= FIELD_MAX - 3)
            cut = i + n;
    }
    if (jlen > FIELD_MAX || s[len] != '\0')
        memcpy(tmp + cut, "...", 4);
    v = json_string(tmp);
    free(tmp);
    return v;
}

/* The bytes field_value's string takes in the line, without its quotes. */
static size_t field_written_len(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i, n, len = 0;

    /* Bounded: stops once past FIELD_MAX written bytes. */
    for (i = 0; p[i] != '\0' && len <= FIELD_MAX; i += n) {
        n = utf8_seq(p + i, strnlen(s + i, 4));
        /* A malformed byte is written \xHH, its backslash escaped. */
        len += n == 0 ? 5 : json_char_len(p + i, n);
        n = n == 0 ? 1 : n;
    }
    return len > FIELD_MAX ? FIELD_MAX : len;
}

/* ------------------------------------------------------------------------
 * The fields of each kind, in the order they are written
 * ------------------------------------------------------------------------ */

typedef struct field {
    const char *key;
    const char *value;
    int omit_null; /* leave the key out when value is NULL */
    int at_max;    /* a NULL value counts at its largest in the size bound */
} field;

#define FIELDS_MAX 16

static const char *kind_name(audit_kind kind)
{
    switch (kind) {
    case AUDIT_DECISION:
        return "decision";
    case AUDIT_OUTCOME:
        return "outcome";
    case AUDIT_EVENT:
        return "event";
    }
    return NULL;
}

/* The string fields of rec after the common head, in order; returns how many. */
static size_t record_fields(field out[FIELDS_MAX], const audit_record *r)
{
    size_t n = 0;

#define F(k, v, omit, max)                                                                         \
    out[n++] = (field)                                                                             \
    {                                                                                              \
        k, v, omit, max                                                                            \
    }
    switch (r->kind) {
    case AUDIT_DECISION:
        F("push_id", r->push_id, 0, 0);
        F("run", r->run, 0, 0);
        F("token", r->token_hash, 0, 0);
        F("remote", r->remote, 0, 0);
        F("repo", r->repo, 0, 0);
        F("ref", r->ref, 0, 0);
        F("old", r->old_id, 0, 0);
        F("new", r->new_id, 0, 0);
        F("action", r->action, 0, 0);
        F("decision", r->decision, 0, 0);
        F("rule", r->rule, 0, 0);
        F("reason", r->reason, 0, 0);
        F("evaluate", r->evaluate, 1, 0);
        F("policy", r->policy, 1, 0);
        /* Pending stays null: its outcome goes in an outcome record. */
        F("outcome", r->outcome, 0, 0);
        break;
    case AUDIT_OUTCOME:
        F("push_id", r->push_id, 0, 0);
        F("repo", r->repo, 0, 0);
        F("ref", r->ref, 0, 0);
        /* decision_seq, an integer, goes between ref and outcome. */
        F("outcome", r->outcome, 0, 1);
        break;
    case AUDIT_EVENT:
        F("event", r->event, 0, 0);
        F("detail", r->detail, 1, 0);
        break;
    }
#undef F
    return n;
}

size_t audit_record_size_max(const audit_record *rec)
{
    field f[FIELDS_MAX];
    size_t n, i, total = LINE_FIXED_MAX;

    if (rec == NULL)
        return total;
    n = record_fields(f, rec);
    for (i = 0; i < n; i++) {
        /* "key": plus a comma */
        total += strlen(f[i].key) + 4;
        if (f[i].value == NULL && !f[i].at_max) {
            total += 4; /* null */
            continue;
        }
        total += 2 + (f[i].value ? field_written_len(f[i].value) : FIELD_MAX);
    }
    return total;
}

int audit_record_check(const audit_record *rec, uint64_t seq, rg_error *err)
{
    size_t i;

    switch (rec->kind) {
    case AUDIT_DECISION:
        if (rec->ref == NULL || rec->decision == NULL)
            return rg_error_set(err, -EINVAL, "a decision record needs a ref and a decision");
        return 0;
    case AUDIT_OUTCOME:
        if (rec->outcome == NULL)
            return rg_error_set(err, -EINVAL, "an outcome record needs an outcome");
        if (rec->decision_seq == 0 || rec->decision_seq >= seq)
            return rg_error_set(err, -EINVAL,
                                "an outcome record's decision_seq %llu is not an earlier record",
                                (unsigned long long)rec->decision_seq);
        return 0;
    case AUDIT_EVENT:
        for (i = 0; rec->event && i < sizeof(event_names) / sizeof(event_names[0]); i++)
            if (!strcmp(rec->event, event_names[i]))
                return 0;
        return rg_error_set(err, -EINVAL, "unknown audit event '%s'",
                            rec->event ? rec->event : "(none)");
    }
    return rg_error_set(err, -EINVAL, "unknown audit record kind %d", (int)rec->kind);
}

int audit_record_line(rg_buf *out, const audit_record *rec, const char *time, uint64_t seq,
                      char prev[AUDIT_HASH_HEX + 1])
{
    field f[FIELDS_MAX];
    json_t *obj;
    char *line = NULL;
    size_t i, n, len;
    int rc = -ENOMEM;

    obj = json_object();
    if (obj == NULL)
        return -ENOMEM;
    if (json_object_set_new(obj, "v", json_integer(2)) < 0 ||
        json_object_set_new(obj, "seq", json_integer((json_int_t)seq)) < 0 ||
        json_object_set_new(obj, "prev", json_string(prev)) < 0 ||
        json_object_set_new(obj, "time", json_string(time)) < 0 ||
        json_object_set_new(obj, "type", json_string(kind_name(rec->kind))) < 0)
        goto done;
    n = record_fields(f, rec);
    for (i = 0; i < n; i++) {
        if (rec->kind == AUDIT_OUTCOME && !strcmp(f[i].key, "outcome") &&
            json_object_set_new(obj, "decision_seq", json_integer((json_int_t)rec->decision_seq)) <
                0)
            goto done;
        if (f[i].value == NULL && f[i].omit_null)
            continue;
        if (json_object_set_new(obj, f[i].key, field_value(f[i].value)) < 0)
            goto done;
    }
    line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (line == NULL)
        goto done;
    len = strlen(line);
    if (len > AUDIT_LINE_MAX) {
        rc = RG_E_TOO_BIG;
        goto done;
    }
    rc = audit_sha256_hex(prev, line, len);
    if (rc == 0)
        rc = rg_buf_append(out, line, len);
    if (rc == 0)
        rc = rg_buf_append(out, "\n", 1);
done:
    free(line);
    json_decref(obj);
    return rc;
}

int audit_json_kind(int *version, const json_t *obj)
{
    json_t *v, *type;
    const char *t;

    *version = 0;
    if (!json_is_object(obj))
        return 0;
    v = json_object_get(obj, "v");
    if (v == NULL) {
        /* v1: every line was one complete decision. */
        if (!json_is_integer(json_object_get(obj, "seq")))
            return 0;
        *version = 1;
        return AUDIT_DECISION;
    }
    if (!json_is_integer(v) || json_integer_value(v) != 2)
        return 0;
    type = json_object_get(obj, "type");
    t = json_string_value(type);
    if (t == NULL)
        return 0;
    *version = 2;
    if (!strcmp(t, "decision"))
        return AUDIT_DECISION;
    if (!strcmp(t, "outcome"))
        return AUDIT_OUTCOME;
    if (!strcmp(t, "event"))
        return AUDIT_EVENT;
    *version = 0;
    return 0;
}
