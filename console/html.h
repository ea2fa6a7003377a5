/*
 * HTML output for the console: escaping of every string that may come from
 * a push (ref names, commit subjects, authors, reasons, run names), URL
 * encoding of query values, and template rendering. The invariant: nothing
 * reaches a page except through console_html_text, console_html_query, or
 * a template slot filled with markup built from those.
 */
#ifndef RG_CONSOLE_HTML_H
#define RG_CONSOLE_HTML_H

#include "util/buf.h"

/* Append `s` (NULL: nothing) with & < > " ' escaped and control characters as '?'. */
int console_html_text(rg_buf *b, const char *s);

/* Append `s` percent-encoded for a query value (only A-Z a-z 0-9 - . _ ~ stay). */
int console_html_query(rg_buf *b, const char *s);

/*
 * Append template `tmpl` with each `{{key}}` replaced by the markup of the
 * same index in vals (n pairs); an unknown slot renders as nothing.
 */
int console_html_render(rg_buf *b, const char *tmpl, const char *const *keys,
                        const char *const *vals, size_t n);

#endif
