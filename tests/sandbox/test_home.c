/*
 * sandbox/home.c: path relations, secret detection for grants, the
 * default toolchain list never touching a secret, and the secret inode
 * index that recognises a hard link to a secret.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/home.h"

/* Inline strings: Criterion copies parameters into a fresh process. */
typedef struct relate_case {
    char a[32], b[32];
    sandbox_home_relation want;
} relate_case;

ParameterizedTestParameters(home, relate_compares_whole_path_components)
{
    static relate_case cases[] = {
        {"/a/b", "/a/b", SANDBOX_HOME_SAME},
        {"/a", "/a/b", SANDBOX_HOME_CONTAINS},
        {"/a/b", "/a", SANDBOX_HOME_INSIDE},
        {"/", "/a", SANDBOX_HOME_CONTAINS},
        {"/a", "/", SANDBOX_HOME_INSIDE},
        {"/", "/", SANDBOX_HOME_SAME},
        {"/a/b", "/a/bc", SANDBOX_HOME_UNRELATED},
        {"/a/bc", "/a/b", SANDBOX_HOME_UNRELATED},
        {"/home/u", "/home/user", SANDBOX_HOME_UNRELATED},
        {"/x", "/y", SANDBOX_HOME_UNRELATED},
    };

    return cr_make_param_array(relate_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(relate_case *c, home, relate_compares_whole_path_components)
{
    cr_assert_eq(sandbox_home_relate(c->a, c->b), c->want, "%s vs %s", c->a, c->b);
}

typedef struct conflict_case {
    char path[48];
    int refused;
} conflict_case;

ParameterizedTestParameters(home, grants_that_would_expose_a_secret_are_refused)
{
    /* For the home /h (see below) with no extra secrets. */
    static conflict_case cases[] = {
        {"/h/.ssh", 1},
        {"/h/.ssh/id_ed25519", 1},
        {"/h/.ssh/sub/dir", 1},
        {"/h/.aws", 1},
        {"/h/.aws/credentials", 1},
        {"/h/.gnupg", 1},
        {"/h/.kube", 1},
        {"/h/.docker", 1},
        {"/h/.netrc", 1},
        {"/h/.config/gh", 1},
        {"/h/.config/gh/hosts.yml", 1},
        {"/h/.config", 1}, /* contains .config/gh */
        {"/h/.cargo", 1},  /* contains .cargo/credentials.toml */
        {"/h/.git-credentials", 1},
        {"/h", 1},
        {"/", 1},
        {"/h/.sshfoo", 0},
        {"/h/.ssh-keys-backup", 0}, /* not a known name: the home hides it anyway */
        {"/h/proj", 0},
        {"/h/.config/nvim", 0},
        {"/h/.cargo/bin", 0},
        {"/h/.local/bin", 0},
        {"/tmp/x", 0},
        {"/hx", 0},
        {"/usr", 0},
    };

    return cr_make_param_array(conflict_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(conflict_case *c, home, grants_that_would_expose_a_secret_are_refused)
{
    sandbox_home h = SANDBOX_HOME_INIT;
    const char *why;

    cr_assert_eq(sandbox_home_init(&h, "/h", NULL, 0, NULL), 0);
    why = sandbox_home_conflict(&h, c->path);
    if (c->refused)
        cr_assert_not_null(why, "%s should be refused", c->path);
    else
        cr_assert_null(why, "%s refused because of %s", c->path, why ? why : "");
    sandbox_home_free(&h);
}

Test(home, extra_secrets_outside_home_are_hidden_and_refused)
{
    const char *extra[] = {"/etc/refgate-test-kube/config", "/srv/gnupg"};
    sandbox_home h = SANDBOX_HOME_INIT;
    size_t i;
    int hidden = 0;

    cr_assert_eq(sandbox_home_init(&h, "/h", extra, 2, NULL), 0);
    cr_assert_str_eq(h.hidden[0], "/h", "the home directory is hidden first");
    for (i = 1; i < h.nhidden; i++)
        if (!strcmp(h.hidden[i], "/srv/gnupg") ||
            !strcmp(h.hidden[i], "/etc/refgate-test-kube/config"))
            hidden++;
    cr_assert_eq(hidden, 2);
    cr_assert_not_null(sandbox_home_conflict(&h, "/srv"));
    cr_assert_not_null(sandbox_home_conflict(&h, "/srv/gnupg/private-keys-v1.d"));
    cr_assert_not_null(sandbox_home_conflict(&h, "/etc"));
    cr_assert_null(sandbox_home_conflict(&h, "/srv/www"));
    sandbox_home_free(&h);
}

Test(home, the_root_directory_cannot_be_home)
{
    sandbox_home h = SANDBOX_HOME_INIT;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(sandbox_home_init(&h, "/", NULL, 0, &err), -EINVAL);
    cr_assert(strstr(err.msg, "refusing") != NULL, "%s", err.msg);
    cr_assert_eq(sandbox_home_init(&h, "relative", NULL, 0, NULL), -EINVAL);
    cr_assert_eq(sandbox_home_init(&h, NULL, NULL, 0, NULL), -EINVAL);
}

Test(home, no_default_readable_path_is_or_holds_a_secret)
{
    sandbox_home h = SANDBOX_HOME_INIT;
    char path[256];
    size_t i;

    cr_assert_eq(sandbox_home_init(&h, "/h", NULL, 0, NULL), 0);
    for (i = 0; sandbox_home_readable_names[i]; i++) {
        const char *why;

        snprintf(path, sizeof(path), "/h/%s", sandbox_home_readable_names[i]);
        why = sandbox_home_conflict(&h, path);
        cr_assert_null(why, "%s overlaps %s", path, why ? why : "");
    }
    sandbox_home_free(&h);
}

Test(home, the_issue_s_secrets_are_listed)
{
    const char *want[] = {".ssh", ".aws", ".gnupg", ".kube", ".docker", ".netrc", ".config/gh"};
    size_t i, j;

    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        for (j = 0; sandbox_home_secret_names[j]; j++)
            if (!strcmp(sandbox_home_secret_names[j], want[i]))
                break;
        cr_assert_not_null(sandbox_home_secret_names[j], "%s is not listed", want[i]);
    }
}

Test(home, load_takes_home_from_the_environment_and_secrets_from_variables)
{
    char dir[] = "/tmp/rg-home-test.XXXXXX";
    char home[128], kube[160], envhome[160], envkube[200], envgh[200];
    char *envp[4];
    sandbox_home h = SANDBOX_HOME_INIT;
    size_t i;
    int found_kube = 0, found_gh = 0;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(home, sizeof(home), "%s/home", dir);
    snprintf(kube, sizeof(kube), "%s/kubeconfig", dir);
    mkdir(home, 0700);
    snprintf(envhome, sizeof(envhome), "HOME=%s", home);
    snprintf(envkube, sizeof(envkube), "KUBECONFIG=%s:relative/ignored", kube);
    snprintf(envgh, sizeof(envgh), "GH_CONFIG_DIR=%s/gh", dir);
    envp[0] = envhome;
    envp[1] = envkube;
    envp[2] = envgh;
    envp[3] = NULL;
    cr_assert_eq(sandbox_home_load(&h, envp, NULL), 0);
    cr_assert_str_eq(h.path, home);
    cr_assert_str_eq(h.env, home);
    for (i = 0; i < h.nhidden; i++) {
        found_kube += !strcmp(h.hidden[i], kube);
        found_gh += strstr(h.hidden[i], "/gh") != NULL;
    }
    cr_assert_eq(found_kube, 1, "KUBECONFIG's file is hidden");
    cr_assert_eq(found_gh, 1, "GH_CONFIG_DIR is hidden");
    sandbox_home_free(&h);
    rmdir(home);
    rmdir(dir);
}

Test(home, a_hard_link_to_a_secret_is_in_the_inode_index)
{
    char dir[] = "/tmp/rg-home-test.XXXXXX";
    char home[128], ssh[160], key[192], leak[192], other[192];
    sandbox_home h = SANDBOX_HOME_INIT;
    sandbox_home_inode *set = NULL;
    struct stat st;
    size_t n = 0;
    int truncated = -1, fd;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(home, sizeof(home), "%s/home", dir);
    snprintf(ssh, sizeof(ssh), "%s/.ssh", home);
    snprintf(key, sizeof(key), "%s/id_ed25519", ssh);
    snprintf(leak, sizeof(leak), "%s/leak", dir);
    snprintf(other, sizeof(other), "%s/other", dir);
    mkdir(home, 0700);
    mkdir(ssh, 0700);
    fd = open(key, O_CREAT | O_WRONLY, 0600);
    close(fd);
    fd = open(other, O_CREAT | O_WRONLY, 0600);
    close(fd);
    cr_assert_eq(link(key, leak), 0);
    cr_assert_eq(sandbox_home_init(&h, home, NULL, 0, NULL), 0);
    cr_assert_eq(sandbox_home_secret_inodes(&set, &n, &truncated, &h, 1000, NULL), 0);
    cr_assert_eq(truncated, 0);
    stat(leak, &st);
    cr_assert(sandbox_home_inode_find(set, n, st.st_dev, st.st_ino), "the link is found");
    stat(ssh, &st);
    cr_assert(sandbox_home_inode_find(set, n, st.st_dev, st.st_ino), "the directory is found");
    stat(other, &st);
    cr_assert_not(sandbox_home_inode_find(set, n, st.st_dev, st.st_ino), "others are not");
    free(set);
    set = NULL;
    cr_assert_eq(sandbox_home_secret_inodes(&set, &n, &truncated, &h, 2, NULL), 0);
    cr_assert_eq(truncated, 1, "the bound is reported");
    free(set);
    sandbox_home_free(&h);
    unlink(leak);
    unlink(other);
    unlink(key);
    rmdir(ssh);
    rmdir(home);
    rmdir(dir);
}
