/*
 * Base64url (tokens/b64url.c): the RFC 4648 test vectors, the URL-safe
 * alphabet, and the strictness that gives every byte string exactly one
 * accepted spelling.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "tokens/b64url.h"

static const struct {
    const char *raw, *enc;
} vectors[] = {
    {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},          {"foo", "Zm9v"},
    {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"},
};

Test(b64url, encodes_the_rfc4648_vectors_without_padding)
{
    char out[32];
    size_t i, n;

    for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        n = tokens_b64url_encode(out, vectors[i].raw, strlen(vectors[i].raw));
        cr_assert_str_eq(out, vectors[i].enc);
        cr_assert_eq(n, strlen(vectors[i].enc));
        cr_assert_eq(tokens_b64url_encoded_len(strlen(vectors[i].raw)), n);
    }
}

Test(b64url, decodes_the_rfc4648_vectors)
{
    unsigned char out[32];
    size_t i, n;

    for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        cr_assert_eq(tokens_b64url_decode(out, &n, vectors[i].enc, strlen(vectors[i].enc)), 0);
        cr_assert_eq(n, strlen(vectors[i].raw));
        cr_assert_eq(memcmp(out, vectors[i].raw, n), 0);
    }
}

Test(b64url, uses_the_url_safe_alphabet)
{
    const unsigned char raw[] = {0xfb, 0xff, 0xbf};
    unsigned char back[3];
    char out[8];
    size_t n;

    tokens_b64url_encode(out, raw, sizeof(raw));
    cr_assert_str_eq(out, "-_-_");
    cr_assert_eq(tokens_b64url_decode(back, &n, out, 4), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(memcmp(back, raw, 3), 0);
}

Test(b64url, round_trips_every_length_and_byte)
{
    unsigned char raw[300], back[300];
    char enc[420];
    size_t len, i, n;

    for (i = 0; i < sizeof(raw); i++)
        raw[i] = (unsigned char)(i * 7 + 3);
    for (len = 0; len < sizeof(raw); len++) {
        n = tokens_b64url_encode(enc, raw, len);
        cr_assert_eq(tokens_b64url_decode(back, &n, enc, n), 0, "length %zu", len);
        cr_assert_eq(n, len);
        cr_assert_eq(memcmp(back, raw, len), 0);
    }
}

Test(b64url, refuses_anything_not_canonical)
{
    static const char *const bad[] = {
        "Z",    /* 6 bits cannot make a byte */
        "Zg==", /* padding */
        "Zh",   /* spare bits set: a second spelling of "f" */
        "Zm9",  /* spare bits set: a second spelling of "fo" */
        "Zm9v\n", "Zm 9v", "Zm+v", "Zm/v", "Zm9v.", "Zm9v=",
    };
    unsigned char out[16];
    size_t i, n;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(tokens_b64url_decode(out, &n, bad[i], strlen(bad[i])), -EINVAL, "'%s'",
                     bad[i]);
}
