/*
 * Toolchain configuration files a run may read: pip's, cargo's, go's and
 * npm's user configs. They live in the home directory, which a run does not
 * see, and several of them may carry credentials: a private index URL with
 * a password in pip.conf, a registry token in cargo's config.toml, an
 * `_authToken` in ~/.npmrc. This module decides, per file, whether it is
 * given as it is, given as a copy without its auth settings (~/.npmrc,
 * whose format is one setting per line), or kept hidden because it holds
 * something that looks like a credential (the others: a partial TOML or
 * INI rewrite could change what the file means). It also notices a git
 * configuration that signs commits or tags, which cannot work inside (the
 * signing keys and agents are hidden), so the runner can say so up front.
 *
 * Nothing here prints: the caller reports the names it is given.
 */
#ifndef RG_SANDBOX_TOOLCONF_H
#define RG_SANDBOX_TOOLCONF_H

#include <stddef.h>

#include "util/error.h"

/* What to do with one config file. */
typedef enum sandbox_toolconf_action {
    SANDBOX_TOOLCONF_GIVE = 0, /* readable as it is (src == dst) */
    SANDBOX_TOOLCONF_FILTERED, /* a copy without auth settings (src) at dst */
    SANDBOX_TOOLCONF_HIDDEN,   /* holds a credential: stays hidden */
} sandbox_toolconf_action;

typedef struct sandbox_toolconf_file {
    sandbox_toolconf_action action;
    const char *rel; /* static: the path under the home directory (".npmrc") */
    const char *env; /* static: the variable that names a copy (npm's), or NULL */
    char *src;       /* what to give: the file itself, or the filtered copy */
    char *dst;       /* where the tool looks: <home>/<rel> */
    char *dropped;   /* FILTERED/HIDDEN: the setting names left out, ", "-separated */
} sandbox_toolconf_file;

#define SANDBOX_TOOLCONF_GPG_COMMIT (1u << 0) /* commit.gpgsign is set */
#define SANDBOX_TOOLCONF_GPG_TAG    (1u << 1) /* tag.gpgsign is set */

typedef struct sandbox_toolconf {
    sandbox_toolconf_file *v; /* only files that exist */
    size_t n;
    unsigned gpgsign; /* SANDBOX_TOOLCONF_GPG_* */
} sandbox_toolconf;

#define SANDBOX_TOOLCONF_INIT                                                                      \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/*
 * Look at the config files under `home` (canonical). Filtered copies are
 * written into `copies` (a directory only the caller can write, created
 * 0700 if missing), replaced atomically so concurrent runs never read half
 * a file. Free with sandbox_toolconf_free().
 */
int sandbox_toolconf_scan(sandbox_toolconf *out, const char *home, const char *copies,
                          rg_error *err);

void sandbox_toolconf_free(sandbox_toolconf *c);

/*
 * One line for the user about what was filtered or hidden, naming files and
 * setting names only ("~/.npmrc given without its auth settings (_auth);
 * ~/.config/pip/pip.conf hidden (it sets index-url)"), into *out
 * (malloc'd; NULL when everything was given as it is).
 */
int sandbox_toolconf_describe(char **out, const sandbox_toolconf *c);

struct sandbox_mount_plan;
struct sandbox_landlock;

/* With the mount namespace: bind what is given, read-only, where the tool
 * looks (`flags`: IDMAP for a root caller, or 0). */
int sandbox_toolconf_mount(const sandbox_toolconf *c, struct sandbox_mount_plan *p, unsigned flags,
                           rg_error *err);

/* Let the command read what is given: at dst with the mount namespace
 * (`mounted`), else at src. */
int sandbox_toolconf_allow(const sandbox_toolconf *c, struct sandbox_landlock *ll, int mounted,
                           rg_error *err);

/* Without the mount namespace a filtered copy is named by its tool's
 * variable (NPM_CONFIG_USERCONFIG), unless an --env set it already. */
int sandbox_toolconf_env(const sandbox_toolconf *c, char ***env, int mounted, rg_error *err);

/*
 * Filter an .npmrc text into *out (malloc'd, NUL-terminated): every line
 * whose key is an auth setting (_auth, _authToken, _password, username,
 * password, email, certfile, keyfile, cert, key, otp, or any of these
 * scoped to a registry as `//host/:_authToken`, or any `//host/...` key)
 * or whose value is a URL with a user or password in it is left out. The
 * names of the left-out keys go to *dropped (malloc'd, ", "-separated,
 * NULL when none). Returns the number of lines left out.
 */
int sandbox_toolconf_filter_npmrc(char **out, char **dropped, const char *text, size_t len);

/*
 * Whether an INI/TOML/env text looks like it holds a credential: a key
 * naming a token, password, secret or auth, or a URL with a user or
 * password in it. The first such key's name goes to *what (malloc'd).
 */
int sandbox_toolconf_has_credential(char **what, const char *text, size_t len);

/* SANDBOX_TOOLCONF_GPG_* set by a git config text (includes not followed). */
unsigned sandbox_toolconf_gpgsign(const char *text, size_t len);

#endif
