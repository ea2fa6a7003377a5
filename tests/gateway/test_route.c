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
    char url[160];
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
    /* The endpoint alone, no repository before it (found by fuzz_route). */
    {"GET", "/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"POST", "/git-receive-pack", "", -EINVAL, "", 0, 0},
    {"POST", "/git-upload-pack", "", -EINVAL, "", 0, 0},
    {"GET", "//acme/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/../acme/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/-x/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    /* Odd shapes: dots and empty segments anywhere, percent-escapes the server
     * did not decode, trailing slashes, control characters. */
    {"GET", "/local/acme/%2e%2e/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/%2e%2e/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/%2Fetc.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/app.git/../info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"POST", "/local/acme/app.git/../git-receive-pack", "", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/..git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/app.git//info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local//acme/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"POST", "/local/acme//app.git/git-receive-pack", "", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/app/.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/lo cal/acme/app.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/a\x01pp.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/app\n.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    {"GET", "/local/acme/app.git/git-receive-pack/../info/refs", "git-receive-pack", -EINVAL, "", 0,
     0},
    {"GET", "/local/acme/app.git/info/refs/", "git-receive-pack", -ENOENT, "", 0, 0},
    {"GET", "/local/acme/app.git/info//refs", "git-receive-pack", -ENOENT, "", 0, 0},
    {"POST", "/local/acme/app.git/git-receive-pack/", "", -ENOENT, "", 0, 0},
    {"GET", "/local.git/info/refs", "git-receive-pack", -EINVAL, "", 0, 0},
    /* Plain names with dots inside are names, not traversal. */
    {"GET", "/local/acme/a..b.git/info/refs", "git-receive-pack", 0, "local/acme/a..b", 1,
     GATEWAY_RECEIVE_PACK},
    {"GET", "/local/acme/app.git.git/info/refs", "git-receive-pack", 0, "local/acme/app.git", 1,
     GATEWAY_RECEIVE_PACK},
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

/* "/local/<path>.git/info/refs" for a path of `nseg` segments of `seglen` bytes. */
static int parse_path(gateway_route *r, size_t nseg, size_t seglen)
{
    char *url = malloc(16 + nseg * (seglen + 1) + 32), *p;

    cr_assert_not_null(url);
    p = url + sprintf(url, "/local");
    for (size_t i = 0; i < nseg; i++) {
        *p++ = '/';
        memset(p, 'a' + (char)(i % 26), seglen);
        p += seglen;
    }
    strcpy(p, ".git/info/refs");
    {
        int rc = gateway_route_parse(r, "GET", url, "git-receive-pack", NULL);

        free(url);
        return rc;
    }
}

Test(route, a_path_of_up_to_16_segments_is_taken_and_17_are_refused)
{
    gateway_route r;

    cr_expect_eq(parse_path(&r, 16, 3), 0);
    cr_expect_eq(strlen(r.path), 16 * 4 - 1);
    cr_expect_eq(parse_path(&r, 17, 3), -EINVAL);
}

Test(route, the_longest_path_fits_exactly_and_one_byte_more_is_refused)
{
    gateway_route r;

    /* path[512] holds 511 bytes and the NUL; repo ("local/" + path) fits too. */
    cr_assert_eq(parse_path(&r, 1, sizeof(r.path) - 1), 0);
    cr_expect_eq(strlen(r.path), sizeof(r.path) - 1);
    cr_expect_eq(strlen(r.repo), strlen("local/") + sizeof(r.path) - 1);
    cr_expect_eq(parse_path(&r, 1, sizeof(r.path)), -EINVAL);
}

Test(route, the_longest_host_fits_exactly_and_one_byte_more_is_refused)
{
    char url[512];
    gateway_route r;

    memset(url, 0, sizeof(url));
    url[0] = '/';
    memset(url + 1, 'h', sizeof(r.host) - 1);
    strcat(url, "/acme/app.git/info/refs");
    cr_assert_eq(gateway_route_parse(&r, "GET", url, "git-receive-pack", NULL), 0);
    cr_expect_eq(strlen(r.host), sizeof(r.host) - 1);
    memset(url, 0, sizeof(url));
    url[0] = '/';
    memset(url + 1, 'h', sizeof(r.host));
    strcat(url, "/acme/app.git/info/refs");
    cr_expect_eq(gateway_route_parse(&r, "GET", url, "git-receive-pack", NULL), -EINVAL);
}

Test(route, a_megabyte_long_url_is_refused_without_reading_past_it)
{
    size_t n = 1 << 20;
    char *url = malloc(n + 64);
    gateway_route r;
    rg_error err = RG_ERROR_INIT;

    cr_assert_not_null(url);
    strcpy(url, "/local/");
    memset(url + 7, 'a', n);
    strcpy(url + 7 + n, ".git/git-receive-pack");
    cr_expect_eq(gateway_route_parse(&r, "POST", url, NULL, &err), -EINVAL);
    cr_expect(err.msg[0] != '\0');
    /* As many "../" as fit: still no traversal. */
    for (size_t i = 0; i + 3 <= n; i += 3)
        memcpy(url + 7 + i, "../", 3);
    cr_expect_eq(gateway_route_parse(&r, "POST", url, NULL, &err), -EINVAL);
    free(url);
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
