/*
 * Reading pushes out of the audit log (pushes.h). Lines that are not
 * records this version knows (a torn tail, v1 lines without a push_id)
 * are passed over: the integrity page is where a broken log is reported.
 */
#include "console/pushes.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"

/* The most refs one push's page lists; git pushes of more are rare. */
#define PUSH_REFS_MAX 4096

static const char *field(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));

    return s ? s : "";
}

static int matches(const char *want, const char *have)
{
    return want == NULL || *want == '\0' || !strcmp(want, have);
}

static int decision_record(const json_t *obj)
{
    int version = 0;

    return audit_json_kind(&version, obj) == AUDIT_DECISION;
}

/* Fold decision record `obj` into `cur`, read back to front: the push's
 * first ref and time are those of the last record seen. */
static void fold(console_push_row *cur, const json_t *obj)
{
    cur->refs++;
    if (!strcmp(field(obj, "decision"), "allow"))
        cur->allowed++;
    else
        cur->denied++;
    snprintf(cur->time, sizeof(cur->time), "%s", field(obj, "time"));
    snprintf(cur->run, sizeof(cur->run), "%s", field(obj, "run"));
    snprintf(cur->repo, sizeof(cur->repo), "%s", field(obj, "repo"));
    snprintf(cur->first_ref, sizeof(cur->first_ref), "%s", field(obj, "ref"));
}

int console_pushes_list(console_push_row **rows, size_t *n, int *more, const audit_source *log,
                        const console_push_filter *f, size_t page, size_t per_page, rg_error *err)
{
    audit_back_reader *rd = NULL;
    console_push_row cur = {0};
    size_t skip = page * per_page, seen = 0;
    const char *data;
    size_t len;
    int in_push = 0, cur_match = 0, rc;

    *rows = NULL;
    *n = 0;
    *more = 0;
    if (per_page == 0 || page >= CONSOLE_PUSHES_PAGES_MAX)
        return rg_error_set(err, -EINVAL, "page: expected 0 to %d", CONSOLE_PUSHES_PAGES_MAX - 1);
    *rows = calloc(per_page, sizeof(**rows));
    if (*rows == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if ((rc = audit_back_reader_open(&rd, log, err)) < 0)
        goto done;
    /* Bounded: one step per line, and it stops one push past the page. */
    for (;;) {
        json_t *obj = NULL;
        const char *pid = "";
        int dec = 0;

        rc = audit_back_reader_prev(rd, &data, &len, err);
        if (rc < 0)
            goto done;
        if (rc > 0) {
            obj = json_loadb(data, len, 0, NULL);
            pid = field(obj, "push_id");
            dec = obj != NULL && decision_record(obj) && *pid;
        }
        if (in_push && (rc == 0 || !dec || strcmp(pid, cur.push_id) != 0)) {
            if (cur_match && seen++ >= skip) {
                if (*n == per_page) {
                    *more = 1;
                    json_decref(obj);
                    break;
                }
                (*rows)[(*n)++] = cur;
            }
            in_push = 0;
        }
        if (rc == 0)
            break;
        if (dec) {
            if (!in_push) {
                memset(&cur, 0, sizeof(cur));
                snprintf(cur.push_id, sizeof(cur.push_id), "%s", pid);
                in_push = 1;
                cur_match = 0;
            }
            fold(&cur, obj);
            if (matches(f->run, field(obj, "run")) && matches(f->repo, field(obj, "repo")) &&
                matches(f->ref, field(obj, "ref")) && matches(f->decision, field(obj, "decision")))
                cur_match = 1;
        }
        json_decref(obj);
    }
    rc = 0;
done:
    audit_back_reader_free(rd);
    if (rc < 0) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}

int console_runs_list(console_run_row **rows, size_t *n, int *more, const audit_source *log,
                      size_t page, size_t per_page, rg_error *err)
{
    audit_back_reader *rd = NULL;
    console_run_row *seen = NULL;
    size_t want, nseen = 0;
    const char *data;
    size_t len;
    int rc;

    *rows = NULL;
    *n = 0;
    *more = 0;
    if (per_page == 0 || page >= CONSOLE_PUSHES_PAGES_MAX)
        return rg_error_set(err, -EINVAL, "page: expected 0 to %d", CONSOLE_PUSHES_PAGES_MAX - 1);
    /* The runs of the pages before, this page's, and one more for *more. */
    want = (page + 1) * per_page + 1;
    seen = calloc(want, sizeof(*seen));
    if (seen == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if ((rc = audit_back_reader_open(&rd, log, err)) < 0)
        goto done;
    /* Bounded: one step per line, and it stops once the page and one more are found. */
    while (nseen < want && (rc = audit_back_reader_prev(rd, &data, &len, err)) > 0) {
        json_t *obj;
        const char *run;
        size_t i;

        /* Cheap test first: only decision records name a run (v1 lines too). */
        if (strstr(data, "\"run\":\"") == NULL)
            continue;
        obj = json_loadb(data, len, 0, NULL);
        run = field(obj, "run");
        if (obj != NULL && decision_record(obj) && *run) {
            for (i = 0; i < nseen && strcmp(seen[i].run, run) != 0; i++)
                ;
            if (i == nseen) {
                snprintf(seen[i].run, sizeof(seen[i].run), "%s", run);
                snprintf(seen[i].time, sizeof(seen[i].time), "%s", field(obj, "time"));
                snprintf(seen[i].repo, sizeof(seen[i].repo), "%s", field(obj, "repo"));
                nseen++;
            }
        }
        json_decref(obj);
    }
    if (rc < 0)
        goto done;
    rc = 0;
    *more = nseen == want;
    {
        size_t skip = page * per_page, count = nseen > skip ? nseen - skip : 0;

        if (count > per_page)
            count = per_page;
        *rows = calloc(count ? count : 1, sizeof(**rows));
        if (*rows == NULL) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
        memcpy(*rows, seen + skip, count * sizeof(**rows));
        *n = count;
    }
done:
    audit_back_reader_free(rd);
    free(seen);
    return rc;
}

/* Copy what a decision record says of its ref. */
static void ref_from(console_push_ref *out, const json_t *obj)
{
    json_t *seq = json_object_get(obj, "seq");

    out->seq = json_is_integer(seq) ? (uint64_t)json_integer_value(seq) : 0;
    snprintf(out->ref, sizeof(out->ref), "%s", field(obj, "ref"));
    snprintf(out->action, sizeof(out->action), "%s", field(obj, "action"));
    snprintf(out->decision, sizeof(out->decision), "%s", field(obj, "decision"));
    snprintf(out->rule, sizeof(out->rule), "%s", field(obj, "rule"));
    snprintf(out->reason, sizeof(out->reason), "%s", field(obj, "reason"));
    snprintf(out->outcome, sizeof(out->outcome), "%s",
             json_is_string(json_object_get(obj, "outcome")) ? field(obj, "outcome") : "pending");
    snprintf(out->old_id, sizeof(out->old_id), "%s", field(obj, "old"));
    snprintf(out->new_id, sizeof(out->new_id), "%s", field(obj, "new"));
    snprintf(out->policy, sizeof(out->policy), "%s", field(obj, "policy"));
}

int console_push_get(console_push *out, const audit_source *log, const char *push_id, rg_error *err)
{
    audit_reader *rd = NULL;
    audit_line line;
    int rc, version;

    memset(out, 0, sizeof(*out));
    if ((rc = audit_reader_open_containing(&rd, log, push_id, err)) < 0)
        return rc;
    /* Bounded: one step per line of the log. */
    while ((rc = audit_reader_next(rd, &line, err)) > 0) {
        json_t *obj;
        int kind;

        /* Cheap test first: most lines are other pushes'. */
        if (line.too_long || strstr(line.data, push_id) == NULL)
            continue;
        obj = json_loadb(line.data, line.len, 0, NULL);
        kind = obj ? audit_json_kind(&version, obj) : 0;
        if (obj == NULL || strcmp(field(obj, "push_id"), push_id) != 0) {
            json_decref(obj);
            continue;
        }
        if (kind == AUDIT_DECISION && out->nrefs < PUSH_REFS_MAX) {
            console_push_ref *grown = realloc(out->refs, (out->nrefs + 1) * sizeof(*grown));

            if (grown == NULL) {
                json_decref(obj);
                rc = rg_error_set(err, -ENOMEM, "out of memory");
                break;
            }
            out->refs = grown;
            if (out->nrefs == 0) {
                snprintf(out->push_id, sizeof(out->push_id), "%s", push_id);
                snprintf(out->time, sizeof(out->time), "%s", field(obj, "time"));
                snprintf(out->run, sizeof(out->run), "%s", field(obj, "run"));
                snprintf(out->repo, sizeof(out->repo), "%s", field(obj, "repo"));
            }
            memset(&out->refs[out->nrefs], 0, sizeof(out->refs[0]));
            ref_from(&out->refs[out->nrefs++], obj);
        } else if (kind == AUDIT_OUTCOME) {
            json_t *ds = json_object_get(obj, "decision_seq");

            for (size_t i = 0; i < out->nrefs; i++)
                if (json_is_integer(ds) && out->refs[i].seq == (uint64_t)json_integer_value(ds))
                    snprintf(out->refs[i].outcome, sizeof(out->refs[i].outcome), "%s",
                             field(obj, "outcome"));
        }
        json_decref(obj);
    }
    audit_reader_free(rd);
    if (rc < 0) {
        console_push_clear(out);
        return rc;
    }
    if (out->nrefs == 0)
        return rg_error_set(err, -ENOENT, "no push %s in the audit log", push_id);
    return 0;
}

void console_push_clear(console_push *p)
{
    if (p == NULL)
        return;
    free(p->refs);
    memset(p, 0, sizeof(*p));
}
