/*
 * report-status (gitprotocol-pack): `unpack ok|<error>`, then `ok <ref>` or
 * `ng <ref> <reason>` per command, then a flush. With side-band-64k the whole
 * report (its pkt-lines and inner flush) is carried in band-1 packets
 * followed by an outer flush; band 2 is progress that git prints as
 * `remote: ...`, band 3 a fatal error.
 *
 * The gateway parses upstream's report to merge it with its own policy
 * rejections, and writes the merged report to the client.
 */
#ifndef RG_GIT_REPORT_H
#define RG_GIT_REPORT_H

#include <stddef.h>

#include "util/buf.h"
#include "util/error.h"

typedef enum git_sideband_mode {
    GIT_SIDEBAND_NONE = 0,
    GIT_SIDEBAND_1000 = 1000, /* side-band: packets of at most 1000 bytes */
    GIT_SIDEBAND_64K = 65520, /* side-band-64k */
} git_sideband_mode;

typedef struct git_ref_status {
    char *refname;
    char *error; /* NULL: ok; else the ng reason */
} git_ref_status;

typedef struct git_report {
    char *unpack; /* "ok" or upstream's unpack error */
    git_ref_status *refs;
    size_t nrefs;
} git_report;

/*
 * Append the report for `unpack` ("ok" or an error) and `refs` to out,
 * framed for `mode`.
 */
int git_report_write(rg_buf *out, const char *unpack, const git_ref_status *refs, size_t nrefs,
                     git_sideband_mode mode);

/*
 * Append a message to out in band `band` (2 progress, 3 fatal), split into
 * as many packets as `mode` needs. Nothing is written for GIT_SIDEBAND_NONE.
 * Band 1 is accepted too, and len 0 writes one empty packet: in band 1 that
 * is the keepalive git's receive-pack sends during long operations.
 */
int git_sideband_write(rg_buf *out, int band, const void *data, size_t len, git_sideband_mode mode);

/* Parse a plain (already demultiplexed) report. Free with git_report_free. */
int git_report_parse(git_report *out, const char *data, size_t len, rg_error *err);
void git_report_free(git_report *r);

/*
 * Incremental demultiplexer for upstream's receive-pack output. Feed it the
 * bytes as they come; band-1 payload is appended to *report (capped), band-2
 * payload to *progress (capped), band 3 sets a fatal message. Without
 * side-band everything is report.
 */
typedef struct git_sideband_demux git_sideband_demux;

int git_sideband_demux_new(git_sideband_demux **out, git_sideband_mode mode, size_t report_max,
                           size_t progress_max);
void git_sideband_demux_free(git_sideband_demux *d);
int git_sideband_demux_feed(git_sideband_demux *d, const char *data, size_t len, rg_error *err);
/*
 * Call at end of stream; RG_E_PROTOCOL when it ended inside a packet or,
 * with side-band, before the final flush and without a band-3 message.
 */
int git_sideband_demux_finish(git_sideband_demux *d, rg_error *err);
const rg_buf *git_sideband_demux_report(const git_sideband_demux *d);
const rg_buf *git_sideband_demux_progress(const git_sideband_demux *d);
/* Band-3 message, or NULL. */
const char *git_sideband_demux_fatal(const git_sideband_demux *d);

#endif
