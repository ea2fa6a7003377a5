/*
 * The glob dialect of rule selectors: repo and ref patterns in the
 * configuration (config/) and their evaluation (policy/).
 */
#ifndef RG_UTIL_GLOB_H
#define RG_UTIL_GLOB_H

#include <stddef.h>

/*
 * Glob match as rules use it, segment by segment at `/`: a segment that is
 * exactly `**` matches any number of whole segments, including none (so a
 * trailing `**` segment after refs/heads matches refs/heads too); elsewhere
 * `*` matches any run of characters within one segment (also none) and `?`
 * one character (a whole UTF-8 sequence) other than `/`. Anything else
 * matches itself; there are no classes or escapes. Returns 1 or 0.
 */
int rg_glob_match(const char *pattern, const char *name);

/*
 * What every name a pattern matches starts and ends with: the literal text
 * before its first and after its last wildcard, less a `/` that a `**`
 * taking no segment removes. A matcher of many patterns compares these
 * with memcmp() first, and runs rg_glob_match only on what passes, from
 * `skip`: the literal whole segments at the start need no second look.
 */
typedef struct rg_glob_ends {
    size_t head;    /* pattern[0..head) starts every matching name */
    size_t tail_at; /* pattern[tail_at..tail_at+tail) ends it */
    size_t tail;
    size_t skip; /* when name[skip-1] is '/', matching from skip in both is the same */
    int literal; /* no wildcard: only the name equal to the pattern matches */
} rg_glob_ends;

void rg_glob_literal_ends(rg_glob_ends *out, const char *pattern);

#endif
