/*
 * The receive-pack request a git client POSTs (gitprotocol-pack, "Reference
 * Update Request and Packfile Transfer"): optional `shallow <id>` lines, the
 * command list `<old> <new> <ref>` with capabilities after a NUL on the first
 * command, a flush, then, when the push-options capability was asked for,
 * push options and a flush, and finally the pack (absent when every command
 * is a delete). Ids are 40 (SHA-1) or 64 (SHA-256) hex digits.
 *
 * The parser is fed the body incrementally as it arrives, keeps only the
 * header (capped), and tells the caller where the pack starts, so the pack
 * itself can be streamed on without ever being held in memory.
 */
#ifndef RG_GIT_PUSH_H
#define RG_GIT_PUSH_H

#include <stddef.h>

#include "util/buf.h"
#include "util/error.h"

#define RGIT_OID_HEX_MAX 64

typedef struct rgit_ref_update {
    char old_id[RGIT_OID_HEX_MAX + 1]; /* all zeros: create */
    char new_id[RGIT_OID_HEX_MAX + 1]; /* all zeros: delete */
    char *refname;
} rgit_ref_update;

typedef struct rgit_push_request {
    rgit_ref_update *updates;
    size_t nupdates;
    char **caps; /* capabilities from the first command, in order */
    size_t ncaps;
    char **push_options;
    size_t npush_options;
    char **shallow; /* ids from shallow lines */
    size_t nshallow;
    size_t oid_hexlen; /* 40 or 64, from the ids (and object-format=) */
} rgit_push_request;

typedef struct rgit_push_limits {
    size_t max_updates;      /* commands per push */
    size_t max_push_options; /* push options per push */
    size_t max_header_bytes; /* everything before the pack */
} rgit_push_limits;

#define RGIT_PUSH_LIMITS_INIT                                                                      \
    {                                                                                              \
        10000, 100, 4 * 1024 * 1024                                                                \
    }

typedef struct rgit_push_parser rgit_push_parser;

int rgit_push_parser_new(rgit_push_parser **out, const rgit_push_limits *limits);
void rgit_push_parser_free(rgit_push_parser *p);

/*
 * Feed the next `len` bytes of the body. Returns 0 when more is needed, 1
 * once the header is complete (then *consumed says how many of these bytes
 * belonged to the header; the rest are the start of the pack, and further
 * bytes must not be fed), or RG_E_PROTOCOL / RG_E_TOO_BIG with a message.
 * A body that is only a flush (git's 4-byte probe before a large push)
 * completes with zero updates.
 */
int rgit_push_parser_feed(rgit_push_parser *p, const char *data, size_t len, size_t *consumed,
                          rg_error *err);

/*
 * The parsed request; valid after feed returned 1 (NULL before, and after
 * an error), owned by the parser.
 */
const rgit_push_request *rgit_push_parser_request(const rgit_push_parser *p);

/* 1 when `caps` holds `name` or `name=...`, else 0. */
int rgit_push_has_cap(const rgit_push_request *req, const char *name);

/* 1 when id is all zeros. */
int rgit_oid_hex_is_zero(const char *id);

/*
 * Write the header of a request that carries only the commands whose
 * indexes are in `keep` (in that order): the capabilities move to the new
 * first command; shallow lines and push options are kept. `ensure_cap`
 * (may be NULL) is added after the others when the client did not ask for
 * it: the gateway always wants upstream's report-status, whatever the
 * client asked for itself.
 */
int rgit_push_request_write(rg_buf *out, const rgit_push_request *req, const size_t *keep,
                            size_t nkeep, const char *ensure_cap);

#endif
