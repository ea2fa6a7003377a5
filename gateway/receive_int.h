/*
 * What the files of one push share (receive.c, receive_inspect.c, hold.c):
 * the push's state and the steps one file takes for another. Private to
 * gateway/; the interface is receive.h.
 */
#ifndef RG_GATEWAY_RECEIVE_INT_H
#define RG_GATEWAY_RECEIVE_INT_H

#include <stdint.h>

#include "gateway/approve.h"
#include "gateway/merge.h"
#include "gateway/receive.h"
#include "git/packscan.h"
#include "git/push.h"
#include "git/quarantine.h"
#include "git/report.h"
#include "inspect/conditions.h"
#include "policy/plan.h"
#include "upstream/mirror.h"
#include "util/inflate.h"

/* The rewritten command list is at most the client's (capped by the
 * parser) plus the capability the gateway adds. */
#define FORWARD_HEADER_MAX (16u * 1024 * 1024)

/* What the spooled pack is read back in. */
#define SPOOL_CHUNK (1u << 20)

/* ---------------------------------------------------------------- state */

/*
 * Where a push is. Each phase is entered by one function (receive.c,
 * "phases"); the pack bytes that arrive go where the phase says (on_pack).
 *
 *   COMMANDS -> PROBE                      no commands: git's probe
 *   COMMANDS -> FORWARDING                 the names decide; the pack streams
 *   COMMANDS -> INSPECTING -> FORWARDING   the pack is spooled and inspected
 *   INSPECTING -> HELD -> FORWARDING       an approval was waited for
 *   FORWARDING -> FINISHED                 upstream's answer and the outcomes
 *   any undecided phase -> FAILED          the request went wrong first
 *
 * A push is decided in one function, receive_decide_and_forward, whichever
 * event lets it decide (the command list's flush, the body's end, the
 * hold's end); FORWARDING is entered in one place under it,
 * record_and_forward, once the decision records are durable: nothing
 * reaches upstream for good before.
 */
typedef enum push_phase {
    PUSH_COMMANDS = 0, /* reading the command list: where gateway_receive_new (calloc) starts */
    PUSH_PROBE,        /* no commands: the rest of the body is not needed */
    PUSH_INSPECTING,   /* undecided: the pack spools into the quarantine (maybe overlapped) */
    PUSH_HELD,         /* decided once, a ref waits for its approval: gateway_receive_read */
    PUSH_FORWARDING,   /* decided for good: the allowed commands went upstream, the pack follows */
    PUSH_FINISHED,     /* upstream's answer merged and the outcome records written */
    PUSH_FAILED,       /* the request went wrong before its decision: nothing is forwarded */
} push_phase;

/* One command of the push and everything decided about it. */
typedef struct ref_cmd {
    const rgit_ref_update *u;
    policy_plan_ref plan;
    char *moves;                      /* owned: the ref it moves when symbolic upstream, or NULL */
    char note[256];                   /* what the gateway could not decide, said with the verdict */
    char reason[GATEWAY_RESULT_MAX];  /* the verdict's reason, for the ng and the log */
    char refusal[GATEWAY_RESULT_MAX]; /* the ng text when not forwarded */
    char detail[300]; /* what made its deciding rule's conditions hold, for the audit log */
    char audited[GATEWAY_RESULT_MAX + 300]; /* the decision record's reason: reason; detail */
    int unaudited;                          /* allowed, the audit log refused it; 2: DB down */
    int tentative;                          /* overlap: sent upstream before the decision */
    uint64_t decision_seq;                  /* its decision record, once written */
    gateway_approval_ref approval;          /* when the rules ask about it */
    gateway_ref_result result;
} ref_cmd;

struct gateway_receive {
    const gateway_ctx *ctx;
    gateway_route route;
    upstream_target target; /* its strings point into route and repo_dir */
    char *repo_dir;
    char *run;
    char token_hash[TOKENS_HASH_PREFIX_SIZE];
    char remote[64];
    char push_id[17];

    rg_inflate *z;
    uint64_t raw_bytes;
    uint64_t decoded_bytes;
    rgit_push_parser *parser;
    const rgit_push_request *req;
    ref_cmd *cmds; /* req->nupdates of them */
    push_phase phase;
    rgit_sideband_mode sideband;
    int report_status;

    /*
     * Besides the phase, facts that hold whatever the phase, or are
     * learned once and kept: what the client asked for (report_status),
     * what the plan found (check_workflows, inspect, may_hold), failures
     * latched with their message (q_failed, keep_failed, symrefs_failed,
     * upstream_failed, failed: a request can go wrong after its push was
     * forwarded, and that push still finishes), what is there to send
     * (send_pack, have_report) and guards that make a step run once
     * (conditions_told, kept, in_flight). scan_state is the overlap
     * scanner's own small state.
     */

    /* Inspection (PUSH_INSPECTING). */
    int spool_fd;
    gateway_spool_lease *lease; /* the server's: charged before the spool grows */
    upstream_mirror *mirror;    /* remote upstreams: held while the pack is inspected */
    rgit_quarantine *q;
    int q_failed;
    rg_error q_err;
    int check_workflows; /* the write credential needs to know about workflow changes */
    int inspect;         /* a rule with content conditions may match: no overlap */
    inspect_conditions *conds;
    const char *content_denied; /* the ref a content condition denied: the push is refused */
    int conditions_told;        /* band 2 said what made the conditions hold */
    /* Overlap: the pack goes upstream as it arrives, all but its trailing
     * checksum (not where the write credential is minted per push). */
    rgit_packscan *scan;
    int scan_state;      /* 0 scanning, 1 the pack's end is known, < 0 failed */
    uint64_t pack_bytes; /* of the pack (and what follows) seen so far */
    uint64_t sent;       /* of the pack sent upstream */
    unsigned cred_flags; /* TOKENS_CRED_* for the forwarded push */

    /* A ref asked for an approval and the pack was not spooled: it is kept
     * here for the approval (pack bytes after the decision). */
    int keep_fd;
    uint64_t keep_bytes;
    int keep_failed;
    int kept; /* receive_keep_packs ran */

    /* Hold: an ask rule keeps the push open until its approval is decided. */
    int may_hold;           /* a rule with a hold may ask: decide at the end */
    int64_t hold_until;     /* CLOCK_MONOTONIC ms; 0: never held */
    int64_t next_keepalive; /* CLOCK_MONOTONIC ms */
    rg_buf held_out;        /* what gateway_receive_read still has to send */
    size_t held_off;

    /* Upstream could not say which refs are symbolic: nothing is sent. */
    int symrefs_failed;
    rg_error symrefs_err;

    /* Forwarding. */
    int nforward; /* refs sent upstream */
    upstream_push *upstream;
    int send_pack; /* the pack follows the forwarded commands (not all deletes) */
    int upstream_failed;
    rg_error upstream_err;
    rgit_report report;
    rg_buf progress;
    int have_report;

    /* Metrics: counted as in flight until freed; when upstream began. */
    int in_flight;
    double upstream_t0;

    /* The request failed (malformed, too large): the HTTP status and why. */
    int failed;
    unsigned fail_status;
    rg_error fail_err;
};

/*
 * A github-app write token may change files under .github/workflows/ only
 * when it has the "workflows" permission, which is asked for only when an
 * allowed ref update needs it.
 */
#define WORKFLOWS_PREFIX ".github/workflows/"

/* receive.c: the phases */
void receive_phase_inspect(gateway_receive *r);
void receive_phase_hold(gateway_receive *r);
int receive_decided(const gateway_receive *r);
push_phase receive_phase(const gateway_receive *r);
int receive_decide_and_forward(gateway_receive *r);

/* receive.c: shared steps (cross-file symbols are prefixed receive_: they are global) */
int receive_fail(gateway_receive *r, unsigned status, int code, const char *msg);
void receive_upstream_failed(gateway_receive *r, const rg_error *e);
void receive_add_note(ref_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int receive_send_upstream(gateway_receive *r, const void *data, size_t len, rg_error *err);
int receive_start_upstream(gateway_receive *r, rg_error *err);
void receive_decide_all(gateway_receive *r);
void receive_answer(gateway_receive *r, rg_buf *response, unsigned *status,
                    const char **content_type);

/* receive_inspect.c */
int receive_start_spool(gateway_receive *r);
int receive_workflows_matter(gateway_receive *r);
void receive_send_spool(gateway_receive *r);
void receive_finish_inspection(gateway_receive *r);
void receive_resolve_ancestry(gateway_receive *r);
void receive_resolve_workflows(gateway_receive *r);
void receive_run_inspection(gateway_receive *r);
void receive_settle_conditions(gateway_receive *r);
void receive_end_inspection(gateway_receive *r);
void receive_start_overlap(gateway_receive *r);
void receive_overlap_pack(gateway_receive *r, const char *data, size_t len);
int receive_overlap_holds(const gateway_receive *r);
void receive_abort_overlap(gateway_receive *r);
void receive_complete_overlap(gateway_receive *r);

/* hold.c */
int receive_may_hold(const gateway_receive *r);
void receive_start_keep(gateway_receive *r);
void receive_keep_write(gateway_receive *r, const char *data, size_t len);
void receive_keep_packs(gateway_receive *r);
int receive_start_hold(gateway_receive *r);

#endif
