/*
 * Tests for inspect/conditions.c over git/inspect.c: each row builds a real
 * push with the git CLI (an upstream holding one commit, a clone that makes
 * the row's commits, a pack made with pack-objects as a client makes it),
 * indexes it into a real quarantine, and checks what one rule's conditions
 * come to on the pushed ref (holds, fails, unknown) and what the pusher is
 * told (band 2), which must never carry the secret.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/conditions.h"
#include "support/gitfix.h"
#include "support/shell.h"
#include "util/fs.h"

#define SECRET "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d"

static char base[] = "/tmp/rg-test-conditions-XXXXXX";
static char upstream[512], work[512], tmp_parent[512];

static void setup(void)
{
    test_gitfix_setup(base, upstream, work, tmp_parent, sizeof(upstream),
                      "echo '# app' > README.md");
}

static void teardown(void)
{
    test_run("rm -rf '%s'", base);
}

TestSuite(conditions, .init = setup, .fini = teardown);

struct row {
    char what[64];
    char script[400]; /* run in the clone; may write object ids to ../extra for the pack */
    char rule[200];   /* the rule's condition keys, JSON with single quotes */
    char limits[80];  /* the config's limits, or "" */
    int create;       /* the ref is created (else updated from base) */
    policy_cond want;
    char says[120]; /* what band 2 must say, or "" */
};

static struct row rows[] = {
    {"a protected path", "mkdir -p .github/workflows && echo x > .github/workflows/ci.yml",
     "'paths': ['.github/workflows/**']", "", 0, POLICY_COND_HOLDS,
     "changes .github/workflows/ci.yml (paths .github/workflows/**)"},
    {"another path", "mkdir src && echo x > src/a.c",
     "'paths': ['.github/workflows/**', 'CODEOWNERS']", "", 0, POLICY_COND_FAILS, ""},
    {"a deleted path", "git rm -q README.md && echo x > other", "'paths': ['README.md']", "", 0,
     POLICY_COND_HOLDS, "changes README.md"},
    {"**/*.pem at any depth", "mkdir -p a/b && echo x > a/b/k.pem", "'paths': ['**/*.pem']", "", 0,
     POLICY_COND_HOLDS, "changes a/b/k.pem"},
    {"a large file", "head -c 2000 /dev/zero > big", "'max_file_bytes': 1000", "", 0,
     POLICY_COND_HOLDS, "big is 2000 bytes"},
    {"a file at the limit", "head -c 1000 /dev/zero > big", "'max_file_bytes': 1000", "", 0,
     POLICY_COND_FAILS, ""},
    {"a long path", "mkdir -p abcdefghij && echo x > abcdefghij/klmnopqrstu",
     "'max_path_length': 20", "", 0, POLICY_COND_HOLDS, "abcdefghij/klmnopqrstu is 22 bytes long"},
    {"a short path", "echo x > short", "'max_path_length': 20", "", 0, POLICY_COND_FAILS, ""},
    {"a secret in a new file", "echo 'token = " SECRET "' > cfg.env", "'secrets': true", "", 0,
     POLICY_COND_HOLDS, "github-token in cfg.env line 1"},
    {"a secret in a commit message",
     "echo x > y && git add -A && git commit -q -m 'oops " SECRET "'", "'secrets': true", "", 0,
     POLICY_COND_HOLDS, "github-token in commit"},
    {"a secret in an unreferenced blob",
     "echo x > y && echo 'k: " SECRET "' | git hash-object -w --stdin > ../extra",
     "'secrets': true", "", 0, POLICY_COND_HOLDS, "which no pushed commit adds"},
    {"a secret in a tag of a blob",
     "echo x > y && git add -A && git commit -q -m y && "
     "git tag -a -m 'see " SECRET "' t $(echo hi | git hash-object -w --stdin) && "
     "git rev-parse t > ../extra",
     "'secrets': true", "", 0, POLICY_COND_HOLDS, "github-token in tag"},
    {"a secret at the end of a blob too large to hold (streamed)",
     "head -c 40000000 /dev/zero | tr '\\0' a > big && printf '\\nk=" SECRET "\\n' >> big",
     "'secrets': true", "", 0, POLICY_COND_HOLDS, "github-token in big line 2"},
    {"no secret", "echo 'token = ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' > cfg.env",
     "'secrets': true", "", 0, POLICY_COND_FAILS, ""},
    {"a foreign author",
     "echo x > y && git add -A && GIT_AUTHOR_EMAIL=a@evil.test git commit -q -m y",
     "'author_email_not': '@example\\\\.com$'", "", 0, POLICY_COND_HOLDS,
     "author email <a@evil.test> does not match"},
    {"our author", "echo x > y", "'author_email_not': '@example\\\\.com$'", "", 0,
     POLICY_COND_FAILS, ""},
    {"a foreign committer",
     "echo x > y && git add -A && GIT_COMMITTER_EMAIL=c@evil.test git commit -q -m y",
     "'committer_email_not': '@example\\\\.com$'", "", 0, POLICY_COND_HOLDS,
     "committer email <c@evil.test> does not match"},
    {"no sign-off", "echo x > y", "'message_not': '^Signed-off-by: '", "", 0, POLICY_COND_HOLDS,
     "message does not match message_not"},
    {"a sign-off", "echo x > y && git add -A && git commit -q -s -m y",
     "'message_not': '^Signed-off-by: '", "", 0, POLICY_COND_FAILS, ""},
    {"a merge",
     "git switch -q -c side && echo s > s && git add -A && git commit -q -m s && "
     "git switch -q main && echo m > m && git add -A && git commit -q -m m && "
     "git merge -q --no-ff --no-edit side",
     "'merge_commits': true", "", 0, POLICY_COND_HOLDS, "is a merge"},
    {"linear history", "echo x > y", "'merge_commits': true", "", 0, POLICY_COND_FAILS, ""},
    {"a create of what upstream has introduces no commit", "true",
     "'message_not': 'never matches this'", "", 1, POLICY_COND_FAILS, ""},
    {"a create introduces its new commits", "echo x > y", "'message_not': 'never matches this'", "",
     1, POLICY_COND_HOLDS, "message does not match"},
    {"all of a rule's conditions must hold", "echo x > y", "'merge_commits': true, 'secrets': true",
     "", 0, POLICY_COND_FAILS, ""},
    {"over the byte budget", "head -c 2000000 /dev/zero | tr '\\\\0' a > big", "'secrets': true",
     "'limits': {'inspect_bytes': 1048576},", 0, POLICY_COND_UNKNOWN,
     "inspection budget exceeded (limits.inspect_bytes: 1048576 inflated bytes)"},
};

ParameterizedTestParameters(conditions, each_condition_on_a_real_push)
{
    return cr_make_param_array(struct row, rows, sizeof(rows) / sizeof(rows[0]));
}

static config_model *config_for(const struct row *r)
{
    char json[1024];
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    snprintf(json, sizeof(json),
             "{'state_dir': '%s/state', %s 'rules': [{'name': 'r', 'effect': 'deny', %s}]}", base,
             r->limits, r->rule);
    for (char *p = json; *p; p++)
        if (*p == '\'')
            *p = '"';
    cr_assert_eq(config_parse(&cfg, json, strlen(json), "/tmp/rg-test-conditions.json", &err), 0,
                 "%s\n%s", err.msg, json);
    return cfg;
}

/* Index what a client pushing HEAD over `base` sends (plus ../extra) into a quarantine. */
static rgit_quarantine *quarantine_push(void)
{
    char *pack_cmd, *data;
    rgit_quarantine *q = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t len;
    FILE *f;

    cr_assert(asprintf(&pack_cmd,
                       "cd '%s' && { printf 'HEAD\\n^base\\n'; cat ../extra 2>/dev/null || true; } "
                       "| git pack-objects -q --stdout --revs --thin > ../push.pack",
                       work) > 0);
    test_run("%s", pack_cmd);
    free(pack_cmd);
    cr_assert(asprintf(&data, "%s/push.pack", base) > 0);
    f = fopen(data, "rb");
    free(data);
    cr_assert_not_null(f);
    data = malloc(64 << 20);
    len = fread(data, 1, 64 << 20, f);
    fclose(f);
    cr_assert_eq(rgit_quarantine_new(&q, upstream, tmp_parent, 40, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_quarantine_write(q, data, len, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_quarantine_finish(q, &err), 0, "%s", err.msg);
    free(data);
    return q;
}

ParameterizedTest(struct row *r, conditions, each_condition_on_a_real_push)
{
    config_model *cfg = config_for(r);
    inspect_conditions *g = NULL;
    inspect_conditions_ref ref = {NULL, NULL, 1};
    rg_buf said = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    const policy_facts *facts;
    rgit_quarantine *q;
    char *base_id, *head;

    test_run("cd '%s' && { %s; } && git add -A && { git diff --cached --quiet || "
             "git commit -q -m change; }",
             work, r->script);
    base_id = test_capture("git -C '%s' rev-parse base", work);
    head = test_capture("git -C '%s' rev-parse HEAD", work);
    q = quarantine_push();
    ref.old_hex = r->create ? NULL : base_id;
    ref.new_hex = head;
    cr_assert_eq(inspect_conditions_inspect(&g, cfg, q, NULL, &ref, 1, &err), 0, "%s", err.msg);
    facts = inspect_conditions_facts(g, 0);
    cr_assert_eq(facts->cond[0], r->want, "%s: got %d, want %d (%s)", r->what, facts->cond[0],
                 r->want, facts->why[0] ? facts->why[0] : "");
    inspect_conditions_explain(g, 0, 0, "rule \"r\"", &said);
    cr_assert_eq(rg_buf_puts(&said, ""), 0);
    if (r->says[0])
        cr_assert(said.data && strstr(said.data, r->says), "%s: band 2 said \"%s\", want \"%s\"",
                  r->what, said.data ? said.data : "", r->says);
    cr_assert(said.data == NULL || strstr(said.data, SECRET) == NULL, "%s: the secret was shown",
              r->what);
    /* The audit log gets the first line's text alone. */
    if (r->says[0]) {
        char first[400];

        inspect_conditions_first(g, 0, 0, first, sizeof(first));
        cr_assert(first[0] != '\0' && strstr(said.data, first), "%s: first \"%s\"", r->what, first);
        cr_assert_null(strstr(first, "refgate:"));
    }
    rg_buf_free(&said);
    inspect_conditions_free(g);
    rgit_quarantine_free(q);
    config_free(cfg);
    free(base_id);
    free(head);
}

Test(conditions, without_a_quarantine_every_answer_is_unknown_and_says_why)
{
    config_model *cfg = config_for(&(struct row){.rule = "'secrets': true, 'paths': ['x']"});
    inspect_conditions *g = NULL;
    inspect_conditions_ref refs[2] = {{NULL, "0123", 1}, {NULL, "4567", 0}};
    rg_error err = RG_ERROR_INIT;
    const policy_facts *f;

    cr_assert_eq(inspect_conditions_inspect(&g, cfg, NULL, "bad pack: truncated", refs, 2, &err),
                 0);
    f = inspect_conditions_facts(g, 0);
    cr_assert_eq(f->cond[0], POLICY_COND_UNKNOWN);
    cr_assert_str_eq(f->why[0], "push content could not be inspected: bad pack: truncated");
    /* A ref no conditioned rule selects gets no answer (unknown, no why). */
    f = inspect_conditions_facts(g, 1);
    cr_assert_eq(f->cond[0], POLICY_COND_UNKNOWN);
    cr_assert_null(f->why[0]);
    cr_assert_null(inspect_conditions_facts(g, 2));
    inspect_conditions_free(g);
    config_free(cfg);
}

/* ------------------------------------------------------------------ unsigned */

/* One push of the commits `script` makes on top of base, checked against `signing`. */
static void check_unsigned(const char *script, const char *signing, policy_cond want,
                           const char *says)
{
    char json[2048];
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    inspect_conditions *g = NULL;
    inspect_conditions_ref ref = {NULL, NULL, 1};
    rg_buf said = RG_BUF_INIT(1 << 20);
    rgit_quarantine *q;
    char *base_id, *head;

    snprintf(json, sizeof(json),
             "{'state_dir': '%s/state', 'signing': %s, 'rules': [{'name': 'r', 'effect': 'deny', "
             "'unsigned': true}]}",
             base, signing);
    for (char *p = json; *p; p++)
        if (*p == '\'')
            *p = '"';
    cr_assert_eq(config_parse(&cfg, json, strlen(json), "/tmp/rg-test-conditions.json", &err), 0,
                 "%s", err.msg);
    test_run("cd '%s' && git reset -q --hard base && { %s; }", work, script);
    base_id = test_capture("git -C '%s' rev-parse base", work);
    head = test_capture("git -C '%s' rev-parse HEAD", work);
    q = quarantine_push();
    ref.old_hex = base_id;
    ref.new_hex = head;
    cr_assert_eq(inspect_conditions_inspect(&g, cfg, q, NULL, &ref, 1, &err), 0, "%s", err.msg);
    inspect_conditions_explain(g, 0, 0, "rule \"r\"", &said);
    cr_assert_eq(rg_buf_puts(&said, ""), 0);
    cr_assert_eq(inspect_conditions_facts(g, 0)->cond[0], want, "%s: got %d (%s)", script,
                 inspect_conditions_facts(g, 0)->cond[0], said.data);
    if (says)
        cr_assert(strstr(said.data, says), "%s: said \"%s\", want \"%s\"", script, said.data, says);
    rg_buf_free(&said);
    inspect_conditions_free(g);
    rgit_quarantine_free(q);
    config_free(cfg);
    free(base_id);
    free(head);
}

#define SSH_SIGN(key)                                                                              \
    "git -c gpg.format=ssh -c user.signingkey=" key " commit -q --allow-empty -S -m s"
#define GPG_SIGN(home)                                                                             \
    "GNUPGHOME=" home " git -c gpg.format=openpgp -c user.signingkey=gpg@example.com "             \
    "commit -q --allow-empty -S -m g"

Test(conditions, unsigned_accepts_only_signatures_by_the_configured_keys)
{
    char ssh_signing[600], gpg_signing[600], both[1200];

    /* k1 is allowed, k2 is a key the pusher made; gpg1's key is in the
     * keyring, gpg2's is not. */
    test_run("cd '%s' && ssh-keygen -q -t ed25519 -N '' -f k1 && ssh-keygen -q -t ed25519 -N '' "
             "-f k2 && echo \"author@example.com $(cat k1.pub)\" > allowed && "
             "mkdir -m 700 gpg1 gpg2 && for h in gpg1 gpg2; do GNUPGHOME=$PWD/$h gpg --batch -q "
             "--passphrase '' --quick-gen-key 'G <gpg@example.com>' ed25519 sign never; done && "
             "GNUPGHOME=$PWD/gpg1 gpg --batch -q --export > keyring.gpg && "
             "for h in gpg1 gpg2; do gpgconf --homedir $PWD/$h --kill gpg-agent; done",
             base);
    snprintf(ssh_signing, sizeof(ssh_signing), "{'allowed_signers': '%s/allowed'}", base);
    snprintf(gpg_signing, sizeof(gpg_signing), "{'gpg_keyring': '%s/keyring.gpg'}", base);
    snprintf(both, sizeof(both),
             "{'allowed_signers': '%s/allowed', 'gpg_keyring': "
             "'%s/keyring.gpg'}",
             base, base);
    check_unsigned(SSH_SIGN("../k1"), ssh_signing, POLICY_COND_FAILS, NULL);
    check_unsigned(SSH_SIGN("../k1") " && git commit -q --allow-empty -m plain", ssh_signing,
                   POLICY_COND_HOLDS, "has no signature");
    check_unsigned(SSH_SIGN("../k2"), ssh_signing, POLICY_COND_HOLDS,
                   "is signed by a key not among signing.allowed_signers");
    check_unsigned(GPG_SIGN("../gpg1"), gpg_signing, POLICY_COND_FAILS, NULL);
    check_unsigned(GPG_SIGN("../gpg2"), gpg_signing, POLICY_COND_HOLDS,
                   "is signed by a key signing does not name");
    check_unsigned(SSH_SIGN("../k1") " && " GPG_SIGN("../gpg1"), both, POLICY_COND_FAILS, NULL);
    /* An SSH signature where only a keyring is configured does not verify. */
    check_unsigned(SSH_SIGN("../k1"), gpg_signing, POLICY_COND_HOLDS, NULL);
}

Test(conditions, unsigned_without_a_key_is_a_config_error)
{
    const char *json =
        "{\"state_dir\": \"s\", \"rules\": [{\"effect\": \"deny\", \"unsigned\": true}]}";
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_parse(&cfg, json, strlen(json), "/tmp/x.json", &err), RG_E_CONFIG);
    cr_assert(strstr(err.msg, "rules[0].unsigned: no key to verify signatures against"), "%s",
              err.msg);
}

Test(conditions, a_sha256_repository_cannot_be_inspected_so_the_answer_is_unknown)
{
    config_model *cfg = config_for(&(struct row){.rule = "'secrets': true"});
    inspect_conditions *g = NULL;
    inspect_conditions_ref ref = {NULL, NULL, 1};
    rg_buf pack = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    rgit_quarantine *q = NULL;
    char up[600], w[600], path[600], *head;

    snprintf(up, sizeof(up), "%s/up256.git", base);
    snprintf(w, sizeof(w), "%s/w256", base);
    snprintf(path, sizeof(path), "%s/p256.pack", base);
    test_run("git init -q --bare --object-format=sha256 '%s' && git init -q --object-format=sha256 "
             "'%s' && cd '%s' && echo x > x && git add x && git commit -q -m x && "
             "echo HEAD | git pack-objects -q --stdout --revs > '%s'",
             up, w, w, path);
    head = test_capture("git -C '%s' rev-parse HEAD", w);
    cr_assert_eq(rg_fs_read_file(&pack, path, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_quarantine_new(&q, up, tmp_parent, 64, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_quarantine_write(q, pack.data, pack.len, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_quarantine_finish(q, &err), 0, "%s", err.msg);
    ref.new_hex = head;
    cr_assert_eq(inspect_conditions_inspect(&g, cfg, q, NULL, &ref, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(inspect_conditions_facts(g, 0)->cond[0], POLICY_COND_UNKNOWN);
    cr_assert(strstr(inspect_conditions_facts(g, 0)->why[0], "SHA-1 repositories only"), "%s",
              inspect_conditions_facts(g, 0)->why[0]);
    inspect_conditions_free(g);
    rgit_quarantine_free(q);
    rg_buf_free(&pack);
    config_free(cfg);
    free(head);
}
