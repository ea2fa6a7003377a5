/*
 * sandbox/toolconf.c: ~/.npmrc loses exactly its auth settings, other
 * toolchain configs holding a credential are recognised (and only those),
 * a signing git config is noticed, and a scan of a home gives, filters or
 * hides each file accordingly.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/toolconf.h"

Test(toolconf, npmrc_keeps_settings_and_drops_every_auth_line)
{
    const char *in = "registry=https://registry.npmjs.org/\n"
                     "//registry.npmjs.org/:_authToken=SECRET1\n"
                     "  _auth = SECRET2\n"
                     "@corp:registry=https://npm.corp/\n"
                     "//npm.corp/:_password=SECRET3\n"
                     "email=me@example.com\n"
                     "certfile=/home/u/cert.pem\n"
                     "keyfile=/home/u/key.pem\n"
                     "@other:registry=https://bob:SECRET4@npm.other/\n"
                     "; a comment stays\n"
                     "save-exact=true\n"
                     "_authToken=SECRET5\n"
                     "username=bob\n";
    char *out = NULL, *dropped = NULL;
    int n = sandbox_toolconf_filter_npmrc(&out, &dropped, in, strlen(in));

    cr_assert_eq(n, 9, "dropped %d lines: %s", n, dropped);
    cr_assert_str_eq(out, "registry=https://registry.npmjs.org/\n"
                          "@corp:registry=https://npm.corp/\n"
                          "; a comment stays\n"
                          "save-exact=true\n");
    cr_assert_null(strstr(dropped, "SECRET"), "a value leaked into the names: %s", dropped);
    cr_assert_not_null(strstr(dropped, "//registry.npmjs.org/:_authToken"));
    cr_assert_not_null(strstr(dropped, "@other:registry"));
    free(out);
    free(dropped);
}

Test(toolconf, npmrc_without_auth_is_unchanged)
{
    const char *in = "registry=https://registry.npmjs.org/\nsave-exact=true\n";
    char *out = NULL, *dropped = NULL;

    cr_assert_eq(sandbox_toolconf_filter_npmrc(&out, &dropped, in, strlen(in)), 0);
    cr_assert_str_eq(out, in);
    cr_assert_null(dropped);
    free(out);
}

typedef struct cred_case {
    char text[96];
    int want;
} cred_case;

ParameterizedTestParameters(toolconf, credentials_in_other_configs_are_recognised)
{
    static cred_case cases[] = {
        {"[global]\nindex-url = https://me:pw@pypi.corp/simple\n", 1},
        {"[global]\nindex-url = https://TOKEN@pypi.corp/simple\n", 1},
        {"[global]\nindex-url = https://pypi.corp/simple\ntimeout = 5\n", 0},
        {"[registry]\ntoken = \"cio_abc\"\n", 1},
        {"[registries.corp]\nindex = \"sparse+https://c/\"\ntoken = \"x\"\n", 1},
        {"[http]\nproxy = \"user:pw@proxy:3128\"\n", 0}, /* no scheme: see below */
        {"[http]\nproxy = \"http://user:pw@proxy:3128\"\n", 1},
        {"[build]\njobs = 4\n[net]\noffline = true\n", 0},
        {"GOPROXY=https://u:p@goproxy.corp,direct\n", 1},
        {"GOFLAGS=-mod=mod\nGOPRIVATE=corp.example/*\n", 0},
        {"# password = not a key in a comment\n", 0},
        {"[x]\nclient_secret = y\n", 1},
    };

    return cr_make_param_array(cred_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(cred_case *c, toolconf, credentials_in_other_configs_are_recognised)
{
    char *what = NULL;
    int got = sandbox_toolconf_has_credential(&what, c->text, strlen(c->text));

    cr_assert_eq(got, c->want, "%s: got %d (%s)", c->text, got, what ? what : "-");
    free(what);
}

Test(toolconf, gpgsign_is_noticed_per_section_and_turned_off_again)
{
    const char *a = "[user]\n\tname = x\n[commit]\n\tgpgsign = true\n";
    const char *b = "[tag]\n\tgpgSign\n[commit]\n\tgpgsign = false\n";
    const char *c = "[commit]\n\tgpgsign = yes\n\tgpgsign = off\n[user]\n\tgpgsign = true\n";

    cr_assert_eq(sandbox_toolconf_gpgsign(a, strlen(a)), SANDBOX_TOOLCONF_GPG_COMMIT);
    cr_assert_eq(sandbox_toolconf_gpgsign(b, strlen(b)), SANDBOX_TOOLCONF_GPG_TAG);
    cr_assert_eq(sandbox_toolconf_gpgsign(c, strlen(c)), 0);
}

static void write_file(const char *dir, const char *rel, const char *text)
{
    char path[512], *slash;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    for (slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0700);
        *slash = '/';
    }
    f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static const sandbox_toolconf_file *find(const sandbox_toolconf *c, const char *rel)
{
    size_t i;

    for (i = 0; i < c->n; i++)
        if (strcmp(c->v[i].rel, rel) == 0)
            return &c->v[i];
    return NULL;
}

Test(toolconf, scan_gives_filters_and_hides_per_file)
{
    char home[] = "/tmp/rg-toolconf-XXXXXX", copies[600], text[256];
    sandbox_toolconf c = SANDBOX_TOOLCONF_INIT;
    rg_error err = RG_ERROR_INIT;
    const sandbox_toolconf_file *f;
    FILE *fp;
    size_t n;

    cr_assert_not_null(mkdtemp(home));
    write_file(home, ".npmrc", "save-exact=true\n//r/:_authToken=SECRET\n");
    write_file(home, ".config/pip/pip.conf", "[global]\nindex-url = https://u:p@x/simple\n");
    write_file(home, ".cargo/config.toml", "[build]\njobs = 2\n");
    write_file(home, ".gitconfig", "[commit]\n\tgpgsign = true\n");
    snprintf(copies, sizeof(copies), "%s/copies", home);
    cr_assert_eq(sandbox_toolconf_scan(&c, home, copies, &err), 0, "%s", err.msg);
    cr_assert_eq(c.n, 3);
    cr_assert_eq(c.gpgsign, SANDBOX_TOOLCONF_GPG_COMMIT);

    f = find(&c, ".npmrc");
    cr_assert_not_null(f);
    cr_assert_eq(f->action, SANDBOX_TOOLCONF_FILTERED);
    cr_assert_str_eq(f->env, "NPM_CONFIG_USERCONFIG");
    fp = fopen(f->src, "r");
    cr_assert_not_null(fp, "%s", f->src);
    n = fread(text, 1, sizeof(text) - 1, fp);
    text[n] = '\0';
    fclose(fp);
    cr_assert_str_eq(text, "save-exact=true\n");
    cr_assert_null(strstr(f->dropped, "SECRET"));

    f = find(&c, ".config/pip/pip.conf");
    cr_assert_eq(f->action, SANDBOX_TOOLCONF_HIDDEN);
    cr_assert_str_eq(f->dropped, "index-url");
    f = find(&c, ".cargo/config.toml");
    cr_assert_eq(f->action, SANDBOX_TOOLCONF_GIVE);
    cr_assert_not_null(strstr(f->src, "/.cargo/config.toml"));
    cr_assert_null(find(&c, ".pip/pip.conf"), "a missing file is not listed");

    sandbox_toolconf_free(&c);
    {
        char cmd[700];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
        cr_assert_eq(system(cmd), 0);
    }
}
