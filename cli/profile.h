/*
 * Agent profiles for `refgate run`: what a known agent (Claude Code, Codex)
 * needs to do its work inside refgate-run, where the environment is an
 * allow-list, the network is the gateway and the home directory is empty.
 * A profile names the API hosts it must reach (given to refgate-run's
 * allow-list proxy), the environment variables it must keep (its API key:
 * refgate run says at start that the run holds them, by name), and its
 * configuration (a directory, and a file beside it), of which the run gets
 * a writable copy of its own, bound by refgate-run at the real paths
 * (~/.claude and ~/.claude.json, ~/.codex), so the agent finds it where it
 * always does and nothing it writes there reaches the real one.
 *
 * The table is data (profile.c): adding an agent is adding a row. A profile
 * is chosen by the command's basename or by `--profile NAME`; `--profile
 * none` runs without one.
 */
#ifndef RG_CLI_PROFILE_H
#define RG_CLI_PROFILE_H

#include "util/error.h"

#include <stddef.h>

typedef struct cli_profile {
    const char *name;               /* what --profile takes */
    const char *const *commands;    /* command basenames that select it */
    const char *const *hosts;       /* HOST:PORT its API needs */
    const char *const *env;         /* variables kept when set: NAME, or PREFIX* */
    const char *base_url_env;       /* names another API URL; its host is allowed too */
    const char *config_env;         /* the variable the agent finds its config by */
    const char *config_dir;         /* relative to HOME: copied for the run */
    const char *config_file;        /* relative to HOME: copied too; may be NULL */
    const char *config_file_new;    /* config_file's content when there is none yet */
    const char *const *config_skip; /* entries of config_dir not copied */
} cli_profile;

/* NULL-terminated: every profile, for --help and the tests. */
extern const cli_profile *const cli_profiles[];

/*
 * The profile for a run: `opt` (from --profile; "none" gives *out = NULL),
 * else the one whose commands hold the basename of `cmd` (none: NULL).
 * Returns 0, or -EINVAL with a message for an unknown --profile.
 */
int cli_profile_select(const cli_profile **out, const char *opt, const char *cmd, rg_error *err);

/* 1 when the environment entry `entry` ("NAME=VALUE") is one `p` keeps. */
int cli_profile_env_match(const cli_profile *p, const char *entry);

/*
 * "HOST:PORT" of an https URL (`https://HOST[:PORT][/...]`, PORT 443 by
 * default) into out; -EINVAL when `url` is no such URL or out is too small.
 */
int cli_profile_url_host(char *out, size_t cap, const char *url);

/*
 * Copy the agent's configuration into `dest` (an existing, empty, private
 * directory): the directory `src_dir` without the entries the profile
 * skips as dest/CLI_PROFILE_COPY_DIR, and, when `src_file` is not NULL,
 * that file as dest/CLI_PROFILE_COPY_FILE (config_file_new when it does
 * not exist, so the agent has a file to write: the run's home is not
 * writable). A missing directory is copied as an empty one (a first run
 * has none). Regular files, directories and symbolic links only: a link to a
 * regular file is copied as that file (its target is not in the run), any
 * other link as a link;
 * at most CLI_PROFILE_COPY_ENTRIES entries, CLI_PROFILE_COPY_BYTES bytes
 * and CLI_PROFILE_COPY_DEPTH levels, past which it fails with -EFBIG.
 */
#define CLI_PROFILE_COPY_DIR     "dir"
#define CLI_PROFILE_COPY_FILE    "file"
#define CLI_PROFILE_COPY_ENTRIES 20000
#define CLI_PROFILE_COPY_BYTES   (512L * 1024 * 1024)
#define CLI_PROFILE_COPY_DEPTH   32
int cli_profile_copy_config(const char *dest, const cli_profile *p, const char *src_dir,
                            const char *src_file, rg_error *err);

#endif
