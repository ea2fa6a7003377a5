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

typedef enum rgit_sideband_mode {
    RGIT_SIDEBAND_NONE = 0,
    RGIT_SIDEBAND_1000 = 1000, /* side-band: packets of at most 1000 bytes */
    RGIT_SIDEBAND_64K = 65520, /* side-band-64k */
} rgit_sideband_mode;

typedef struct rgit_ref_status {
    char *refname;
    char *error; /* NULL: ok; else the ng reason */
} rgit_ref_status;

typedef struct rgit_report {
    char *unpack; /* "ok" or upstream's unpack error */
    rgit_ref_status *refs;
    size_t nrefs;
} rgit_report;

/*
 * Append the report for `unpack` ("ok" or an error) and `refs` to out,
 * framed for `mode`.
 */
int rgit_report_write(rg_buf *out, const char *unpack, const rgit_ref_status *refs, size_t nrefs,
                      rgit_sideband_mode mode);

/*
 * Append a message to out in band `band` (2 progress, 3 fatal), split into
 * as many packets as `mode` needs. Nothing is written for RGIT_SIDEBAND_NONE.
 * Band 1 is accepted too, and len 0 writes one empty packet: in band 1 that
 * is the keepalive git's receive-pack sends during long operations.
 */
int rgit_sideband_write(rg_buf *out, int band, const void *data, size_t len,
                        rgit_sideband_mode mode);

/* Parse a plain (already demultiplexed) report. Free with rgit_report_free. */
int rgit_report_parse(rgit_report *out, const char *data, size_t len, rg_error *err);
void rgit_report_free(rgit_report *r);

/*
 * Incremental demultiplexer for upstream's receive-pack output. Feed it the
 * bytes as they come; band-1 payload is appended to *report (capped), band-2
 * payload to *progress (capped), band 3 sets a fatal message. Without
 * side-band everything is report.
 */
typedef struct rgit_sideband_demux rgit_sideband_demux;

int rgit_sideband_demux_new(rgit_sideband_demux **out, rgit_sideband_mode mode, size_t report_max,
                            size_t progress_max);
void rgit_sideband_demux_free(rgit_sideband_demux *d);
int rgit_sideband_demux_feed(rgit_sideband_demux *d, const char *data, size_t len, rg_error *err);
/*
 * Call at end of stream; RG_E_PROTOCOL when it ended inside a packet or,
 * with side-band, before the final flush and without a band-3 message.
 */
int rgit_sideband_demux_finish(rgit_sideband_demux *d, rg_error *err);
const rg_buf *rgit_sideband_demux_report(const rgit_sideband_demux *d);
const rg_buf *rgit_sideband_demux_progress(const rgit_sideband_demux *d);
/* Band-3 message, or NULL. */
const char *rgit_sideband_demux_fatal(const rgit_sideband_demux *d);

#endif
