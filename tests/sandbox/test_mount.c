/*
 * sandbox/mount.c, its pure parts: the plan orders parents before children
 * and refuses a hide over a writable bind; other mounts of a directory are
 * found in mountinfo text (a bind mount of it, of a parent, of a child,
 * the whole filesystem mounted twice), escapes decoded, the mount it is
 * reached through and unrelated filesystems left out.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/mount.h"

Test(mount, the_plan_puts_parents_before_children)
{
    sandbox_mount_plan p = SANDBOX_MOUNT_PLAN_INIT;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(sandbox_mount_plan_add(&p, SANDBOX_MOUNT_BIND, "/src/a", "/home/u/proj.1",
                                        SANDBOX_MOUNT_RW, &err),
                 0);
    cr_assert_eq(
        sandbox_mount_plan_add(&p, SANDBOX_MOUNT_BIND, "/x", "/home/u/.cargo/bin", 0, &err), 0);
    cr_assert_eq(sandbox_mount_plan_add(&p, SANDBOX_MOUNT_TMPFS, NULL, "/home/u", 0, &err), 0);
    cr_assert_eq(sandbox_mount_plan_add(&p, SANDBOX_MOUNT_TMPFS, NULL, "/tmp", 0, &err), 0);
    cr_assert_eq(sandbox_mount_plan_add(&p, SANDBOX_MOUNT_TMPFS, NULL, "/tmp", 0, &err), 0,
                 "a duplicate is ignored");
    cr_assert_eq(p.n, 4);
    cr_assert_eq(sandbox_mount_plan_finish(&p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.ops[0].dst, "/tmp");
    cr_assert_str_eq(p.ops[1].dst, "/home/u");
    cr_assert_str_eq(p.ops[2].dst, "/home/u/proj.1");
    cr_assert_str_eq(p.ops[3].dst, "/home/u/.cargo/bin");
    sandbox_mount_plan_free(&p);
}

Test(mount, a_hide_over_a_writable_bind_is_refused)
{
    sandbox_mount_plan p = SANDBOX_MOUNT_PLAN_INIT;
    rg_error err = RG_ERROR_INIT;

    sandbox_mount_plan_add(&p, SANDBOX_MOUNT_BIND, "/srv/p.1", "/srv/p.1", SANDBOX_MOUNT_RW, &err);
    sandbox_mount_plan_add(&p, SANDBOX_MOUNT_HIDE, NULL, "/srv", 0, &err);
    cr_assert_lt(sandbox_mount_plan_finish(&p, &err), 0);
    cr_assert(strstr(err.msg, "/srv must stay hidden") != NULL, "%s", err.msg);
    sandbox_mount_plan_free(&p);

    sandbox_mount_plan_add(&p, SANDBOX_MOUNT_BIND, "/srv/p.1", "/srv/p.1", SANDBOX_MOUNT_RW, &err);
    sandbox_mount_plan_add(&p, SANDBOX_MOUNT_HIDE, NULL, "/srv/p.1/secret", 0, &err);
    cr_assert_eq(sandbox_mount_plan_finish(&p, &err), 0, "a hide inside the fork is fine");
    sandbox_mount_plan_free(&p);
}

static const char mountinfo[] =
    "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
    "40 27 254:0 /root /mnt/root\\040copy rw,relatime - ext4 /dev/vda rw\n"
    "41 27 254:0 / /media/disk rw,relatime - ext4 /dev/vda rw\n"
    "42 27 254:0 /root/work /srv/work rw,relatime - ext4 /dev/vda rw\n"
    "43 27 254:0 /etc /srv/etc rw,relatime - ext4 /dev/vda rw\n"
    "44 27 0:50 /root /srv/other rw,relatime - tmpfs tmpfs rw\n"
    "garbage line\n";

Test(mount, other_mounts_of_a_directory_are_found)
{
    rg_error err = RG_ERROR_INIT;
    char **aliases = NULL;
    size_t n = 0, i;

    cr_assert_eq(sandbox_mount_aliases(&aliases, &n, mountinfo, "/root", 16, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(aliases[0], "/mnt/root copy", "a bind mount of it, escape decoded");
    cr_assert_str_eq(aliases[1], "/media/disk/root", "the filesystem mounted twice");
    cr_assert_str_eq(aliases[2], "/srv/work", "a bind mount of a directory inside it");
    for (i = 0; i < n; i++)
        free(aliases[i]);
    free(aliases);
}

Test(mount, a_directory_reached_through_a_bind_mount_maps_back)
{
    rg_error err = RG_ERROR_INIT;
    char **aliases = NULL;
    size_t n = 0, i;

    /* /srv/work/x is /root/work/x on the disk: visible under / and /media/disk too. */
    cr_assert_eq(sandbox_mount_aliases(&aliases, &n, mountinfo, "/srv/work/x", 16, &err), 0);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(aliases[0], "/root/work/x");
    cr_assert_str_eq(aliases[1], "/mnt/root copy/work/x");
    cr_assert_str_eq(aliases[2], "/media/disk/root/work/x");
    for (i = 0; i < n; i++)
        free(aliases[i]);
    free(aliases);
}

Test(mount, the_alias_list_is_bounded)
{
    rg_error err = RG_ERROR_INIT;
    char **aliases = NULL;
    size_t n = 0;

    cr_assert_eq(sandbox_mount_aliases(&aliases, &n, mountinfo, "/root", 1, &err), 0);
    cr_assert_eq(n, 1);
    free(aliases[0]);
    free(aliases);
}
