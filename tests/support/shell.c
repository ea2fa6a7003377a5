/* Shell helpers for Criterion tests; see shell.h. */
#include "support/shell.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "util/buf.h"

void test_run(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    int status;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    status = system(cmd);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "command failed: %s", cmd);
}

char *test_capture(const char *fmt, ...)
{
    char cmd[8192], chunk[4096];
    rg_buf out = RG_BUF_INIT(16 * 1024 * 1024);
    va_list ap;
    FILE *f;
    size_t n;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    f = popen(cmd, "r");
    cr_assert_not_null(f);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        cr_assert_eq(rg_buf_append(&out, chunk, n), 0);
    cr_assert_eq(pclose(f), 0, "command failed: %s", cmd);
    cr_assert_eq(rg_buf_append(&out, "", 0), 0);
    while (out.len > 0 && out.data[out.len - 1] == '\n')
        out.data[--out.len] = '\0';
    return rg_buf_detach(&out);
}

void test_git_env(const char *home)
{
    setenv("HOME", home, 1);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
    setenv("GIT_AUTHOR_NAME", "Test Author", 1);
    setenv("GIT_AUTHOR_EMAIL", "author@example.com", 1);
    setenv("GIT_COMMITTER_NAME", "Test Committer", 1);
    setenv("GIT_COMMITTER_EMAIL", "committer@example.com", 1);
}
