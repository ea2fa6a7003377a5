/* Small text helpers; see text.h. */
#include "util/text.h"

void rg_hex_encode(char *out, const unsigned char *in, size_t len)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * len] = '\0';
}

int rg_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int rg_name_segment_ok(const char *s, size_t len)
{
    if (len == 0 || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '+' || c == '~'))
            return 0;
    }
    return 1;
}

long long rg_duration_parse(const char *s)
{
    static const struct {
        char suffix;
        long long seconds;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
    long long n = 0, unit = 1;
    const char *p = s;
    size_t i;

    if (s == NULL || *p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
        if (n > 1000000000LL)
            return -1;
    }
    if (*p != '\0') {
        for (i = 0; i < sizeof(units) / sizeof(units[0]) && units[i].suffix != *p; i++)
            ;
        if (i == sizeof(units) / sizeof(units[0]) || p[1] != '\0')
            return -1;
        unit = units[i].seconds;
    }
    return n * unit;
}
