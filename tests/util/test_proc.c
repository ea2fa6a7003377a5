/*
 * Child processes (util/proc.c): deadlines end the whole process group,
 * stderr keeps only its tail, the way a child ended is reported, and input
 * and output move together without deadlock.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/proc.h"

extern char **environ;

static void setup(void)
{
    /* A write to a child that stopped reading must fail with EPIPE, as in
     * the programs, which ignore SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
}

TestSuite(proc, .init = setup);

/* `sh -c script`; the argv lives in the caller's `argv` (4 entries). */
static rg_proc_spec sh_spec_in(const char **argv, const char *script, unsigned flags)
{
    rg_proc_spec s = RG_PROC_SPEC_INIT;

    argv[0] = "sh";
    argv[1] = "-c";
    argv[2] = script;
    argv[3] = NULL;
    s.argv = argv;
    s.envp = (const char *const *)environ;
    s.flags = flags;
    return s;
}

#define sh_spec(script, flags) sh_spec_in((const char *[4]){0}, (script), (flags))

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 1 once `pid` no longer runs (gone, or a zombie waiting for init). */
static int pid_gone(pid_t pid)
{
    char path[64], buf[512], *close_paren;
    FILE *f;
    size_t n;

    if (kill(pid, 0) < 0)
        return 1;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    close_paren = strrchr(buf, ')');
    return close_paren != NULL && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

/* Poll (bounded, 5 s) until the grandchild is gone. */
static int wait_gone(pid_t pid)
{
    for (int i = 0; i < 500; i++) {
        if (pid_gone(pid))
            return 1;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

static void read_pid_and_finish(const char *script, double max_seconds)
{
    rg_proc_spec s = sh_spec(script, RG_PROC_STDOUT | RG_PROC_STDERR | RG_PROC_GROUP);
    rg_error err = RG_ERROR_INIT;
    rg_proc *p = NULL;
    char buf[64] = {0};
    ssize_t n;
    int status = -1;
    double t0;

    cr_assert_eq(rg_proc_start(&p, &s, &err), 0, "%s", err.msg);
    n = rg_proc_read(p, buf, sizeof(buf) - 1, rg_proc_deadline(10), &err);
    cr_assert_gt(n, 0, "%s", err.msg);
    pid_t grandchild = (pid_t)atoi(buf);
    cr_assert_gt(grandchild, 1);
    t0 = now_s();
    cr_assert_eq(rg_proc_finish(p, &status, rg_proc_deadline(1), &err), -ETIMEDOUT);
    cr_assert_lt(now_s() - t0, max_seconds, "took %.1f s", now_s() - t0);
    cr_expect(status == 128 + SIGTERM || status == 128 + SIGKILL, "status %d", status);
    cr_expect(strstr(err.msg, "sh ran past its deadline and was ended after 1 s") != NULL, "%s",
              err.msg);
    cr_expect(strstr(err.msg, "started") != NULL, "the stderr tail is named: %s", err.msg);
    cr_expect_eq(rg_proc_check(p, RG_E_CHILD, &err), RG_E_CHILD);
    cr_expect(strstr(err.msg, "deadline") != NULL, "%s", err.msg);
    cr_expect(wait_gone(grandchild), "the grandchild %d outlived the deadline", (int)grandchild);
    rg_proc_free(p);
}

Test(proc, a_child_that_never_exits_is_ended_at_the_deadline_with_its_grandchild)
{
    read_pid_and_finish("echo started >&2; sleep 1000 & echo $!; wait", 1 + 3);
}

Test(proc, a_group_that_ignores_sigterm_gets_sigkill_after_the_grace)
{
    /* The grandchild ignores TERM as well: only the group SIGKILL ends it. */
    read_pid_and_finish("trap '' TERM; echo started >&2; "
                        "sh -c 'trap \"\" TERM; while :; do sleep 1; done' & echo $!; "
                        "while :; do wait; done",
                        1 + RG_PROC_TERM_GRACE_MS / 1000.0 + 3);
}

Test(proc, endless_stderr_keeps_only_the_tail)
{
    rg_proc_spec s = sh_spec("i=0; while [ $i -lt 20000 ]; do echo \"noise line $i\"; "
                             "i=$((i+1)); done >&2; echo 'fatal: the real reason' >&2; "
                             "echo 'generic last line' >&2; exit 3",
                             RG_PROC_STDERR);
    rg_error err = RG_ERROR_INIT;
    rg_proc *p = NULL;
    char why[256];
    int status = -1;

    cr_assert_eq(rg_proc_start(&p, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(rg_proc_finish(p, &status, rg_proc_deadline(60), &err), 0, "%s", err.msg);
    cr_expect_eq(status, 3);
    rg_proc_why(p, why, sizeof(why));
    cr_expect_str_eq(why, "fatal: the real reason");
    cr_expect_eq(rg_proc_check(p, -42, &err), -42);
    cr_expect_str_eq(err.msg, "sh exited with status 3: fatal: the real reason");
    rg_proc_free(p);
}

Test(proc, an_endless_writer_on_stderr_is_bounded_and_ended)
{
    rg_proc_spec s = sh_spec("while :; do echo 'still talking'; done >&2", RG_PROC_STDERR);
    rg_error err = RG_ERROR_INIT;
    rg_proc *p = NULL;
    char why[256];

    cr_assert_eq(rg_proc_start(&p, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(rg_proc_finish(p, NULL, rg_proc_deadline(1), &err), -ETIMEDOUT);
    rg_proc_why(p, why, sizeof(why));
    cr_expect_str_eq(why, "still talking");
    rg_proc_free(p);
}

Test(proc, exit_codes_and_signals_are_reported)
{
    rg_error err = RG_ERROR_INIT;
    int status = -1;
    rg_proc_spec ok = sh_spec("exit 0", 0);
    rg_proc_spec seven = sh_spec("echo 'why not' >&2; exit 7", 0);
    rg_proc_spec killed = sh_spec("kill -9 $$", 0);

    cr_expect_eq(rg_proc_run(&status, NULL, &ok, rg_proc_deadline(30), &err), 0, "%s", err.msg);
    cr_expect_eq(status, 0);
    cr_expect_eq(rg_proc_run(&status, NULL, &seven, rg_proc_deadline(30), &err), 0, "%s", err.msg);
    cr_expect_eq(status, 7);
    cr_expect_eq(rg_proc_run(NULL, NULL, &seven, rg_proc_deadline(30), &err), RG_E_CHILD);
    cr_expect_str_eq(err.msg, "sh exited with status 7: why not");
    cr_expect_eq(rg_proc_run(&status, NULL, &killed, rg_proc_deadline(30), &err), 0, "%s", err.msg);
    cr_expect_eq(status, 128 + SIGKILL);
    cr_expect_eq(rg_proc_run(NULL, NULL, &killed, rg_proc_deadline(30), &err), RG_E_CHILD);
    cr_expect_str_eq(err.msg, "sh was killed by signal 9");
}

Test(proc, a_program_that_does_not_exist_fails_to_start)
{
    const char *argv[] = {"refgate-no-such-program", NULL};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_error err = RG_ERROR_INIT;
    rg_proc *p = NULL;

    s.argv = argv;
    s.envp = (const char *const *)environ;
    cr_expect_lt(rg_proc_start(&p, &s, &err), 0);
    cr_expect_null(p);
    cr_expect(strstr(err.msg, "refgate-no-such-program") != NULL, "%s", err.msg);
}

static int count_sink(void *ctx, const char *data, size_t len, rg_error *err)
{
    size_t *total = ctx;

    (void)err;
    for (size_t i = 0; i < len; i++)
        cr_assert_eq(data[i], (char)('a' + (*total + i) % 26));
    *total += len;
    return 0;
}

Test(proc, stdin_is_fed_while_stdout_is_read_without_deadlock)
{
    const char *argv[] = {"cat", NULL};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_error err = RG_ERROR_INIT;
    size_t big = 16 * 1024 * 1024, total = 0;
    char *data = malloc(big);
    rg_proc *p = NULL;
    int status = -1;

    cr_assert_not_null(data);
    for (size_t i = 0; i < big; i++)
        data[i] = (char)('a' + i % 26);
    s.argv = argv;
    s.envp = (const char *const *)environ;
    s.flags = RG_PROC_STDIN | RG_PROC_STDOUT | RG_PROC_STDERR | RG_PROC_GROUP;
    s.on_stdout = count_sink;
    s.ctx = &total;
    cr_assert_eq(rg_proc_start(&p, &s, &err), 0, "%s", err.msg);
    /* Far more than both pipes hold: without draining stdout, cat would block and so would we. */
    cr_assert_eq(rg_proc_write(p, data, big, rg_proc_deadline(60), &err), 0, "%s", err.msg);
    cr_assert_eq(rg_proc_finish(p, &status, rg_proc_deadline(60), &err), 0, "%s", err.msg);
    cr_expect_eq(status, 0);
    cr_expect_eq(total, big);
    rg_proc_free(p);
    free(data);
}

Test(proc, stdout_is_read_in_pieces_with_a_file_as_stdin)
{
    const char *argv[] = {"cat", NULL};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_error err = RG_ERROR_INIT;
    char tmpl[] = "/tmp/rg-proc-XXXXXX", buf[7];
    size_t total = 0, want = 300 * 1000;
    rg_proc *p = NULL;
    ssize_t n;
    int fd = mkstemp(tmpl), status = -1;

    cr_assert_geq(fd, 0);
    unlink(tmpl);
    for (size_t i = 0; i < want; i++)
        cr_assert_eq(write(fd, "0123456789" + i % 10, 1), 1);
    lseek(fd, 0, SEEK_SET);
    s.argv = argv;
    s.envp = (const char *const *)environ;
    s.flags = RG_PROC_STDOUT | RG_PROC_STDERR;
    s.stdin_fd = fd;
    cr_assert_eq(rg_proc_start(&p, &s, &err), 0, "%s", err.msg);
    /* Bounded: at most one round per byte. */
    for (size_t r = 0; r <= want; r++) {
        n = rg_proc_read(p, buf, sizeof(buf), rg_proc_deadline(30), &err);
        cr_assert_geq(n, 0, "%s", err.msg);
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            cr_assert_eq(buf[i], "0123456789"[(total + (size_t)i) % 10]);
        total += (size_t)n;
    }
    cr_expect_eq(total, want);
    cr_assert_eq(rg_proc_finish(p, &status, rg_proc_deadline(30), &err), 0, "%s", err.msg);
    cr_expect_eq(status, 0);
    rg_proc_free(p);
    close(fd);
}

Test(proc, writing_to_a_child_that_stopped_reading_fails_with_epipe)
{
    rg_proc_spec s = sh_spec("exec 0<&-; echo 'fatal: not reading' >&2; exit 5",
                             RG_PROC_STDIN | RG_PROC_STDERR | RG_PROC_GROUP);
    rg_error err = RG_ERROR_INIT;
    size_t big = 4 * 1024 * 1024;
    char *data = calloc(1, big);
    rg_proc *p = NULL;
    int status = -1;

    cr_assert_not_null(data);
    cr_assert_eq(rg_proc_start(&p, &s, &err), 0, "%s", err.msg);
    cr_expect_eq(rg_proc_write(p, data, big, rg_proc_deadline(30), &err), -EPIPE);
    cr_expect(strstr(err.msg, "sh stopped reading its input") != NULL, "%s", err.msg);
    cr_assert_eq(rg_proc_finish(p, &status, rg_proc_deadline(30), &err), 0, "%s", err.msg);
    cr_expect_eq(status, 5);
    cr_expect_eq(rg_proc_check(p, RG_E_CHILD, &err), RG_E_CHILD);
    cr_expect_str_eq(err.msg, "sh exited with status 5: fatal: not reading");
    rg_proc_free(p);
    free(data);
}

Test(proc, output_past_the_buffer_cap_fails_the_run)
{
    rg_proc_spec s = sh_spec("head -c 100000 /dev/zero", 0);
    rg_buf out = RG_BUF_INIT(1000);
    rg_error err = RG_ERROR_INIT;
    int status = -1;

    cr_expect_eq(rg_proc_run(&status, &out, &s, rg_proc_deadline(30), &err), RG_E_TOO_BIG);
    cr_expect(strstr(err.msg, "larger than 1000 bytes") != NULL, "%s", err.msg);
    rg_buf_free(&out);
}

Test(proc, freeing_a_running_child_ends_its_group)
{
    rg_proc_spec s = sh_spec("sleep 1000 & echo $!; wait", RG_PROC_STDOUT | RG_PROC_GROUP);
    rg_error err = RG_ERROR_INIT;
    rg_proc *p = NULL;
    char buf[64] = {0};

    cr_assert_eq(rg_proc_start(&p, &s, &err), 0, "%s", err.msg);
    cr_assert_gt(rg_proc_read(p, buf, sizeof(buf) - 1, rg_proc_deadline(10), &err), 0);
    rg_proc_free(p);
    cr_expect(wait_gone((pid_t)atoi(buf)));
}
