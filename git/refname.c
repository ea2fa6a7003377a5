/* Ref names as git's check-ref-format accepts them; see refname.h. */
#include "git/refname.h"

#include <string.h>

const char *rgit_refname_problem(const char *s, size_t n)
{
    size_t i, comp = 0; /* start of the current component */

    if (n == 0)
        return "it is empty";
    if (n < 5 || memcmp(s, "refs/", 5) != 0)
        return "it does not start with refs/";
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c < 0x20 || c == 0x7f)
            return "it contains a control character";
        if (strchr(" ~^:?*[\\", c) != NULL)
            return "it contains one of space ~ ^ : ? * [ \\";
        if (c == '.' && i + 1 < n && s[i + 1] == '.')
            return "it contains ..";
        if (c == '@' && i + 1 < n && s[i + 1] == '{')
            return "it contains @{";
        if (c == '/' || i + 1 == n) {
            size_t end = c == '/' ? i : n; /* component is s[comp..end) */

            if (end == comp)
                return c == '/' ? "it contains an empty component" : "it ends with /";
            if (s[comp] == '.')
                return "a component starts with .";
            if (end - comp >= 5 && memcmp(s + end - 5, ".lock", 5) == 0)
                return "a component ends with .lock";
            comp = i + 1;
        }
    }
    if (s[n - 1] == '/')
        return "it ends with /";
    if (s[n - 1] == '.')
        return "it ends with .";
    return NULL;
}
