/*
 * Pushes as the console shows them, read from the audit log (audit/audit.h's
 * readers: the file, or the database's records when the config has
 * "state.postgres"): the decision records of one push are one batch, so a
 * push is a run of consecutive decision records with the same push_id.
 * Nothing is cached: every call reads the log, and a log that cannot be
 * read (a database that cannot be reached) is an error, never an empty
 * listing.
 */
#ifndef RG_CONSOLE_PUSHES_H
#define RG_CONSOLE_PUSHES_H

#include <stddef.h>
#include <stdint.h>

#include "audit/audit.h"
#include "util/error.h"

/* The most pages back a listing goes. */
#define CONSOLE_PUSHES_PAGES_MAX 1000

/* Exact-match filters; NULL or "" matches anything. A push matches when one of its refs does. */
typedef struct console_push_filter {
    const char *run, *repo, *ref, *decision;
} console_push_filter;

/* One push in a listing. Strings are cut to fit. */
typedef struct console_push_row {
    char push_id[80];
    char time[40];
    char run[160];
    char repo[256];
    char first_ref[256];
    unsigned refs, allowed, denied;
} console_push_row;

/*
 * Page `page` (0: the newest) of the pushes matching `f`, newest first,
 * `per_page` to a page, into a calloc'd array (*n rows); *more says whether
 * an older page has any. The log is read from its end and only as far as
 * the page needs (one push more), so the newest pages cost the same
 * whatever the log's length. page must be below CONSOLE_PUSHES_PAGES_MAX.
 */
int console_pushes_list(console_push_row **rows, size_t *n, int *more, const audit_source *log,
                        const console_push_filter *f, size_t page, size_t per_page, rg_error *err);

/* One run in the runs listing: its newest push. Strings are cut to fit. */
typedef struct console_run_row {
    char run[160];
    char time[40];
    char repo[256];
} console_run_row;

/*
 * Page `page` (0: the newest) of the runs that pushed, the most recently
 * pushing first, `per_page` to a page, into a calloc'd array (*n rows);
 * *more says whether an older page has any. Read from the end of the log,
 * only as far as the page needs.
 */
int console_runs_list(console_run_row **rows, size_t *n, int *more, const audit_source *log,
                      size_t page, size_t per_page, rg_error *err);

/* One ref of one push, with what became of it. Strings are cut to fit. */
typedef struct console_push_ref {
    uint64_t seq;
    char ref[512], action[16], decision[16], rule[256], reason[1024], outcome[1024];
    char old_id[72], new_id[72];
    char policy[80]; /* the digest of the policy that decided; "" when the record names none */
} console_push_ref;

/* One push's detail. */
typedef struct console_push {
    char push_id[80], time[40], run[160], repo[256];
    console_push_ref *refs; /* calloc'd */
    size_t nrefs;
} console_push;

/*
 * The push `push_id` and its refs' outcomes; -ENOENT when the log has no
 * such push. The file is read through; from the database only the rows
 * that name the push are fetched.
 */
int console_push_get(console_push *out, const audit_source *log, const char *push_id,
                     rg_error *err);

void console_push_clear(console_push *p);

#endif
