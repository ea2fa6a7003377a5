/*
 * Run tokens (tokens/token.c, tokens/key.c) with the file store: minting
 * and verifying, the expiry boundary, revocations that outlive the
 * process and reach other processes, every way a token can be damaged
 * (claims, signature, kid), keys of other gateways, rotation, and the key
 * file's creation and checks. tests/tokens/test_store.c runs what the
 * two stores share against both.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tokens/token.h"
#include "util/fs.h"

#define NOW 1900000000 /* 2030: a fixed clock makes expiry exact */

static char dir[PATH_MAX];
static char state[PATH_MAX];

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, sizeof(dir), "%s/rg-token-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(state, sizeof(state), "%s/state", dir);
}

static tokens_store *store_of_state;

static void teardown(void)
{
    tokens_store_free(store_of_state);
    store_of_state = NULL;
    rg_fs_remove_tree(dir, 0, NULL);
}

TestSuite(token, .init = setup, .fini = teardown);

static const char *const default_repos[] = {"local/acme/app", "github.com/acme/lib"};

/* The file store of `state`, opened on first use (each test is its own process). */

static tokens_store *store(void)
{
    rg_error err = RG_ERROR_INIT;

    if (store_of_state == NULL)
        cr_assert_eq(tokens_store_file_open(&store_of_state, state, &err), 0, "%s", err.msg);
    return store_of_state;
}

static tokens_key *load_key(const char *sdir)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = NULL;

    cr_assert_eq(tokens_key_load(&k, sdir, &err), 0, "key load: %s", err.msg);
    cr_assert_not_null(k);
    return k;
}

/* Publish k to the test's store, as a gateway does before it mints. */
static void publish(tokens_key *k)
{
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(tokens_key_publish(k, store(), "test", &err), 0, "publish: %s", err.msg);
}

static char *mint_unpublished(tokens_key *k, int64_t ttl, int64_t now)
{
    rg_error err = RG_ERROR_INIT;
    char *tok = NULL;

    cr_assert_eq(tokens_mint(&tok, k, "run-1", default_repos, 2, ttl, now, &err), 0, "mint: %s",
                 err.msg);
    cr_assert_not_null(tok);
    return tok;
}

static char *mint(tokens_key *k, int64_t ttl, int64_t now)
{
    publish(k);
    return mint_unpublished(k, ttl, now);
}

static tokens_status verify_in(tokens_store *s, const char *tok, int64_t now)
{
    rg_error err = RG_ERROR_INIT;
    tokens_claims *c = NULL;
    tokens_status st = TOKENS_OK;

    cr_assert_eq(tokens_verify(&c, &st, s, tok, now, &err), 0, "verify: %s", err.msg);
    if (st == TOKENS_OK)
        cr_assert_not_null(c);
    else
        cr_assert_null(c, "claims must only come with TOKENS_OK");
    tokens_claims_free(c);
    return st;
}

static tokens_status verify(const char *tok, int64_t now)
{
    return verify_in(store(), tok, now);
}

static int revoke_tok(const char *tok, rg_error *err)
{
    return tokens_revoke(store(), tok, err);
}

static size_t count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;
    int ch;

    if (f == NULL)
        return 0;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

/* ------------------------------------------------------------------------ */

Test(token, mint_then_verify_returns_the_claims)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW);
    tokens_claims *c = NULL;
    tokens_status st;
    size_t i;

    cr_assert_eq(strncmp(tok, "rg2.", 4), 0);
    cr_assert_eq(tokens_verify(&c, &st, store(), tok, NOW, &err), 0, "%s", err.msg);
    cr_assert_eq(st, TOKENS_OK, "%s", tokens_status_message(st));
    cr_assert_str_eq(c->run, "run-1");
    cr_assert_eq(c->nrepos, 2);
    cr_assert_str_eq(c->repos[0], "local/acme/app");
    cr_assert_str_eq(c->repos[1], "github.com/acme/lib");
    cr_assert_eq(c->exp, NOW + 600);
    cr_assert_eq(strlen(c->id), 32);
    for (i = 0; i < 32; i++)
        cr_assert(strchr("0123456789abcdef", c->id[i]) != NULL);
    tokens_claims_free(c);
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, two_mints_have_different_ids)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *a = mint(k, 600, NOW), *b = mint(k, 600, NOW);
    tokens_claims *ca = NULL, *cb = NULL;
    tokens_status st;

    cr_assert_str_neq(a, b);
    cr_assert_eq(tokens_verify(&ca, &st, store(), a, NOW, &err), 0);
    cr_assert_eq(tokens_verify(&cb, &st, store(), b, NOW, &err), 0);
    cr_assert_str_neq(ca->id, cb->id);
    tokens_claims_free(ca);
    tokens_claims_free(cb);
    tokens_secret_free(a);
    tokens_secret_free(b);
    tokens_key_free(k);
}

Test(token, valid_until_the_second_before_exp_and_expired_at_exp)
{
    tokens_key *k = load_key(state);
    char *tok = mint(k, 60, NOW);

    cr_assert_eq(verify(tok, NOW), TOKENS_OK);
    cr_assert_eq(verify(tok, NOW + 59), TOKENS_OK);
    cr_assert_eq(verify(tok, NOW + 60), TOKENS_EXPIRED);
    cr_assert_eq(verify(tok, NOW + 100000), TOKENS_EXPIRED);
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, allow_repo_matches_exactly)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW);
    tokens_claims *c = NULL;
    tokens_status st;

    cr_assert_eq(tokens_verify(&c, &st, store(), tok, NOW, &err), 0);
    cr_assert(tokens_claims_allow_repo(c, "local/acme/app"));
    cr_assert(tokens_claims_allow_repo(c, "github.com/acme/lib"));
    cr_assert_not(tokens_claims_allow_repo(c, "local/acme"));
    cr_assert_not(tokens_claims_allow_repo(c, "local/acme/app2"));
    cr_assert_not(tokens_claims_allow_repo(c, "local/acme/app.git"));
    cr_assert_not(tokens_claims_allow_repo(c, "local/acme/app/x"));
    cr_assert_not(tokens_claims_allow_repo(c, NULL));
    cr_assert_not(tokens_claims_allow_repo(NULL, "local/acme/app"));
    tokens_claims_free(c);
    tokens_secret_free(tok);
    tokens_key_free(k);
}

/* ------------------------------------------------------------------------
 * Revocation
 * ------------------------------------------------------------------------ */

Test(token, revocation_survives_a_restart)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW), *other = mint(k, 600, NOW), path[PATH_MAX];
    struct stat st;

    cr_assert_eq(revoke_tok(tok, &err), 0, "%s", err.msg);
    cr_assert_eq(verify(tok, NOW), TOKENS_REVOKED);
    tokens_key_free(k);
    tokens_store_free(store_of_state);
    store_of_state = NULL;

    /* A new process: the key and the revocations come from disk. */
    k = load_key(state);
    cr_assert_eq(verify(tok, NOW), TOKENS_REVOKED);
    cr_assert_eq(verify(other, NOW), TOKENS_OK, "only the revoked token is refused");

    snprintf(path, sizeof(path), "%s/revoked", state);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    tokens_secret_free(tok);
    tokens_secret_free(other);
    tokens_key_free(k);
}

Test(token, revocation_written_by_another_process_is_seen_at_once)
{
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW);
    int wstatus;
    pid_t pid;

    cr_assert_eq(verify(tok, NOW), TOKENS_OK);
    pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        /* `refgate token revoke`, in short. */
        tokens_store *s2 = NULL;
        int rc = tokens_store_file_open(&s2, state, NULL);
        if (rc == 0)
            rc = tokens_revoke(s2, tok, NULL);
        tokens_store_free(s2);
        _exit(rc == 0 ? 0 : 1);
    }
    cr_assert_eq(waitpid(pid, &wstatus, 0), pid);
    cr_assert(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    /* The running "gateway" keeps its store (and its key cache) and still sees it. */
    cr_assert_eq(verify(tok, NOW), TOKENS_REVOKED);
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, revoking_twice_records_it_once)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW), path[PATH_MAX];

    cr_assert_eq(revoke_tok(tok, &err), 0, "%s", err.msg);
    cr_assert_eq(revoke_tok(tok, &err), 0, "%s", err.msg);
    snprintf(path, sizeof(path), "%s/revoked", state);
    cr_assert_eq(count_lines(path), 1);
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, an_expired_token_can_still_be_revoked)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = mint(k, 1, 1000); /* expired long ago */

    cr_assert_eq(revoke_tok(tok, &err), 0, "%s", err.msg);
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, revoke_refuses_tokens_of_keys_the_store_does_not_hold)
{
    rg_error err = RG_ERROR_INIT;
    char other_state[PATH_MAX], path[PATH_MAX];
    tokens_key *k = load_key(state), *k2;
    char *foreign;

    snprintf(other_state, sizeof(other_state), "%s/other", dir);
    k2 = load_key(other_state);
    foreign = mint_unpublished(k2, 600, NOW);
    cr_assert_eq(revoke_tok(foreign, &err), RG_E_AUTH);
    cr_assert(strstr(err.msg, "key") != NULL, "%s", err.msg);
    cr_assert_eq(revoke_tok("rg2.garbage", &err), RG_E_AUTH);
    cr_assert_eq(revoke_tok(NULL, &err), RG_E_AUTH);
    snprintf(path, sizeof(path), "%s/revoked", state);
    cr_assert_eq(access(path, F_OK), -1, "nothing was recorded");
    tokens_secret_free(foreign);
    tokens_key_free(k);
    tokens_key_free(k2);
}

Test(token, unreadable_revocation_file_fails_closed)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW), path[PATH_MAX];
    tokens_claims *c = NULL;
    tokens_status st = TOKENS_OK;

    /* A directory where the file should be cannot be read, even by root. */
    snprintf(path, sizeof(path), "%s/revoked", state);
    cr_assert_eq(mkdir(path, 0700), 0);
    cr_assert_lt(tokens_verify(&c, &st, store(), tok, NOW, &err), 0);
    cr_assert_null(c);
    cr_assert_neq(st, TOKENS_OK);
    cr_assert(strstr(err.msg, "revocations") != NULL, "%s", err.msg);
    rmdir(path);

    if (geteuid() != 0) {
        int fd = open(path, O_CREAT | O_WRONLY, 0600);
        cr_assert_geq(fd, 0);
        close(fd);
        cr_assert_eq(chmod(path, 0000), 0);
        st = TOKENS_OK;
        cr_assert_lt(tokens_verify(&c, &st, store(), tok, NOW, &err), 0);
        cr_assert_null(c);
        cr_assert_neq(st, TOKENS_OK);
    }
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, revocation_file_others_can_write_fails_closed)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW), path[PATH_MAX];
    tokens_claims *c = NULL;
    tokens_status st = TOKENS_OK;
    int fd;

    snprintf(path, sizeof(path), "%s/revoked", state);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(chmod(path, 0666), 0);
    cr_assert_lt(tokens_verify(&c, &st, store(), tok, NOW, &err), 0);
    cr_assert_neq(st, TOKENS_OK);
    cr_assert(strstr(err.msg, "0666") != NULL, "%s", err.msg);
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, torn_revocation_line_neither_matches_nor_swallows_the_next)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW), *other = mint(k, 600, NOW), path[PATH_MAX];
    FILE *f;

    /* A revoke that crashed after writing half an id. */
    snprintf(path, sizeof(path), "%s/revoked", state);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("0123456789abcdef 1\n0123456789abc", f);
    fclose(f);
    chmod(path, 0600);
    cr_assert_eq(verify(tok, NOW), TOKENS_OK);
    cr_assert_eq(revoke_tok(tok, &err), 0, "%s", err.msg);
    cr_assert_eq(verify(tok, NOW), TOKENS_REVOKED);
    cr_assert_eq(verify(other, NOW), TOKENS_OK);
    cr_assert_eq(count_lines(path), 3, "the torn line was terminated first");
    tokens_secret_free(tok);
    tokens_secret_free(other);
    tokens_key_free(k);
}

/* ------------------------------------------------------------------------
 * Damaged tokens
 * ------------------------------------------------------------------------ */

typedef void (*tamper_fn)(char *tok);

static char *sig_of(char *tok)
{
    return strrchr(tok, '.') + 1;
}

/* rg2.<16 hex kid>.<claims>.<signature>: the claims start at 21. */
#define CLAIMS_AT 21

static void flip_payload_char(char *tok)
{
    char *p = tok + CLAIMS_AT + 4;
    *p = *p == 'A' ? 'B' : 'A';
}
static void flip_signature_char(char *tok)
{
    char *p = sig_of(tok);
    *p = *p == 'A' ? 'B' : 'A';
}
static void truncate_by_one(char *tok)
{
    tok[strlen(tok) - 1] = '\0';
}
static void drop_signature(char *tok)
{
    sig_of(tok)[0] = '\0';
}
static void drop_signature_and_dot(char *tok)
{
    sig_of(tok)[-1] = '\0';
}
static void append_dot(char *tok)
{
    strcat(tok, ".");
}
static void append_dot_and_more(char *tok)
{
    strcat(tok, ".AAAA");
}
static void dot_inside_payload(char *tok)
{
    tok[CLAIMS_AT + 3] = '.';
}
static void append_char(char *tok)
{
    strcat(tok, "A");
}
static void append_newline(char *tok)
{
    strcat(tok, "\n");
}
static void leading_space(char *tok)
{
    memmove(tok + 1, tok, strlen(tok) + 1);
    tok[0] = ' ';
}
static void version_1(char *tok)
{
    tok[2] = '1';
}
static void version_3(char *tok)
{
    tok[2] = '3';
}
/* Another hex digit: a kid no key has. */
static void kid_of_no_key(char *tok)
{
    tok[4] = tok[4] == '0' ? '1' : '0';
}
static void kid_upper_case(char *tok)
{
    int i;

    for (i = 4; i < 20; i++)
        if (tok[i] >= 'a' && tok[i] <= 'f') {
            tok[i] = (char)(tok[i] - 'a' + 'A');
            return;
        }
    tok[4] = 'X';
}
static void kid_one_short(char *tok)
{
    memmove(tok + 4, tok + 5, strlen(tok + 5) + 1);
}
static void kid_removed(char *tok)
{
    memmove(tok + 4, tok + CLAIMS_AT, strlen(tok + CLAIMS_AT) + 1);
}
static void signature_zeroed(char *tok)
{
    char *p = sig_of(tok);

    memset(p, 'A', strlen(p) - 1);
    p[strlen(p) - 1] = 'A';
}
static void signature_halved(char *tok)
{
    char *p = sig_of(tok);

    p[strlen(p) / 2] = '\0';
}
static void upper_prefix(char *tok)
{
    tok[0] = 'R';
    tok[1] = 'G';
}
static void no_prefix(char *tok)
{
    memmove(tok, tok + 4, strlen(tok + 4) + 1);
}
static void empty(char *tok)
{
    tok[0] = '\0';
}
static void padded_signature(char *tok)
{
    strcat(tok, "=");
}
/* The signature's last character carries 2 spare bits; setting them re-spells it. */
static void non_canonical_signature(char *tok)
{
    char *last = tok + strlen(tok) - 1;
    const char *alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    int v = (int)(strchr(alpha, *last) - alpha);
    *last = alpha[v ^ 1];
}
static void payload_not_base64(char *tok)
{
    tok[CLAIMS_AT + 2] = '*';
}

typedef struct tamper_case {
    const char *name;
    tamper_fn fn;
    tokens_status want;
} tamper_case;

static tamper_case tamper_cases[] = {
    {"payload byte", flip_payload_char, TOKENS_BAD_SIGNATURE},
    {"signature byte", flip_signature_char, TOKENS_BAD_SIGNATURE},
    {"payload not base64url", payload_not_base64, TOKENS_BAD_SIGNATURE},
    {"truncated by one", truncate_by_one, TOKENS_MALFORMED},
    {"signature removed", drop_signature, TOKENS_MALFORMED},
    {"signature and dot removed", drop_signature_and_dot, TOKENS_MALFORMED},
    {"trailing dot", append_dot, TOKENS_MALFORMED},
    {"extra segment", append_dot_and_more, TOKENS_MALFORMED},
    {"dot inside payload", dot_inside_payload, TOKENS_MALFORMED},
    {"extra character", append_char, TOKENS_MALFORMED},
    {"trailing newline", append_newline, TOKENS_MALFORMED},
    {"leading space", leading_space, TOKENS_MALFORMED},
    {"rg1 prefix (HMAC tokens)", version_1, TOKENS_MALFORMED},
    {"rg3 prefix", version_3, TOKENS_MALFORMED},
    {"RG2 prefix", upper_prefix, TOKENS_MALFORMED},
    {"kid of no key", kid_of_no_key, TOKENS_UNKNOWN_KEY},
    {"kid in upper case", kid_upper_case, TOKENS_MALFORMED},
    {"kid one digit short", kid_one_short, TOKENS_MALFORMED},
    {"kid removed", kid_removed, TOKENS_MALFORMED},
    {"signature all zero", signature_zeroed, TOKENS_BAD_SIGNATURE},
    {"signature cut in half", signature_halved, TOKENS_MALFORMED},
    {"no prefix", no_prefix, TOKENS_MALFORMED},
    {"empty", empty, TOKENS_MALFORMED},
    {"padded signature", padded_signature, TOKENS_MALFORMED},
    {"non-canonical signature", non_canonical_signature, TOKENS_MALFORMED},
};

/*
 * Criterion runs each parameter in a worker process whose addresses differ
 * from the runner's, so a parameter must not hold pointers: the tests get
 * an index into the static table instead.
 */
#define NCASES(a) (sizeof(a) / sizeof((a)[0]))
static size_t case_index[64];

static size_t *case_indexes(size_t n)
{
    size_t i;

    cr_assert_leq(n, NCASES(case_index));
    for (i = 0; i < n; i++)
        case_index[i] = i;
    return case_index;
}

ParameterizedTestParameters(token, damaged_tokens_are_refused_with_the_right_status)
{
    return cr_make_param_array(size_t, case_indexes(NCASES(tamper_cases)), NCASES(tamper_cases));
}

ParameterizedTest(size_t *i, token, damaged_tokens_are_refused_with_the_right_status)
{
    const tamper_case *tc = &tamper_cases[*i];
    tokens_key *k = load_key(state);
    char *tok = mint(k, 600, NOW), buf[TOKENS_MAX_LEN + 64];
    tokens_status st;

    cr_assert_lt(strlen(tok) + 16, sizeof(buf));
    strcpy(buf, tok);
    tc->fn(buf);
    cr_assert_str_neq(buf, tok, "%s: the case must change the token", tc->name);
    st = verify(buf, NOW);
    cr_assert_eq(st, tc->want, "%s: got '%s', want '%s'", tc->name, tokens_status_message(st),
                 tokens_status_message(tc->want));
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, another_payload_under_this_signature_is_refused)
{
    tokens_key *k = load_key(state);
    char *a = mint(k, 600, NOW), *b = mint(k, 3600, NOW), buf[TOKENS_MAX_LEN + 64];

    /* b's claims (longer-lived) with a's signature. */
    snprintf(buf, sizeof(buf), "%.*s%s", (int)(strrchr(b, '.') - b), b, strrchr(a, '.'));
    cr_assert_eq(verify(buf, NOW), TOKENS_BAD_SIGNATURE);
    tokens_secret_free(a);
    tokens_secret_free(b);
    tokens_key_free(k);
}

Test(token, another_gateways_key_verifies_only_once_published)
{
    char other_state[PATH_MAX], kid[TOKENS_KID_SIZE];
    tokens_key *k = load_key(state), *k2;
    char *foreign, *own;

    snprintf(other_state, sizeof(other_state), "%s/other", dir);
    k2 = load_key(other_state);
    foreign = mint_unpublished(k2, 600, NOW);
    cr_assert_eq(verify(foreign, NOW), TOKENS_UNKNOWN_KEY);
    publish(k2);
    cr_assert_eq(verify(foreign, NOW), TOKENS_OK);

    /* The kid of one published key on a token the other signed. */
    own = mint(k, 600, NOW);
    tokens_key_kid(kid, k);
    memcpy(foreign + 4, kid, TOKENS_KID_HEX);
    cr_assert_eq(verify(foreign, NOW), TOKENS_BAD_SIGNATURE);
    tokens_key_kid(kid, k2);
    memcpy(own + 4, kid, TOKENS_KID_HEX);
    cr_assert_eq(verify(own, NOW), TOKENS_BAD_SIGNATURE);
    tokens_secret_free(foreign);
    tokens_secret_free(own);
    tokens_key_free(k);
    tokens_key_free(k2);
}

Test(token, rotation_signs_with_a_new_kid_and_old_tokens_verify_until_they_expire)
{
    rg_error err = RG_ERROR_INIT;
    char before[TOKENS_KID_SIZE], old_kid[TOKENS_KID_SIZE], new_kid[TOKENS_KID_SIZE],
        path[PATH_MAX];
    tokens_key *k = load_key(state), *again;
    char *old_tok = mint(k, 60, NOW), *new_tok;
    tokens_claims *c = NULL;
    tokens_status st;

    tokens_key_kid(before, k);
    cr_assert_eq(tokens_key_rotate(k, store(), state, "test", old_kid, new_kid, &err), 0, "%s",
                 err.msg);
    cr_assert_str_eq(old_kid, before);
    cr_assert_str_neq(new_kid, old_kid);
    new_tok = mint_unpublished(k, 600, NOW); /* rotate published it */
    cr_assert_eq(tokens_verify(&c, &st, store(), new_tok, NOW, &err), 0, "%s", err.msg);
    cr_assert_eq(st, TOKENS_OK);
    cr_assert_str_eq(c->kid, new_kid);
    tokens_claims_free(c);
    cr_assert_eq(verify(old_tok, NOW + 59), TOKENS_OK, "the retired key still verifies");
    cr_assert_eq(verify(old_tok, NOW + 60), TOKENS_EXPIRED);

    /* The file holds the new key: a restart (or the CLI) signs with it. */
    again = load_key(state);
    tokens_key_kid(before, again);
    cr_assert_str_eq(before, new_kid);
    snprintf(path, sizeof(path), "%s/token-keys", state);
    cr_assert_eq(count_lines(path), 3, "key old, key new, retire old");
    tokens_secret_free(old_tok);
    tokens_secret_free(new_tok);
    tokens_key_free(k);
    tokens_key_free(again);
}

Test(token, oversized_and_null_tokens_are_malformed)
{
    tokens_key *k = load_key(state);
    char *big = malloc(TOKENS_MAX_LEN + 100);
    tokens_claims *c = NULL;
    tokens_status st = TOKENS_OK;

    cr_assert_not_null(big);
    memcpy(big, "rg2.", 4);
    memset(big + 4, 'A', TOKENS_MAX_LEN + 90);
    big[TOKENS_MAX_LEN + 99] = '\0';
    cr_assert_eq(verify(big, NOW), TOKENS_MALFORMED);
    cr_assert_eq(tokens_verify(&c, &st, store(), NULL, NOW, NULL), 0);
    cr_assert_eq(st, TOKENS_MALFORMED);
    cr_assert_null(c);
    free(big);
    tokens_key_free(k);
}

/* ------------------------------------------------------------------------
 * Shapes and names
 * ------------------------------------------------------------------------ */

Test(token, tokens_of_the_same_inputs_have_one_shape)
{
    tokens_key *k = load_key(state);
    size_t len0 = 0, i, dots;
    const char *p;
    char *tok;

    for (i = 0; i < 50; i++) {
        tok = mint(k, 600, NOW);
        if (i == 0)
            len0 = strlen(tok);
        cr_assert_eq(strlen(tok), len0, "token length must not depend on the random id");
        for (dots = 0, p = tok; *p; p++)
            dots += *p == '.';
        cr_assert_eq(dots, 3);
        cr_assert_eq(strlen(sig_of(tok)), 86, "64-byte Ed25519 signature, unpadded base64url");
        cr_assert_leq(strlen(tok), TOKENS_MAX_LEN);
        tokens_secret_free(tok);
    }
    tokens_key_free(k);
}

Test(token, hash_prefix_is_12_hex_digits_and_never_part_of_the_token)
{
    tokens_key *k = load_key(state);
    char prefix[13], again[13], *tok;
    size_t i, j;

    for (i = 0; i < 200; i++) {
        tok = mint(k, 600, NOW);
        memset(prefix, 'x', sizeof(prefix));
        tokens_hash_prefix(prefix, tok);
        cr_assert_eq(prefix[12], '\0');
        cr_assert_eq(strlen(prefix), 12);
        for (j = 0; j < 12; j++)
            cr_assert(strchr("0123456789abcdef", prefix[j]) != NULL);
        cr_assert_null(strstr(tok, prefix), "a log line must not carry part of the token");
        tokens_hash_prefix(again, tok);
        cr_assert_str_eq(prefix, again);
        tokens_secret_free(tok);
    }
    /* SHA-256("abc") = ba7816bf8f01cfea... */
    tokens_hash_prefix(prefix, "abc");
    cr_assert_str_eq(prefix, "ba7816bf8f01");
    tokens_key_free(k);
}

Test(token, free_functions_accept_null)
{
    tokens_secret_free(NULL);
    tokens_claims_free(NULL);
    tokens_key_free(NULL);
}

Test(token, every_status_has_a_message)
{
    cr_assert_str_eq(tokens_status_message(TOKENS_OK), "valid");
    cr_assert(strstr(tokens_status_message(TOKENS_EXPIRED), "expired") != NULL);
    cr_assert(strstr(tokens_status_message(TOKENS_REVOKED), "revoked") != NULL);
    cr_assert(strstr(tokens_status_message(TOKENS_BAD_SIGNATURE), "signature") != NULL);
    cr_assert(strlen(tokens_status_message(TOKENS_MALFORMED)) > 0);
}

/* ------------------------------------------------------------------------
 * What mint refuses
 * ------------------------------------------------------------------------ */

typedef struct mint_case {
    const char *name;
    const char *run;
    const char *repo;
    size_t nrepos; /* copies of repo */
    int64_t ttl;
} mint_case;

static char long_run[TOKENS_RUN_MAX + 2];
static char long_host[200];

static mint_case mint_cases[] = {
    {"empty run", "", "local/a", 1, 60},
    {"run with a space", "my run", "local/a", 1, 60},
    {"run with a tab", "my\trun", "local/a", 1, 60},
    {"run with an escape", "run\x1b[31m", "local/a", 1, 60},
    {"run not ASCII", "r\xc3\xa9sum\xc3\xa9", "local/a", 1, 60},
    {"run too long", long_run, "local/a", 1, 60},
    {"no repos", "r", "local/a", 0, 60},
    {"too many repos", "r", "local/a", TOKENS_REPOS_MAX + 1, 60},
    {"repo without host", "r", "noslash", 1, 60},
    {"repo with leading slash", "r", "/local/a", 1, 60},
    {"repo with ..", "r", "local/../a", 1, 60},
    {"repo with .", "r", "local/./a", 1, 60},
    {"repo with .git", "r", "local/a.git", 1, 60},
    {"repo with empty segment", "r", "local//a", 1, 60},
    {"repo with trailing slash", "r", "local/a/", 1, 60},
    {"repo with hidden segment", "r", "local/.ssh", 1, 60},
    {"repo with space", "r", "local/a b", 1, 60},
    {"repo with newline", "r", "local/a\nb", 1, 60},
    {"empty repo", "r", "", 1, 60},
    {"host only", "r", "local/", 1, 60},
    {"host too long", "r", long_host, 1, 60},
    {"zero ttl", "r", "local/a", 1, 0},
    {"negative ttl", "r", "local/a", 1, -5},
    {"ttl over 7 days", "r", "local/a", 1, TOKENS_TTL_MAX + 1},
};

ParameterizedTestParameters(token, mint_refuses_bad_input)
{
    return cr_make_param_array(size_t, case_indexes(NCASES(mint_cases)), NCASES(mint_cases));
}

ParameterizedTest(size_t *ci, token, mint_refuses_bad_input)
{
    const mint_case *mc = &mint_cases[*ci];
    const char *repos[TOKENS_REPOS_MAX + 1];
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char *tok = (char *)"untouched";
    size_t i;

    /* The long strings are filled here, in the worker that uses them. */
    memset(long_run, 'r', sizeof(long_run) - 1);
    long_run[sizeof(long_run) - 1] = '\0';
    memset(long_host, 'h', sizeof(long_host) - 3);
    memcpy(long_host + sizeof(long_host) - 3, "/a", 3);
    for (i = 0; i < mc->nrepos; i++)
        repos[i] = mc->repo;
    cr_assert_eq(tokens_mint(&tok, k, mc->run, repos, mc->nrepos, mc->ttl, NOW, &err), -EINVAL,
                 "%s: must be refused", mc->name);
    cr_assert_null(tok, "%s: *out is NULL on failure", mc->name);
    cr_assert(err.msg[0] != '\0', "%s: says why", mc->name);
    tokens_key_free(k);
}

Test(token, mint_accepts_the_limits)
{
    const char *repos[TOKENS_REPOS_MAX];
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char run[TOKENS_RUN_MAX + 1], *tok = NULL;
    size_t i;

    memset(run, 'r', TOKENS_RUN_MAX);
    run[TOKENS_RUN_MAX] = '\0';
    for (i = 0; i < TOKENS_REPOS_MAX; i++)
        repos[i] = "local/acme/some-repo_name.v2+x~y";
    publish(k);
    cr_assert_eq(tokens_mint(&tok, k, run, repos, TOKENS_REPOS_MAX, TOKENS_TTL_MAX, NOW, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(verify(tok, NOW + TOKENS_TTL_MAX - 1), TOKENS_OK);
    tokens_secret_free(tok);
    tokens_key_free(k);
}

Test(token, mint_refuses_a_token_over_the_size_cap)
{
    const char *repos[TOKENS_REPOS_MAX];
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = load_key(state);
    char repo[600], *tok = NULL;
    size_t i;

    /* 32 repos of ~500 bytes cannot fit in 8 KiB. */
    memcpy(repo, "local/", 6);
    for (i = 6; i < 500; i++)
        repo[i] = (i % 50 == 0) ? '/' : 'a';
    repo[500] = '\0';
    for (i = 0; i < TOKENS_REPOS_MAX; i++)
        repos[i] = repo;
    cr_assert_eq(tokens_mint(&tok, k, "r", repos, TOKENS_REPOS_MAX, 60, NOW, &err), RG_E_TOO_BIG,
                 "%s", err.msg);
    cr_assert_null(tok);
    tokens_key_free(k);
}

/* ------------------------------------------------------------------------
 * The key file
 * ------------------------------------------------------------------------ */

Test(token, key_is_created_0600_in_a_new_0700_state_dir)
{
    char sdir[PATH_MAX], path[PATH_MAX];
    tokens_key *k;
    struct stat st;

    snprintf(sdir, sizeof(sdir), "%s/a/b/state", dir);
    k = load_key(sdir);
    cr_assert_eq(stat(sdir, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 0777, 0700);
    snprintf(path, sizeof(path), "%s/" TOKENS_KEY_FILE, sdir);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    cr_assert_eq(st.st_size, 32);
    tokens_key_free(k);
}

Test(token, the_same_key_is_loaded_again)
{
    tokens_key *k = load_key(state), *k2;
    char a[TOKENS_KID_SIZE], b[TOKENS_KID_SIZE];
    char *tok;

    k2 = load_key(state);
    tokens_key_kid(a, k);
    tokens_key_kid(b, k2);
    cr_assert_str_eq(a, b);
    tok = mint_unpublished(k2, 600, NOW);
    publish(k);
    cr_assert_eq(verify(tok, NOW), TOKENS_OK);
    tokens_secret_free(tok);
    tokens_key_free(k);
    tokens_key_free(k2);
}

static void expect_key_refused(const char *needle)
{
    rg_error err = RG_ERROR_INIT;
    tokens_key *k = (tokens_key *)&err; /* must be reset to NULL */

    cr_assert_lt(tokens_key_load(&k, state, &err), 0);
    cr_assert_null(k);
    cr_assert(strstr(err.msg, needle) != NULL, "message '%s' should mention '%s'", err.msg, needle);
}

Test(token, key_readable_by_others_is_refused)
{
    char path[PATH_MAX];

    tokens_key_free(load_key(state));
    snprintf(path, sizeof(path), "%s/" TOKENS_KEY_FILE, state);
    cr_assert_eq(chmod(path, 0644), 0);
    expect_key_refused("0644");
    expect_key_refused("0600");
    cr_assert_eq(chmod(path, 0640), 0);
    expect_key_refused("0640");
    cr_assert_eq(chmod(path, 0600), 0);
    tokens_key_free(load_key(state));
}

Test(token, key_of_the_wrong_size_is_refused)
{
    char path[PATH_MAX];

    tokens_key_free(load_key(state));
    snprintf(path, sizeof(path), "%s/" TOKENS_KEY_FILE, state);
    cr_assert_eq(truncate(path, 31), 0);
    expect_key_refused("31 bytes");
    cr_assert_eq(truncate(path, 33), 0);
    expect_key_refused("33 bytes");
    cr_assert_eq(truncate(path, 0), 0);
    expect_key_refused("0 bytes");
}

Test(token, symlinked_key_is_refused)
{
    char path[PATH_MAX], target[PATH_MAX];

    tokens_key_free(load_key(state));
    snprintf(path, sizeof(path), "%s/" TOKENS_KEY_FILE, state);
    snprintf(target, sizeof(target), "%s/elsewhere.key", dir);
    cr_assert_eq(rename(path, target), 0);
    cr_assert_eq(symlink(target, path), 0);
    expect_key_refused("symbolic link");
}

typedef struct loader {
    tokens_key *key;
    int rc;
} loader;

static void *load_thread(void *arg)
{
    loader *l = arg;

    l->rc = tokens_key_load(&l->key, state, NULL);
    return NULL;
}

Test(token, concurrent_first_loads_agree_on_one_key)
{
    loader l[8];
    pthread_t th[8];
    char *tok;
    DIR *d;
    struct dirent *e;
    size_t i, entries = 0;

    for (i = 0; i < 8; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, load_thread, &l[i]), 0);
    for (i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    for (i = 0; i < 8; i++)
        cr_assert_eq(l[i].rc, 0, "loader %zu failed", i);
    for (i = 0; i < 8; i++) {
        char a[TOKENS_KID_SIZE], b[TOKENS_KID_SIZE];

        tokens_key_kid(a, l[0].key);
        tokens_key_kid(b, l[i].key);
        cr_assert_str_eq(a, b, "loader %zu has another key", i);
    }
    /* The losers' temporary files are gone. */
    d = opendir(state);
    cr_assert_not_null(d);
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            entries++;
            cr_assert_str_eq(e->d_name, TOKENS_KEY_FILE);
        }
    closedir(d);
    cr_assert_eq(entries, 1);
    tok = mint(l[0].key, 600, NOW);
    cr_assert_eq(verify(tok, NOW), TOKENS_OK);
    tokens_secret_free(tok);
    for (i = 0; i < 8; i++)
        tokens_key_free(l[i].key);
}
