/*
 * Finding where a pack really ends, as its bytes stream past. A pack is a
 * 12-byte header ("PACK", version, object count), the objects (a type and
 * size header, a delta base for deltas, then a zlib stream) and a trailing
 * checksum of 20 (SHA-1) or 32 (SHA-256) bytes. Only inflating each zlib
 * stream tells where the next object starts; the output is thrown away.
 *
 * The gateway forwards a pack to upstream while it is still deciding, and
 * holds back the trailing checksum until the decision: without it
 * receive-pack cannot complete the pack, so nothing can land before the
 * decision is made and recorded. That needs to know which bytes are the
 * trailer, exactly: the body may go on after the pack (receive-pack ignores
 * what follows a complete pack), so "the last 20 bytes" would not do.
 *
 * The scanner checks only what it needs for that (object types, varint
 * lengths, that each stream inflates to its declared size); upstream's own
 * index-pack verifies the rest. Inflated bytes are capped, so a zlib bomb
 * costs bounded work.
 */
#ifndef RG_GIT_PACKSCAN_H
#define RG_GIT_PACKSCAN_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct rgit_packscan rgit_packscan;

/*
 * A scanner for a pack whose object ids have `oid_hexlen` hex digits (40
 * or 64). `max_inflated` caps the bytes all objects may inflate to.
 */
int rgit_packscan_new(rgit_packscan **out, size_t oid_hexlen, uint64_t max_inflated);

/*
 * Scan the next bytes of the stream (which starts at the pack's first
 * byte). Returns 1 once the whole pack has been seen (bytes past its end
 * are not scanned), 0 while more is needed, or RG_E_PROTOCOL / RG_E_TOO_BIG
 * with a message when the stream is not a pack the scanner can follow.
 */
int rgit_packscan_feed(rgit_packscan *s, const char *data, size_t len, rg_error *err);

/*
 * How many bytes from the start may go upstream without completing the
 * pack: everything before the trailing checksum (all bytes seen while the
 * trailer has not started).
 */
uint64_t rgit_packscan_safe(const rgit_packscan *s);

/* The pack's whole length, trailer included; 0 until feed returned 1. */
uint64_t rgit_packscan_end(const rgit_packscan *s);

/* Accepts NULL. */
void rgit_packscan_free(rgit_packscan *s);

#endif
