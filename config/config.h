/*
 * The gateway's configuration: one JSON file, loaded with jansson into a
 * read-only model. Relative paths are relative to the file. Every error
 * names the file, the key and what is wrong, and loading refuses unknown
 * keys so a typo never silently weakens a rule.
 *
 *   {
 *     "listen": "127.0.0.1:8470",        optional; port 0 picks a free port
 *     "state_dir": "state",              required; keys, audit log, url file
 *     "default": "deny",                 optional; "allow" | "deny" | "ask"
 *     "max_body_bytes": 2147483648,      optional cap on one push body
 *     "limits": { ... },                 optional; see below
 *     "approvals": {"expire": "24h"},    optional; see below
 *     "admin": {"listen": "127.0.0.1:9470"}, optional; see below
 *     "upstreams": [ {"host": "local", "url": "file:///srv/git"} ],
 *     "rules": [ {"name": "protect-main", "repos": ["local/acme/app"],
 *                 "refs": ["refs/heads/main"], "actions": ["update","force","delete"],
 *                 "runs": ["release-*"], "effect": "deny", "reason": "main is protected",
 *                 "mode": "enforce" | "evaluate", "hold": 300,
 *                 "paths": ["CODEOWNERS"], "secrets": true, ...} ],
 *     "secrets": {"patterns": [{"name", "regex"}], "allow": ["<fingerprint>"]},
 *     "signing": {"allowed_signers": "FILE", "gpg_keyring": "FILE"},
 *     "state": {"postgres": "postgresql:///refgate?host=/run/postgresql"}
 *   }
 *
 * listen: "a.b.c.d:port" or "[v6]:port", numeric addresses only.
 * upstreams: optional. `host` is one path segment of [A-Za-z0-9._-] (no
 *   leading dot), unique. `url` is `file:///abs/dir`, a directory path
 *   (relative to the file), or an `http://` / `https://` URL. Local
 *   directories must exist when the config loads. Only http(s) upstreams
 *   may also carry "credentials" and "read_credentials" (object or string),
 *   "ca_file" (string), "connect_timeout" and "idle_timeout" (seconds);
 *   they are type-checked now and used by forwarding.
 * rules: optional; every selector is optional and matches anything when
 *   absent. `repos` globs match "<host>/<path>" without ".git", `refs`
 *   globs match full ref names, `runs` globs match the run name the push's
 *   token carries (`refgate token mint --run`, `refgate run --run`), all in
 *   the dialect of rg_glob_match. A rule with `runs` never matches a push
 *   whose run name is unknown (evaluation without one: `refgate policy
 *   check` without --run); a rule without `runs` matches every run. Deny still
 *   wins, so a run's exception is an allow with `runs` where the other
 *   runs fall to the default or to a weaker rule, never to a deny. `effect` is
 *   required; `mode` defaults to "enforce"; `name` defaults to
 *   "rules[<index>]", names are unique and "default" is reserved. `hold`
 *   (ask rules only; seconds or "90s", "10m"; 1 s..1 h) keeps a push the rule
 *   asks about open until its approval is decided or the time is up, when
 *   the client speaks side-band (gateway/approve.h). Patterns
 *   that can never match (empty segments, a repo ending in .git or naming
 *   no configured host, a ref outside refs, `***`, a `**` that is not a
 *   whole segment, `[` or `\`; in `runs`, a character no run name holds:
 *   anything but printable ASCII without spaces) are errors rather than
 *   dead rules; `refgate policy lint` finds the subtler ones.
 * limits: optional, every key optional; what strangers' connections and
 *   bodies may cost the gateway (defaults in brackets):
 *   "connections" [4096]      open connections at most (2..1048576);
 *   "unauthenticated" [3072]  connections whose request headers are not yet
 *                             complete and authorised; past it the oldest
 *                             such connection is cut, so the rest of
 *                             "connections" is always left for pushers
 *                             (1..connections-1);
 *   "per_token" [16]          concurrent requests per run token (429 past it);
 *   "header_seconds" [10]     from accept (or the end of the previous request
 *                             on a kept-alive connection) to complete request
 *                             headers; trickling does not extend it (1..3600);
 *   "idle_seconds" [60]       silence allowed between bytes (1..3600);
 *   "spool_bytes" [8 GiB]     disk all concurrent requests may spool (503 past it);
 *   "inflate_ratio" [100]     decoded:compressed ratio a gzip body may reach
 *                             after its first MiB (413 past it; 2..100000);
 *   "inspect_bytes" [4 GiB]   inflated object bytes the inspection of one push
 *                             for content conditions may read (1 MiB..);
 *   "inspect_seconds" [300]   wall time it may take (1..3600); past either,
 *                             the conditions are unknown and deny rules hold.
 * Content conditions on rules ("paths", "max_file_bytes", "max_path_length",
 *   "secrets", "author_email_not", "committer_email_not", "message_not",
 *   "merge_commits", "unsigned") and the top-level "secrets" and "signing"
 *   objects: see config/conditions.h. A rule with conditions matches only
 *   when its selectors match and every condition holds.
 * control: optional, every key optional; the local control socket that
 *   mints and revokes run tokens for `refgate run` (gateway/control.h):
 *   "socket" [<state_dir>/control.sock]  a unix socket path (relative to the
 *                             file); it must fit sun_path (107 bytes); when
 *                             the default does not, there is no socket (NULL);
 *   "users" [[]]              user names or numeric uids also allowed (the
 *                             gateway's own uid always is);
 *   "groups" [[]]             group names or numeric gids whose members are
 *                             allowed (primary or supplementary);
 *   "max_ttl" ["12h"]         the longest lifetime a minted token may ask
 *                             for: seconds, or "90s", "30m", "2h", "7d"
 *                             (1 s..7 days);
 *   "url" [none]              the gateway's URL as runs reach it, for
 *                             `refgate run` when it cannot read <state_dir>/url
 *                             and the gateway does not say (http:// only).
 * approvals: optional; what an `ask` rule's push waits for (see
 *   approvals/approvals.h; kept in <state_dir>/approvals):
 *   "expire" ["24h"]          how long an approval lives: a pending one from
 *                             the push that asked, a decided one from its
 *                             decision; seconds, or "90s", "30m", "24h", "7d"
 *                             (1 s..30 days).
 * admin: optional; the operator's listener for GET /healthz and GET /metrics
 *   (gateway/admin.h), never on the push port every run reaches:
 *   "listen"                  required in "admin"; host:port as for
 *                             "listen" (port 0 picks a free port; its URL is
 *                             written to <state_dir>/admin.url); it may not
 *                             be the push address itself.
 * console: optional; the review console (console/console.h), off without it:
 *   "listen"                  host:port of its own listener, written like
 *                             "listen" (port 0: any free port; never the
 *                             gateway's port); its URL goes to
 *                             <state_dir>/console.url.
 * state: optional; files under state_dir without it, a shared PostgreSQL
 *   database with it (config/state.h).
 */
#ifndef RG_CONFIG_CONFIG_H
#define RG_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "config/conditions.h"
#include "config/policy.h"
#include "config/state.h"
#include "util/error.h"
#include "util/glob.h"

typedef enum config_action {
    CONFIG_ACTION_CREATE = 1 << 0,
    CONFIG_ACTION_UPDATE = 1 << 1, /* fast-forward */
    CONFIG_ACTION_FORCE = 1 << 2,  /* old is not an ancestor of new */
    CONFIG_ACTION_DELETE = 1 << 3,
} config_action;

#define CONFIG_ACTION_ALL 0xf

/* Ordered so that a larger value wins: deny over ask over allow. */
typedef enum config_effect {
    CONFIG_ALLOW = 0,
    CONFIG_ASK = 1,
    CONFIG_DENY = 2,
} config_effect;

typedef struct config_rule {
    char *name;   /* "name", or "rules[<index>]" when absent */
    char **repos; /* NULL: any repo */
    size_t nrepos;
    char **refs; /* NULL: any ref */
    size_t nrefs;
    char **runs; /* NULL: any run, and pushes whose run is unknown */
    size_t nruns;
    /*
     * For each pattern above (NULL when the selector is absent), worked out
     * at load so evaluation turns most patterns down in a few byte
     * comparisons.
     */
    rg_glob_ends *repos_ends, *refs_ends, *runs_ends;
    unsigned actions; /* bitmask of config_action; CONFIG_ACTION_ALL when absent */
    config_effect effect;
    char *reason;           /* may be NULL */
    int evaluate_only;      /* "mode": "evaluate": logged, never enforced */
    unsigned hold;          /* "hold": seconds an ask keeps the push open; 0: refuse at once */
    config_conditions cond; /* content conditions (config/conditions.h); cond.set 0: none */
} config_rule;

/* How the gateway authenticates to an upstream (remote upstreams only). */
typedef enum config_cred_type {
    CONFIG_CRED_NONE = 0,   /* {"type": "none"}, and the default */
    CONFIG_CRED_STATIC,     /* {"type": "static", "username", "token_file"} */
    CONFIG_CRED_GITHUB_APP, /* {"type": "github-app", "app_id", "private_key_file",
                               "api_url", "installation_id"} */
} config_cred_type;

typedef struct config_credentials {
    config_cred_type type;
    char *username;            /* static: the Basic user name (default "x-access-token") */
    char *token_file;          /* static: absolute path of the secret */
    long long app_id;          /* github-app */
    char *private_key_file;    /* github-app: absolute path of the PEM key */
    char *api_url;             /* github-app: default "https://api.github.com" */
    long long installation_id; /* github-app: 0 = look it up per repository */
} config_credentials;

typedef struct config_upstream {
    char *host; /* the first path segment clients use */
    char *url;  /* as configured; for remote upstreams without a trailing '/' */
    char *root; /* for file:// upstreams, the absolute directory; else NULL */
    /* Remote (http/https) upstreams only: */
    config_credentials credentials;      /* for forwarded pushes */
    config_credentials read_credentials; /* advertisements, fetches, the mirror;
                                            a copy of `credentials` when absent */
    int has_read_credentials;            /* "read_credentials" was given */
    char *ca_file;                       /* absolute, or NULL: the system CAs */
    long connect_timeout;                /* seconds (default 10) */
    long idle_timeout;                   /* seconds without progress (default 60) */
} config_upstream;

/* See "limits" above; every field is set (defaults filled in). */
typedef struct config_limits {
    unsigned connections;
    unsigned unauthenticated;
    unsigned per_token;
    unsigned header_seconds;
    unsigned idle_seconds;
    uint64_t spool_bytes;
    unsigned inflate_ratio;
    uint64_t inspect_bytes;   /* inflated bytes one push's content inspection may read */
    unsigned inspect_seconds; /* wall time it may take */
} config_limits;

/* See "control" above; every field is set (defaults filled in). */
typedef struct config_control {
    char *socket; /* absolute; NULL when the default path is too long for a socket */
    char **users; /* as configured: names or decimal uids */
    size_t nusers;
    char **groups; /* names or decimal gids */
    size_t ngroups;
    long long max_ttl; /* seconds */
    char *url;         /* NULL when not configured */
} config_control;

/* See "approvals" above; every field is set (defaults filled in). */
typedef struct config_approvals {
    long long expire; /* seconds */
} config_approvals;

/* See "admin" above. */
typedef struct config_admin {
    char *listen_host;    /* NULL: no admin listener */
    unsigned listen_port; /* 0: any free port */
} config_admin;
/* See "console" above. */
typedef struct config_console {
    char *listen_host; /* NULL: no console */
    unsigned listen_port;
} config_console;

typedef struct config_model {
    char *path; /* the file it was loaded from (absolute) */
    char *listen_host;
    unsigned listen_port; /* 0: any free port */
    char *state_dir;      /* absolute */
    config_effect default_effect;
    uint64_t max_body_bytes;
    config_limits limits;
    config_control control;
    config_approvals approvals;
    config_admin admin;
    config_console console;
    config_upstream *upstreams;
    size_t nupstreams;
    config_rule *rules;
    size_t nrules;
    config_secrets secrets; /* scanner compiled when a rule has "secrets": true */
    config_signing signing; /* the keys "unsigned" verifies against */
    config_state state;     /* "state": where shared state lives (config/state.h) */
    /* The policy that decides (config/policy.h): the digest of this
     * model's policy part, and the published version it came from (0: the
     * file's own). */
    char policy_digest[CONFIG_POLICY_DIGEST_SIZE];
    long long policy_version;
    json_t *source; /* the top-level object loaded, for config_with_policy */
} config_model;

/*
 * Load the config at `path`. On success *out is the caller's, freed with
 * config_free; on failure *out is NULL and err says why (RG_E_CONFIG
 * for a bad config, a negative errno when the file cannot be read).
 */
int config_load(config_model **out, const char *path, rg_error *err);

/*
 * Parse a config from memory; `path` names it in errors and anchors paths
 * (it need not exist, but its directory must for local upstreams to resolve).
 */
int config_parse(config_model **out, const char *json, size_t len, const char *path, rg_error *err);

/*
 * The host's config `local` with its policy part replaced by `policy` (an
 * object of policy keys, config_policy_parse), loaded exactly as a file
 * would be: the rules are checked against local's upstreams, local's
 * signing keys and so on. `label` names the policy in errors ("published
 * policy v3: rules[1]: ..."); `version` goes to policy_version. Paths stay
 * relative to local's file.
 */
int config_with_policy(config_model **out, const config_model *local, const json_t *policy,
                       const char *label, long long version, rg_error *err);

void config_free(config_model *cfg);

/* The upstream whose host is `host`, or NULL. */
const config_upstream *config_find_upstream(const config_model *cfg, const char *host);

/* Static names as the config spells them; "unknown" for other values. */
const char *config_action_name(config_action a);
const char *config_effect_name(config_effect e);

#endif
