/*
 * Base64url (RFC 4648 section 5) without padding, as run tokens and JWTs
 * use it. Decoding is strict: no padding, no whitespace, no characters
 * outside the alphabet and no stray bits in the last character, so every
 * byte string has exactly one accepted encoding and a token cannot be
 * re-spelled into a different string that still verifies.
 */
#ifndef RG_TOKENS_B64URL_H
#define RG_TOKENS_B64URL_H

#include <stddef.h>

/* Characters needed to encode `len` bytes (not counting a NUL). */
size_t tokens_b64url_encoded_len(size_t len);

/*
 * Encode `len` bytes of `in` into `out`, which must hold
 * tokens_b64url_encoded_len(len) + 1 bytes; the result is NUL-terminated.
 * Returns the number of characters written.
 */
size_t tokens_b64url_encode(char *out, const void *in, size_t len);

/*
 * Decode `len` characters of `in` into `out`, which must hold len * 3 / 4
 * bytes; *out_len gets the number of bytes. Returns 0, or -EINVAL when `in`
 * is not canonical unpadded base64url.
 */
int tokens_b64url_decode(unsigned char *out, size_t *out_len, const char *in, size_t len);

#endif
