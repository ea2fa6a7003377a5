/*
 * The secret scanner behind the `"secrets": true` content condition: does
 * added content (a blob, a commit or tag message) carry a credential?
 *
 * A content_secrets is the compiled, read-only detector set: the built-in
 * detectors (content/detect.h) plus extra patterns from the configuration,
 * compiled once into one Hyperscan streaming database so every pattern is
 * matched in a single pass. It may be shared by threads. A
 * content_secrets_scan is one thread's working state (Hyperscan scratch and
 * stream, a window of the last bytes seen): feed it an object in chunks of
 * any size, end it, and it is ready for the next object.
 *
 * Findings name the detector, the byte offset and line of the secret, and a
 * fingerprint `<detector>:<16 hex digits of SHA-256 of the secret>`, never
 * the secret itself, so a finding can go to a log or an error message as
 * is, and a known false positive can be allowed by its fingerprint.
 *
 * Bounded: the work is linear in the input (each match costs at most the
 * longest match, CONTENT_SECRETS_WIDTH_MAX bytes) and a scan's memory is
 * fixed when it is created, whatever it is fed.
 */
#ifndef RG_CONTENT_SECRETS_H
#define RG_CONTENT_SECRETS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Detector names are 1..CONTENT_SECRETS_NAME_MAX of [A-Za-z0-9_.-]. */
#define CONTENT_SECRETS_NAME_MAX 64
/* `<name>:` + 16 hex digits + NUL. */
#define CONTENT_SECRETS_FINGERPRINT_MAX (CONTENT_SECRETS_NAME_MAX + 1 + 16 + 1)
/* The longest text an extra pattern may match; longer or unbounded ones are refused. */
#define CONTENT_SECRETS_WIDTH_MAX 1024

/*
 * An extra detector from the configuration: its name and a Hyperscan regex
 * whose whole match is the secret (the fingerprint covers it). A regex that
 * can end at several places after one start reports the first end only:
 * anchor a token's end (`\b`, or a byte that cannot continue it).
 */
typedef struct content_secret_pattern {
    const char *name;
    const char *regex;
} content_secret_pattern;

typedef struct content_secret_finding {
    const char *kind; /* the detector's name; valid as long as the content_secrets */
    uint64_t offset;  /* of the secret's first byte in the object */
    uint64_t line;    /* 1-based line of that byte */
    char fingerprint[CONTENT_SECRETS_FINGERPRINT_MAX];
} content_secret_finding;

/* Called once per finding not allowed by fingerprint: 0 to go on, nonzero to stop. */
typedef int (*content_secrets_found_fn)(const content_secret_finding *finding, void *arg);

typedef struct content_secrets content_secrets;
typedef struct content_secrets_scan content_secrets_scan;

/*
 * Compile the built-in detectors and the `nextra` extra patterns into *out.
 * Extra patterns are refused (RG_E_CONFIG, the message names the pattern)
 * when their name is malformed or taken, or their regex does not compile,
 * can match empty text, or can match more than CONTENT_SECRETS_WIDTH_MAX
 * bytes. Findings whose fingerprint is one of the `nallow`
 * `allow_fingerprints` are not reported; each must be
 * `<name>:<16 lowercase hex digits>`. Nothing is kept of the arguments.
 */
int content_secrets_new(content_secrets **out, const content_secret_pattern *extra, size_t nextra,
                        const char *const *allow_fingerprints, size_t nallow, rg_error *err);
void content_secrets_free(content_secrets *s);

/*
 * One thread's scan state over `s` (which must outlive it), reporting to
 * `fn(finding, arg)`. The caller may change what `arg` points to between
 * objects.
 */
int content_secrets_scan_new(content_secrets_scan **out, const content_secrets *s,
                             content_secrets_found_fn fn, void *arg, rg_error *err);

/*
 * Scan the next `len` bytes of the current object. Returns 0, 1 when the
 * callback asked to stop (the rest of the object is then skipped until
 * content_secrets_scan_end), or a negative error (the object must then be
 * treated as unscanned).
 */
int content_secrets_scan_feed(content_secrets_scan *scan, const void *data, size_t len,
                              rg_error *err);

/*
 * End the current object: report what only its end decides (a match
 * anchored at the end, a private key that runs to the end) and reset the
 * scan for the next object. Returns as content_secrets_scan_feed does; the
 * scan is reset in every case.
 */
int content_secrets_scan_end(content_secrets_scan *scan, rg_error *err);

/* Feed one whole object and end it. */
int content_secrets_scan_buffer(content_secrets_scan *scan, const void *data, size_t len,
                                rg_error *err);

/* Frees the scan after wiping the bytes of content it kept. */
void content_secrets_scan_free(content_secrets_scan *scan);

#endif
