/* Agent profiles of `refgate run` (cli/profile.c): selection, the variables kept, API hosts. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/profile.h"

/* Arrays, not pointers: each case runs in a fresh worker process. */
typedef struct select_case {
    char opt[16]; /* "" for no --profile */
    char cmd[64];
    int rc;
    char want[16]; /* "" for no profile */
} select_case;

static select_case selects[] = {
    {"", "claude", 0, "claude"},
    {"", "/usr/local/bin/claude", 0, "claude"},
    {"", "./node_modules/.bin/codex", 0, "codex"},
    {"", "codex", 0, "codex"},
    {"", "sh", 0, ""},
    {"", "claude-wrapper", 0, ""},
    {"", "/opt/claude/bin/node", 0, ""},
    {"none", "claude", 0, ""},
    {"codex", "claude", 0, "codex"},
    {"claude", "sh", 0, "claude"},
    {"bogus", "claude", -EINVAL, ""},
    {"Claude", "sh", -EINVAL, ""},
};

ParameterizedTestParameters(profile, select_by_basename_or_option)
{
    return cr_make_param_array(select_case, selects, sizeof(selects) / sizeof(selects[0]));
}

ParameterizedTest(select_case *c, profile, select_by_basename_or_option)
{
    const cli_profile *p = (const cli_profile *)1;
    rg_error err = RG_ERROR_INIT;
    int rc = cli_profile_select(&p, c->opt[0] ? c->opt : NULL, c->cmd, &err);

    cr_assert_eq(rc, c->rc, "--profile '%s' %s: got %d, want %d", c->opt, c->cmd, rc, c->rc);
    if (rc < 0) {
        cr_assert(strstr(err.msg, c->opt) != NULL, "the message names the profile: %s", err.msg);
        return;
    }
    if (c->want[0] == '\0')
        cr_assert_null(p, "--profile '%s' %s: want none, got %s", c->opt, c->cmd, p->name);
    else
        cr_assert(p != NULL && !strcmp(p->name, c->want), "--profile '%s' %s: want %s", c->opt,
                  c->cmd, c->want);
}

typedef struct env_case {
    char profile[16];
    char entry[64];
    int kept;
} env_case;

static env_case envs[] = {
    {"claude", "ANTHROPIC_API_KEY=sk-x", 1},
    {"claude", "ANTHROPIC_BASE_URL=https://x", 1},
    {"claude", "CLAUDE_CODE_USE_BEDROCK=1", 1},
    {"claude", "DISABLE_TELEMETRY=1", 1},
    /* refgate run sets it to the copy: the caller's never passes as well. */
    {"claude", "CLAUDE_CONFIG_DIR=/home/me/.claude", 0},
    {"claude", "OPENAI_API_KEY=sk-y", 0},
    {"claude", "AWS_SECRET_ACCESS_KEY=z", 0},
    {"claude", "ANTHROPIC", 0},
    {"claude", "DISABLE_TELEMETRY_X=1", 0},
    {"codex", "OPENAI_API_KEY=sk-y", 1},
    {"codex", "OPENAI_BASE_URL=https://x", 1},
    {"codex", "CODEX_HOME=/home/me/.codex", 0},
    {"codex", "CODEX_SANDBOX=x", 1},
    {"codex", "ANTHROPIC_API_KEY=sk-x", 0},
    {"codex", "GITHUB_TOKEN=ghp", 0},
};

ParameterizedTestParameters(profile, env_kept_only_for_its_agent)
{
    return cr_make_param_array(env_case, envs, sizeof(envs) / sizeof(envs[0]));
}

ParameterizedTest(env_case *c, profile, env_kept_only_for_its_agent)
{
    const cli_profile *p = NULL;

    cr_assert_eq(cli_profile_select(&p, c->profile, NULL, NULL), 0);
    cr_assert_eq(cli_profile_env_match(p, c->entry), c->kept, "%s %s", c->profile, c->entry);
}

Test(profile, no_profile_keeps_nothing)
{
    cr_assert_eq(cli_profile_env_match(NULL, "ANTHROPIC_API_KEY=x"), 0);
}

typedef struct url_case {
    char url[64];
    int rc;
    char want[32];
} url_case;

static url_case urls[] = {
    {"https://api.anthropic.com", 0, "api.anthropic.com:443"},
    {"https://proxy.corp.example:8443/v1", 0, "proxy.corp.example:8443"},
    {"https://gw.example/anthropic?x=1", 0, "gw.example:443"},
    {"http://api.anthropic.com", -EINVAL, ""},
    {"https://user:pw@host.example", -EINVAL, ""},
    {"https://[::1]:443/", -EINVAL, ""},
    {"https://host.example:0", -EINVAL, ""},
    {"https://host.example:99999", -EINVAL, ""},
    {"https://host.example:12x", -EINVAL, ""},
    {"https:///path", -EINVAL, ""},
};

ParameterizedTestParameters(profile, base_url_host_is_https_host_and_port)
{
    return cr_make_param_array(url_case, urls, sizeof(urls) / sizeof(urls[0]));
}

ParameterizedTest(url_case *c, profile, base_url_host_is_https_host_and_port)
{
    char out[64] = "";

    cr_assert_eq(cli_profile_url_host(out, sizeof(out), c->url), c->rc, "%s", c->url);
    if (c->rc == 0)
        cr_assert_str_eq(out, c->want);
}

Test(profile, every_profile_has_hosts_env_and_a_config)
{
    size_t i;

    for (i = 0; cli_profiles[i]; i++) {
        const cli_profile *p = cli_profiles[i];

        cr_assert(p->hosts[0] != NULL && p->env[0] != NULL && p->config_env && p->config_dir, "%s",
                  p->name);
        /* Only HTTPS goes through refgate-run's CONNECT proxy. */
        for (size_t j = 0; p->hosts[j]; j++)
            cr_assert(strstr(p->hosts[j], ":443") != NULL, "%s: %s", p->name, p->hosts[j]);
    }
}

/* Run a formatted shell command, for the fixture's few file operations. */
#define SH(...)                                                                                    \
    do {                                                                                           \
        char cmd_[2048];                                                                           \
        snprintf(cmd_, sizeof(cmd_), __VA_ARGS__);                                                 \
        cr_assert_eq(system(cmd_), 0, "%s", cmd_);                                                 \
    } while (0)

Test(profile, config_copy_skips_other_projects_and_copies_linked_files)
{
    char tmpl[] = "/tmp/rg-profile-XXXXXX", path[512];
    const cli_profile *p = NULL;
    rg_error err = RG_ERROR_INIT;
    struct stat st;

    cr_assert_not_null(mkdtemp(tmpl));
    SH("mkdir -p %s/home/.claude/projects/other %s/home/.claude/agents %s/copy && "
       "echo '{}' >%s/home/.claude/settings.json && echo T >%s/home/.claude/projects/other/t && "
       "echo J >%s/home/.claude.json",
       tmpl, tmpl, tmpl, tmpl, tmpl, tmpl);
    SH("echo A >%s/home/.claude/agents/a.md && ln -s /etc %s/home/.claude/link && "
       "echo H >%s/home/.claude/history.jsonl && chmod 600 %s/home/.claude/settings.json && "
       "echo K >%s/dotfiles-keys.json && ln -s %s/dotfiles-keys.json %s/home/.claude/keys.json",
       tmpl, tmpl, tmpl, tmpl, tmpl, tmpl, tmpl);
    cr_assert_eq(cli_profile_select(&p, "claude", NULL, NULL), 0);
    snprintf(path, sizeof(path), "%s/copy", tmpl);
    char dir[512], file[512];
    snprintf(dir, sizeof(dir), "%s/home/.claude", tmpl);
    snprintf(file, sizeof(file), "%s/home/.claude.json", tmpl);
    cr_assert_eq(cli_profile_copy_config(path, p, dir, file, &err), 0, "%s", err.msg);

    snprintf(path, sizeof(path), "%s/copy/dir/settings.json", tmpl);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "permission bits kept (owner's)");
    snprintf(path, sizeof(path), "%s/copy/dir/agents/a.md", tmpl);
    cr_assert_eq(stat(path, &st), 0, "subdirectories are copied");
    snprintf(path, sizeof(path), "%s/copy/file", tmpl);
    cr_assert_eq(stat(path, &st), 0, "the config file is copied beside the directory");
    cr_assert_eq(st.st_size, 2, "... with its content");
    snprintf(path, sizeof(path), "%s/copy/dir/link", tmpl);
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "a link to a directory stays a link");
    snprintf(path, sizeof(path), "%s/copy/dir/keys.json", tmpl);
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISREG(st.st_mode),
              "a link to a file is copied as the file (its target is not in the run)");
    snprintf(path, sizeof(path), "%s/copy/dir/projects", tmpl);
    cr_assert_neq(lstat(path, &st), 0, "other projects' transcripts are not copied");
    snprintf(path, sizeof(path), "%s/copy/dir/history.jsonl", tmpl);
    cr_assert_neq(lstat(path, &st), 0, "the prompt history is not copied");

    /* No config yet (a first run): an empty copy, no error. */
    SH("mkdir %s/copy2", tmpl);
    snprintf(path, sizeof(path), "%s/copy2", tmpl);
    snprintf(dir, sizeof(dir), "%s/nothing/.claude", tmpl);
    snprintf(file, sizeof(file), "%s/nothing/.claude.json", tmpl);
    cr_assert_eq(cli_profile_copy_config(path, p, dir, file, &err), 0, "%s", err.msg);
    snprintf(path, sizeof(path), "%s/copy2/dir", tmpl);
    cr_assert_eq(stat(path, &st), 0, "an empty directory to bind");
    cr_assert(S_ISDIR(st.st_mode));
    snprintf(path, sizeof(path), "%s/copy2/file", tmpl);
    cr_assert_eq(stat(path, &st), 0, "a new file the agent can write (the home is not writable)");
    cr_assert_eq(st.st_size, 3, "holding {} and a newline: valid JSON");
    SH("rm -rf %s", tmpl);
}
