/*
 * fork/tree.c: what a copy keeps (modes, times, symlinks as links,
 * FIFOs, empty directories), what it changes on purpose (hard links split,
 * sockets skipped), and removal that never follows a symlink out.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fork/tree.h"

static char top[64], src[96], dst[96];

static void tree_setup(void)
{
    strcpy(top, "/tmp/rg-tree-test.XXXXXX");
    cr_assert_not_null(mkdtemp(top));
    snprintf(src, sizeof(src), "%s/src", top);
    snprintf(dst, sizeof(dst), "%s/dst", top);
    cr_assert_eq(mkdir(src, 0750), 0);
    cr_assert_eq(mkdir(dst, 0700), 0);
}

static void tree_teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s'; rm -rf '%s'", top, top);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(tree, .init = tree_setup, .fini = tree_teardown);

static void at(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static void put(const char *name, const char *data, mode_t mode)
{
    char p[256];
    int fd;

    at(p, sizeof(p), src, name);
    fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    cr_assert_geq(fd, 0, "%s", p);
    cr_assert_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    fchmod(fd, mode);
    close(fd);
}

static int copy(fork_tree_stats *st)
{
    fork_tree_opts o = FORK_TREE_OPTS_INIT;
    int s = open(src, O_RDONLY | O_DIRECTORY), d = open(dst, O_RDONLY | O_DIRECTORY), rc;

    rc = fork_tree_copy(st, s, d, &o, NULL);
    close(s);
    close(d);
    return rc;
}

Test(tree, copy_keeps_modes_times_links_fifos_and_empty_directories)
{
    struct timespec times[2] = {{1000000000, 0}, {1000000000, 123456789}};
    fork_tree_stats st;
    struct stat a, b;
    char p[256], q[256], target[64];
    ssize_t n;

    put("exec", "#!/bin/sh\n", 0751);
    at(p, sizeof(p), src, "exec");
    cr_assert_eq(utimensat(AT_FDCWD, p, times, 0), 0);
    at(p, sizeof(p), src, "empty");
    mkdir(p, 0701);
    at(p, sizeof(p), src, "link");
    cr_assert_eq(symlink("exec", p), 0);
    at(p, sizeof(p), src, "dangling");
    cr_assert_eq(symlink("/nonexistent/x", p), 0);
    at(p, sizeof(p), src, "fifo");
    cr_assert_eq(mkfifo(p, 0640), 0);

    cr_assert_eq(copy(&st), 0);
    cr_assert_eq(st.files, 1);
    cr_assert_eq(st.symlinks, 2);
    cr_assert_eq(st.fifos, 1);
    cr_assert_eq(st.dirs, 1);

    at(p, sizeof(p), src, "exec");
    at(q, sizeof(q), dst, "exec");
    stat(p, &a);
    stat(q, &b);
    cr_assert_eq(b.st_mode & 07777, 0751);
    cr_assert_eq(b.st_mtim.tv_sec, a.st_mtim.tv_sec);
    cr_assert_eq(b.st_mtim.tv_nsec, a.st_mtim.tv_nsec, "nanoseconds are kept");
    cr_assert_neq(b.st_ino, a.st_ino);
    at(q, sizeof(q), dst, "empty");
    cr_assert_eq(stat(q, &b), 0);
    cr_assert(S_ISDIR(b.st_mode));
    cr_assert_eq(b.st_mode & 07777, 0701);
    at(q, sizeof(q), dst, "link");
    n = readlink(q, target, sizeof(target) - 1);
    cr_assert_eq(n, 4);
    target[n] = '\0';
    cr_assert_str_eq(target, "exec");
    at(q, sizeof(q), dst, "dangling");
    cr_assert_eq(lstat(q, &b), 0);
    cr_assert(S_ISLNK(b.st_mode));
    at(q, sizeof(q), dst, "fifo");
    cr_assert_eq(stat(q, &b), 0);
    cr_assert(S_ISFIFO(b.st_mode));
    cr_assert_eq(b.st_mode & 07777, 0640);
    stat(dst, &b);
    cr_assert_eq(b.st_mode & 07777, 0750, "the top gets the source's mode");
}

Test(tree, copy_splits_hard_links_and_skips_sockets)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    fork_tree_stats st;
    struct stat a, b;
    char p[256], q[256];
    int s;

    put("one", "shared", 0644);
    at(p, sizeof(p), src, "one");
    at(q, sizeof(q), src, "two");
    cr_assert_eq(link(p, q), 0);
    s = socket(AF_UNIX, SOCK_STREAM, 0);
    at(sun.sun_path, sizeof(sun.sun_path), src, "sock");
    cr_assert_eq(bind(s, (struct sockaddr *)&sun, sizeof(sun)), 0);
    close(s);

    cr_assert_eq(copy(&st), 0);
    cr_assert_eq(st.hardlinks, 2, "both names are counted");
    cr_assert_eq(st.skipped, 1);
    at(p, sizeof(p), dst, "one");
    at(q, sizeof(q), dst, "two");
    stat(p, &a);
    stat(q, &b);
    cr_assert_eq(a.st_nlink, 1);
    cr_assert_eq(b.st_nlink, 1);
    cr_assert_neq(a.st_ino, b.st_ino, "each name is its own file");
    at(p, sizeof(p), dst, "sock");
    cr_assert_eq(access(p, F_OK), -1);
}

Test(tree, copy_reports_the_clone_refusal_or_clones)
{
    fork_tree_stats st;

    put("f", "data", 0644);
    cr_assert_eq(copy(&st), 0);
    cr_assert_eq(st.cloned + st.copied, 1);
    if (st.copied == 1)
        cr_assert_neq(st.clone_errno, 0, "a copy says why FICLONE was refused");
    cr_assert_eq(st.bytes, 4);
}

Test(tree, remove_never_follows_a_symlink_out)
{
    char victim[128], p[256], q[256];

    snprintf(victim, sizeof(victim), "%s/victim", top);
    mkdir(victim, 0755);
    at(p, sizeof(p), victim, "keep");
    close(open(p, O_CREAT | O_WRONLY, 0644));
    at(p, sizeof(p), dst, "sub");
    mkdir(p, 0555); /* read-only directories are emptied too */
    at(q, sizeof(q), p, "to-victim");
    chmod(p, 0755);
    cr_assert_eq(symlink(victim, q), 0);
    chmod(p, 0555);

    cr_assert_eq(fork_tree_remove(dst, NULL), 0);
    cr_assert_eq(access(dst, F_OK), -1);
    at(p, sizeof(p), victim, "keep");
    cr_assert_eq(access(p, F_OK), 0, "the symlink's target is untouched");
    cr_assert_eq(fork_tree_remove(dst, NULL), 0, "a missing path is not an error");
}

Test(tree, remove_refuses_odd_paths)
{
    cr_assert_eq(fork_tree_remove("relative", NULL), -EINVAL);
    cr_assert_eq(fork_tree_remove("/", NULL), -EINVAL);
}
