/*
 * `refgate policy`: ask the rules a question without pushing.
 *
 * `check` decides one ref update the way the gateway would and explains it
 * rule by rule (compare `gitolite access -s`): for each rule, whether it
 * matched and, when not, every selector that failed; which rule decided;
 * what the evaluate-mode rules alone would have said. Given old and new ids
 * and a repository, it classifies the update as the gateway does (a zero
 * id is a create or delete, an update is a force unless old is an ancestor
 * of new, and an ancestry that cannot be computed counts as a force) and
 * follows a symbolic ref to the ref it moves. Exit status: 0 allow,
 * 1 deny, 2 ask (which the gateway refuses until the update is approved), 3 error.
 *
 * `lint` reports what policy/lint.c finds. Exit status: 0 clean, 1 a
 * finding at or above --fail-on (default: any), 2 usage or a bad config.
 *
 * `publish` stores the policy part of a config (config/policy.h), or a
 * policy file, in the shared database as its next version, after loading
 * it over the config exactly as a gateway would; `current` says which
 * policy is in force: the database's current version, or the digest of a
 * file-store config's own policy. Exit status: 0 done (publishing the
 * current digest again is a no-op, and says so), 1 failed or none
 * published, 2 usage.
 *
 * Nothing here reads or writes the gateway's state directory.
 */
#include <git2.h>
#include <jansson.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "config/config.h"
#include "config/policy.h"
#include "db/policies.h"
#include "git/symref.h"
#include "policy/eval.h"
#include "policy/lint.h"
#include "policy/plan.h"
#include "util/buf.h"
#include "util/fs.h"

#define CHECK_ALLOW 0
#define CHECK_DENY  1
#define CHECK_ASK   2
#define CHECK_ERROR 3

#define LINT_CLEAN    0
#define LINT_FINDINGS 1
#define LINT_USAGE    2

/* ------------------------------------------------------------------------ */
/* The rules that decide                                                    */
/* ------------------------------------------------------------------------ */

/*
 * The config whose rules the gateway enforces: the file's own, or with a
 * database the published policy merged over the file, as every gateway
 * there loads it (none published is an error that says so).
 */
static int load_enforced(config_model **out, const char *path, rg_error *err)
{
    config_model *local = NULL;
    db_pool *pool = NULL;
    PGconn *c = NULL;
    db_policy_info info;
    json_t *policy = NULL;
    char label[64];
    int rc;

    *out = NULL;
    rc = config_load(&local, path, err);
    if (rc < 0 || local->state.postgres == NULL) {
        *out = local;
        return rc;
    }
    if ((rc = db_pool_open(&pool, &local->state, err)) < 0 ||
        (rc = db_acquire(pool, &c, err)) < 0 || (rc = db_schema_check(c, err)) < 0 ||
        (rc = db_policy_current(c, &info, err)) < 0)
        goto done;
    if (info.version == 0) {
        rc = rg_error_set(err, RG_E_STATE,
                          "%s uses a database where no policy has been published (gateways on "
                          "it refuse every push): run refgate policy publish",
                          local->path);
        goto done;
    }
    snprintf(label, sizeof(label), "published policy v%lld", info.version);
    if ((rc = db_policy_load(c, &info, &policy, err)) == 0)
        rc = config_with_policy(out, local, policy, label, info.version, err);
done:
    json_decref(policy);
    if (c != NULL)
        db_release(pool, c);
    db_pool_close(pool);
    config_free(local);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* check: classifying the update                                            */
/* ------------------------------------------------------------------------ */

typedef struct check_args {
    const char *config, *repo, *ref, *action, *old_id, *new_id, *git_dir, *run;
    int json;
} check_args;

static int is_zero_id(const char *s)
{
    size_t n = strspn(s, "0");

    return s[n] == '\0' && (n == 40 || n == 64);
}

/* An id or revision in the repository, as a commit's hex id. */
static int resolve_commit(char hex[GIT_OID_HEXSZ + 1], git_repository *repo, const char *what,
                          const char *spec)
{
    git_object *obj = NULL;
    int rc = -1;

    if (git_revparse_single(&obj, repo, spec) < 0) {
        fprintf(stderr, "refgate policy check: %s %s: not found in the repository (%s)\n", what,
                spec, git_error_last() ? git_error_last()->message : "unknown error");
        goto done;
    }
    git_oid_tostr(hex, GIT_OID_HEXSZ + 1, git_object_id(obj));
    rc = 0;
done:
    git_object_free(obj);
    return rc;
}

/*
 * Whether old is an ancestor of new (or new itself). *known is 0 when the
 * gateway could not tell either (an id that is no commit, a broken
 * history): it then decides a force, and so does the check.
 */
static void ancestry(int *known, int *is_ancestor, char *why, size_t whysz, git_repository *repo,
                     const char *old_hex, const char *new_hex)
{
    git_oid old_oid, new_oid;
    git_object *o = NULL, *n = NULL;
    int grc;

    *known = 0;
    *is_ancestor = 0;
    if (git_oid_fromstr(&old_oid, old_hex) < 0 || git_oid_fromstr(&new_oid, new_hex) < 0 ||
        git_object_lookup(&o, repo, &old_oid, GIT_OBJECT_ANY) < 0 ||
        git_object_lookup(&n, repo, &new_oid, GIT_OBJECT_ANY) < 0 ||
        git_object_type(o) != GIT_OBJECT_COMMIT || git_object_type(n) != GIT_OBJECT_COMMIT) {
        snprintf(why, whysz, "ancestry unknown: old and new must both be commits");
        goto done;
    }
    if (git_oid_equal(&old_oid, &new_oid)) {
        *known = *is_ancestor = 1;
        snprintf(why, whysz, "old and new are the same commit");
        goto done;
    }
    grc = git_graph_descendant_of(repo, &new_oid, &old_oid);
    if (grc < 0) {
        snprintf(why, whysz, "ancestry unknown: %s",
                 git_error_last() ? git_error_last()->message : "walking the history failed");
        goto done;
    }
    *known = 1;
    *is_ancestor = grc > 0;
    snprintf(why, whysz, "old %s an ancestor of new", *is_ancestor ? "is" : "is not");
done:
    git_object_free(o);
    git_object_free(n);
}

/*
 * Fill the plan of the one update from the ids: classified as the gateway
 * does, except that ancestry is always computed, so the action shown is
 * exact even where no rule tells an update from a force (the decision is
 * the same either way then).
 */
static int classify_ids(policy_plan_ref *pr, char *why, size_t whysz, const check_args *a,
                        const config_model *cfg, const char *repo_name)
{
    char old_hex[GIT_OID_HEXSZ + 1], new_hex[GIT_OID_HEXSZ + 1], *moves = NULL;
    git_repository *repo = NULL;
    rgit_symrefs *syms = NULL;
    rg_error err = RG_ERROR_INIT;
    int known, is_anc, rc = -1;

    if (git_repository_open_ext(&repo, a->git_dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
        fprintf(stderr, "refgate policy check: --git-dir %s: %s\n", a->git_dir,
                git_error_last() ? git_error_last()->message : "not a repository");
        goto done;
    }
    pr->old_zero = is_zero_id(a->old_id);
    pr->new_zero = is_zero_id(a->new_id);
    if ((!pr->old_zero && resolve_commit(old_hex, repo, "--old", a->old_id) < 0) ||
        (!pr->new_zero && resolve_commit(new_hex, repo, "--new", a->new_id) < 0))
        goto done;
    /* The gateway decides on the ref a symbolic one moves, too. */
    if (rgit_symrefs_open(&syms, git_repository_path(repo), &err) < 0 ||
        rgit_symrefs_resolve(&moves, syms, pr->ref, &err) < 0) {
        fprintf(stderr, "refgate policy check: --ref %s: %s\n", pr->ref, err.msg);
        goto done;
    }
    pr->moves = moves;
    policy_plan_classify(pr, cfg, repo_name);
    if (!pr->invalid && !pr->old_zero && !pr->new_zero) {
        ancestry(&known, &is_anc, why, whysz, repo, old_hex, new_hex);
        pr->needs_ancestry = 1;
        policy_plan_set_ancestry(pr, known, is_anc);
    } else {
        snprintf(why, whysz, "%s",
                 pr->invalid    ? "old and new are both zero"
                 : pr->old_zero ? "old is zero"
                                : "new is zero");
    }
    rc = 0;
done:
    rgit_symrefs_free(syms);
    git_repository_free(repo);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* check: output                                                            */
/* ------------------------------------------------------------------------ */

/* "rules[3] \"name\"" or just the generated name. */
static void rule_label(char *out, size_t outsz, const config_rule *r, size_t i)
{
    char gen[32];

    snprintf(gen, sizeof(gen), "rules[%zu]", i);
    if (!strcmp(r->name, gen))
        snprintf(out, outsz, "%s", gen);
    else
        snprintf(out, outsz, "%s %s", gen, r->name);
}

static void print_patterns(char *const *globs, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        printf("%s%s", i ? ", " : "", globs[i]);
}

static void print_actions(unsigned actions)
{
    unsigned bit;
    int first = 1;

    for (bit = CONFIG_ACTION_CREATE; bit <= CONFIG_ACTION_DELETE; bit <<= 1) {
        if (actions & bit) {
            printf("%s%s", first ? "" : ", ", config_action_name((config_action)bit));
            first = 0;
        }
    }
}

/* One rule's line of the trace: matched (and on what), or every failed selector. */
static void print_trace_rule(const config_rule *r, size_t i, const policy_trace_rule *t,
                             const char *decides, const char *run)
{
    char label[160];
    const char *sep = " ";

    rule_label(label, sizeof(label), r, i);
    printf("  %-28s %-5s%s ", label, config_effect_name(r->effect),
           r->evaluate_only ? " (evaluate mode)" : "");
    if (t->failed == 0) {
        printf("matched");
        if (t->repo_glob >= 0)
            printf(", repo %s", r->repos[t->repo_glob]);
        if (t->ref_glob >= 0)
            printf(", ref %s", r->refs[t->ref_glob]);
        if (t->run_glob >= 0)
            printf(", run %s", r->runs[t->run_glob]);
        if (t->conditions == POLICY_COND_UNKNOWN)
            printf(", conditions unknown without the push's content: assumed to hold");
        printf("%s\n", decides);
        return;
    }
    printf("no:");
    if (t->failed & POLICY_SEL_REPO) {
        printf("%srepo not in [", sep);
        print_patterns(r->repos, r->nrepos);
        printf("]");
        sep = "; ";
    }
    if (t->failed & POLICY_SEL_REF) {
        printf("%sref not in [", sep);
        print_patterns(r->refs, r->nrefs);
        printf("]");
        sep = "; ";
    }
    if (t->failed & POLICY_SEL_ACTION) {
        printf("%saction not in [", sep);
        print_actions(r->actions);
        printf("]");
        sep = "; ";
    }
    if (t->failed & POLICY_SEL_RUN) {
        printf("%srun %s [", sep, run && run[0] ? "not in" : "unknown, the rule wants");
        print_patterns(r->runs, r->nruns);
        printf("]");
        sep = "; ";
    }
    if (t->failed & POLICY_SEL_CONDITIONS)
        printf("%sconditions %s", sep,
               t->conditions == POLICY_COND_UNKNOWN
                   ? "unknown without the push's content: an allow rule's are assumed not to hold"
                   : "do not hold");
    printf("\n");
}

static json_t *patterns_json(char *const *globs, size_t n)
{
    json_t *arr = json_array();
    size_t i;

    for (i = 0; i < n; i++)
        json_array_append_new(arr, json_string(globs[i]));
    return arr;
}

static json_t *trace_rule_json(const config_rule *r, size_t i, const policy_trace_rule *t,
                               int decides)
{
    json_t *o = json_object(), *failed = json_array();
    unsigned bit;

    json_object_set_new(o, "index", json_integer((json_int_t)i));
    json_object_set_new(o, "name", json_string(r->name));
    json_object_set_new(o, "effect", json_string(config_effect_name(r->effect)));
    json_object_set_new(o, "mode", json_string(r->evaluate_only ? "evaluate" : "enforce"));
    json_object_set_new(o, "matched", json_boolean(t->failed == 0));
    for (bit = POLICY_SEL_REPO; bit <= POLICY_SEL_CONDITIONS; bit <<= 1)
        if (t->failed & bit)
            json_array_append_new(failed, json_string(policy_selector_name((policy_selector)bit)));
    json_object_set_new(o, "failed", failed);
    json_object_set_new(o, "repo_pattern",
                        t->repo_glob >= 0 ? json_string(r->repos[t->repo_glob]) : json_null());
    json_object_set_new(o, "ref_pattern",
                        t->ref_glob >= 0 ? json_string(r->refs[t->ref_glob]) : json_null());
    json_object_set_new(o, "run_pattern",
                        t->run_glob >= 0 ? json_string(r->runs[t->run_glob]) : json_null());
    if (r->repos)
        json_object_set_new(o, "repos", patterns_json(r->repos, r->nrepos));
    if (r->refs)
        json_object_set_new(o, "refs", patterns_json(r->refs, r->nrefs));
    if (r->runs)
        json_object_set_new(o, "runs", patterns_json(r->runs, r->nruns));
    if (t->conditions >= 0)
        json_object_set_new(o, "conditions",
                            json_string(t->conditions == POLICY_COND_UNKNOWN ? "unknown"
                                        : t->conditions == POLICY_COND_HOLDS ? "hold"
                                                                             : "do not hold"));
    json_object_set_new(o, "decides", json_boolean(decides));
    return o;
}

/*
 * Trace the evaluation of one name (the ref pushed, or the ref it moves):
 * printed, or appended to `traces` as JSON.
 */
static int trace_name(json_t *traces, const config_model *cfg, const char *repo, const char *ref,
                      const char *run, config_action action)
{
    policy_trace_rule *trace = calloc(cfg->nrules ? cfg->nrules : 1, sizeof(*trace));
    policy_decision d;
    json_t *t, *rules;
    size_t i;

    if (trace == NULL) {
        fprintf(stderr, "refgate policy check: out of memory\n");
        return -1;
    }
    policy_eval_trace(&d, trace, cfg->nrules, cfg, repo, ref, run, action);
    if (traces == NULL) {
        printf("\ntrace for %s (%zu rules):\n", ref, cfg->nrules);
        for (i = 0; i < cfg->nrules; i++)
            print_trace_rule(&cfg->rules[i], i, &trace[i],
                             d.rule_index == (int)i ? "  <- decides"
                             : d.evaluate_rule_name == cfg->rules[i].name
                                 ? "  <- decides among evaluate-mode rules"
                                 : "",
                             run);
        printf("  %-28s %-5s %s\n", "default", config_effect_name(cfg->default_effect),
               d.rule_index < 0 ? "<- decides (no enforced rule matched)"
                                : "(not used: a rule matched)");
    } else {
        t = json_object();
        rules = json_array();
        json_object_set_new(t, "ref", json_string(ref));
        for (i = 0; i < cfg->nrules; i++)
            json_array_append_new(
                rules, trace_rule_json(&cfg->rules[i], i, &trace[i], d.rule_index == (int)i));
        json_object_set_new(t, "rules", rules);
        json_object_set_new(t, "decided_by", json_string(d.rule_name));
        json_array_append_new(traces, t);
    }
    free(trace);
    return 0;
}

static const char *verdict_name(const policy_decision *d)
{
    if (d->effect == CONFIG_ALLOW)
        return "allow";
    return d->rule_effect == CONFIG_ASK ? "ask" : "deny";
}

static int verdict_status(const policy_decision *d)
{
    if (d->effect == CONFIG_ALLOW)
        return CHECK_ALLOW;
    return d->rule_effect == CONFIG_ASK ? CHECK_ASK : CHECK_DENY;
}

static int report_check(const config_model *cfg, const char *repo, const policy_plan_ref *pr,
                        const char *run, const char *why, json_t *root)
{
    const policy_decision *d = &pr->decision;
    const char *action = config_action_name(pr->action);
    json_t *traces = NULL, *ev;

    if (root == NULL) {
        printf("decision: %s\n", verdict_name(d));
        if (d->rule_effect == CONFIG_ASK)
            printf("          (the gateway refuses it until the update is approved: refgate "
                   "approvals)\n");
        if (d->rule_index >= 0)
            printf("rule:     %s (rules[%d])\n", d->rule_name, d->rule_index);
        else if (!strcmp(d->rule_name, "default"))
            printf("rule:     default (no enforced rule matched)\n");
        else
            printf("rule:     %s (refused before any rule)\n", d->rule_name);
        printf("reason:   %s\n", d->reason);
        printf("ref:      %s in %s\n", pr->ref, repo);
        if (pr->moves != NULL)
            printf("          a symbolic ref to %s: both names are decided\n", pr->moves);
        printf("action:   %s%s%s%s\n", action, why[0] ? " (" : "", why, why[0] ? ")" : "");
        if (run && run[0])
            printf("run:      %s\n", run);
        else
            printf("run:      unknown (rules with \"runs\" do not match; see --run)\n");
        if (d->evaluate_matched > 0)
            printf("evaluate: rule %s would %s (evaluate mode: reported, not enforced)\n",
                   d->evaluate_rule_name, config_effect_name(d->evaluate_effect));
        if (cfg->policy_version > 0)
            printf("policy:   version %lld %s (published)\n", cfg->policy_version,
                   cfg->policy_digest);
    } else {
        json_object_set_new(root, "decision", json_string(verdict_name(d)));
        json_object_set_new(root, "rule", json_string(d->rule_name));
        json_object_set_new(root, "rule_index",
                            d->rule_index >= 0 ? json_integer(d->rule_index) : json_null());
        json_object_set_new(root, "reason", json_string(d->reason));
        json_object_set_new(root, "repo", json_string(repo));
        json_object_set_new(root, "ref", json_string(pr->ref));
        json_object_set_new(root, "moves", pr->moves ? json_string(pr->moves) : json_null());
        json_object_set_new(root, "run", run && run[0] ? json_string(run) : json_null());
        json_object_set_new(root, "action", json_string(action));
        json_object_set_new(root, "classified", why[0] ? json_string(why) : json_null());
        json_object_set_new(root, "policy", json_string(cfg->policy_digest));
        json_object_set_new(root, "policy_version",
                            cfg->policy_version > 0 ? json_integer(cfg->policy_version)
                                                    : json_null());
        ev = d->evaluate_matched > 0 ? json_object() : json_null();
        if (d->evaluate_matched > 0) {
            json_object_set_new(ev, "rule", json_string(d->evaluate_rule_name));
            json_object_set_new(ev, "effect", json_string(config_effect_name(d->evaluate_effect)));
        }
        json_object_set_new(root, "evaluate", ev);
        traces = json_array();
        json_object_set_new(root, "traces", traces);
    }
    /* A zero/zero command is refused before any rule is asked. */
    if (pr->invalid)
        return 0;
    if (trace_name(traces, cfg, repo, pr->ref, run, pr->action) < 0)
        return -1;
    if (pr->moves != NULL && strcmp(pr->moves, pr->ref) &&
        trace_name(traces, cfg, repo, pr->moves, run, pr->action) < 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* check                                                                    */
/* ------------------------------------------------------------------------ */

static int parse_action(config_action *out, const char *s)
{
    static const config_action all[] = {CONFIG_ACTION_CREATE, CONFIG_ACTION_UPDATE,
                                        CONFIG_ACTION_FORCE, CONFIG_ACTION_DELETE};
    size_t i;

    for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (!strcmp(s, config_action_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

static const cli_opt check_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(check_args, config), "FILE"},
    {"--repo", CLI_OPT_VALUE, offsetof(check_args, repo), "HOST/PATH"},
    {"--ref", CLI_OPT_VALUE, offsetof(check_args, ref), "REF"},
    {"--action", CLI_OPT_VALUE, offsetof(check_args, action), "ACTION"},
    {"--old", CLI_OPT_VALUE, offsetof(check_args, old_id), "ID"},
    {"--new", CLI_OPT_VALUE, offsetof(check_args, new_id), "ID"},
    {"--git-dir", CLI_OPT_VALUE, offsetof(check_args, git_dir), "DIR"},
    {"--run", CLI_OPT_VALUE, offsetof(check_args, run), "NAME"},
    {"--json", CLI_OPT_FLAG, offsetof(check_args, json), NULL},
};
const cli_cmd cli_cmd_policy_check = {"policy check", CLI_OPTS(check_opts), 0, NULL};

/* A usage mistake of policy check: its own exit status, not 2. */
static int check_usage(const char *msg)
{
    cli_usage_error(&cli_cmd_policy_check, "%s", msg);
    return CHECK_ERROR;
}

static int policy_check(int argc, char **argv)
{
    check_args a = {0};
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    policy_plan_ref pr = {0};
    char repo[512], why[300] = "", host[128];
    const char *slash;
    json_t *root = NULL;
    cli_args args;
    size_t len;
    int m, git_started = 0, status = CHECK_ERROR;

    m = cli_opts_parse(&cli_cmd_policy_check, &a, &args, argc, argv);
    if (m != 0)
        return m == CLI_PARSE_HELP ? 0 : CHECK_ERROR;
    if (args.n > 0) {
        cli_usage_error(&cli_cmd_policy_check, "unexpected argument '%s'", args.v[0]);
        return CHECK_ERROR;
    }
    if (a.config == NULL || a.repo == NULL || a.ref == NULL)
        return check_usage("--config, --repo and --ref are required");
    if ((a.action != NULL) == (a.old_id != NULL || a.new_id != NULL || a.git_dir != NULL))
        return check_usage("give either --action or --old, --new and --git-dir");
    if (a.action == NULL && (a.old_id == NULL || a.new_id == NULL || a.git_dir == NULL))
        return check_usage("--old, --new and --git-dir go together");
    if (strncmp(a.ref, "refs/", 5) != 0 || a.ref[5] == '\0') {
        fprintf(stderr, "refgate policy check: --ref %s: give the full name, e.g. refs/heads/%s\n",
                a.ref, a.ref);
        return CHECK_ERROR;
    }
    len = strlen(a.repo);
    if (len >= 4 && !strcmp(a.repo + len - 4, ".git"))
        len -= 4;
    slash = memchr(a.repo, '/', len);
    if (slash == NULL || slash == a.repo || slash + 1 == a.repo + len || len >= sizeof(repo) ||
        (size_t)(slash - a.repo) >= sizeof(host)) {
        fprintf(stderr,
                "refgate policy check: --repo %s: expected HOST/PATH, e.g. local/acme/app\n",
                a.repo);
        return CHECK_ERROR;
    }
    memcpy(repo, a.repo, len);
    repo[len] = '\0';
    memcpy(host, a.repo, (size_t)(slash - a.repo));
    host[slash - a.repo] = '\0';

    if (load_enforced(&cfg, a.config, &err) < 0) {
        fprintf(stderr, "refgate policy check: %s\n", err.msg);
        return CHECK_ERROR;
    }
    if (config_find_upstream(cfg, host) == NULL) {
        fprintf(stderr, "refgate policy check: --repo %s: '%s' is not an upstream host in %s\n",
                a.repo, host, cfg->path);
        goto done;
    }
    pr.ref = a.ref;
    pr.run = a.run;
    if (a.action != NULL) {
        if (parse_action(&pr.action, a.action) < 0) {
            fprintf(stderr,
                    "refgate policy check: --action %s: expected create, update, force or "
                    "delete\n",
                    a.action);
            goto done;
        }
        pr.classified = 1;
    } else {
        if (git_libgit2_init() < 0) {
            fprintf(stderr, "refgate policy check: libgit2 failed to start\n");
            goto done;
        }
        git_started = 1;
        if (classify_ids(&pr, why, sizeof(why), &a, cfg, repo) < 0)
            goto done;
    }
    policy_plan_decide(&pr, cfg, repo);
    if (a.json)
        root = json_object();
    if (report_check(cfg, repo, &pr, a.run, why, root) < 0) {
        status = CHECK_ERROR;
        goto done;
    }
    if (root != NULL && (json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0 ||
                         putchar('\n') == EOF)) {
        status = CHECK_ERROR;
        goto done;
    }
    status = verdict_status(&pr.decision);
done:
    free((char *)pr.moves);
    if (git_started)
        git_libgit2_shutdown();
    json_decref(root);
    config_free(cfg);
    if (fflush(stdout) != 0)
        status = CHECK_ERROR;
    return status;
}

/* ------------------------------------------------------------------------ */
/* lint                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct lint_out {
    const config_model *cfg;
    json_t *json; /* NULL: text */
    size_t errors, warnings;
} lint_out;

static void on_finding(const policy_lint_finding *f, void *arg)
{
    lint_out *o = arg;
    const config_rule *r = &o->cfg->rules[f->rule];
    char label[160];
    json_t *j;

    if (f->level == POLICY_LINT_ERROR)
        o->errors++;
    else
        o->warnings++;
    if (o->json == NULL) {
        rule_label(label, sizeof(label), r, f->rule);
        printf("%s: %s: %s: %s: %s\n", o->cfg->path, label, policy_lint_level_name(f->level),
               policy_lint_kind_name(f->kind), f->message);
        return;
    }
    j = json_object();
    json_object_set_new(j, "rule_index", json_integer((json_int_t)f->rule));
    json_object_set_new(j, "rule", json_string(r->name));
    json_object_set_new(j, "level", json_string(policy_lint_level_name(f->level)));
    json_object_set_new(j, "kind", json_string(policy_lint_kind_name(f->kind)));
    json_object_set_new(j, "other",
                        f->other >= 0 ? json_string(o->cfg->rules[f->other].name) : json_null());
    json_object_set_new(j, "message", json_string(f->message));
    json_array_append_new(o->json, j);
}

typedef struct lint_opts {
    const char *config, *fail_on;
    int json;
} lint_opts;

static const cli_opt lint_opts_table[] = {
    {"--config", CLI_OPT_VALUE, offsetof(lint_opts, config), "FILE"},
    {"--fail-on", CLI_OPT_VALUE, offsetof(lint_opts, fail_on), "LEVEL"},
    {"--json", CLI_OPT_FLAG, offsetof(lint_opts, json), NULL},
};
const cli_cmd cli_cmd_policy_lint = {"policy lint", CLI_OPTS(lint_opts_table), 0, NULL};

static int policy_lint_cmd(int argc, char **argv)
{
    const char *config_path = NULL, *fail_on = NULL;
    lint_opts o = {0};
    cli_args args;
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    lint_out out = {0};
    int m, json = 0, status = LINT_USAGE;

    m = cli_opts_parse(&cli_cmd_policy_lint, &o, &args, argc, argv);
    if (m != 0)
        return cli_opts_exit(m);
    if (args.n > 0)
        return cli_usage_error(&cli_cmd_policy_lint, "unexpected argument '%s'", args.v[0]);
    config_path = o.config;
    fail_on = o.fail_on;
    json = o.json;
    if (config_path == NULL)
        return cli_usage_error(&cli_cmd_policy_lint, "--config is required");
    if (fail_on != NULL && strcmp(fail_on, "warning") && strcmp(fail_on, "error")) {
        fprintf(stderr, "refgate policy lint: --fail-on %s: expected warning or error\n", fail_on);
        return LINT_USAGE;
    }
    if (load_enforced(&cfg, config_path, &err) < 0) {
        fprintf(stderr, "refgate policy lint: %s\n", err.msg);
        return LINT_USAGE;
    }
    out.cfg = cfg;
    if (json)
        out.json = json_array();
    policy_lint(cfg, on_finding, &out);
    if (json) {
        if (json_dumpf(out.json, stdout, JSON_INDENT(2)) < 0 || putchar('\n') == EOF)
            goto done;
    } else if (out.errors + out.warnings == 0) {
        printf("%s: %zu rules, no findings\n", cfg->path, cfg->nrules);
    } else {
        printf("%zu error%s, %zu warning%s\n", out.errors, out.errors == 1 ? "" : "s", out.warnings,
               out.warnings == 1 ? "" : "s");
    }
    if (fail_on != NULL && !strcmp(fail_on, "error"))
        status = out.errors ? LINT_FINDINGS : LINT_CLEAN;
    else
        status = out.errors + out.warnings ? LINT_FINDINGS : LINT_CLEAN;
done:
    json_decref(out.json);
    config_free(cfg);
    if (fflush(stdout) != 0)
        status = LINT_USAGE;
    return status;
}

/* ------------------------------------------------------------------------ */
/* publish and current                                                      */
/* ------------------------------------------------------------------------ */

#define PUBLISH_OK     0
#define PUBLISH_FAILED 1

typedef struct shared_args {
    const char *config, *policy;
    int json;
} shared_args;

static const cli_opt publish_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(shared_args, config), "FILE"},
    {"--policy", CLI_OPT_VALUE, offsetof(shared_args, policy), "POLICYFILE"},
};
static const cli_opt current_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(shared_args, config), "FILE"},
    {"--json", CLI_OPT_FLAG, offsetof(shared_args, json), NULL},
};
const cli_cmd cli_cmd_policy_publish = {"policy publish", CLI_OPTS(publish_opts), 0, NULL};
const cli_cmd cli_cmd_policy_current = {"policy current", CLI_OPTS(current_opts), 0, NULL};

/* publish's or current's options: 0, 1 after help, -1 after a mistake (said). */
static int shared_parse(shared_args *a, int argc, char **argv, int publish)
{
    const cli_cmd *cmd = publish ? &cli_cmd_policy_publish : &cli_cmd_policy_current;
    cli_args args;
    int rc = cli_opts_parse(cmd, a, &args, argc, argv);

    if (rc != 0)
        return rc == CLI_PARSE_HELP ? 1 : -1;
    if (args.n > 0) {
        cli_usage_error(cmd, "unexpected argument '%s'", args.v[0]);
        return -1;
    }
    if (a->config == NULL) {
        cli_usage_error(cmd, "--config is required");
        return -1;
    }
    return 0;
}

/* Who publishes, as the row names them: user@host. */
static void publisher(char *out, size_t outsz)
{
    const struct passwd *pw = getpwuid(geteuid());
    char host[64] = "";

    gethostname(host, sizeof(host) - 1);
    if (pw != NULL)
        snprintf(out, outsz, "%s@%s", pw->pw_name, host);
    else
        snprintf(out, outsz, "%ld@%s", (long)geteuid(), host);
}

/* The policy to publish: POLICYFILE's object, or the config's policy part. */
static int publish_read(json_t **out, const config_model *cfg, const char *path, rg_error *err)
{
    rg_buf text = RG_BUF_INIT(CONFIG_POLICY_MAX_BYTES);
    int rc;

    if (path == NULL)
        return config_policy_extract(out, cfg->source, err);
    rc = rg_fs_read_file(&text, path, err);
    if (rc == 0)
        rc = config_policy_parse(out, text.data, text.len, path, err);
    rg_buf_free(&text);
    return rc;
}

static int policy_publish(int argc, char **argv)
{
    static const char prog[] = "refgate policy publish";
    shared_args a = {0};
    config_model *cfg = NULL, *merged = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *policy = NULL;
    db_pool *pool = NULL;
    db_policy_info cur;
    char digest[CONFIG_POLICY_DIGEST_SIZE], by[128], *body = NULL;
    size_t len;
    int rc, unchanged = 0, status = PUBLISH_FAILED;

    if ((rc = shared_parse(&a, argc, argv, 1)) != 0)
        return rc > 0 ? 0 : LINT_USAGE;
    if (config_load(&cfg, a.config, &err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        return PUBLISH_FAILED;
    }
    if (cfg->state.postgres == NULL) {
        fprintf(stderr,
                "%s: %s has no \"state\": {\"postgres\": ...}: there is no database to "
                "publish to (a file-store gateway enforces its own config's policy)\n",
                prog, cfg->path);
        goto done;
    }
    /* Loaded as every gateway on the database will load it: over a host's
     * config, rules checked against its upstreams. */
    if (publish_read(&policy, cfg, a.policy, &err) < 0 ||
        config_with_policy(&merged, cfg, policy, a.policy ? a.policy : cfg->path, 0, &err) < 0 ||
        config_policy_canonical(&body, &len, policy, &err) < 0 ||
        config_policy_digest_bytes(digest, body, len, &err) < 0) {
        fprintf(stderr, "%s: not published: %s\n", prog, err.msg);
        goto done;
    }
    publisher(by, sizeof(by));
    if (db_pool_open(&pool, &cfg->state, &err) < 0 ||
        db_policy_publish(pool, &cur, &unchanged, digest, body, len, by, &err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        goto done;
    }
    if (unchanged)
        printf("policy %s is already the current one (version %lld): nothing published\n",
               cur.digest, cur.version);
    else
        printf("published policy version %lld %s (%zu rules)\n", cur.version, cur.digest,
               merged->nrules);
    status = PUBLISH_OK;
done:
    db_pool_close(pool);
    free(body);
    json_decref(policy);
    config_free(merged);
    config_free(cfg);
    if (fflush(stdout) != 0)
        status = PUBLISH_FAILED;
    return status;
}

static int policy_current(int argc, char **argv)
{
    static const char prog[] = "refgate policy current";
    shared_args a = {0};
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    db_pool *pool = NULL;
    db_policy_info cur = {0};
    PGconn *c = NULL;
    json_t *j = NULL;
    int rc, status = PUBLISH_FAILED;

    if ((rc = shared_parse(&a, argc, argv, 0)) != 0)
        return rc > 0 ? 0 : LINT_USAGE;
    if (config_load(&cfg, a.config, &err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        return PUBLISH_FAILED;
    }
    if (cfg->state.postgres == NULL) {
        if (a.json)
            j = json_pack("{s:s, s:s, s:s}", "source", "file", "file", cfg->path, "digest",
                          cfg->policy_digest);
        else
            printf("%s (the policy of %s: no database)\n", cfg->policy_digest, cfg->path);
        status = PUBLISH_OK;
        goto print;
    }
    if (db_pool_open(&pool, &cfg->state, &err) < 0 || db_acquire(pool, &c, &err) < 0 ||
        db_schema_check(c, &err) < 0 || db_policy_current(c, &cur, &err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        goto done;
    }
    if (cur.version == 0) {
        if (a.json)
            j = json_pack("{s:s, s:n}", "source", "database", "version");
        else
            printf("no policy has been published: run refgate policy publish\n");
        goto print;
    }
    status = PUBLISH_OK;
    if (a.json)
        j = json_pack("{s:s, s:I, s:s, s:s, s:s}", "source", "database", "version",
                      (json_int_t)cur.version, "digest", cur.digest, "published", cur.published,
                      "by", cur.by);
    else
        printf("version %lld %s published %s by %s\n", cur.version, cur.digest, cur.published,
               cur.by);
print:
    if (a.json && (j == NULL || json_dumpf(j, stdout, JSON_COMPACT) < 0 || putchar('\n') == EOF))
        status = PUBLISH_FAILED;
done:
    json_decref(j);
    if (c != NULL)
        db_release(pool, c);
    db_pool_close(pool);
    config_free(cfg);
    if (fflush(stdout) != 0)
        status = PUBLISH_FAILED;
    return status;
}

int cli_policy(int argc, char **argv)
{
    if (argc >= 2 && cli_is_help(argv[1])) {
        cli_help_print(stdout, "policy");
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "check"))
        return policy_check(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "lint"))
        return policy_lint_cmd(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "publish"))
        return policy_publish(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "current"))
        return policy_current(argc - 1, argv + 1);
    if (argc < 2)
        fprintf(stderr, "refgate policy: expected check, lint, publish or current (see refgate "
                        "policy --help)\n");
    else
        fprintf(stderr, "refgate policy: unknown subcommand '%s' (see refgate policy --help)\n",
                argv[1]);
    return LINT_USAGE;
}
