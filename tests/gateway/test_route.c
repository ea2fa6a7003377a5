/* Routing and repository path validation (gateway/route.c). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/route.h"

/* Arrays, not pointers: Criterion hands each case to a fresh worker
 * process, where pointers into this one's memory mean nothing. */
typedef struct route_case {
    char method[8];
    char url[128];
    char service[32]; /* "" for none */
    int rc;
    char repo[64]; /* expected on success */
    int advertise;
    gateway_service svc;
} route_case;

static route_case cases[] = {
    {"GET", "/local/acme/app.git/info/refs", "git-receive-pack", 0, "local/acme/app", 1,
     GATEWAY_RECEIVE_PACK},
    {"GET", "/local/acme/app/info/refs", "git-receive-pack", 0, "local/acme/app", 1,
     GATEWAY_RECEIVE_PACK},
    {"POST", "/local/acme/app.git/git-receive-pack", "", 0, "local/acme/app", 0,
     GATEWAY_RECEIVE_PACK},
    {"POST", "/github.com/o/r.git/git-upload-pack", "", 0, "github.com/o/r", 0,
     GATEWAY_UPLOAD_PACK},
    {"GET", "/local/a/b/c/d.git/info/refs", "git-upload-pack", 0, "local/a/b/c/d", 1,
     GATEWAY_UPLOAD_PACK},
    /* Not git endpoints. */
    {"GET", "/", "", -ENOENT, "", 0, 0},
    {"GET", "/local/acme/app.git/HEAD", "", -ENOENT, "", 0, 0},
    {"GET", "/local/acme/app.git/info/refs", "", -ENOENT, "", 0, 0},
    {"GET", "/local/acme/app.git/info/refs", "git-evil", -ENOENT, "", 0, 0},
    {"GET", "local/acme/app.git/info/refs", "git-receive-pack", -ENOENT, "", 0, 0},
    /* Wrong methods. */
    {"POST", "/local/acme/app.git/info/refs", "git-receive-pack", -EPERM, "", 0, 0},
    {"GET", "/local/acme/app.git/git-receive-pack", "", -EPERM, "", 0, 0},
    {"PUT", "/local/acme/app.git/git-upload-pack", "", -EPERM, "", 0, 0},
    /* Traversal and odd segments. */
    {"GET", "/local/../etc/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/../../x.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/./app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme//app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/.hidden/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/a pp.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/a\\b.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "//acme/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/../acme/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/-x/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    /* Git LFS's API, which a run's URL rewrite sends here: refused as LFS, whatever the method. */
    {"POST", "/local/acme/app.git/info/lfs/objects/batch", "", -EOPNOTSUPP, "", 0, 0},
    {"POST", "/github.com/o/r/info/lfs/objects/batch", "", -EOPNOTSUPP, "", 0, 0},
    {"GET", "/local/acme/app.git/info/lfs/locks", "", -EOPNOTSUPP, "", 0, 0},
    {"POST", "/local/acme/app.git/info/lfs/locks/verify", "", -EOPNOTSUPP, "", 0, 0},
    {"PUT", "/local/acme/app.git/info/lfs/objects/abc", "", -EOPNOTSUPP, "", 0, 0},
    {"GET", "/local/acme/app.git/info/lfs", "", -EOPNOTSUPP, "", 0, 0},
    /* ...but not a repository that merely has lfs in its name. */
    {"GET", "/local/acme/info-lfs.git/info/refs", "git-upload-pack", 0, "local/acme/info-lfs", 1,
     GATEWAY_UPLOAD_PACK},
};

ParameterizedTestParameters(route, parse_accepts_git_endpoints_and_rejects_the_rest)
{
    return cr_make_param_array(route_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(route_case *c, route, parse_accepts_git_endpoints_and_rejects_the_rest)
{
    gateway_route r;
    rg_error err = RG_ERROR_INIT;
    int rc = gateway_route_parse(&r, c->method, c->url, c->service[0] ? c->service : NULL, &err);

    cr_assert_eq(rc, c->rc, "%s %s: got %d (%s), want %d", c->method, c->url, rc, err.msg, c->rc);
    if (rc == 0) {
        cr_assert_str_eq(r.repo, c->repo);
        cr_assert_eq(r.advertise, c->advertise);
        cr_assert_eq(r.service, c->svc);
    } else {
        cr_assert(err.msg[0] != '\0', "an error must say why");
    }
}

Test(route, long_paths_are_refused_not_truncated)
{
    char url[2048] = "/local/";
    gateway_route r;

    for (int i = 0; i < 60; i++)
        strcat(url, "abcdefghij/");
    strcat(url, "x.git/info/refs");
    cr_assert_eq(gateway_route_parse(&r, "GET", url, "git-receive-pack", NULL), -EINVAL);
}

static char root[PATH_MAX];

static void make_root(void)
{
    char cmd[PATH_MAX * 2];

    snprintf(root, sizeof(root), "/tmp/route-test.XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    snprintf(cmd, sizeof(cmd),
             "git init -q --bare %s/root/acme/app.git && git init -q --bare %s/outside.git && "
             "ln -s %s/outside.git %s/root/acme/escape.git",
             root, root, root, root);
    cr_assert_eq(system(cmd), 0);
}

static void remove_root(void)
{
    char cmd[PATH_MAX + 16];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(route_local, .init = make_root, .fini = remove_root);

static int local_dir(char **out, const char *url)
{
    char r[PATH_MAX];
    config_upstream up = {.host = (char *)"local", .url = NULL, .root = r};
    gateway_route route;
    rg_error err = RG_ERROR_INIT;

    snprintf(r, sizeof(r), "%s/root", root);
    cr_assert_eq(gateway_route_parse(&route, "GET", url, "git-receive-pack", &err), 0, "%s",
                 err.msg);
    return gateway_route_local_dir(out, &up, &route, &err);
}

Test(route_local, maps_a_path_to_the_bare_repository_under_the_root)
{
    char *dir = NULL, want[PATH_MAX], real[PATH_MAX];

    cr_assert_eq(local_dir(&dir, "/local/acme/app.git/info/refs"), 0);
    snprintf(want, sizeof(want), "%s/root/acme/app.git", root);
    cr_assert_not_null(realpath(want, real));
    cr_assert_str_eq(dir, real);
    free(dir);
    cr_assert_eq(local_dir(&dir, "/local/acme/app/info/refs"), 0);
    free(dir);
}

Test(route_local, refuses_missing_repositories_and_symlinks_out_of_the_root)
{
    char *dir = NULL;

    cr_assert_eq(local_dir(&dir, "/local/acme/nope.git/info/refs"), -ENOENT);
    cr_assert_null(dir);
    cr_assert_eq(local_dir(&dir, "/local/acme/escape.git/info/refs"), -ENOENT);
    cr_assert_null(dir);
    /* A directory that is not a repository is not served either. */
    cr_assert_eq(local_dir(&dir, "/local/acme/info/refs"), -ENOENT);
}

Test(route, lfs_api_calls_get_the_lfs_refusal_message)
{
    gateway_route r;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(
        gateway_route_parse(&r, "POST", "/local/acme/app.git/info/lfs/objects/batch", NULL, &err),
        -EOPNOTSUPP);
    cr_assert_str_eq(err.msg, GATEWAY_ROUTE_LFS_REFUSAL);
    cr_assert(strstr(err.msg, "Git LFS is not supported through the gateway") != NULL);
}
