/*
 * Content conditions of one push; see conditions.h. Two passes over the
 * quarantine, against one budget (limits.inspect_bytes, inspect_seconds):
 *
 *   pack     every new object: the largest blob (max_file_bytes) and,
 *            when a rule asks for secrets, every blob, commit and tag
 *            streamed through the secret scanner;
 *   ranges   per inspected ref, the commits it introduces: each rule's
 *            commit conditions, and where the pack's findings sit (the
 *            first commit and path that carry a flagged blob).
 *
 * Then each (ref, rule with conditions) gets its answer: a condition holds
 * when something was found, fails when its pass completed without finding
 * anything, and is unknown otherwise; a rule's conditions hold when all of
 * them do (one failing is enough to fail).
 */
#include "inspect/conditions.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "content/secrets.h"
#include "git/inspect.h"
#include "util/glob.h"

/* Secrets and evidence kept to show the pusher; the rest are counted. */
#define FINDINGS_MAX 16
#define EVIDENCE_MAX 4
#define TEXT_MAX     240
/* How much of a path is shown. */
#define PATH_SHOWN_MAX 160

typedef struct finding {
    content_secret_finding f;
    char object[41];
    rgit_inspect_type type;
    char commit[41]; /* where a blob was first seen: "" when unreferenced in the ranges */
    char path[PATH_SHOWN_MAX + 4];
} finding;

/* One rule with conditions on one ref. */
typedef struct slot {
    unsigned found; /* commit condition bits seen to hold */
    char first_path[PATH_SHOWN_MAX + 4];
    char evidence[EVIDENCE_MAX][TEXT_MAX];
    int nevidence;
    char why[TEXT_MAX];
} slot;

struct inspect_conditions {
    const config_model *cfg;
    size_t nrefs;
    size_t nslots;       /* rules with conditions */
    int *slot_of;        /* per rule: its slot, or -1 */
    slot *slots;         /* nrefs * nslots */
    unsigned char *cond; /* nrefs * nrules, policy_cond */
    const char **why;    /* nrefs * nrules */
    policy_facts *facts; /* nrefs */

    /* Pack pass. */
    int pack_done;
    char pack_err[TEXT_MAX];
    uint64_t largest;
    char largest_id[41];
    char largest_commit[41];
    char largest_path[PATH_SHOWN_MAX + 4];
    finding findings[FINDINGS_MAX];
    size_t nfindings, nfound;
    rgit_inspect_object const *current; /* the object being scanned */

    /* Range pass, per ref. */
    int *range_done;
    int *sig_done; /* signatures checked (when a rule asks) */
    char (*range_err)[TEXT_MAX];
    size_t ref; /* the ref being walked */
};

/* Text from the pushed data, one line of printable bytes, cut short visibly. */
static void shown(char *out, size_t outsz, const char *s)
{
    size_t n = 0;

    for (; *s && n + 4 < outsz; s++)
        out[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    if (*s)
        memcpy(out + n, "...", 4);
    else
        out[n] = '\0';
}

static slot *slot_at(inspect_conditions *g, size_t ref, size_t rule)
{
    return g->slot_of[rule] < 0 ? NULL : &g->slots[ref * g->nslots + (size_t)g->slot_of[rule]];
}

static void add_evidence(slot *s, config_condition bit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_evidence(slot *s, config_condition bit, const char *fmt, ...)
{
    va_list ap;

    s->found |= (unsigned)bit;
    if (s->nevidence >= EVIDENCE_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(s->evidence[s->nevidence++], TEXT_MAX, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ pack */

static int on_secret(const content_secret_finding *f, void *arg)
{
    inspect_conditions *g = arg;

    g->nfound++;
    if (g->nfindings < FINDINGS_MAX) {
        finding *k = &g->findings[g->nfindings++];

        k->f = *f;
        memcpy(k->object, g->current->id, sizeof(k->object));
        k->type = g->current->type;
    }
    return 0;
}

typedef struct pack_pass {
    inspect_conditions *g;
    content_secrets_scan *scan;
} pack_pass;

static int on_object(const rgit_inspect_object *o, void *arg)
{
    pack_pass *p = arg;
    inspect_conditions *g = p->g;

    if (o->type == RGIT_INSPECT_BLOB && (o->size > g->largest || g->largest_id[0] == '\0')) {
        g->largest = o->size;
        memcpy(g->largest_id, o->id, sizeof(g->largest_id));
    }
    g->current = o;
    return 0;
}

static int on_data(const rgit_inspect_object *o, const void *data, size_t len, void *arg,
                   rg_error *err)
{
    pack_pass *p = arg;

    (void)o;
    /* 1: the scan stopped early (it never asks to); only errors fail. */
    return content_secrets_scan_feed(p->scan, data, len, err) < 0 ? RG_E_PROTOCOL : 0;
}

static int on_end(const rgit_inspect_object *o, void *arg, rg_error *err)
{
    pack_pass *p = arg;

    (void)o;
    return content_secrets_scan_end(p->scan, err) < 0 ? RG_E_PROTOCOL : 0;
}

/* Which pack conditions any rule has: only those are worked out. */
static unsigned pack_bits(const config_model *cfg)
{
    unsigned bits = 0;

    for (size_t i = 0; i < cfg->nrules; i++)
        bits |= cfg->rules[i].cond.set & CONFIG_COND_PACK;
    return bits;
}

static void pack_pass_run(inspect_conditions *g, rgit_quarantine *q, rgit_inspect_budget *b)
{
    pack_pass p = {.g = g};
    rgit_inspect_object_fns fns = {on_object, on_data, on_end, &p};
    unsigned bits = pack_bits(g->cfg);
    rg_error e = RG_ERROR_INIT;

    if (bits == 0) {
        g->pack_done = 1;
        return;
    }
    if ((bits & CONFIG_COND_SECRETS) && g->cfg->secrets.scanner == NULL) {
        snprintf(g->pack_err, sizeof(g->pack_err), "no secret scanner");
        return;
    }
    if ((bits & CONFIG_COND_SECRETS) &&
        content_secrets_scan_new(&p.scan, g->cfg->secrets.scanner, on_secret, g, &e) < 0) {
        snprintf(g->pack_err, sizeof(g->pack_err), "%s", e.msg);
        return;
    }
    if (p.scan == NULL)
        fns.data = NULL;
    if (rgit_inspect_objects(q, &fns, b, &e) < 0)
        snprintf(g->pack_err, sizeof(g->pack_err), "%s", e.msg);
    else
        g->pack_done = 1;
    content_secrets_scan_free(p.scan);
}

/* ---------------------------------------------------------------- ranges */

static int on_commit(const rgit_inspect_commit *c, void *arg)
{
    inspect_conditions *g = arg;
    char email[TEXT_MAX / 2];

    for (size_t i = 0; i < g->cfg->nrules; i++) {
        const config_conditions *cc = &g->cfg->rules[i].cond;
        slot *s = slot_at(g, g->ref, i);

        if (s == NULL)
            continue;
        if ((cc->set & CONFIG_COND_MERGE_COMMITS) && c->nparents > 1)
            add_evidence(s, CONFIG_COND_MERGE_COMMITS, "commit %.7s is a merge", c->id);
        if ((cc->set & CONFIG_COND_AUTHOR_EMAIL_NOT) &&
            regexec(&cc->author_email_not, c->author_email, 0, NULL, 0) != 0) {
            shown(email, sizeof(email), c->author_email);
            add_evidence(s, CONFIG_COND_AUTHOR_EMAIL_NOT,
                         "commit %.7s: author email <%s> does not match author_email_not", c->id,
                         email);
        }
        if ((cc->set & CONFIG_COND_COMMITTER_EMAIL_NOT) &&
            regexec(&cc->committer_email_not, c->committer_email, 0, NULL, 0) != 0) {
            shown(email, sizeof(email), c->committer_email);
            add_evidence(s, CONFIG_COND_COMMITTER_EMAIL_NOT,
                         "commit %.7s: committer email <%s> does not match committer_email_not",
                         c->id, email);
        }
        if ((cc->set & CONFIG_COND_MESSAGE_NOT) &&
            regexec(&cc->message_not, c->message, 0, NULL, 0) != 0)
            add_evidence(s, CONFIG_COND_MESSAGE_NOT,
                         "commit %.7s: message does not match message_not", c->id);
    }
    return 0;
}

static int on_path(const rgit_inspect_commit *c, const rgit_inspect_path *p, void *arg)
{
    inspect_conditions *g = arg;
    char path[PATH_SHOWN_MAX + 4];
    size_t len = strlen(p->path);

    shown(path, sizeof(path), p->path);
    /* Where the pack's flagged blobs sit, for the pusher. */
    if (p->blob[0] != '\0') {
        for (size_t k = 0; k < g->nfindings; k++) {
            finding *f = &g->findings[k];

            if (f->commit[0] == '\0' && !strcmp(f->object, p->blob)) {
                memcpy(f->commit, c->id, sizeof(f->commit));
                memcpy(f->path, path, sizeof(f->path));
            }
        }
        if (g->largest_commit[0] == '\0' && !strcmp(g->largest_id, p->blob)) {
            memcpy(g->largest_commit, c->id, sizeof(g->largest_commit));
            memcpy(g->largest_path, path, sizeof(g->largest_path));
        }
    }
    for (size_t i = 0; i < g->cfg->nrules; i++) {
        const config_conditions *cc = &g->cfg->rules[i].cond;
        slot *s = slot_at(g, g->ref, i);

        if (s == NULL)
            continue;
        if ((cc->set & CONFIG_COND_MAX_PATH_LENGTH) && p->blob[0] != '\0' &&
            len > cc->max_path_length)
            add_evidence(s, CONFIG_COND_MAX_PATH_LENGTH,
                         "commit %.7s: path %s is %zu bytes long (max_path_length %llu)", c->id,
                         path, len, (unsigned long long)cc->max_path_length);
        if (!(cc->set & CONFIG_COND_PATHS))
            continue;
        for (size_t j = 0; j < cc->npaths; j++) {
            if (!rg_glob_match(cc->paths[j], p->path))
                continue;
            if (!(s->found & CONFIG_COND_PATHS))
                memcpy(s->first_path, path, sizeof(s->first_path));
            add_evidence(s, CONFIG_COND_PATHS, "commit %.7s changes %s (paths %s)", c->id, path,
                         cc->paths[j]);
            break;
        }
    }
    return 0;
}

/*
 * Whether the ranges need their diffs: for a path condition, or to say
 * where a flagged blob sits (a secret, a blob over some max_file_bytes).
 * Diffs are most of a range's cost, so a push with nothing to find pays
 * only the walk.
 */
static int paths_needed(const inspect_conditions *g)
{
    for (size_t i = 0; i < g->cfg->nrules; i++) {
        const config_conditions *cc = &g->cfg->rules[i].cond;

        if ((cc->set & (CONFIG_COND_PATHS | CONFIG_COND_MAX_PATH_LENGTH)) ||
            ((cc->set & CONFIG_COND_MAX_FILE_BYTES) && g->largest_id[0] &&
             g->largest > cc->max_file_bytes))
            return 1;
    }
    return g->nfindings > 0;
}

static const char *signature_problem(char letter)
{
    switch (letter) {
    case 'N':
        return "has no signature";
    case 'U':
        return "is signed by a key not among signing.allowed_signers";
    case 'E':
        return "is signed by a key signing does not name";
    case 'B':
        return "has a bad signature";
    case 'X':
    case 'Y':
        return "is signed by an expired key or signature";
    case 'R':
        return "is signed by a revoked key";
    }
    return "has a signature that does not verify";
}

static int on_signature(const char *id, int verified, char letter, void *arg)
{
    inspect_conditions *g = arg;

    if (verified)
        return 0;
    for (size_t i = 0; i < g->cfg->nrules; i++) {
        slot *s = slot_at(g, g->ref, i);

        if (s != NULL && (g->cfg->rules[i].cond.set & CONFIG_COND_UNSIGNED))
            add_evidence(s, CONFIG_COND_UNSIGNED, "commit %.7s %s", id, signature_problem(letter));
    }
    return 0;
}

static int any_rule_has(const config_model *cfg, config_condition c)
{
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].cond.set & (unsigned)c)
            return 1;
    return 0;
}

static void range_pass_run(inspect_conditions *g, rgit_quarantine *q,
                           const inspect_conditions_ref *refs, rgit_inspect_budget *b)
{
    rgit_inspect_range_fns fns = {on_commit, paths_needed(g) ? on_path : NULL, g};
    rgit_inspect_signing keys = {g->cfg->signing.allowed_signers, g->cfg->signing.gpg_keyring};
    int signatures = any_rule_has(g->cfg, CONFIG_COND_UNSIGNED);

    for (size_t i = 0; i < g->nrefs; i++) {
        rg_error e = RG_ERROR_INIT;

        if (!refs[i].inspect)
            continue;
        g->ref = i;
        if (rgit_inspect_range(q, refs[i].old_hex, refs[i].new_hex, &fns, b, &e) < 0) {
            snprintf(g->range_err[i], TEXT_MAX, "%s", e.msg);
            continue;
        }
        g->range_done[i] = 1;
        if (!signatures)
            continue;
        if (rgit_inspect_signatures(q, refs[i].old_hex, refs[i].new_hex, &keys, on_signature, g, b,
                                    &e) < 0)
            snprintf(g->range_err[i], TEXT_MAX, "%s", e.msg);
        else
            g->sig_done[i] = 1;
    }
}

/* ---------------------------------------------------------------- answer */

/* One condition of a rule on a ref: HOLDS, FAILS or UNKNOWN. */
static policy_cond one(const inspect_conditions *g, size_t ref, const config_conditions *cc,
                       const slot *s, config_condition bit)
{
    int found, known;

    if (bit == CONFIG_COND_SECRETS) {
        found = g->nfound > 0;
        known = g->pack_done;
    } else if (bit == CONFIG_COND_MAX_FILE_BYTES) {
        found = g->largest_id[0] != '\0' && g->largest > cc->max_file_bytes;
        known = g->pack_done;
    } else {
        found = (s->found & (unsigned)bit) != 0;
        known = bit == CONFIG_COND_UNSIGNED ? g->sig_done[ref] : g->range_done[ref];
    }
    return found ? POLICY_COND_HOLDS : known ? POLICY_COND_FAILS : POLICY_COND_UNKNOWN;
}

static void phrase(char *out, size_t outsz, const config_conditions *cc, const slot *s,
                   config_condition bit)
{
    size_t len = strlen(out);

    if (len > 0)
        len += (size_t)snprintf(out + len, outsz - len, " and ");
    if (len >= outsz)
        return;
    switch (bit) {
    case CONFIG_COND_PATHS:
        snprintf(out + len, outsz - len, "push changes %s", s->first_path);
        break;
    case CONFIG_COND_MAX_FILE_BYTES:
        snprintf(out + len, outsz - len, "push contains a file larger than %llu bytes",
                 (unsigned long long)cc->max_file_bytes);
        break;
    case CONFIG_COND_MAX_PATH_LENGTH:
        snprintf(out + len, outsz - len, "push changes a path longer than %llu bytes",
                 (unsigned long long)cc->max_path_length);
        break;
    case CONFIG_COND_SECRETS:
        snprintf(out + len, outsz - len, "push contains a secret");
        break;
    case CONFIG_COND_AUTHOR_EMAIL_NOT:
        snprintf(out + len, outsz - len, "a commit's author email does not match");
        break;
    case CONFIG_COND_COMMITTER_EMAIL_NOT:
        snprintf(out + len, outsz - len, "a commit's committer email does not match");
        break;
    case CONFIG_COND_MESSAGE_NOT:
        snprintf(out + len, outsz - len, "a commit message does not match");
        break;
    case CONFIG_COND_MERGE_COMMITS:
        snprintf(out + len, outsz - len, "push contains a merge commit");
        break;
    case CONFIG_COND_UNSIGNED:
        snprintf(out + len, outsz - len, "a commit is not signed by a key the config names");
        break;
    }
}

/* Kleene AND over the rule's conditions, and the why that goes with it. */
static void answer(inspect_conditions *g, size_t ref, size_t rule, const char *qwhy)
{
    const config_conditions *cc = &g->cfg->rules[rule].cond;
    slot *s = slot_at(g, ref, rule);
    int any_unknown = 0, any_fails = 0;

    for (unsigned b = 0; b < CONFIG_COND_COUNT; b++) {
        config_condition bit = (config_condition)(1u << b);
        policy_cond c;

        if (!(cc->set & (unsigned)bit))
            continue;
        c = qwhy ? POLICY_COND_UNKNOWN : one(g, ref, cc, s, bit);
        any_fails |= c == POLICY_COND_FAILS;
        any_unknown |= c == POLICY_COND_UNKNOWN;
        if (c == POLICY_COND_HOLDS)
            phrase(s->why, sizeof(s->why), cc, s, bit);
    }
    g->cond[ref * g->cfg->nrules + rule] = any_fails     ? POLICY_COND_FAILS
                                           : any_unknown ? POLICY_COND_UNKNOWN
                                                         : POLICY_COND_HOLDS;
    if (!any_fails && any_unknown) {
        const char *e = qwhy                   ? qwhy
                        : g->range_err[ref][0] ? g->range_err[ref]
                        : g->pack_err[0]       ? g->pack_err
                                               : "not inspected";

        snprintf(s->why, sizeof(s->why), "push content could not be inspected: %s", e);
    }
    g->why[ref * g->cfg->nrules + rule] = s->why;
}

int inspect_conditions_inspect(inspect_conditions **out, const config_model *cfg,
                               rgit_quarantine *q, const char *why,
                               const inspect_conditions_ref *refs, size_t nrefs, rg_error *err)
{
    inspect_conditions *g;
    rgit_inspect_budget b;
    size_t n = nrefs ? nrefs : 1, nr = cfg->nrules ? cfg->nrules : 1;

    *out = NULL;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    g->cfg = cfg;
    g->nrefs = nrefs;
    g->slot_of = calloc(nr, sizeof(*g->slot_of));
    for (size_t i = 0; g->slot_of && i < cfg->nrules; i++)
        g->slot_of[i] = cfg->rules[i].cond.set ? (int)g->nslots++ : -1;
    g->slots = calloc(n * (g->nslots ? g->nslots : 1), sizeof(*g->slots));
    g->cond = calloc(n * nr, sizeof(*g->cond));
    g->why = calloc(n * nr, sizeof(*g->why));
    g->facts = calloc(n, sizeof(*g->facts));
    g->range_done = calloc(n, sizeof(*g->range_done));
    g->sig_done = calloc(n, sizeof(*g->sig_done));
    g->range_err = calloc(n, sizeof(*g->range_err));
    if (g->slot_of == NULL || g->slots == NULL || g->cond == NULL || g->why == NULL ||
        g->facts == NULL || g->range_done == NULL || g->sig_done == NULL || g->range_err == NULL) {
        inspect_conditions_free(g);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    if (q != NULL) {
        rgit_inspect_budget_init(&b, cfg->limits.inspect_bytes, cfg->limits.inspect_seconds);
        pack_pass_run(g, q, &b);
        range_pass_run(g, q, refs, &b);
        why = NULL;
    } else if (why == NULL) {
        why = "no pack";
    }
    for (size_t i = 0; i < nrefs; i++) {
        for (size_t r = 0; r < cfg->nrules; r++)
            if (refs[i].inspect && cfg->rules[r].cond.set)
                answer(g, i, r, why);
        g->facts[i].cond = g->cond + i * cfg->nrules;
        g->facts[i].why = g->why + i * cfg->nrules;
    }
    *out = g;
    return 0;
}

const policy_facts *inspect_conditions_facts(const inspect_conditions *g, size_t i)
{
    return g && i < g->nrefs ? &g->facts[i] : NULL;
}

/* Where explanation lines go: band 2 (with a label), and/or the first one alone. */
typedef struct lines {
    const char *label;
    rg_buf *out; /* may be NULL */
    char *first; /* may be NULL */
    size_t firstsz;
} lines;

static void line(lines *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(lines *l, const char *fmt, ...)
{
    char text[2 * TEXT_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (l->first != NULL && l->first[0] == '\0')
        snprintf(l->first, l->firstsz, "%s", text);
    if (l->out != NULL)
        rg_buf_printf(l->out, "refgate: %s: %s\n", l->label, text);
}

static void explain_finding(const finding *f, lines *l)
{
    const char *what = f->type == RGIT_INSPECT_COMMIT ? "commit" : "tag";

    if (f->type == RGIT_INSPECT_BLOB && f->commit[0])
        line(l, "%s in %s line %llu (commit %.7s, fingerprint %s)", f->f.kind, f->path,
             (unsigned long long)f->f.line, f->commit, f->f.fingerprint);
    else if (f->type == RGIT_INSPECT_BLOB)
        line(l, "%s in blob %.7s line %llu, which no pushed commit adds (fingerprint %s)",
             f->f.kind, f->object, (unsigned long long)f->f.line, f->f.fingerprint);
    else
        line(l, "%s in %s %.7s line %llu (fingerprint %s)", f->f.kind, what, f->object,
             (unsigned long long)f->f.line, f->f.fingerprint);
}

static void explain(const inspect_conditions *g, size_t i, size_t rule, lines *l)
{
    const config_conditions *cc;
    const slot *s;
    policy_cond c;

    if (g == NULL || i >= g->nrefs || rule >= g->cfg->nrules || g->slot_of[rule] < 0)
        return;
    cc = &g->cfg->rules[rule].cond;
    s = &g->slots[i * g->nslots + (size_t)g->slot_of[rule]];
    c = (policy_cond)g->cond[i * g->cfg->nrules + rule];
    if (c != POLICY_COND_HOLDS) {
        line(l, "%s", s->why[0] ? s->why : "conditions unknown");
        return;
    }
    if (cc->set & CONFIG_COND_SECRETS) {
        for (size_t k = 0; k < g->nfindings; k++)
            explain_finding(&g->findings[k], l);
        if (g->nfound > g->nfindings)
            line(l, "and %zu more secrets", g->nfound - g->nfindings);
    }
    if (cc->set & CONFIG_COND_MAX_FILE_BYTES) {
        if (g->largest_commit[0])
            line(l, "%s is %llu bytes (commit %.7s, max_file_bytes %llu)", g->largest_path,
                 (unsigned long long)g->largest, g->largest_commit,
                 (unsigned long long)cc->max_file_bytes);
        else
            line(l, "blob %.7s is %llu bytes (max_file_bytes %llu)", g->largest_id,
                 (unsigned long long)g->largest, (unsigned long long)cc->max_file_bytes);
    }
    for (int k = 0; k < s->nevidence; k++)
        line(l, "%s", s->evidence[k]);
}

void inspect_conditions_explain(const inspect_conditions *g, size_t i, size_t rule,
                                const char *label, rg_buf *out)
{
    lines l = {label, out, NULL, 0};

    explain(g, i, rule, &l);
}

void inspect_conditions_first(const inspect_conditions *g, size_t i, size_t rule, char *out,
                              size_t outsz)
{
    lines l = {NULL, NULL, out, outsz};

    if (outsz > 0)
        out[0] = '\0';
    explain(g, i, rule, &l);
}

void inspect_conditions_free(inspect_conditions *g)
{
    if (g == NULL)
        return;
    free(g->slot_of);
    free(g->slots);
    free(g->cond);
    free(g->why);
    free(g->facts);
    free(g->range_done);
    free(g->sig_done);
    free(g->range_err);
    free(g);
}
