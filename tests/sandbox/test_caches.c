/*
 * sandbox/caches.c: the default root follows XDG_CACHE_HOME, each tool gets
 * a 0700 directory of its own at its usual path, cargo's follow a
 * CARGO_HOME inside the home directory, and a cache directory someone else
 * could write (or a symlink planted in place of one) refuses the run.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/caches.h"
#include "sandbox/home.h"

static char dir[] = "/tmp/rg-caches-XXXXXX";

static void setup(void)
{
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(caches, .init = setup, .fini = teardown);

static const sandbox_cache *find(const sandbox_caches *c, const char *name)
{
    size_t i;

    for (i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0)
            return &c->v[i];
    return NULL;
}

Test(caches, default_root_follows_xdg_cache_home)
{
    char x1[] = "XDG_CACHE_HOME=/x/cache", x2[] = "XDG_CACHE_HOME=rel";
    char *env1[] = {x1, NULL}, *env2[] = {x2, NULL};
    rg_error err = RG_ERROR_INIT;
    char *root = NULL;

    cr_assert_eq(sandbox_caches_default_root(&root, "/home/u", env1, &err), 0);
    cr_assert_str_eq(root, "/x/cache/refgate/caches");
    free(root);
    cr_assert_eq(sandbox_caches_default_root(&root, "/home/u", env2, &err), 0);
    cr_assert_str_eq(root, "/home/u/.cache/refgate/caches");
    free(root);
}

Test(caches, each_tool_gets_a_private_directory_at_its_usual_path)
{
    sandbox_caches c = SANDBOX_CACHES_INIT;
    rg_error err = RG_ERROR_INIT;
    char root[128];
    const sandbox_cache *e;
    struct stat st;
    size_t i;

    snprintf(root, sizeof(root), "%s/c/refgate/caches", dir);
    cr_assert_eq(sandbox_caches_prepare(&c, root, "/home/u", NULL, &err), 0, "%s", err.msg);
    cr_assert_gt(c.n, 8);
    for (i = 0; i < c.n; i++) {
        cr_assert_eq(stat(c.v[i].src, &st), 0, "%s", c.v[i].src);
        cr_assert(S_ISDIR(st.st_mode));
        cr_assert_eq(st.st_mode & 0777, 0700, "%s: %o", c.v[i].src, st.st_mode & 0777);
        cr_assert_eq(strncmp(c.v[i].dst, "/home/u/", 8), 0, "%s", c.v[i].dst);
    }
    cr_assert_eq(stat(root, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700);
    e = find(&c, "go-build");
    cr_assert_str_eq(e->dst, "/home/u/.cache/go-build");
    cr_assert_str_eq(e->env, "GOCACHE");
    e = find(&c, "npm");
    cr_assert_str_eq(e->dst, "/home/u/.npm");
    e = find(&c, "cargo-registry");
    cr_assert_str_eq(e->dst, "/home/u/.cargo/registry");
    cr_assert_null(e->env);
    sandbox_caches_free(&c);
}

Test(caches, cargo_follows_a_cargo_home_inside_home_only)
{
    sandbox_caches c = SANDBOX_CACHES_INIT;
    rg_error err = RG_ERROR_INIT;
    char root[128];

    snprintf(root, sizeof(root), "%s/r", dir);
    cr_assert_eq(sandbox_caches_prepare(&c, root, "/home/u", "/home/u/rust/cargo", &err), 0);
    cr_assert_str_eq(find(&c, "cargo-git")->dst, "/home/u/rust/cargo/git");
    sandbox_caches_free(&c);
    cr_assert_eq(sandbox_caches_prepare(&c, root, "/home/u", "/opt/cargo", &err), 0);
    cr_assert_null(find(&c, "cargo-git"), "a CARGO_HOME outside home keeps the host's");
    cr_assert_not_null(find(&c, "go-mod"));
    sandbox_caches_free(&c);
}

Test(caches, a_cache_others_can_write_or_a_symlink_is_refused)
{
    sandbox_caches c = SANDBOX_CACHES_INIT;
    rg_error err = RG_ERROR_INIT;
    char root[128], path[192];

    snprintf(root, sizeof(root), "%s/r", dir);
    cr_assert_eq(sandbox_caches_prepare(&c, root, "/home/u", NULL, &err), 0);
    sandbox_caches_free(&c);

    snprintf(path, sizeof(path), "%s/npm", root);
    cr_assert_eq(chmod(path, 0777), 0);
    cr_assert_lt(sandbox_caches_prepare(&c, root, "/home/u", NULL, &err), 0);
    cr_assert_not_null(strstr(err.msg, "writable by group or others"), "%s", err.msg);
    cr_assert_eq(chmod(path, 0700), 0);

    snprintf(path, sizeof(path), "%s/pip", root);
    cr_assert_eq(rmdir(path), 0);
    cr_assert_eq(symlink("/etc", path), 0);
    err = (rg_error)RG_ERROR_INIT;
    cr_assert_lt(sandbox_caches_prepare(&c, root, "/home/u", NULL, &err), 0);
    cr_assert_not_null(strstr(err.msg, "symlink"), "%s", err.msg);
}

static void seed(sandbox_caches *c, const char *home, char *const *env, int mounted)
{
    sandbox_home h = SANDBOX_HOME_INIT;
    rg_error err = RG_ERROR_INIT;
    char root[128];

    snprintf(root, sizeof(root), "%s/caches", dir);
    cr_assert_eq(sandbox_home_init(&h, home, NULL, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(sandbox_caches_prepare(c, root, home, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(sandbox_caches_seed_go(c, &h, env, mounted, &err), 0, "%s", err.msg);
    sandbox_home_free(&h);
}

static void write_goenv(const char *home, const char *text)
{
    char path[256], cmd[300];
    FILE *f;

    snprintf(path, sizeof(path), "%s/.config/go", home);

    snprintf(cmd, sizeof(cmd), "mkdir -p %s", path);
    cr_assert_eq(system(cmd), 0);
    strcat(path, "/env");
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(caches, go_is_seeded_from_the_users_download_cache_through_goproxy)
{
    sandbox_caches c = SANDBOX_CACHES_INIT;
    char home[128], dl[256], want[512], off[] = "GOPROXY=off";
    char *none[] = {NULL}, *envoff[] = {off, NULL};

    snprintf(home, sizeof(home), "%s/home", dir);
    snprintf(dl, sizeof(dl), "mkdir -p %s/go/pkg/mod/cache/download", home);
    cr_assert_eq(system(strcat(strcpy(want, "mkdir -p "), home)), 0);
    seed(&c, home, none, 1);
    cr_assert_null(c.goproxy, "no download cache: no seed");
    sandbox_caches_free(&c);

    cr_assert_eq(system(dl), 0);
    seed(&c, home, none, 1);
    snprintf(want, sizeof(want), "file://%s/.cache/refgate-seed/go,https://proxy.golang.org,direct",
             home);
    cr_assert_str_eq(c.goproxy, want);
    cr_assert_not_null(strstr(c.seed_src, "/go/pkg/mod/cache/download"));
    sandbox_caches_free(&c);

    seed(&c, home, none, 0);
    cr_assert_not_null(strstr(c.goproxy, "/go/pkg/mod/cache/download,https://"),
                       "without the mount namespace the seed is named where it is");
    sandbox_caches_free(&c);

    write_goenv(home, "GOFLAGS=-mod=mod\nGOPROXY=https://goproxy.corp.example\n");
    seed(&c, home, none, 1);
    cr_assert_not_null(strstr(c.goproxy, "/go,https://goproxy.corp.example"), "%s", c.goproxy);
    sandbox_caches_free(&c);

    seed(&c, home, envoff, 1);
    cr_assert_null(c.goproxy, "GOPROXY=off in the environment: no seed");
    sandbox_caches_free(&c);

    write_goenv(home, "GOPROXY=https://me:pw@goproxy.corp.example\n");
    seed(&c, home, none, 1);
    cr_assert_null(c.goproxy, "a GOPROXY with credentials is never copied into the run");
    sandbox_caches_free(&c);
}
