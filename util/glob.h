/*
 * The glob dialect of rule selectors: repo and ref patterns in the
 * configuration (config/) and their evaluation (policy/).
 */
#ifndef RG_UTIL_GLOB_H
#define RG_UTIL_GLOB_H

/*
 * Glob match as rules use it, segment by segment at `/`: a segment that is
 * exactly `**` matches any number of whole segments, including none (so a
 * trailing `**` segment after refs/heads matches refs/heads too); elsewhere
 * `*` matches any run of characters within one segment (also none) and `?`
 * one character (a whole UTF-8 sequence) other than `/`. Anything else
 * matches itself; there are no classes or escapes. Returns 1 or 0.
 */
int rg_glob_match(const char *pattern, const char *name);

#endif
