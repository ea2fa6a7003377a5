/*
 * The report merge (see merge.h): a walk over the refs, each answered from
 * its own verdict or from upstream's status line for it.
 */
#include "gateway/merge.h"

#include <stdio.h>
#include <string.h>

void gateway_merge_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

static const rgit_ref_status *find_status(const rgit_report *rep, const char *ref)
{
    for (size_t i = 0; i < rep->nrefs; i++)
        if (!strcmp(rep->refs[i].refname, ref))
            return &rep->refs[i];
    return NULL;
}

static const char *failure_text(const char *up_failure)
{
    return up_failure && up_failure[0] ? up_failure : "upstream gave no report";
}

void gateway_merge_unpack(char unpack[GATEWAY_RESULT_MAX], const rgit_report *up,
                          const char *up_failure)
{
    if (up)
        snprintf(unpack, GATEWAY_RESULT_MAX, "%s", up->unpack ? up->unpack : "ok");
    else if (up_failure)
        snprintf(unpack, GATEWAY_RESULT_MAX, "upstream: %s", failure_text(up_failure));
    else
        snprintf(unpack, GATEWAY_RESULT_MAX, "ok");
    gateway_merge_one_line(unpack);
}

void gateway_merge_ref(gateway_ref_result *r, const rgit_report *up, const char *up_failure)
{
    const rgit_ref_status *us = up ? find_status(up, r->refname) : NULL;

    r->error[0] = '\0';
    if (!r->forwarded && r->failure) {
        snprintf(r->error, sizeof(r->error), "upstream: %s", r->failure);
        snprintf(r->outcome, sizeof(r->outcome), "upstream error: %s", r->failure);
    } else if (!r->forwarded) {
        snprintf(r->error, sizeof(r->error), "%s", r->refusal ? r->refusal : "refused");
        snprintf(r->outcome, sizeof(r->outcome), "rejected");
    } else if (up == NULL) {
        snprintf(r->error, sizeof(r->error), "upstream: %s", failure_text(up_failure));
        snprintf(r->outcome, sizeof(r->outcome), "upstream error: %s", failure_text(up_failure));
    } else if (us == NULL) {
        snprintf(r->error, sizeof(r->error), "upstream: no status for this ref");
        snprintf(r->outcome, sizeof(r->outcome), "upstream error: no status for this ref");
    } else if (us->error) {
        snprintf(r->error, sizeof(r->error), "%s", us->error);
        snprintf(r->outcome, sizeof(r->outcome), "forwarded: ng %s", us->error);
    } else {
        snprintf(r->outcome, sizeof(r->outcome), "forwarded: ok");
    }
    gateway_merge_one_line(r->error);
    gateway_merge_one_line(r->outcome);
}
