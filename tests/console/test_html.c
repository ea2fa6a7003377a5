/* The console's escaping and templates (console/html.c): nothing a push
 * chose can become markup. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "console/html.h"
#include "util/error.h"

struct escape_case {
    char in[64];
    char out[160];
};

static struct escape_case escape_cases[] = {
    {"plain text", "plain text"},
    {"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
    {"\"><img src=x onerror=y>", "&quot;&gt;&lt;img src=x onerror=y&gt;"},
    {"a'b", "a&#39;b"},
    {"&amp;", "&amp;amp;"},
    {"line\nbreak\x1b[31m", "line?break?[31m"},
    {"\x7f", "?"},
    {"caf\xc3\xa9", "caf\xc3\xa9"},
};

ParameterizedTestParameters(html, text_is_escaped)
{
    return cr_make_param_array(struct escape_case, escape_cases,
                               sizeof(escape_cases) / sizeof(escape_cases[0]));
}

ParameterizedTest(struct escape_case *c, html, text_is_escaped)
{
    rg_buf b = RG_BUF_INIT(1024);

    cr_assert_eq(console_html_text(&b, c->in), 0);
    cr_expect_str_eq(b.data ? b.data : "", c->out);
    rg_buf_free(&b);
}

Test(html, query_values_are_percent_encoded)
{
    rg_buf b = RG_BUF_INIT(1024);

    cr_assert_eq(console_html_query(&b, "refs/heads/a b&c=\"d\"<"), 0);
    cr_expect_str_eq(b.data, "refs%2Fheads%2Fa%20b%26c%3D%22d%22%3C");
    rg_buf_free(&b);
}

Test(html, templates_fill_known_slots_and_drop_unknown_ones)
{
    static const char *const keys[] = {"title", "body"};
    const char *vals[] = {"T&amp;", "<p>x</p>"};
    rg_buf b = RG_BUF_INIT(1024);

    cr_assert_eq(console_html_render(&b, "<h1>{{title}}</h1>{{body}}{{other}}!", keys, vals, 2), 0);
    cr_expect_str_eq(b.data, "<h1>T&amp;</h1><p>x</p>!");
    rg_buf_free(&b);
}

Test(html, a_page_past_its_cap_fails)
{
    rg_buf b = RG_BUF_INIT(8);

    cr_expect_eq(console_html_text(&b, "<<<<"), RG_E_TOO_BIG);
}
