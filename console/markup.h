/*
 * The pages' markup helpers (private to the console's page files). Each
 * appends to a buffer only while the caller's local `rc` is 0, so the
 * first failure (a buffer past its cap) ends the page and is the one
 * returned: PUT for fixed markup, TEXT for text (html.h's escaping), QUERY
 * for a query value.
 */
#ifndef RG_CONSOLE_MARKUP_H
#define RG_CONSOLE_MARKUP_H

#include "console/html.h"

#define PUT(b, s)                                                                                  \
    do {                                                                                           \
        if (rc == 0)                                                                               \
            rc = rg_buf_puts((b), (s));                                                            \
    } while (0)
#define TEXT(b, s)                                                                                 \
    do {                                                                                           \
        if (rc == 0)                                                                               \
            rc = console_html_text((b), (s));                                                      \
    } while (0)
#define QUERY(b, s)                                                                                \
    do {                                                                                           \
        if (rc == 0)                                                                               \
            rc = console_html_query((b), (s));                                                     \
    } while (0)

#endif
