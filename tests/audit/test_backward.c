/* Reading the audit log back to front (audit/backward.c): every line once,
 * newest first, across block boundaries, with or without a final newline,
 * empty lines passed over and a line past AUDIT_LINE_MAX dropped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit.h"

static char path[64];

static void write_file(const char *data, size_t len)
{
    FILE *f;

    snprintf(path, sizeof(path), "/tmp/rg-back-XXXXXX");
    close(mkstemp(path));
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* All lines, newest first, joined by '|'. */
static char *read_all(void)
{
    audit_back_reader *r = NULL;
    rg_error err = RG_ERROR_INIT;
    const char *d;
    size_t len, used = 0, cap = 1 << 20;
    char *out = calloc(1, cap);
    int rc;

    cr_assert_eq(audit_back_reader_open(&r, &(audit_source){.path = path}, &err), 0, "%s", err.msg);
    while ((rc = audit_back_reader_prev(r, &d, &len, &err)) > 0) {
        cr_assert_eq(strlen(d), len);
        cr_assert_lt(used + len + 2, cap);
        memcpy(out + used, d, len);
        used += len;
        out[used++] = '|';
    }
    cr_assert_eq(rc, 0, "%s", err.msg);
    audit_back_reader_free(r);
    unlink(path);
    return out;
}

Test(backward, lines_come_newest_first_with_or_without_a_final_newline)
{
    char *got;

    write_file("a\nbb\n\nccc\n", 10);
    got = read_all();
    cr_expect_str_eq(got, "ccc|bb|a|");
    free(got);
    write_file("a\nbb", 4);
    got = read_all();
    cr_expect_str_eq(got, "bb|a|");
    free(got);
    write_file("", 0);
    got = read_all();
    cr_expect_str_eq(got, "");
    free(got);
}

Test(backward, lines_across_blocks_are_whole_and_a_huge_one_is_dropped)
{
    size_t big = AUDIT_LINE_MAX + 200 * 1024, mid = 100 * 1024, len = 0;
    char *data = malloc(big + mid + 64), *got;

    len += (size_t)sprintf(data, "first\n");
    memset(data + len, 'x', big);
    len += big;
    data[len++] = '\n';
    memset(data + len, 'y', mid);
    len += mid;
    data[len++] = '\n';
    len += (size_t)sprintf(data + len, "last\n");
    write_file(data, len);
    got = read_all();
    cr_expect_eq(strncmp(got, "last|yyyy", 9), 0);
    cr_expect_eq(strlen(got), 5 + mid + 1 + 6);
    cr_expect_str_eq(got + 5 + mid + 1, "first|");
    free(got);
    free(data);
}
