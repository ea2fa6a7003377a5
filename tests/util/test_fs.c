/*
 * Removing a tree (util/fs.c rg_fs_remove_tree): it stays inside. A
 * symbolic link is removed, never followed; another filesystem or a bind
 * mount inside is left alone; the top directory can be kept.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"

static char root[PATH_MAX];    /* what the test removes */
static char outside[PATH_MAX]; /* what must survive */
static char mounted[PATH_MAX]; /* a mount point to undo, or "" */

static void setup(void)
{
    char tmpl[] = "/tmp/rg-test-fs-XXXXXX";

    cr_assert_not_null(mkdtemp(tmpl));
    snprintf(root, sizeof(root), "%s/root", tmpl);
    snprintf(outside, sizeof(outside), "%s/outside", tmpl);
    cr_assert_eq(mkdir(root, 0700), 0);
    cr_assert_eq(mkdir(outside, 0700), 0);
    mounted[0] = '\0';
}

static void teardown(void)
{
    char top[PATH_MAX];

    if (mounted[0] != '\0')
        umount2(mounted, MNT_DETACH);
    snprintf(top, sizeof(top), "%.*s", (int)(strrchr(root, '/') - root), root);
    rg_fs_remove_tree(top, 0, NULL);
}

TestSuite(fs, .init = setup, .fini = teardown);

static const char *at(const char *dir, const char *name)
{
    static char bufs[8][PATH_MAX];
    static int next;
    char *p = bufs[next++ % 8];

    snprintf(p, PATH_MAX, "%s/%s", dir, name);
    return p;
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, "x", 1), 1);
    close(fd);
}

static int exists(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0;
}

Test(fs, removes_a_nested_tree)
{
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(mkdir(at(root, "a"), 0700), 0);
    cr_assert_eq(mkdir(at(root, "a/b"), 0700), 0);
    cr_assert_eq(mkdir(at(root, "a/b/c"), 0000), 0); /* unreadable, empty: still removed */
    touch(at(root, "a/b/file"));
    touch(at(root, "top"));
    cr_assert_eq(rg_fs_remove_tree(root, 0, &err), 0, "%s", err.msg);
    cr_expect_not(exists(root));
    cr_expect_eq(rg_fs_remove_tree(root, 0, &err), 0, "a missing tree is already removed");
}

Test(fs, keep_top_empties_the_directory_and_keeps_it)
{
    rg_error err = RG_ERROR_INIT;
    struct stat st;

    cr_assert_eq(mkdir(at(root, "a"), 0700), 0);
    touch(at(root, "a/f"));
    touch(at(root, "g"));
    cr_assert_eq(rg_fs_remove_tree(root, RG_FS_KEEP_TOP, &err), 0, "%s", err.msg);
    cr_assert_eq(stat(root, &st), 0);
    cr_expect(S_ISDIR(st.st_mode));
    cr_expect_not(exists(at(root, "a")));
    cr_expect_not(exists(at(root, "g")));
}

Test(fs, symbolic_links_are_removed_never_followed)
{
    rg_error err = RG_ERROR_INIT;

    touch(at(outside, "precious"));
    cr_assert_eq(mkdir(at(outside, "dir"), 0700), 0);
    touch(at(outside, "dir/precious"));
    cr_assert_eq(symlink(outside, at(root, "to-dir")), 0);
    cr_assert_eq(symlink(at(outside, "precious"), at(root, "to-file")), 0);
    cr_assert_eq(mkdir(at(root, "sub"), 0700), 0);
    cr_assert_eq(symlink(at(outside, "dir"), at(root, "sub/deeper")), 0);
    cr_assert_eq(rg_fs_remove_tree(root, 0, &err), 0, "%s", err.msg);
    cr_expect_not(exists(root));
    cr_expect(exists(at(outside, "precious")));
    cr_expect(exists(at(outside, "dir/precious")));
}

Test(fs, a_symbolic_link_as_the_top_is_removed_not_followed)
{
    char link[PATH_MAX];
    rg_error err = RG_ERROR_INIT;

    touch(at(outside, "precious"));
    snprintf(link, sizeof(link), "%s-link", root);
    cr_assert_eq(symlink(outside, link), 0);
    cr_assert_eq(rg_fs_remove_tree(link, 0, &err), 0, "%s", err.msg);
    cr_expect_not(exists(link));
    cr_expect(exists(at(outside, "precious")));
}

/* Mount `what` on root/mnt; skips the test with the reason when not allowed. */
static void mount_inside(int bind)
{
    const char *mnt = at(root, "mnt");
    int rc;

    if (geteuid() != 0)
        cr_skip_test("mounting needs root (running as uid %d)", (int)geteuid());
    /* A mount namespace of this test's own process, so a crash leaves no
     * mount behind on the machine. */
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        cr_skip_test("no private mount namespace: %s", strerror(errno));
    cr_assert_eq(mkdir(mnt, 0700), 0);
    if (bind)
        rc = mount(outside, mnt, NULL, MS_BIND, NULL);
    else
        rc = mount("rg-test", mnt, "tmpfs", 0, "size=1m");
    if (rc < 0)
        cr_skip_test("cannot mount here: %s", strerror(errno));
    snprintf(mounted, sizeof(mounted), "%s", mnt);
}

Test(fs, another_filesystem_inside_is_not_crossed)
{
    rg_error err = RG_ERROR_INIT;

    mount_inside(0);
    touch(at(root, "mnt/on-tmpfs"));
    touch(at(root, "mine"));
    cr_expect_eq(rg_fs_remove_tree(root, 0, &err), -EXDEV);
    cr_expect(strstr(err.msg, root) != NULL, "%s", err.msg);
    cr_expect(exists(at(root, "mnt/on-tmpfs")), "a file on the other filesystem was removed");
    cr_expect_not(exists(at(root, "mine")), "what is not under the mount still goes");
}

Test(fs, a_bind_mount_of_the_same_filesystem_is_not_crossed)
{
    rg_error err = RG_ERROR_INIT;

    mount_inside(1);
    touch(at(outside, "precious"));
    cr_expect_eq(rg_fs_remove_tree(root, RG_FS_KEEP_TOP, &err), -EXDEV);
    cr_expect(exists(at(outside, "precious")), "a file behind the bind mount was removed");
}
