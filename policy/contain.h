/*
 * Containment between rule patterns: does every name one glob matches also
 * match another? `refgate policy lint` asks it to find rules that a broader
 * rule always overrides. The answer is sound, not complete: 1 means
 * certain, 0 means "not certain" (which includes "no"), so a lint finding
 * built on it is never a false one, though some true ones go unreported.
 */
#ifndef RG_POLICY_CONTAIN_H
#define RG_POLICY_CONTAIN_H

#include <stddef.h>

/*
 * 1 when every name `narrow` matches is matched by `broad` (both in the
 * dialect of rg_glob_match), 0 when that is not certain. Decided segment by
 * segment: a `**` of `broad` may take any run of `narrow`'s segments (its
 * `**` included); within a segment, a `*` of `broad` may take any run of
 * `narrow`'s characters and wildcards, a `?` one character or `?`, and a
 * literal only itself. Patterns with bytes outside ASCII are compared only
 * where `narrow` has no wildcard (character boundaries then depend on the
 * name), and patterns of more than POLICY_CONTAIN_MAX_SEGMENTS segments
 * only when they are equal.
 */
int policy_glob_contains(const char *broad, const char *narrow);

#define POLICY_CONTAIN_MAX_SEGMENTS 64

#endif
