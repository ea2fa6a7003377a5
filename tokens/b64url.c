/* Strict unpadded base64url; see b64url.h. */
#include "tokens/b64url.h"

#include <errno.h>
#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* The 6-bit value of `c`, or -1 when it is not in the alphabet. */
static int sextet(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

size_t tokens_b64url_encoded_len(size_t len)
{
    return len / 3 * 4 + (len % 3 ? len % 3 + 1 : 0);
}

size_t tokens_b64url_encode(char *out, const void *in, size_t len)
{
    const unsigned char *p = in;
    size_t i, o = 0;
    uint32_t v;

    for (i = 0; i + 3 <= len; i += 3) {
        v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = alphabet[v >> 6 & 63];
        out[o++] = alphabet[v & 63];
    }
    if (len - i == 1) {
        v = (uint32_t)p[i] << 16;
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
    } else if (len - i == 2) {
        v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = alphabet[v >> 6 & 63];
    }
    out[o] = '\0';
    return o;
}

int tokens_b64url_decode(unsigned char *out, size_t *out_len, const char *in, size_t len)
{
    size_t i, o = 0, rest = len % 4;
    uint32_t v = 0;
    int s, k;

    *out_len = 0;
    /* One leftover character carries only 6 bits: never a whole byte. */
    if (rest == 1)
        return -EINVAL;
    for (i = 0; i < len; i++) {
        s = sextet((unsigned char)in[i]);
        if (s < 0)
            return -EINVAL;
        v = v << 6 | (uint32_t)s;
        if (i % 4 == 3) {
            out[o++] = (unsigned char)(v >> 16);
            out[o++] = (unsigned char)(v >> 8);
            out[o++] = (unsigned char)v;
            v = 0;
        }
    }
    if (rest) {
        /* Pad the group to 24 bits; the bits past the data must be zero. */
        for (k = (int)rest; k < 4; k++)
            v <<= 6;
        if (rest == 2 && (v & 0xffff) != 0)
            return -EINVAL;
        if (rest == 3 && (v & 0xff) != 0)
            return -EINVAL;
        out[o++] = (unsigned char)(v >> 16);
        if (rest == 3)
            out[o++] = (unsigned char)(v >> 8);
    }
    *out_len = o;
    return 0;
}
