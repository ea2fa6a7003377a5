/*
 * The one-push page (pages.h): the push's refs as the audit log recorded
 * them, then for each ref its rule trace (policy_eval_trace run again over
 * the console's configuration from what the record holds) and what the
 * update brought, read back from upstream (refgit.h). Content conditions
 * are not re-computed: the trace says so and the recorded decision stands.
 * Reading upstream is bounded per ref (refgit.h's caps) and per push (the
 * first CONSOLE_PUSH_REFS_READ refs).
 */
#include "console/pages.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/markup.h"
#include "console/refgit.h"
#include "policy/eval.h"

/* The refs of one push whose commits and paths are read from upstream. */
#define CONSOLE_PUSH_REFS_READ 20

/*
 * The config_action an audit record's action names; 0 for none.
 * "update|force" (no rule told them apart) is decided as an update, as the
 * gateway's plan does (policy/plan.h).
 */
static config_action action_bit(const char *name)
{
    if (!strcmp(name, "update|force"))
        return CONFIG_ACTION_UPDATE;
    for (unsigned bit = CONFIG_ACTION_CREATE; bit <= CONFIG_ACTION_DELETE; bit <<= 1)
        if (!strcmp(config_action_name((config_action)bit), name))
            return (config_action)bit;
    return 0;
}

/* Why rule `r` did or did not match, as trace `t` says. */
static int trace_why(rg_buf *b, const config_rule *r, const policy_trace_rule *t)
{
    unsigned failed = t->failed & ~(unsigned)POLICY_SEL_CONDITIONS;
    const char *sep = "";
    int rc = 0;

    if (failed == 0) {
        PUT(b, r->cond.set ? "selectors match; content conditions as recorded" : "matched");
        return rc;
    }
    PUT(b, "not matched: ");
    for (unsigned bit = POLICY_SEL_REPO; bit <= POLICY_SEL_RUN; bit <<= 1) {
        if (!(failed & bit))
            continue;
        PUT(b, sep);
        PUT(b, policy_selector_name((policy_selector)bit));
        sep = ", ";
    }
    PUT(b, failed & (failed - 1) ? " do not match" : " does not match");
    return rc;
}

static int trace_row(rg_buf *b, const char *name, const char *effect, const char *mode,
                     const char *why_markup, const char *decides)
{
    int rc = 0;

    PUT(b, decides[0] ? "<tr class=\"decides\"><td>" : "<tr><td>");
    TEXT(b, name);
    PUT(b, "</td><td>");
    PUT(b, effect);
    PUT(b, "</td><td>");
    PUT(b, mode);
    PUT(b, "</td><td>");
    PUT(b, why_markup);
    PUT(b, "</td><td>");
    PUT(b, decides);
    PUT(b, "</td></tr>");
    return rc;
}

/* Ref `r`'s rule trace over the console's configuration. */
static int ref_trace(rg_buf *b, const config_model *cfg, const console_push *p,
                     const console_push_ref *r)
{
    config_action action = action_bit(r->action);
    policy_trace_rule *trace;
    policy_decision d;
    rg_buf why = RG_BUF_INIT(4096);
    int rc = 0;

    PUT(b, "<h3>Rule trace</h3>");
    if (cfg == NULL || action == 0 || p->repo[0] == '\0' || r->ref[0] == '\0') {
        PUT(b, "<p class=\"note\">No trace: the record holds no repository, ref or single "
               "action (");
        TEXT(b, r->action);
        PUT(b, "), so the rules cannot be evaluated again.</p>");
        return rc;
    }
    trace = calloc(cfg->nrules ? cfg->nrules : 1, sizeof(*trace));
    if (trace == NULL)
        return -ENOMEM;
    policy_eval_trace(&d, trace, cfg->nrules, cfg, p->repo, r->ref, p->run, action);
    PUT(b, "<p class=\"note\">The rules evaluated again over the console's configuration for this "
           "ref, action and run");
    if (!strcmp(r->action, "update|force"))
        PUT(b, " (update|force: no rule told them apart, traced as an update)");
    PUT(b, ". Content conditions are shown as recorded: their facts are not re-computed. "
           "Decided by (as recorded): <strong class=\"decided-by\">");
    TEXT(b, r->rule);
    PUT(b, "</strong>");
    if (strcmp(d.rule_name, r->rule) != 0) {
        PUT(b, "; over the current configuration, without content facts, ");
        TEXT(b, d.rule_name);
        PUT(b, " would decide");
    }
    /* A published policy, or a changed file, may not be the console's rules. */
    if (r->policy[0] != '\0') {
        PUT(b, ". Decided under policy <code class=\"policy\">");
        TEXT(b, r->policy);
        PUT(b, "</code>");
        if (strcmp(r->policy, cfg->policy_digest) != 0) {
            PUT(b, ", not the console's configuration's (<code>");
            TEXT(b, cfg->policy_digest);
            PUT(b, "</code>): the trace below may not be what decided");
        }
    }
    PUT(b, ".</p><table class=\"trace\"><thead><tr><th>Rule</th><th>Effect</th><th>Mode</th>"
           "<th>Match</th><th></th></tr></thead><tbody>");
    for (size_t i = 0; rc == 0 && i < cfg->nrules; i++) {
        const config_rule *cr = &cfg->rules[i];
        const char *decides = !strcmp(cr->name, r->rule) ? "decided"
                              : d.rule_index == (int)i   ? "would decide now"
                              : d.evaluate_rule_index == (int)i
                                  ? "decides among evaluate-mode rules"
                                  : "";

        rg_buf_reset(&why);
        rc = trace_why(&why, cr, &trace[i]);
        if (rc == 0)
            rc = trace_row(b, cr->name, config_effect_name(cr->effect),
                           cr->evaluate_only ? "evaluate" : "enforce", why.data ? why.data : "",
                           decides);
    }
    if (rc == 0)
        rc = trace_row(b, "default", config_effect_name(cfg->default_effect), "",
                       d.rule_index < 0 ? "no enforced rule matched" : "not used: a rule matched",
                       !strcmp(r->rule, "default") ? "decided"
                       : d.rule_index < 0          ? "would decide now"
                                                   : "");
    PUT(b, "</tbody></table>");
    rg_buf_free(&why);
    free(trace);
    return rc;
}

static int commits_table(rg_buf *b, const console_refgit *g)
{
    char num[96];
    int rc = 0;

    if (g->deleted) {
        PUT(b, "<p class=\"note\">The ref is deleted: no commit introduced.</p>");
        return rc;
    }
    if (g->ncommits == 0) {
        PUT(b, "<p class=\"note\">No commit introduced.</p>");
        return rc;
    }
    PUT(b, "<table class=\"commits\"><thead><tr><th>Commit</th><th>Author</th><th>Subject</th>"
           "</tr></thead><tbody>");
    for (size_t i = 0; rc == 0 && i < g->ncommits; i++) {
        PUT(b, "<tr><td><code>");
        TEXT(b, g->commits[i].id);
        PUT(b, "</code></td><td>");
        TEXT(b, g->commits[i].author);
        PUT(b, "</td><td>");
        TEXT(b, g->commits[i].subject);
        PUT(b, "</td></tr>");
    }
    PUT(b, "</tbody></table>");
    if (g->commits_cut) {
        snprintf(num, sizeof(num), "<p class=\"note cut\">Only the first %d commits are shown.</p>",
                 CONSOLE_REFGIT_COMMITS_MAX);
        PUT(b, num);
    }
    return rc;
}

static int paths_list(rg_buf *b, const console_refgit *g)
{
    char num[96], st[2] = "";
    int rc = 0;

    if (g->deleted)
        return rc;
    PUT(b, "<h3>Changed paths</h3>");
    if (g->empty_base)
        PUT(b, "<p class=\"note\">Against an empty tree: the created ref's base is not known.</p>");
    if (g->npaths == 0) {
        PUT(b, "<p class=\"note\">No path changed.</p>");
        return rc;
    }
    PUT(b, "<ul class=\"paths\">");
    for (size_t i = 0; rc == 0 && i < g->npaths; i++) {
        st[0] = g->paths[i].status;
        PUT(b, "<li><code>");
        PUT(b, st);
        PUT(b, " ");
        TEXT(b, g->paths[i].path);
        PUT(b, "</code></li>");
    }
    PUT(b, "</ul>");
    if (g->paths_cut) {
        snprintf(num, sizeof(num), "<p class=\"note cut\">Only the first %d paths are shown.</p>",
                 CONSOLE_REFGIT_PATHS_MAX);
        PUT(b, num);
    }
    return rc;
}

/* What ref `r` brought, read from `gitdir` (NULL: dir_err says why there is none). */
static int ref_content(rg_buf *b, const char *gitdir, int mirror, const rg_error *dir_err,
                       const console_push_ref *r)
{
    console_refgit g;
    rg_error e = RG_ERROR_INIT;
    int rc = 0;

    PUT(b, "<h3>Commits</h3>");
    if (gitdir == NULL) {
        PUT(b, "<p class=\"note unavailable\">Unavailable: ");
        TEXT(b, dir_err->msg);
        PUT(b, "</p>");
        return rc;
    }
    if (console_refgit_read(&g, gitdir, r->ref, r->old_id, r->new_id, &e) < 0) {
        PUT(b, "<p class=\"error\">The upstream repository cannot be read: ");
        TEXT(b, e.msg);
        PUT(b, "</p>");
        return rc;
    }
    if (!g.available) {
        PUT(b, "<p class=\"note unavailable\">");
        /* A denied ref was never forwarded; an allowed one may be upstream and not mirrored yet. */
        TEXT(b,
             mirror && !strcmp(r->decision, "allow") ? CONSOLE_REFGIT_UNAVAILABLE_MIRROR : g.why);
        PUT(b, "</p>");
    } else {
        if (rc == 0)
            rc = commits_table(b, &g);
        if (rc == 0)
            rc = paths_list(b, &g);
    }
    console_refgit_clear(&g);
    return rc;
}

static int refs_table(rg_buf *body, const console_push *p)
{
    int rc = 0;

    PUT(body, "<table class=\"refs\"><thead><tr><th>Ref</th><th>Action</th>"
              "<th>Old..new</th><th>Decision</th><th>Rule</th><th>Reason</th><th>Outcome</th>"
              "</tr></thead><tbody>");
    for (size_t i = 0; rc == 0 && i < p->nrefs; i++) {
        const console_push_ref *r = &p->refs[i];

        PUT(body, "<tr><td><code>");
        TEXT(body, r->ref);
        PUT(body, "</code></td><td>");
        TEXT(body, r->action);
        PUT(body, "</td><td><code>");
        TEXT(body, r->old_id);
        PUT(body, "..");
        TEXT(body, r->new_id);
        PUT(body, "</code></td><td class=\"");
        PUT(body, !strcmp(r->decision, "allow") ? "allow" : "deny");
        PUT(body, "\">");
        TEXT(body, r->decision);
        PUT(body, "</td><td>");
        TEXT(body, r->rule);
        PUT(body, "</td><td>");
        TEXT(body, r->reason);
        PUT(body, "</td><td>");
        TEXT(body, r->outcome);
        PUT(body, "</td></tr>");
    }
    PUT(body, "</tbody></table>");
    return rc;
}

int console_page_push(rg_buf *body, const console_view *v, const char *push_id)
{
    const config_model *cfg = v->ctx->cfg;
    console_push p;
    rg_error e = RG_ERROR_INIT, dir_err = RG_ERROR_INIT;
    char path[4200], *gitdir = NULL;
    audit_source src;
    int mirror = 0, rc = 0;

    src = console_log_source(path, sizeof(path), v);
    if (console_push_get(&p, &src, push_id, &e) < 0) {
        PUT(body, "<p class=\"error\">");
        TEXT(body, e.msg);
        PUT(body, "</p>");
        return rc;
    }
    PUT(body, "<dl><dt>Push</dt><dd><code>");
    TEXT(body, p.push_id);
    PUT(body, "</code></dd><dt>Time</dt><dd>");
    TEXT(body, p.time);
    PUT(body, "</dd><dt>Run</dt><dd>");
    TEXT(body, p.run);
    PUT(body, "</dd><dt>Repository</dt><dd>");
    TEXT(body, p.repo);
    PUT(body, "</dd></dl>");
    if (rc == 0)
        rc = refs_table(body, &p);
    console_refgit_dir(&gitdir, &mirror, cfg, p.repo, &dir_err);
    git_libgit2_init();
    for (size_t i = 0; rc == 0 && i < p.nrefs; i++) {
        const console_push_ref *r = &p.refs[i];

        PUT(body, "<section class=\"ref-detail\"><h2>");
        TEXT(body, r->ref);
        PUT(body, "</h2>");
        if (rc == 0)
            rc = ref_trace(body, cfg, &p, r);
        if (rc == 0 && i < CONSOLE_PUSH_REFS_READ)
            rc = ref_content(body, gitdir, mirror, &dir_err, r);
        else
            PUT(body, "<p class=\"note cut\">Commits not read: only the first refs of a push "
                      "are read from upstream.</p>");
        PUT(body, "</section>");
    }
    git_libgit2_shutdown();
    free(gitdir);
    console_push_clear(&p);
    return rc;
}
