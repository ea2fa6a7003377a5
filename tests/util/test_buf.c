/* Capped buffers (util/buf.c): the cap is a hard limit that frees. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/error.h"

Test(buf, appends_up_to_the_cap_and_keeps_a_nul)
{
    rg_buf b = RG_BUF_INIT(10);

    cr_assert_eq(rg_buf_append(&b, "hello", 5), 0);
    cr_assert_eq(rg_buf_printf(&b, "%d", 12345), 0);
    cr_assert_eq(b.len, 10);
    cr_assert_str_eq(b.data, "hello12345");
    rg_buf_free(&b);
}

Test(buf, an_append_past_the_cap_fails_and_frees)
{
    rg_buf b = RG_BUF_INIT(8);

    cr_assert_eq(rg_buf_puts(&b, "12345678"), 0);
    cr_assert_eq(rg_buf_append(&b, "9", 1), RG_E_TOO_BIG);
    cr_assert_null(b.data);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(rg_buf_printf(&b, "%s", "123456789"), RG_E_TOO_BIG);
}

Test(buf, a_huge_length_cannot_wrap_the_size_check)
{
    rg_buf b = RG_BUF_INIT((size_t)-1 / 2);

    cr_assert_eq(rg_buf_append(&b, "ab", 2), 0);
    cr_assert_eq(rg_buf_append(&b, "x", (size_t)-1 - 1), RG_E_TOO_BIG);
}

Test(buf, consume_and_detach)
{
    rg_buf b = RG_BUF_INIT(100);
    char *p;

    rg_buf_puts(&b, "abcdef");
    rg_buf_consume(&b, 2);
    cr_assert_str_eq(b.data, "cdef");
    p = rg_buf_detach(&b);
    cr_assert_str_eq(p, "cdef");
    cr_assert_null(b.data);
    free(p);
}

Test(buf, truncate_cuts_back_to_a_mark_and_never_grows)
{
    rg_buf b = RG_BUF_INIT(100);
    rg_buf empty = RG_BUF_INIT(100);

    rg_buf_truncate(&empty, 0); /* no data yet: nothing to cut */
    cr_assert_null(empty.data);
    rg_buf_puts(&b, "abc");
    rg_buf_puts(&b, "defgh");
    rg_buf_truncate(&b, 3);
    cr_assert_eq(b.len, 3);
    cr_assert_str_eq(b.data, "abc");
    rg_buf_truncate(&b, 10); /* past the end: unchanged */
    cr_assert_eq(b.len, 3);
    cr_assert_str_eq(b.data, "abc");
    rg_buf_truncate(&b, 0);
    cr_assert_eq(b.len, 0);
    cr_assert_str_eq(b.data, "");
    rg_buf_free(&b);
}

Test(error, wrap_prefixes_and_truncates_safely)
{
    rg_error e = RG_ERROR_INIT;
    char big[600];

    cr_assert_eq(rg_error_set(&e, -5, "inner %d", 1), -5);
    rg_error_wrap(&e, "outer");
    cr_assert_str_eq(e.msg, "outer: inner 1");
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    rg_error_set(&e, -5, "%s", big);
    rg_error_wrap(&e, "p");
    cr_assert_eq(strlen(e.msg), sizeof(e.msg) - 1);
    cr_assert_eq(strncmp(e.msg, "p: xxx", 6), 0);
}
