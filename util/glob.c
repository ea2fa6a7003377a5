/*
 * The glob dialect of rule selectors (see glob.h). Names are cut at `/`
 * into segments: a `**` segment matches any number of whole segments,
 * including none, and every other segment matches exactly one segment, with
 * `*` for any run of characters and `?` for one character. Both levels use
 * the iterative backtracking of classic wildcard matching (return to the
 * last star, let it take one more), so matching is O(pattern * name) and a
 * hostile ref name cannot make it exponential.
 */
#include "util/glob.h"

#include <stdint.h>
#include <string.h>

/*
 * Bytes in the UTF-8 character at s (at most `avail`), so `?` and a star's
 * step take a whole character. Bytes that do not form a character count as
 * one each.
 */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    size_t want, n;

    if (s[0] < 0xc0 || s[0] > 0xf7)
        want = 1;
    else if (s[0] < 0xe0)
        want = 2;
    else if (s[0] < 0xf0)
        want = 3;
    else
        want = 4;
    for (n = 1; n < want && n < avail && (s[n] & 0xc0) == 0x80; n++)
        ;
    return n;
}

/* One segment: `*` and `?` never see a `/`, since segments have none. */
static int segment_match(const char *p, size_t plen, const char *s, size_t slen)
{
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;

    while (si < slen) {
        if (pi < plen && p[pi] == '*') {
            while (pi < plen && p[pi] == '*')
                pi++;
            star_p = pi;
            star_s = si;
            continue;
        }
        if (pi < plen && p[pi] == '?') {
            pi++;
            si += utf8_len((const unsigned char *)s + si, slen - si);
            continue;
        }
        if (pi < plen && p[pi] == s[si]) {
            pi++;
            si++;
            continue;
        }
        if (star_p == SIZE_MAX)
            return 0;
        star_s += utf8_len((const unsigned char *)s + star_s, slen - star_s);
        pi = star_p;
        si = star_s;
    }
    while (pi < plen && p[pi] == '*')
        pi++;
    return pi == plen;
}

/*
 * Segments are short: a plain loop costs less than strcspn's setup, and
 * policy_eval runs this for every pattern of every rule (bench/policy.sh).
 */
static size_t segment_len(const char *s)
{
    size_t n = 0;

    while (s[n] != '\0' && s[n] != '/')
        n++;
    return n;
}

/* The segment after the one of length `len` at s, or NULL after the last. */
static const char *segment_after(const char *s, size_t len)
{
    return s[len] == '/' ? s + len + 1 : NULL;
}

static int is_globstar(const char *seg)
{
    return seg[0] == '*' && seg[1] == '*' && (seg[2] == '/' || seg[2] == '\0');
}

void rg_glob_literal_ends(rg_glob_ends *out, const char *pattern)
{
    size_t len = strlen(pattern), h = strcspn(pattern, "*?"), t = 0;

    memset(out, 0, sizeof(*out));
    if (h == len) {
        out->head = out->tail = len;
        out->literal = 1;
        return;
    }
    /* Whole literal segments before the first wildcard match themselves. */
    for (out->skip = h; out->skip > 0 && pattern[out->skip - 1] != '/'; out->skip--)
        ;
    /* "refs/" + "**" matches "refs": the `/` before a `**` may go. */
    if (h > 0 && pattern[h - 1] == '/')
        h--;
    while (pattern[len - 1 - t] != '*' && pattern[len - 1 - t] != '?')
        t++;
    /* "**" + "/x" matches "x": the `/` after a `**` may go. */
    if (t > 0 && pattern[len - t] == '/')
        t--;
    out->head = h;
    out->tail = t;
    out->tail_at = len - t;
}

int rg_glob_match(const char *pattern, const char *name)
{
    const char *p = pattern, *n = name;
    const char *star_p = NULL, *star_n = NULL;
    size_t plen, nlen;
    int have_star = 0;

    if (pattern == NULL || name == NULL)
        return 0;
    for (;;) {
        if (p != NULL && is_globstar(p)) {
            have_star = 1;
            star_p = segment_after(p, 2);
            star_n = n;
            p = star_p;
            continue;
        }
        if (p == NULL && n == NULL)
            return 1;
        if (p != NULL && n != NULL) {
            plen = segment_len(p);
            nlen = segment_len(n);
            if (segment_match(p, plen, n, nlen)) {
                p = segment_after(p, plen);
                n = segment_after(n, nlen);
                continue;
            }
        }
        /* Let the last `**` take one more segment and retry from there. */
        if (!have_star || star_n == NULL)
            return 0;
        star_n = segment_after(star_n, segment_len(star_n));
        p = star_p;
        n = star_n;
    }
}
