/*
 * Shell helpers for Criterion tests that build fixtures with the real git
 * CLI: run a command and fail the test when it fails, or capture its output.
 */
#ifndef RG_TESTS_SUPPORT_SHELL_H
#define RG_TESTS_SUPPORT_SHELL_H

/* Run a printf-formatted shell command; the test fails unless it exits 0. */
void test_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Run a command and return its standard output (free() it), trailing
 * newlines removed; the test fails unless it exits 0. */
char *test_capture(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Isolate git from the developer's own configuration: HOME is `home`, no
 * system or global config, fixed author and committer.
 */
void test_git_env(const char *home);

#endif
