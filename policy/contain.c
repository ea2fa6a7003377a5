/*
 * Glob containment (see contain.h). Both levels mirror util/glob.c: at the
 * level of segments a table over (suffix of broad, suffix of narrow), at
 * the level of characters the iterative backtracking of wildcard matching,
 * run over narrow's pattern as if it were a name whose wildcards are
 * letters that only a wildcard of broad can take. Pure: no allocation.
 */
#include "policy/contain.h"

#include <stdint.h>
#include <string.h>

#include "util/glob.h"

typedef struct segment {
    const char *p;
    size_t len;
    int globstar; /* the whole segment is `**` */
} segment;

/* Cut `pat` at `/`; -1 when it has more than `max` segments. */
static int split(segment *out, size_t max, const char *pat)
{
    size_t n = 0;
    const char *p = pat;

    for (;;) {
        if (n == max)
            return -1;
        out[n].p = p;
        out[n].len = strcspn(p, "/");
        out[n].globstar = out[n].len == 2 && p[0] == '*' && p[1] == '*';
        n++;
        if (p[out[n - 1].len] == '\0')
            return (int)n;
        p += out[n - 1].len + 1;
    }
}

static int has_byte_above_ascii(const char *p, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++)
        if ((unsigned char)p[i] >= 0x80)
            return 1;
    return 0;
}

static int all_stars(const char *p, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++)
        if (p[i] != '*')
            return 0;
    return len > 0;
}

/* One character of broad's segment against one of narrow's pattern. */
static int token_covers(char b, char n)
{
    if (b == '?')
        return n != '*'; /* one character, literal or `?`, never a run */
    return b == n;       /* a literal covers only itself (n is no wildcard then) */
}

/* Whether every string segment `n` matches is matched by segment `b`. */
static int segment_contains(const segment *b, const segment *n)
{
    char bs[256], ns[256];
    size_t bi = 0, ni = 0, star_b = SIZE_MAX, star_n = 0;

    if (b->len == n->len && !memcmp(b->p, n->p, b->len))
        return 1;
    if (all_stars(b->p, b->len))
        return 1;
    if (memchr(n->p, '*', n->len) == NULL && memchr(n->p, '?', n->len) == NULL) {
        /* A literal segment: the matcher itself says. */
        if (b->len >= sizeof(bs) || n->len >= sizeof(ns))
            return 0;
        memcpy(bs, b->p, b->len);
        bs[b->len] = '\0';
        memcpy(ns, n->p, n->len);
        ns[n->len] = '\0';
        return rg_glob_match(bs, ns);
    }
    /* `?` takes a UTF-8 character, whose extent a pattern alone cannot fix. */
    if (has_byte_above_ascii(b->p, b->len) || has_byte_above_ascii(n->p, n->len))
        return 0;
    while (ni < n->len) {
        if (bi < b->len && b->p[bi] == '*') {
            while (bi < b->len && b->p[bi] == '*')
                bi++;
            star_b = bi;
            star_n = ni;
            continue;
        }
        if (bi < b->len && token_covers(b->p[bi], n->p[ni])) {
            bi++;
            ni++;
            continue;
        }
        /* Let broad's last star take one more of narrow's characters. */
        if (star_b == SIZE_MAX)
            return 0;
        star_n++;
        bi = star_b;
        ni = star_n;
    }
    while (bi < b->len && b->p[bi] == '*')
        bi++;
    return bi == b->len;
}

int policy_glob_contains(const char *broad, const char *narrow)
{
    segment bs[POLICY_CONTAIN_MAX_SEGMENTS], ns[POLICY_CONTAIN_MAX_SEGMENTS];
    /* c[i][j]: broad's segments from i contain narrow's from j. */
    unsigned char c[POLICY_CONTAIN_MAX_SEGMENTS + 1][POLICY_CONTAIN_MAX_SEGMENTS + 1];
    int nb, nn, i, j;

    if (broad == NULL || narrow == NULL)
        return 0;
    if (!strcmp(broad, narrow))
        return 1;
    nb = split(bs, POLICY_CONTAIN_MAX_SEGMENTS, broad);
    nn = split(ns, POLICY_CONTAIN_MAX_SEGMENTS, narrow);
    if (nb < 0 || nn < 0)
        return 0;
    for (i = nb; i >= 0; i--) {
        for (j = nn; j >= 0; j--) {
            if (i == nb) {
                /* Left over in narrow, even `**`, can take a segment broad lacks. */
                c[i][j] = j == nn;
            } else if (bs[i].globstar) {
                /*
                 * `**` takes nothing, or narrow's next segment (a `**` there
                 * too: a pattern that starts with `**` matches every name
                 * with any segments put in front of it).
                 */
                c[i][j] = c[i + 1][j] || (j < nn && c[i][j + 1]);
            } else {
                /* One segment of broad cannot take the any number a `**` may. */
                c[i][j] = j < nn && !ns[j].globstar && segment_contains(&bs[i], &ns[j]) &&
                          c[i + 1][j + 1];
            }
        }
    }
    return c[0][0];
}
