/*
 * Linting a config's rules (see lint.h). A pattern is "dead" when no name
 * the gateway ever evaluates can match it: repo names pass the gateway's
 * routing (plain segments of letters, digits and `._-+~`, at most 16 after
 * the host, the host a configured upstream), ref names its check-ref-format
 * (git/push.c), run names the token's limit. Only literal characters of a
 * pattern are judged, since a wildcard may stand for anything allowed.
 */
#include "policy/lint.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy/contain.h"
#include "util/glob.h"

/* The most path segments after the host that routing accepts (gateway/route.c). */
#define REPO_PATH_SEGMENTS_MAX 16

/* ------------------------------------------------------------------------ */
/* Dead patterns                                                            */
/* ------------------------------------------------------------------------ */

static int is_wild(char c)
{
    return c == '*' || c == '?';
}

static int is_globstar_seg(const char *seg, size_t len)
{
    return len == 2 && seg[0] == '*' && seg[1] == '*';
}

/* Why no routed repo name matches `pat`, or NULL when one may. */
static const char *repo_dead(const config_model *cfg, const char *pat, char *why, size_t whysz)
{
    char host[256];
    const char *seg = pat;
    size_t len, i, nseg = 0;

    for (;; seg += len + 1) {
        len = strcspn(seg, "/");
        if (!is_globstar_seg(seg, len)) {
            nseg++;
            if (seg[0] == '.' || seg[0] == '-')
                return "a repository path segment never starts with '.' or '-'";
            for (i = 0; i < len; i++) {
                char c = seg[i];

                if (!is_wild(c) && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                     (c >= '0' && c <= '9') || strchr("._-+~", c) != NULL))
                    return "repository names hold only letters, digits and . _ - + ~";
            }
        }
        if (seg[len] == '\0')
            break;
    }
    if (nseg > REPO_PATH_SEGMENTS_MAX + 1)
        return "repository paths have at most 16 segments after the host";
    len = strcspn(pat, "/");
    if (is_globstar_seg(pat, len) || len >= sizeof(host))
        return NULL;
    memcpy(host, pat, len);
    host[len] = '\0';
    for (i = 0; i < cfg->nupstreams; i++)
        if (rg_glob_match(host, cfg->upstreams[i].host))
            return NULL;
    snprintf(why, whysz, "no configured upstream host matches \"%s\"", host);
    return why;
}

/* Why no ref name the gateway accepts (git/push.c) matches `pat`, or NULL. */
static const char *ref_dead(const char *pat)
{
    const char *seg = pat;
    size_t len, i, nseg = 0;
    int globstar = 0;

    for (i = 0; pat[i] != '\0'; i++) {
        unsigned char c = (unsigned char)pat[i];

        if (c < 0x20 || c == 0x7f || strchr(" ~^:", c) != NULL)
            return "ref names never hold a control character, space, ~, ^ or :";
        if (c == '.' && pat[i + 1] == '.')
            return "ref names never hold ..";
        if (c == '@' && pat[i + 1] == '{')
            return "ref names never hold @{";
    }
    for (;; seg += len + 1) {
        len = strcspn(seg, "/");
        if (is_globstar_seg(seg, len)) {
            globstar = 1;
        } else {
            nseg++;
            if (seg[0] == '.')
                return "a ref name's component never starts with '.'";
            if (len >= 5 && !memcmp(seg + len - 5, ".lock", 5))
                return "a ref name's component never ends with .lock";
        }
        if (seg[len] == '\0')
            break;
    }
    if (!globstar && nseg < 2)
        return "ref names have at least two components (refs/...)";
    if (pat[strlen(pat) - 1] == '.')
        return "ref names never end with '.'";
    return NULL;
}

/* Why no run name matches `pat`, or NULL. */
static const char *run_dead(const char *pat, char *why, size_t whysz)
{
    size_t i, least = 0;

    /* Every character but a star and a separator (which `**` may absorb) takes one byte. */
    for (i = 0; pat[i] != '\0'; i++)
        if (pat[i] != '*' && pat[i] != '/')
            least++;
    if (least <= POLICY_LINT_RUN_MAX)
        return NULL;
    snprintf(why, whysz, "it needs at least %zu characters and run names have at most %d", least,
             POLICY_LINT_RUN_MAX);
    return why;
}

typedef enum selector_kind {
    SEL_REPOS,
    SEL_REFS,
    SEL_RUNS,
} selector_kind;

static const char *const selector_key[] = {"repos", "refs", "runs"};

static const char *pattern_dead(const config_model *cfg, selector_kind k, const char *pat,
                                char *why, size_t whysz)
{
    switch (k) {
    case SEL_REPOS:
        return repo_dead(cfg, pat, why, whysz);
    case SEL_REFS:
        return ref_dead(pat);
    case SEL_RUNS:
        return run_dead(pat, why, whysz);
    }
    return NULL;
}

static void selector_of(char *const **globs, size_t *n, const config_rule *r, selector_kind k)
{
    *globs = k == SEL_REPOS ? r->repos : k == SEL_REFS ? r->refs : r->runs;
    *n = k == SEL_REPOS ? r->nrepos : k == SEL_REFS ? r->nrefs : r->nruns;
}

/* The selector none of whose patterns can match, or -1 when the rule can match. */
static int never_matching_selector(const config_model *cfg, const config_rule *r)
{
    char why[256];
    char *const *globs;
    size_t n, i;
    int k;

    for (k = SEL_REPOS; k <= SEL_RUNS; k++) {
        selector_of(&globs, &n, r, (selector_kind)k);
        if (globs == NULL)
            continue;
        for (i = 0; i < n; i++)
            if (pattern_dead(cfg, (selector_kind)k, globs[i], why, sizeof(why)) == NULL)
                break;
        if (i == n)
            return k;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Coverage                                                                 */
/* ------------------------------------------------------------------------ */

/* Every pattern of narrow's selector within one of broad's; NULL is "any". */
static int selector_covers(char *const *broad, size_t nbroad, char *const *narrow, size_t nnarrow,
                           int absent_is_anything)
{
    size_t i, j;

    if (broad == NULL)
        return 1;
    if (narrow == NULL) {
        /* An absent `runs` also matches a push whose run is unknown, which no pattern does. */
        if (!absent_is_anything)
            return 0;
        for (j = 0; j < nbroad; j++)
            if (policy_glob_contains(broad[j], "**"))
                return 1;
        return 0;
    }
    for (i = 0; i < nnarrow; i++) {
        for (j = 0; j < nbroad; j++)
            if (policy_glob_contains(broad[j], narrow[i]))
                break;
        if (j == nbroad)
            return 0;
    }
    return 1;
}

int policy_rule_covers(const config_rule *broad, const config_rule *narrow)
{
    /* A rule with content conditions matches only some pushes: it covers nothing. */
    return broad->cond.set == 0 && (narrow->actions & ~broad->actions) == 0 &&
           selector_covers(broad->repos, broad->nrepos, narrow->repos, narrow->nrepos, 1) &&
           selector_covers(broad->refs, broad->nrefs, narrow->refs, narrow->nrefs, 1) &&
           selector_covers(broad->runs, broad->nruns, narrow->runs, narrow->nruns, 0);
}

/* ------------------------------------------------------------------------ */
/* Findings                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct lint_run {
    const config_model *cfg;
    policy_lint_fn fn;
    void *arg;
    size_t count;
} lint_run;

static void report(lint_run *lr, policy_lint_kind kind, policy_lint_level level, size_t rule,
                   int other, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void report(lint_run *lr, policy_lint_kind kind, policy_lint_level level, size_t rule,
                   int other, const char *fmt, ...)
{
    policy_lint_finding f;
    va_list ap;

    memset(&f, 0, sizeof(f));
    f.kind = kind;
    f.level = level;
    f.rule = rule;
    f.other = other;
    va_start(ap, fmt);
    vsnprintf(f.message, sizeof(f.message), fmt, ap);
    va_end(ap);
    lr->count++;
    if (lr->fn != NULL)
        lr->fn(&f, lr->arg);
}

/* Dead patterns of one rule; returns 1 when the whole rule can never match. */
static int lint_dead(lint_run *lr, size_t ri)
{
    const config_rule *r = &lr->cfg->rules[ri];
    char why[256];
    const char *dead;
    char *const *globs;
    size_t n, i;
    int k = never_matching_selector(lr->cfg, r);

    if (k >= 0) {
        selector_of(&globs, &n, r, (selector_kind)k);
        dead = pattern_dead(lr->cfg, (selector_kind)k, globs[0], why, sizeof(why));
        report(lr, POLICY_LINT_NEVER_MATCHES, POLICY_LINT_ERROR, ri, -1,
               "no pattern of \"%s\" can match (\"%s\": %s)", selector_key[k], globs[0], dead);
        return 1;
    }
    for (k = SEL_REPOS; k <= SEL_RUNS; k++) {
        selector_of(&globs, &n, r, (selector_kind)k);
        for (i = 0; globs != NULL && i < n; i++) {
            dead = pattern_dead(lr->cfg, (selector_kind)k, globs[i], why, sizeof(why));
            if (dead != NULL)
                report(lr, POLICY_LINT_DEAD_PATTERN, POLICY_LINT_WARNING, ri, -1,
                       "%s[%zu] \"%s\" never matches: %s", selector_key[k], i, globs[i], dead);
        }
    }
    return 0;
}

static const char *effect_verb(config_effect e)
{
    return e == CONFIG_DENY ? "denies" : e == CONFIG_ASK ? "asks for approval of" : "allows";
}

/*
 * A rule that never decides: a stronger rule in the same mode covers it
 * (deny wins wherever it is), or an earlier one with the same effect does
 * (among equals the first decides).
 */
static void lint_overridden(lint_run *lr, size_t ri)
{
    const config_model *cfg = lr->cfg;
    const config_rule *r = &cfg->rules[ri], *o;
    size_t j;

    for (j = 0; j < cfg->nrules; j++) {
        o = &cfg->rules[j];
        if (j == ri || o->evaluate_only != r->evaluate_only || o->effect <= r->effect ||
            !policy_rule_covers(o, r) || never_matching_selector(cfg, o) >= 0)
            continue;
        report(lr, POLICY_LINT_SHADOWED, POLICY_LINT_ERROR, ri, (int)j,
               "never decides: rule \"%s\" (rules[%zu]) %s every update this rule %s, and %s "
               "wins",
               o->name, j, effect_verb(o->effect), effect_verb(r->effect),
               config_effect_name(o->effect));
        return;
    }
    for (j = 0; j < ri; j++) {
        o = &cfg->rules[j];
        if (o->evaluate_only != r->evaluate_only || o->effect != r->effect ||
            !policy_rule_covers(o, r) || never_matching_selector(cfg, o) >= 0)
            continue;
        if (policy_rule_covers(r, o))
            report(lr, POLICY_LINT_DUPLICATE, POLICY_LINT_WARNING, ri, (int)j,
                   "duplicate of rule \"%s\" (rules[%zu]): the same selectors and effect, and "
                   "the first decides",
                   o->name, j);
        else
            report(lr, POLICY_LINT_REDUNDANT, POLICY_LINT_WARNING, ri, (int)j,
                   "never decides: rule \"%s\" (rules[%zu]) comes first and %s every update "
                   "this rule does",
                   o->name, j, effect_verb(o->effect));
        return;
    }
}

size_t policy_lint(const config_model *cfg, policy_lint_fn fn, void *arg)
{
    lint_run lr = {cfg, fn, arg, 0};
    const config_rule *r;
    size_t i;

    if (cfg == NULL)
        return 0;
    for (i = 0; i < cfg->nrules; i++) {
        r = &cfg->rules[i];
        if (lint_dead(&lr, i))
            continue;
        lint_overridden(&lr, i);
        /* A rule with conditions says what in the push held, so it has a reason. */
        if (!r->evaluate_only && r->effect != CONFIG_ALLOW && r->reason == NULL && r->cond.set == 0)
            report(&lr, POLICY_LINT_NO_REASON, POLICY_LINT_WARNING, i, -1,
                   "%s without a reason: the pusher is told which rule decided, not why",
                   r->effect == CONFIG_DENY ? "denies" : "asks for approval");
    }
    return lr.count;
}

const char *policy_lint_kind_name(policy_lint_kind k)
{
    switch (k) {
    case POLICY_LINT_NEVER_MATCHES:
        return "never-matches";
    case POLICY_LINT_DEAD_PATTERN:
        return "dead-pattern";
    case POLICY_LINT_SHADOWED:
        return "shadowed";
    case POLICY_LINT_DUPLICATE:
        return "duplicate";
    case POLICY_LINT_REDUNDANT:
        return "redundant";
    case POLICY_LINT_NO_REASON:
        return "no-reason";
    }
    return "unknown";
}

const char *policy_lint_level_name(policy_lint_level l)
{
    return l == POLICY_LINT_ERROR ? "error" : "warning";
}
