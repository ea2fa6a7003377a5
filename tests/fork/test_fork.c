/*
 * fork/fork.c: fork naming (<dir>.<N> beside .<dir>.<N>.base), claiming
 * the first free N, and a real fork of a small tree in /tmp.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fork/fork.h"

typedef struct name_case {
    char src[32];
    unsigned n;
    char fork[40], base[48];
} name_case;

ParameterizedTestParameters(fork, paths_put_the_fork_and_its_base_beside_the_directory)
{
    static name_case cases[] = {
        {"/a/b", 1, "/a/b.1", "/a/.b.1.base"},
        {"/a/b", 3, "/a/b.3", "/a/.b.3.base"},
        {"/work/main", 12, "/work/main.12", "/work/.main.12.base"},
        {"/top", 1, "/top.1", "/.top.1.base"},
        {"/a/.hidden", 2, "/a/.hidden.2", "/a/..hidden.2.base"},
        {"/a/b.1", 1, "/a/b.1.1", "/a/.b.1.1.base"},
    };

    return cr_make_param_array(name_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(name_case *c, fork, paths_put_the_fork_and_its_base_beside_the_directory)
{
    char *f = NULL, *b = NULL;

    cr_assert_eq(fork_paths(&f, &b, c->src, c->n, NULL), 0);
    cr_assert_str_eq(f, c->fork);
    cr_assert_str_eq(b, c->base);
    free(f);
    free(b);
}

Test(fork, the_root_directory_cannot_be_forked)
{
    rg_error err = RG_ERROR_INIT;
    char *f = NULL, *b = NULL;

    cr_assert_eq(fork_paths(&f, &b, "/", 1, &err), -EINVAL);
    cr_assert(strstr(err.msg, "beside") != NULL, "%s", err.msg);
    cr_assert_eq(fork_paths(&f, &b, "relative", 1, NULL), -EINVAL);
    cr_assert_eq(fork_paths(&f, &b, "/a/", 1, NULL), -EINVAL);
}

static char top[64];

static void fork_setup(void)
{
    strcpy(top, "/tmp/rg-fork-test.XXXXXX");
    cr_assert_not_null(mkdtemp(top));
}

static void fork_teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    cr_assert_eq(system(cmd), 0);
}

static void put(const char *dir, const char *name, const char *data)
{
    char p[256];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "w");
    cr_assert_not_null(f, "%s", p);
    fputs(data, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    size_t n;

    cr_assert_not_null(f, "%s", path);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(fork, create_claims_the_first_free_number_and_copies_twice, .init = fork_setup,
     .fini = fork_teardown)
{
    fork_tree_opts to = FORK_TREE_OPTS_INIT;
    fork_ws f = FORK_FORK_INIT, g = FORK_FORK_INIT;
    char src[128], p[256];

    snprintf(src, sizeof(src), "%s/proj", top);
    mkdir(src, 0755);
    put(src, "file", "hello\n");
    /* .1 is taken by a leftover fork, .2 by a leftover base. */
    snprintf(p, sizeof(p), "%s/proj.1", top);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/.proj.2.base", top);
    mkdir(p, 0755);
    cr_assert_eq(fork_create(&f, src, &to, NULL), 0);
    cr_assert_eq(f.n, 3);
    snprintf(p, sizeof(p), "%s/proj.3", top);
    cr_assert_str_eq(f.path, p);
    snprintf(p, sizeof(p), "%s/.proj.3.base", top);
    cr_assert_str_eq(f.base, p);
    snprintf(p, sizeof(p), "%s/file", f.path);
    cr_assert_str_eq(slurp(p), "hello\n");
    snprintf(p, sizeof(p), "%s/file", f.base);
    cr_assert_str_eq(slurp(p), "hello\n");
    cr_assert_eq(f.base_stats.files, 1);
    cr_assert_eq(f.fork_stats.files, 1);
    cr_assert_eq(f.fork_stats.cloned + f.fork_stats.copied, 1);

    cr_assert_eq(fork_create(&g, src, &to, NULL), 0);
    cr_assert_eq(g.n, 4, "a second fork takes the next number");

    cr_assert_eq(fork_remove(&f, NULL), 0);
    cr_assert_eq(access(f.path, F_OK), -1);
    cr_assert_eq(access(f.base, F_OK), -1);
    cr_assert_eq(access(src, F_OK), 0, "removing a fork leaves the source");
    fork_free(&f);
    fork_free(&g);
    fork_free(NULL);
}

/* Whether somebody holds the lock on `path` (a shared lock cannot be had). */
static int locked(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), held;

    cr_assert_geq(fd, 0, "%s", path);
    held = flock(fd, LOCK_SH | LOCK_NB) < 0;
    close(fd);
    return held;
}

Test(fork, the_run_marker_is_locked_while_the_fork_is_held, .init = fork_setup,
     .fini = fork_teardown)
{
    fork_tree_opts to = FORK_TREE_OPTS_INIT;
    fork_ws f = FORK_FORK_INIT;
    char src[128], p[256];
    struct stat st;

    snprintf(src, sizeof(src), "%s/proj", top);
    mkdir(src, 0755);
    put(src, "file", "hello\n");
    cr_assert_eq(fork_create(&f, src, &to, NULL), 0);
    snprintf(p, sizeof(p), "%s/.proj.1.run", top);
    cr_assert_str_eq(f.lock, p);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0600);
    cr_assert(locked(p), "the runner holds the marker");
    cr_assert_eq(fcntl(f.lock_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC, "the command never gets it");
    {
        /* The marker is not part of either tree. */
        snprintf(p, sizeof(p), "%s/.proj.1.run", f.path);
        cr_assert_eq(access(p, F_OK), -1);
        snprintf(p, sizeof(p), "%s/.proj.1.run", top);
    }
    cr_assert_eq(fork_remove(&f, NULL), 0);
    cr_assert_eq(access(p, F_OK), -1, "--rm removes the marker");
    fork_free(&f);
    cr_assert_eq(f.lock_fd, -1);
}

static int refuse_all_links(void *ctx, const struct stat *st)
{
    (void)ctx;
    return S_ISREG(st->st_mode);
}

Test(fork, a_refused_copy_leaves_nothing_behind, .init = fork_setup, .fini = fork_teardown)
{
    fork_tree_opts to = FORK_TREE_OPTS_INIT;
    fork_ws f = FORK_FORK_INIT;
    rg_error err = RG_ERROR_INIT;
    char src[128], a[192], b[192], p[256];

    snprintf(src, sizeof(src), "%s/proj", top);
    mkdir(src, 0755);
    put(src, "a", "x");
    snprintf(a, sizeof(a), "%s/a", src);
    snprintf(b, sizeof(b), "%s/b", src);
    cr_assert_eq(link(a, b), 0);
    to.refuse = refuse_all_links;
    cr_assert_eq(fork_create(&f, src, &to, &err), RG_E_DENIED);
    cr_assert(strstr(err.msg, "hard link to a secret") != NULL, "%s", err.msg);
    snprintf(p, sizeof(p), "%s/proj.1", top);
    cr_assert_eq(access(p, F_OK), -1, "no fork is left");
    snprintf(p, sizeof(p), "%s/.proj.1.base", top);
    cr_assert_eq(access(p, F_OK), -1, "no base is left");
}

typedef struct parse_case {
    char path[32];
    int rc;
    char src[32];
    unsigned n;
} parse_case;

ParameterizedTestParameters(fork, parse_is_the_inverse_of_paths_on_names)
{
    static parse_case cases[] = {
        {"/a/b.1", 0, "/a/b", 1},    {"/a/b.12", 0, "/a/b", 12},     {"/a/b.1.2", 0, "/a/b.1", 2},
        {"/top.3", 0, "/top", 3},    {"/a/b.9999", 0, "/a/b", 9999}, {"/a/b.10000", -EINVAL, "", 0},
        {"/a/b.0", -EINVAL, "", 0},  {"/a/b.01", -EINVAL, "", 0},    {"/a/b.", -EINVAL, "", 0},
        {"/a/b.1x", -EINVAL, "", 0}, {"/a/b", -EINVAL, "", 0},       {"/a.1/b", -EINVAL, "", 0},
        {"/a/.1", -EINVAL, "", 0},   {"a/b.1", -EINVAL, "", 0},
    };

    return cr_make_param_array(parse_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(parse_case *c, fork, parse_is_the_inverse_of_paths_on_names)
{
    char *src = NULL;
    unsigned n = 0;

    cr_assert_eq(fork_parse(&src, &n, c->path), c->rc, "%s", c->path);
    if (c->rc == 0) {
        cr_assert_str_eq(src, c->src);
        cr_assert_eq(n, c->n);
    } else {
        cr_assert_null(src);
    }
    free(src);
}

Test(fork, a_fork_is_recognised_by_its_base_and_opened_under_its_marker, .init = fork_setup,
     .fini = fork_teardown)
{
    fork_tree_opts to = FORK_TREE_OPTS_INIT;
    fork_ws f = FORK_FORK_INIT, g = FORK_FORK_INIT, h = FORK_FORK_INIT;
    rg_error err = RG_ERROR_INIT;
    char src[128], p[256];

    snprintf(src, sizeof(src), "%s/proj", top);
    mkdir(src, 0755);
    put(src, "file", "hello\n");
    cr_assert_eq(fork_create(&f, src, &to, NULL), 0);
    cr_assert(fork_is_fork(f.path));
    cr_assert(!fork_is_fork(src), "the original is no fork");
    snprintf(p, sizeof(p), "%s/plain.2", top);
    mkdir(p, 0755);
    cr_assert(!fork_is_fork(p), "a name alone does not make a fork");
    cr_assert_eq(fork_open(&g, p, &err), -EINVAL);
    cr_assert(strstr(err.msg, "not a fork") != NULL, "%s", err.msg);

    /* The run that made it still holds the marker. */
    cr_assert_eq(fork_open(&g, f.path, &err), -EBUSY);
    cr_assert(strstr(err.msg, "still alive") != NULL, "%s", err.msg);
    fork_free(&f);
    snprintf(p, sizeof(p), "%s/proj.1", top);
    cr_assert_eq(fork_open(&g, p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(g.src, src);
    cr_assert_str_eq(g.path, p);
    cr_assert(g.continued);
    cr_assert_eq(fork_open(&h, p, &err), -EBUSY, "one run at a time");
    snprintf(p, sizeof(p), "%s/proj.1/file", top);
    cr_assert_str_eq(slurp(p), "hello\n", "opening copies nothing and keeps the files");
    fork_free(&g);
}
