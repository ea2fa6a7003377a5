/* Escaping and template rendering for the console's pages (html.h). */
#include "console/html.h"

#include <string.h>

int console_html_text(rg_buf *b, const char *s)
{
    int rc = 0;

    for (; rc == 0 && s && *s; s++) {
        switch (*s) {
        case '&':
            rc = rg_buf_puts(b, "&amp;");
            break;
        case '<':
            rc = rg_buf_puts(b, "&lt;");
            break;
        case '>':
            rc = rg_buf_puts(b, "&gt;");
            break;
        case '"':
            rc = rg_buf_puts(b, "&quot;");
            break;
        case '\'':
            rc = rg_buf_puts(b, "&#39;");
            break;
        default:
            rc = rg_buf_append(b, (unsigned char)*s < 0x20 || *s == 0x7f ? "?" : s, 1);
        }
    }
    return rc;
}

int console_html_query(rg_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;

    for (; rc == 0 && s && *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            rc = rg_buf_append(b, s, 1);
        } else {
            char enc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            rc = rg_buf_append(b, enc, 3);
        }
    }
    return rc;
}

int console_html_render(rg_buf *b, const char *tmpl, const char *const *keys,
                        const char *const *vals, size_t n)
{
    const char *p = tmpl, *open, *close;
    int rc = 0;

    /* Bounded: each round moves past one slot of the (embedded) template. */
    while (rc == 0 && (open = strstr(p, "{{")) != NULL && (close = strstr(open, "}}")) != NULL) {
        size_t klen = (size_t)(close - open - 2);

        rc = rg_buf_append(b, p, (size_t)(open - p));
        for (size_t i = 0; rc == 0 && i < n; i++)
            if (strlen(keys[i]) == klen && !strncmp(open + 2, keys[i], klen))
                rc = rg_buf_puts(b, vals[i] ? vals[i] : "");
        p = close + 2;
    }
    return rc == 0 ? rg_buf_puts(b, p) : rc;
}
