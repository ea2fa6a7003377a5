/*
 * Merging upstream's report with the gateway's own verdicts: the one place
 * that says, for every ref of a push, what the client is told (`ok`, or the
 * `ng` reason) and what the audit log records as its outcome. Pure: the
 * same inputs always give the same texts, so it is tested as a table.
 */
#ifndef RG_GATEWAY_MERGE_H
#define RG_GATEWAY_MERGE_H

#include <stddef.h>

#include "git/report.h"

/* The longest ng reason or outcome kept; longer upstream text is cut. */
#define GATEWAY_RESULT_MAX 600

typedef struct gateway_ref_result {
    /* In. */
    const char *refname;
    int forwarded;       /* sent upstream */
    const char *refusal; /* not forwarded: the ng text ("policy: ...") */
    const char *failure; /* not forwarded because upstream failed before it could be:
                            why (takes precedence over refusal) */
    /* Out: single-line, printable text. */
    char error[GATEWAY_RESULT_MAX];   /* the ng reason; empty for ok */
    char outcome[GATEWAY_RESULT_MAX]; /* "rejected", "forwarded: ok", "forwarded: ng ...",
                                         "upstream error: ..." */
} gateway_ref_result;

/*
 * Fill one ref's error and outcome. `up` is upstream's report, or NULL
 * when there is none (nothing was forwarded, or upstream failed, and then
 * `up_failure` says why).
 */
void gateway_merge_ref(gateway_ref_result *r, const rgit_report *up, const char *up_failure);

/*
 * The unpack status for the client: upstream's, the failure when upstream
 * gave no report, or "ok" when nothing was forwarded (up_failure NULL).
 */
void gateway_merge_unpack(char unpack[GATEWAY_RESULT_MAX], const rgit_report *up,
                          const char *up_failure);

/* Replace control bytes with spaces, in place, so text stays on one line. */
void gateway_merge_one_line(char *s);

#endif
