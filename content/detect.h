/*
 * The built-in secret detectors: for each, the Hyperscan regex that finds a
 * candidate and the C that confirms it and cuts out the secret's value.
 * Regexes find; C decides what a regex cannot (entropy, placeholders, code
 * references, an AWS key id paired with its secret). Pure: no allocation,
 * no I/O, no Hyperscan; content/secrets.c drives these.
 *
 * Every built-in regex matches at most CONTENT_DETECT_WIDTH_MAX bytes and
 * has one end per start (a token's end is anchored by a byte that cannot
 * continue it), so one candidate is reported once.
 */
#ifndef RG_CONTENT_DETECT_H
#define RG_CONTENT_DETECT_H

#include <stddef.h>

/* The longest built-in match. */
#define CONTENT_DETECT_WIDTH_MAX 1024

/* How a detector's match becomes a finding. */
typedef enum content_detect_kind {
    CONTENT_DETECT_TOKEN,       /* a fixed-shape token: the match is the secret */
    CONTENT_DETECT_ASSIGNMENT,  /* `password = value`: the value, if high-entropy */
    CONTENT_DETECT_AWS_ID,      /* an AWS key id: its secret is looked for around it */
    CONTENT_DETECT_PRIVATE_KEY, /* a PEM/OpenSSH/PGP header: the body follows */
} content_detect_kind;

typedef struct content_detector {
    const char *name; /* the findings' kind */
    const char *regex;
    int caseless;
    content_detect_kind kind;
    const char *extra_chars; /* a token's bytes besides [A-Za-z0-9] */
} content_detector;

extern const content_detector content_detectors[];
extern const size_t content_ndetectors;

/* Kind of the paired AWS finding (a key id alone is not a finding). */
#define CONTENT_DETECT_AWS_PAIR "aws-access-key"
/* An AWS key id and its secret pair when at most this many bytes lie between them. */
#define CONTENT_DETECT_AWS_WINDOW     512
#define CONTENT_DETECT_AWS_SECRET_LEN 40
/* The bytes on either side of a key id where its secret is looked for. */
#define CONTENT_DETECT_AWS_RANGE (CONTENT_DETECT_AWS_WINDOW + CONTENT_DETECT_AWS_SECRET_LEN + 1)
/* A private key's fingerprint covers this many body characters. */
#define CONTENT_DETECT_KEY_CHARS 256
/* Its regex ends with this many body characters (or with an armor header). */
#define CONTENT_DETECT_KEY_LEAD 16

/* Shannon entropy of the bytes, in bits per byte. */
double content_detect_entropy(const unsigned char *p, size_t n);

/* 1 when the bytes have the shape of an AWS secret access key. */
int content_detect_aws_secret(const unsigned char *p, size_t n);

/*
 * Find an AWS secret access key in p[0..n): a run of exactly 40 of
 * [0-9A-Za-z/+] between bytes outside that set (and not followed by `=`)
 * with the shape of one. A run that touches a side marked open may go on
 * past it and is not taken. Returns 1 with *off at the last such run when
 * `last`, else the first; 0 when there is none.
 */
int content_detect_aws_secret_find(size_t *off, const unsigned char *p, size_t n, int open_left,
                                   int open_right, int last);

/*
 * Confirm the match `m` of detector `d` and find the secret's value in it.
 * Returns 1 with *off and *len set to the value within `m`, or 0 when the
 * match is not a secret (a placeholder, a code reference, low entropy).
 * For CONTENT_DETECT_PRIVATE_KEY it confirms nothing (the body comes later).
 */
int content_detect_value(size_t *off, size_t *len, const content_detector *d,
                         const unsigned char *m, size_t mlen);

/*
 * A private key's body, collected a chunk at a time: the base64 characters
 * after the header up to CONTENT_DETECT_KEY_CHARS, across line breaks
 * (real ones and `\n` escapes in a string), stopping at the first other
 * byte. When the match ended in an armor header (`Proc-Type: `,
 * `Version: `), set `headers` first: the body starts after the empty line
 * that ends the headers. The value holds a secret: wipe it.
 */
typedef struct content_detect_key {
    unsigned char value[CONTENT_DETECT_KEY_CHARS];
    size_t n;
    unsigned gap;   /* separator (or header) bytes since the last body character */
    int backslash;  /* the previous byte was a backslash */
    int headers;    /* still in the armor headers */
    int line_empty; /* nothing but blanks so far on this header line */
    int done;
} content_detect_key;

/* Feed bytes; returns how many it consumed (fewer than `n` once done). */
size_t content_detect_key_feed(content_detect_key *k, const unsigned char *p, size_t n);

#endif
