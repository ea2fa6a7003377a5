/*
 * The built-in secret detectors and their confirmation (see detect.h).
 *
 * Each token regex starts at a word boundary and ends on a byte that cannot
 * continue the token (or at the end of the object), so a token one
 * character too long is not half-reported. The generic assignment regex
 * only finds `keyword <op> value` candidates; whether the value is a secret
 * is decided here, on rules a regex cannot express well:
 *   - the value is 12..64 bytes (the regex) and carries at least
 *     ASSIGN_ENTROPY_MIN bits of Shannon entropy per byte, which random
 *     credentials of that length do (16 random base64 characters: about 3.7)
 *     and words, repeated characters and most identifiers do not;
 *   - it is not a placeholder (`changeme`, `example`, `xxxx`, `<...>`) nor a
 *     reference to where the secret really lives (`${VAR}`, `$VAR`, `{{x}}`,
 *     `os.environ[...]`, calls, URLs, paths, dotted identifiers, literals
 *     in braces), and it ends at a `\n`-style escape inside a string;
 *   - it is not a token a specific detector reports under its own name.
 */
#include "content/detect.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

/* The shortest assigned value taken for a secret (the regex's bound too). */
#define ASSIGN_LEN_MIN 12
/* Bits per byte below which an assigned value is not taken for a secret. */
#define ASSIGN_ENTROPY_MIN 3.0
/* Below this a token is a placeholder (`ghp_xxxx...`), not a credential. */
#define TOKEN_ENTROPY_MIN 3.0
/* An AWS secret is 40 random base64 characters: about 4.9 bits per byte. */
#define AWS_SECRET_ENTROPY_MIN 4.0
/* A private key body may be broken by at most this many separator bytes in a row. */
#define KEY_GAP_MAX 64
/* Armor headers before a private key's body: at most this many bytes. */
#define KEY_HEADERS_MAX 512

/* A line break between base64 lines, real or escaped inside a string. */
#define KEY_SEP "(?:[ \\t\\r\\n]|\\\\[rn]){1,8}"

const content_detector content_detectors[] = {
    {"private-key",
     "-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----" KEY_SEP
     "(?:[A-Za-z0-9+/=]{16}|[A-Za-z-]{1,32}: )",
     0, CONTENT_DETECT_PRIVATE_KEY, ""},
    {"aws-access-key-id", "\\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\\b", 0, CONTENT_DETECT_AWS_ID,
     ""},
    {"github-token", "\\bgh[pousr]_[0-9A-Za-z]{36}\\b", 0, CONTENT_DETECT_TOKEN, ""},
    {"github-fine-grained-token", "\\bgithub_pat_[0-9A-Za-z_]{82}\\b", 0, CONTENT_DETECT_TOKEN,
     "_"},
    {"gitlab-token", "\\bglpat-[0-9A-Za-z_-]{20,64}(?:[^0-9A-Za-z_-]|$)", 0, CONTENT_DETECT_TOKEN,
     "_-"},
    {"slack-token", "\\bxox[abposr]-[0-9A-Za-z-]{10,100}(?:[^0-9A-Za-z-]|$)", 0,
     CONTENT_DETECT_TOKEN, "-"},
    {"google-api-key", "\\bAIza[0-9A-Za-z_-]{35}(?:[^0-9A-Za-z_-]|$)", 0, CONTENT_DETECT_TOKEN,
     "_-"},
    {"secret-assignment",
     "(?:password|passwd|pwd|secret|token|api[_.-]?key|access[_.-]?key|auth[_.-]?key|"
     "private[_.-]?key|credential)[0-9A-Za-z_.-]{0,16}[\"'\\]]{0,2}[ \\t]{0,4}(?::=|=>|=|:)"
     "[ \\t]{0,4}[\"'`]?[^\\s\"'`;,]{12,64}(?:[\\s\"'`;,]|$)",
     1, CONTENT_DETECT_ASSIGNMENT, ""},
};
const size_t content_ndetectors = sizeof(content_detectors) / sizeof(content_detectors[0]);

double content_detect_entropy(const unsigned char *p, size_t n)
{
    size_t counts[256] = {0};
    double h = 0;

    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        counts[p[i]]++;
    for (size_t c = 0; c < 256; c++) {
        if (counts[c] != 0) {
            double q = (double)counts[c] / (double)n;
            h -= q * log2(q);
        }
    }
    return h;
}

/* ------------------------------------------------------------------------
 * Small predicates over a value
 * ------------------------------------------------------------------------ */

static int in_token(const content_detector *d, unsigned char c)
{
    return isalnum(c) || (c != '\0' && strchr(d->extra_chars, c) != NULL);
}

static int has(const unsigned char *p, size_t n, const char *needle, int caseless)
{
    size_t k = strlen(needle);

    for (size_t i = 0; i + k <= n; i++) {
        if (caseless ? strncasecmp((const char *)p + i, needle, k) == 0
                     : memcmp(p + i, needle, k) == 0)
            return 1;
    }
    return 0;
}

static int starts(const unsigned char *p, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);

    return n >= k && memcmp(p, prefix, k) == 0;
}

/* Tokens the specific detectors report under their own names. */
static int is_known_token(const unsigned char *p, size_t n)
{
    static const char *const prefixes[] = {
        "ghp_",  "gho_",  "ghu_",  "ghs_",  "ghr_",       "github_pat_", "glpat-",
        "xoxa-", "xoxb-", "xoxo-", "xoxp-", "xoxr-",      "xoxs-",       "AIza",
        "AKIA",  "ASIA",  "ABIA",  "ACCA",  "-----BEGIN",
    };

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (starts(p, n, prefixes[i]))
            return 1;
    return 0;
}

static int is_placeholder(const unsigned char *p, size_t n)
{
    static const char *const words[] = {
        "example", "changeme", "change_me",  "change-me", "placeholder", "xxxx",
        "your_",   "your-",    "dummy",      "redacted",  "sample",      "****",
        "...",     "<",        "0123456789", "123456789",
    };

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (has(p, n, words[i], 1))
            return 1;
    return 0;
}

/* Where the secret really lives: a variable, template, call, URL, path or literal. */
static int is_reference(const unsigned char *p, size_t n)
{
    static const char *const inside[] = {"${", "{{", "(", ")", "[", "]", "->", "::", "://"};
    static const char *const prefixes[] = {"%", "@", "#{", "{", "/", "./", "../", "~/"};

    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == '$' &&
            (p[i + 1] == '{' || p[i + 1] == '(' || p[i + 1] == '_' || isalpha(p[i + 1])))
            return 1;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (starts(p, n, prefixes[i]))
            return 1;
    for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++)
        if (has(p, n, inside[i], 0))
            return 1;
    return 0;
}

/* Words and identifiers (`settings.SECRET_KEY`, `acme/app:write`): no digit. */
static int is_words(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isalpha(p[i]) && strchr("_.-/:", p[i]) == NULL)
            return 0;
    return 1;
}

/* ------------------------------------------------------------------------
 * Confirmation
 * ------------------------------------------------------------------------ */

/* The value of `key <op> value<terminator>`: after the first `:` or `=`. */
static int assignment_value(size_t *off, size_t *len, const unsigned char *m, size_t mlen)
{
    size_t i = 0, end = mlen;

    while (i < mlen && m[i] != ':' && m[i] != '=')
        i++;
    while (i < mlen && (m[i] == ':' || m[i] == '=' || m[i] == '>'))
        i++;
    while (i < mlen && (m[i] == ' ' || m[i] == '\t'))
        i++;
    if (i < mlen && (m[i] == '"' || m[i] == '\'' || m[i] == '`'))
        i++;
    if (end > i && (isspace(m[end - 1]) || strchr("\"'`;,", m[end - 1]) != NULL))
        end--;
    /* An escape (`\n`, `\t`) ends the value inside a string literal. */
    for (size_t k = i; k + 1 < end; k++) {
        if (m[k] == '\\' && strchr("nrt0", m[k + 1]) != NULL) {
            end = k;
            break;
        }
    }
    if (end < i + ASSIGN_LEN_MIN)
        return 0;
    *off = i;
    *len = end - i;
    return 1;
}

int content_detect_aws_secret(const unsigned char *p, size_t n)
{
    int upper = 0, lower = 0, digit = 0;

    if (n != CONTENT_DETECT_AWS_SECRET_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        upper |= isupper(p[i]) != 0;
        lower |= islower(p[i]) != 0;
        digit |= isdigit(p[i]) != 0;
    }
    return upper && lower && digit && content_detect_entropy(p, n) >= AWS_SECRET_ENTROPY_MIN;
}

static int aws_secret_byte(unsigned char c)
{
    return isalnum(c) || c == '/' || c == '+';
}

int content_detect_aws_secret_find(size_t *off, const unsigned char *p, size_t n, int open_left,
                                   int open_right, int last)
{
    int found = 0;

    for (size_t i = 0; i < n;) {
        size_t j = i;

        if (!aws_secret_byte(p[i])) {
            i++;
            continue;
        }
        while (j < n && aws_secret_byte(p[j]))
            j++;
        /* Bounded: each byte is looked at by one run. */
        if (j - i == CONTENT_DETECT_AWS_SECRET_LEN && !(i == 0 && open_left) &&
            !(j == n && open_right) && (j == n || p[j] != '=') &&
            !has(p + i, j - i, "EXAMPLE", 0) && content_detect_aws_secret(p + i, j - i)) {
            *off = i;
            found = 1;
            if (!last)
                break;
        }
        i = j;
    }
    return found;
}

int content_detect_value(size_t *off, size_t *len, const content_detector *d,
                         const unsigned char *m, size_t mlen)
{
    size_t lo = 0, hi = mlen;
    const unsigned char *v;
    size_t n;

    if (d->kind == CONTENT_DETECT_PRIVATE_KEY) {
        /* Either the body's first characters or the first armor header. */
        if (mlen >= 2 && m[mlen - 2] == ':' && m[mlen - 1] == ' ') {
            *off = mlen;
            *len = 0;
            return 1;
        }
        if (mlen < CONTENT_DETECT_KEY_LEAD)
            return 0;
        *off = mlen - CONTENT_DETECT_KEY_LEAD;
        *len = CONTENT_DETECT_KEY_LEAD;
        return 1;
    }
    if (d->kind == CONTENT_DETECT_ASSIGNMENT) {
        if (!assignment_value(&lo, &n, m, mlen))
            return 0;
        v = m + lo;
        if (is_known_token(v, n) || is_placeholder(v, n) || is_reference(v, n) || is_words(v, n) ||
            content_detect_entropy(v, n) < ASSIGN_ENTROPY_MIN)
            return 0;
        *off = lo;
        *len = n;
        return 1;
    }
    /* Tokens: the regex may include the bytes that bound them. */
    while (lo < hi && !in_token(d, m[lo]))
        lo++;
    while (hi > lo && !in_token(d, m[hi - 1]))
        hi--;
    v = m + lo;
    n = hi - lo;
    if (n == 0 || has(v, n, "EXAMPLE", 0))
        return 0;
    if (content_detect_entropy(v, n) < TOKEN_ENTROPY_MIN)
        return 0;
    *off = lo;
    *len = n;
    return 1;
}

/* Skip RFC 1421 / OpenPGP armor headers: they end with an empty line. */
static void key_header_byte(content_detect_key *k, int newline, int blank)
{
    if (newline) {
        if (k->line_empty)
            k->headers = 0;
        k->line_empty = 1;
    } else if (!blank) {
        k->line_empty = 0;
    }
    if (++k->gap > KEY_HEADERS_MAX)
        k->done = 1;
}

size_t content_detect_key_feed(content_detect_key *k, const unsigned char *p, size_t n)
{
    size_t i;

    for (i = 0; i < n && !k->done; i++) {
        unsigned char c = p[i];
        int newline = c == '\n', blank = c == ' ' || c == '\t' || c == '\r';

        if (k->backslash) {
            /* `\n` and `\r` inside a string literal break lines too. */
            k->backslash = 0;
            newline = c == 'n';
            blank = c == 'r';
            if (!newline && !blank && !k->headers) {
                k->done = 1;
                break;
            }
        } else if (c == '\\') {
            k->backslash = 1;
            continue;
        }
        if (k->headers) {
            key_header_byte(k, newline, blank);
        } else if (!newline && !blank && (isalnum(c) || c == '+' || c == '/' || c == '=')) {
            k->value[k->n++] = c;
            k->gap = 0;
            if (k->n == sizeof(k->value))
                k->done = 1;
        } else if (newline || blank) {
            if (++k->gap > KEY_GAP_MAX)
                k->done = 1;
        } else {
            k->done = 1;
            break;
        }
    }
    return i;
}
