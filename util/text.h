/*
 * Small text helpers several libraries need the same way: hex digits both
 * ways, and the one rule for a name segment that a URL path, a token's repo
 * list and a config's host may hold, so all three accept exactly the same
 * names.
 */
#ifndef RG_UTIL_TEXT_H
#define RG_UTIL_TEXT_H

#include <stddef.h>

/* Write 2*len lowercase hex digits and a NUL to out. */
void rg_hex_encode(char *out, const unsigned char *in, size_t len);

/* The value of a hex digit (either case), or -1. */
int rg_hex_digit(char c);

/*
 * 1 when s[0..len) is a plain name segment: non-empty, not starting with
 * '.' or '-', and only letters, digits and ". _ - + ~" — so never "." or
 * "..", never a separator, never a control character.
 */
int rg_name_segment_ok(const char *s, size_t len);

/*
 * Seconds from "3600", "90s", "30m", "2h", "7d" or "1w"; -1 when not a
 * duration (or past a billion seconds). Token TTLs, audit ages and the
 * control socket's limits all say durations this way.
 */
long long rg_duration_parse(const char *s);

#endif
