/*
 * The audit log (audit/) and `refgate audit` (cli/audit.c): every kind of
 * damage is found at the right line, a torn tail is kept and chained past,
 * and the CLI filters, prints and verifies what is on disk. What every
 * store must do (chaining, batches, concurrent appends, completing pending
 * records) is tested on each store in test_store.c.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "cli/cli.h"

static char dir[PATH_MAX], logpath[PATH_MAX];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");
    char state[PATH_MAX];

    snprintf(dir, sizeof(dir), "%s/rg-audit-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(state, sizeof(state), "%s/state", dir);
    cr_assert_eq(mkdir(state, 0700), 0);
    snprintf(logpath, sizeof(logpath), "%s/audit.jsonl", state);
}

static void teardown(void)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(audit, .init = setup, .fini = teardown);

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

#define ZEROS "0000000000000000000000000000000000000000000000000000000000000000"
#define OID0  "0000000000000000000000000000000000000000"
#define OID1  "1111111111111111111111111111111111111111"

typedef struct rec_bufs {
    char push[32], reason[64];
} rec_bufs;

/* Record i: odd ones are denied pushes to main, even ones allowed feature pushes. */
static audit_record make_rec(rec_bufs *b, int i)
{
    audit_record r;

    snprintf(b->push, sizeof(b->push), "push-%d", i);
    snprintf(b->reason, sizeof(b->reason), "reason number %d", i);
    memset(&r, 0, sizeof(r));
    r.kind = AUDIT_DECISION;
    r.push_id = b->push;
    r.run = i % 2 ? "run-odd" : "run-even";
    r.token_hash = "0123456789ab";
    r.remote = "127.0.0.1";
    r.repo = "local/acme/app";
    r.ref = i % 2 ? "refs/heads/main" : "refs/heads/feature/x";
    r.old_id = OID0;
    r.new_id = OID1;
    r.action = i % 2 ? "force" : "create";
    r.decision = i % 2 ? "deny" : "allow";
    r.rule = i % 2 ? "protect-main" : "features";
    r.reason = b->reason;
    r.outcome = i % 2 ? "rejected" : "forwarded: ok";
    return r;
}

static audit_log *open_log(void)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = NULL;

    cr_assert_eq(audit_open(&log, logpath, &err), 0, "open: %s", err.msg);
    cr_assert_not_null(log);
    return log;
}

/* Append records first..first+n-1, one call each, with the log opened and closed. */
static void append_records(int first, int n)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    audit_record r;
    rec_bufs b;
    int i;

    for (i = first; i < first + n; i++) {
        r = make_rec(&b, i);
        cr_assert_eq(audit_append(log, &r, &err), 0, "append: %s", err.msg);
    }
    audit_close(log);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

static void spit(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void spit_append(const char *path, const char *data)
{
    FILE *f = fopen(path, "ab");

    cr_assert_not_null(f);
    fputs(data, f);
    fclose(f);
}

/* Start of line n (1-based) in buf, and its length without the newline. */
static char *line_at(char *buf, int n, size_t *len)
{
    char *p = buf, *nl;
    int i;

    for (i = 1; i < n; i++) {
        p = strchr(p, '\n');
        cr_assert_not_null(p, "no line %d", n);
        p++;
    }
    nl = strchr(p, '\n');
    *len = nl ? (size_t)(nl - p) : strlen(p);
    return p;
}

static json_t *parse_line(int n)
{
    char *buf = slurp(logpath, NULL), *p;
    json_t *j;
    size_t len;

    p = line_at(buf, n, &len);
    j = json_loadb(p, len, 0, NULL);
    cr_assert(json_is_object(j), "line %d is not JSON", n);
    free(buf);
    return j;
}

static void sha256_hex(char out[65], const void *data, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[32];
    unsigned int mdlen = 0;
    int i;

    cr_assert_eq(EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL), 1);
    for (i = 0; i < 32; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[64] = '\0';
}

static audit_verify_result verify_log(void)
{
    rg_error err = RG_ERROR_INIT;
    audit_verify_result res;

    cr_assert_eq(audit_verify(&res, &(audit_source){.path = logpath}, &err), 0, "verify: %s",
                 err.msg);
    return res;
}

static void assert_intact(uint64_t lines)
{
    audit_verify_result res = verify_log();

    cr_assert_eq(res.bad_line, 0, "broken at line %llu: %s", (unsigned long long)res.bad_line,
                 res.why);
    cr_assert_eq(res.lines, lines, "%llu lines, expected %llu", (unsigned long long)res.lines,
                 (unsigned long long)lines);
}

static void assert_broken(uint64_t line, const char *needle)
{
    audit_verify_result res = verify_log();

    cr_assert_eq(res.bad_line, line, "bad line %llu (%s), expected %llu",
                 (unsigned long long)res.bad_line, res.why, (unsigned long long)line);
    cr_assert(strstr(res.why, needle) != NULL, "why '%s' should say '%s'", res.why, needle);
}

/* ------------------------------------------------------------------------
 * Writing and the chain
 * ------------------------------------------------------------------------ */

Test(audit, fields_are_written_in_order_and_evaluate_only_when_set)
{
    static const char *const order[] = {"v",       "seq",    "prev",     "time",   "type",
                                        "push_id", "run",    "token",    "remote", "repo",
                                        "ref",     "old",    "new",      "action", "decision",
                                        "rule",    "reason", "evaluate", "outcome"};
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    audit_record r;
    rec_bufs b;
    const char *key, *t;
    json_t *j, *v;
    size_t i;
    void *it;

    r = make_rec(&b, 1);
    cr_assert_eq(audit_append(log, &r, &err), 0);
    r.evaluate = "deny by strict-tags";
    r.reason = NULL;
    cr_assert_eq(audit_append(log, &r, &err), 0);
    audit_close(log);

    j = parse_line(1);
    cr_assert_eq(json_object_size(j), 18, "no evaluate when it is NULL");
    cr_assert_null(json_object_get(j, "evaluate"));
    for (i = 0, it = json_object_iter(j); it; it = json_object_iter_next(j, it), i++)
        cr_assert_str_eq(json_object_iter_key(it), order[i + (i >= 17)]);
    /* 2026-11-30T12:00:05.123Z */
    t = json_string_value(json_object_get(j, "time"));
    cr_assert_eq(strlen(t), 24, "%s", t);
    cr_assert(t[10] == 'T' && t[19] == '.' && t[23] == 'Z', "%s", t);
    cr_assert_str_eq(json_string_value(json_object_get(j, "token")), "0123456789ab");
    cr_assert_str_eq(json_string_value(json_object_get(j, "old")), OID0);
    json_decref(j);

    j = parse_line(2);
    cr_assert_eq(json_object_size(j), 19);
    for (i = 0, it = json_object_iter(j); it; it = json_object_iter_next(j, it), i++) {
        key = json_object_iter_key(it);
        cr_assert_str_eq(key, order[i]);
    }
    v = json_object_get(j, "reason");
    cr_assert(json_is_null(v), "a NULL field is written as null");
    cr_assert_str_eq(json_string_value(json_object_get(j, "evaluate")), "deny by strict-tags");
    json_decref(j);
}

Test(audit, a_decision_names_its_policy_between_evaluate_and_outcome_and_verifies)
{
    static const char digest[] =
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    audit_record r;
    rec_bufs b;
    json_t *j;
    void *it;
    const char *prev = NULL;

    r = make_rec(&b, 1);
    r.evaluate = "deny by trial";
    r.policy = digest;
    cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
    /* A record without one (written before policies, or no policy decided). */
    r.policy = NULL;
    cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
    audit_close(log);

    j = parse_line(1);
    cr_assert_str_eq(json_string_value(json_object_get(j, "policy")), digest);
    for (it = json_object_iter(j); it; it = json_object_iter_next(j, it)) {
        if (!strcmp(json_object_iter_key(it), "policy"))
            cr_assert_str_eq(prev, "evaluate");
        if (!strcmp(json_object_iter_key(it), "outcome"))
            cr_assert_str_eq(prev, "policy");
        prev = json_object_iter_key(it);
    }
    json_decref(j);
    j = parse_line(2);
    cr_assert_null(json_object_get(j, "policy"), "left out when NULL");
    json_decref(j);
    assert_intact(2);
}

Test(audit, lines_are_compact_json)
{
    char *buf;

    append_records(1, 1);
    buf = slurp(logpath, NULL);
    cr_assert_eq(strncmp(buf, "{\"v\":2,\"seq\":1,\"prev\":\"", 23), 0, "%s", buf);
    cr_assert_null(strstr(buf, "\": "), "no spaces after colons");
    free(buf);
}

Test(audit, log_is_created_0600)
{
    struct stat st;

    audit_close(open_log());
    cr_assert_eq(stat(logpath, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    cr_assert_eq(st.st_size, 0);
    assert_intact(0);
}

Test(audit, a_second_writer_is_refused_while_the_first_is_open)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log(), *second = NULL;

    cr_assert_eq(audit_open(&second, logpath, &err), -EBUSY);
    cr_assert_null(second);
    cr_assert(strstr(err.msg, "in use") != NULL, "%s", err.msg);
    audit_close(log);
    second = open_log();
    audit_close(second);
}

Test(audit, hostile_fields_are_escaped_and_capped)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    char *big = malloc(20000);
    const char *reason, *ref;
    audit_record r;
    rec_bufs b;
    json_t *j;

    cr_assert_not_null(big);
    memset(big, 'x', 19999);
    big[19999] = '\0';
    r = make_rec(&b, 1);
    r.ref = "refs/heads/\xff\xfe-bad-\x1b[31m-utf8";
    r.reason = big;
    r.outcome = "forwarded: ng caf\xc3\xa9 \xe2\x80\xae evil"; /* valid UTF-8 stays */
    cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
    audit_close(log);
    free(big);
    assert_intact(1);

    j = parse_line(1);
    ref = json_string_value(json_object_get(j, "ref"));
    cr_assert_str_eq(ref, "refs/heads/\\xFF\\xFE-bad-\x1b[31m-utf8");
    reason = json_string_value(json_object_get(j, "reason"));
    cr_assert_leq(strlen(reason), 4096);
    cr_assert_eq(strcmp(reason + strlen(reason) - 3, "..."), 0);
    cr_assert_str_eq(json_string_value(json_object_get(j, "outcome")),
                     "forwarded: ng caf\xc3\xa9 \xe2\x80\xae evil");
    json_decref(j);
}

Test(audit, free_functions_accept_null)
{
    audit_close(NULL);
    audit_reader_free(NULL);
}

/* ------------------------------------------------------------------------
 * Damage
 * ------------------------------------------------------------------------ */

Test(audit, a_changed_byte_is_found_at_the_next_line_and_names_the_changed_one)
{
    char *buf, *p;
    size_t len;

    append_records(1, 10);
    buf = slurp(logpath, &len);
    p = strstr(buf, "reason number 5");
    cr_assert_not_null(p);
    p[7] = 'N'; /* "reason Number 5": still valid JSON */
    spit(logpath, buf, len);
    free(buf);
    assert_broken(6, "prev does not match line 5");
}

Test(audit, a_change_that_breaks_the_json_is_found_at_that_line)
{
    char *buf, *p;
    size_t len;

    append_records(1, 10);
    buf = slurp(logpath, &len);
    p = line_at(buf, 5, &len);
    p[0] = 'X';
    len = strlen(buf);
    spit(logpath, buf, len);
    free(buf);
    assert_broken(5, "not a JSON object");
}

Test(audit, a_changed_seq_is_found_at_that_line)
{
    char *buf, *p;
    size_t len;

    append_records(1, 10);
    buf = slurp(logpath, &len);
    p = strstr(line_at(buf, 4, &len), "\"seq\":4");
    cr_assert_not_null(p);
    p[6] = '7';
    spit(logpath, buf, strlen(buf));
    free(buf);
    assert_broken(4, "seq 7 does not follow seq 3");
}

Test(audit, a_deleted_line_is_found)
{
    char *buf, *p, *q;
    size_t len;

    append_records(1, 8);
    buf = slurp(logpath, &len);
    p = line_at(buf, 4, &len);
    q = p + len + 1;
    memmove(p, q, strlen(q) + 1);
    spit(logpath, buf, strlen(buf));
    free(buf);
    assert_broken(4, "a record is missing");
}

Test(audit, a_deleted_first_line_is_found)
{
    char *buf, *p;
    size_t len;

    append_records(1, 3);
    buf = slurp(logpath, &len);
    p = strchr(buf, '\n') + 1;
    spit(logpath, p, strlen(p));
    free(buf);
    assert_broken(1, "first record has seq 1");
}

Test(audit, swapped_lines_are_found)
{
    char *buf, *out, *l2, *l3;
    size_t len, n2, n3, head;

    append_records(1, 4);
    buf = slurp(logpath, &len);
    out = malloc(len + 1);
    l2 = line_at(buf, 2, &n2);
    l3 = line_at(buf, 3, &n3);
    head = (size_t)(l2 - buf);
    memcpy(out, buf, head);
    memcpy(out + head, l3, n3 + 1);
    memcpy(out + head + n3 + 1, l2, n2 + 1);
    memcpy(out + head + n2 + n3 + 2, l3 + n3 + 1, len - head - n2 - n3 - 2);
    spit(logpath, out, len);
    free(out);
    free(buf);
    assert_broken(2, "seq 3 does not follow seq 1");
}

Test(audit, a_torn_last_line_is_named)
{
    append_records(1, 3);
    spit_append(logpath, "{\"time\":\"2026-11-30T12:00:0");
    assert_broken(4, "torn");
}

Test(audit, reopening_after_a_torn_line_keeps_it_and_chains_past_it)
{
    static const char torn[] = "{\"time\":\"2026-11-30T12:00:0";
    char hash[65];
    json_t *j;
    char *buf, *p;
    size_t len;

    append_records(1, 3);
    spit_append(logpath, torn);
    append_records(4, 2);

    buf = slurp(logpath, NULL);
    p = line_at(buf, 4, &len);
    cr_assert_eq(len, strlen(torn));
    cr_assert_eq(memcmp(p, torn, len), 0, "the torn fragment is kept as it was");
    free(buf);

    sha256_hex(hash, torn, strlen(torn));
    j = parse_line(5);
    cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 4, "seq follows the last good one");
    cr_assert_str_eq(json_string_value(json_object_get(j, "prev")), hash,
                     "prev is the hash of the torn line's bytes");
    json_decref(j);
    j = parse_line(6);
    cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 5);
    json_decref(j);
    /* Verify names the torn line, which is no longer at the end. */
    assert_broken(4, "not a JSON object");
}

Test(audit, a_whole_record_missing_only_its_newline_rejoins_the_chain)
{
    char *buf;
    size_t len;

    append_records(1, 3);
    buf = slurp(logpath, &len);
    spit(logpath, buf, len - 1);
    free(buf);
    assert_broken(3, "torn");
    append_records(4, 1);
    assert_intact(4);
}

Test(audit, a_failed_append_is_recovered_by_the_next)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    struct rlimit old, lim;
    audit_record r;
    struct stat st;
    rec_bufs b;
    json_t *j;

    r = make_rec(&b, 1);
    cr_assert_eq(audit_append(log, &r, &err), 0);
    /* Let the next write stop 50 bytes in, as a full disk would. */
    cr_assert_eq(stat(logpath, &st), 0);
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)st.st_size + 50;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    r = make_rec(&b, 2);
    cr_assert_lt(audit_append(log, &r, &err), 0);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    r = make_rec(&b, 3);
    cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
    audit_close(log);

    /* The half record is kept and named; the next one chains on from it. */
    assert_broken(2, "not a JSON object");
    j = parse_line(3);
    cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 2);
    cr_assert_str_eq(json_string_value(json_object_get(j, "push_id")), "push-3");
    json_decref(j);
}

Test(audit, verify_of_a_missing_log_is_enoent)
{
    rg_error err = RG_ERROR_INIT;
    audit_verify_result res;

    cr_assert_eq(audit_verify(&res, &(audit_source){.path = logpath}, &err), -ENOENT);
}

/* ------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------ */

Test(audit, the_reader_yields_each_line_with_its_hash)
{
    rg_error err = RG_ERROR_INIT;
    audit_reader *r = NULL;
    audit_line line;
    unsigned char md[32];
    unsigned int mdlen;
    char *buf, *p;
    size_t len;
    int n = 0;

    append_records(1, 3);
    spit_append(logpath, "\npartial");
    buf = slurp(logpath, NULL);
    cr_assert_eq(audit_reader_open(&r, &(audit_source){.path = logpath}, &err), 0);
    while (audit_reader_next(r, &line, &err) == 1) {
        n++;
        cr_assert_eq(line.number, (uint64_t)n);
        p = line_at(buf, n, &len);
        cr_assert_eq(line.len, len);
        cr_assert_eq(memcmp(line.data, p, len), 0);
        cr_assert_eq(line.data[len], '\0');
        EVP_Digest(p, len, md, &mdlen, EVP_sha256(), NULL);
        cr_assert_eq(memcmp(line.sha256, md, 32), 0);
        cr_assert_eq(line.torn, n == 5, "only the last line lacks its newline");
        cr_assert_eq(line.too_long, 0);
    }
    cr_assert_eq(n, 5, "3 records, an empty line and the partial one");
    audit_reader_free(r);
    free(buf);
}

/* ------------------------------------------------------------------------
 * refgate audit
 * ------------------------------------------------------------------------ */

static char *config_path(void)
{
    static char path[PATH_MAX];
    char json[PATH_MAX + 200];

    snprintf(path, sizeof(path), "%s/refgate.json", dir);
    snprintf(json, sizeof(json),
             "{\"state_dir\": \"state\", \"upstreams\": [{\"host\": \"local\", \"url\": "
             "\"file://%s\"}]}\n",
             dir);
    spit(path, json, strlen(json));
    return path;
}

/* Run a CLI function with the given arguments; its stdout lands in *out. */
static int run_cli(char **out, int (*fn)(int, char **), ...)
{
    char *argv[32], outpath[PATH_MAX];
    int argc = 0, saved, fd, rc;
    const char *a;
    va_list ap;

    va_start(ap, fn);
    while ((a = va_arg(ap, const char *)) != NULL && argc < 31)
        argv[argc++] = strdup(a);
    va_end(ap);
    argv[argc] = NULL;
    snprintf(outpath, sizeof(outpath), "%s/stdout.txt", dir);
    fflush(stdout);
    saved = dup(STDOUT_FILENO);
    fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    rc = fn(argc, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    *out = slurp(outpath, NULL);
    while (argc > 0)
        free(argv[--argc]);
    return rc;
}

static int count_char(const char *s, char c)
{
    int n = 0;

    for (; *s; s++)
        n += *s == c;
    return n;
}

Test(audit, cli_verify_says_intact_broken_or_no_log)
{
    const char *cfg = config_path();
    char *out, *buf, *p;
    size_t len;

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "verify", "--config", cfg, NULL), 0);
    cr_assert_str_eq(out, "no audit log yet\n");
    free(out);

    append_records(1, 7);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "verify", "--config", cfg, NULL), 0);
    cr_assert_str_eq(out, "audit log intact: 7 records\n");
    free(out);

    buf = slurp(logpath, &len);
    p = strstr(buf, "reason number 3");
    p[0] = 'R';
    spit(logpath, buf, len);
    free(buf);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "verify", "--config", cfg, NULL), 1);
    cr_assert_eq(strncmp(out, "audit log broken at line 4: prev does not match line 3", 54), 0,
                 "%s", out);
    free(out);
}

Test(audit, cli_help_and_usage_errors)
{
    const char *cfg = config_path();
    char *out;

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--help", NULL), 0);
    cr_assert(strstr(out, "usage: refgate audit") != NULL);
    cr_assert(strstr(out, "--since") != NULL);
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "verify", "--help", NULL), 0);
    cr_assert(strstr(out, "verify") != NULL);
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", NULL), 2, "--config is required");
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "verify", NULL), 2);
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--decision", "maybe", NULL),
                 2);
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--since", "yesterday", NULL),
                 2);
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--bogus", NULL), 2);
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", NULL), 2);
    free(out);
}

Test(audit, cli_lists_matching_lines_as_stored_with_json)
{
    const char *cfg = config_path();
    char *out, *buf, *p, *want;
    size_t len;
    int i;

    append_records(1, 6);
    cr_assert_eq(
        run_cli(&out, cli_audit, "audit", "--config", cfg, "--json", "--decision", "deny", NULL),
        0);
    /* Lines 1, 3, 5 (the odd records), byte for byte. */
    buf = slurp(logpath, NULL);
    want = calloc(1, strlen(buf) + 1);
    for (i = 1; i <= 5; i += 2) {
        p = line_at(buf, i, &len);
        strncat(want, p, len + 1);
    }
    cr_assert_str_eq(out, want);
    free(want);
    free(buf);
    free(out);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--json", NULL), 0);
    buf = slurp(logpath, NULL);
    cr_assert_str_eq(out, buf, "no filter: the whole log");
    free(buf);
    free(out);
}

Test(audit, cli_filters_by_run_repo_ref_decision_and_time)
{
    const char *cfg = config_path();
    char *out;

    append_records(1, 6);
#define LINES(...)                                                                                 \
    (run_cli(&out, cli_audit, "audit", "--config", cfg, "--json", __VA_ARGS__, NULL) == 0          \
         ? count_char(out, '\n')                                                                   \
         : -1)
    cr_assert_eq(LINES("--run", "run-even"), 3);
    free(out);
    cr_assert_eq(LINES("--run", "nobody"), 0);
    free(out);
    cr_assert_eq(LINES("--ref", "main"), 3, "a short branch name");
    free(out);
    cr_assert_eq(LINES("--ref", "refs/heads/main"), 3);
    free(out);
    cr_assert_eq(LINES("--ref", "feature/*"), 3, "a glob");
    free(out);
    cr_assert_eq(LINES("--repo", "local/acme/app"), 6);
    free(out);
    cr_assert_eq(LINES("--repo", "local/acme/*"), 6);
    free(out);
    cr_assert_eq(LINES("--repo", "local/other"), 0);
    free(out);
    cr_assert_eq(LINES("--decision", "allow", "--ref", "main"), 0);
    free(out);
    cr_assert_eq(LINES("--since", "2000-01-01"), 6);
    free(out);
    cr_assert_eq(LINES("--since", "2999-01-01T00:00:00Z"), 0);
    free(out);
    cr_assert_eq(LINES("--since", "2999-01-01T00:00:00.5+02:00"), 0);
    free(out);
    cr_assert_eq(LINES("--since", "1h"), 6, "all were written just now");
    free(out);
    cr_assert_eq(LINES("--since=10m"), 6);
    free(out);
#undef LINES
}

Test(audit, cli_table_is_aligned_and_shortened)
{
    const char *cfg = config_path();
    rg_error err = RG_ERROR_INIT;
    audit_log *log;
    audit_record r;
    rec_bufs b;
    char *out, *line2, *line3, reason[300];
    const char *col;
    int i;

    append_records(1, 2);
    log = open_log();
    r = make_rec(&b, 3);
    for (i = 0; i < 299; i++)
        reason[i] = 'a' + i % 26;
    reason[299] = '\0';
    r.reason = reason;
    r.run = "run-\x1b]0;evil\x07";
    cr_assert_eq(audit_append(log, &r, &err), 0);
    audit_close(log);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, NULL), 0);
    cr_assert_eq(count_char(out, '\n'), 4, "a header and three rows:\n%s", out);
    cr_assert_eq(strncmp(out, "TIME", 4), 0, "%s", out);
    cr_assert_null(strchr(out, '\x1b'), "no escape sequence reaches the terminal");
    cr_assert_null(strchr(out, '\x07'));
    cr_assert_null(strstr(out, reason), "a long reason is shortened");
    cr_assert_not_null(strstr(out, "\xe2\x80\xa6"), "with an ellipsis");
    cr_assert_not_null(strstr(out, "feature/x"), "branches lose refs/heads/");
    cr_assert_null(strstr(out, "refs/heads/"));

    /* Columns line up: REPO starts at the same place in every line. */
    col = strstr(out, "REPO");
    line2 = strchr(out, '\n') + 1;
    line3 = strchr(line2, '\n') + 1;
    cr_assert_eq(strncmp(line2 + (col - out), "local/acme/app", 14), 0, "%s", out);
    cr_assert_eq(strncmp(line3 + (col - out), "local/acme/app", 14), 0, "%s", out);
    free(out);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--run", "nobody", NULL), 0);
    cr_assert_str_eq(out, "no matching audit records\n");
    free(out);
}

Test(audit, cli_list_without_a_log_says_so)
{
    const char *cfg = config_path();
    char *out;

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, NULL), 0);
    cr_assert_str_eq(out, "no audit log yet\n");
    free(out);
}

/* ------------------------------------------------------------------------
 * Record format v2
 * ------------------------------------------------------------------------ */

/* Count the lines of the log. */
static int log_lines(void)
{
    char *buf = slurp(logpath, NULL);
    int n = count_char(buf, '\n');

    free(buf);
    return n;
}

static const char *jstr(json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

typedef struct v2_case {
    audit_record rec;
    const char *type;
    const char *keys; /* the keys after v, seq, prev, time, type, comma-separated */
} v2_case;

/* Criterion hands parameters to another process: pass indexes, not pointers. */
static const v2_case v2_cases[] = {
    {{.kind = AUDIT_DECISION,
      .push_id = "p1",
      .run = "r",
      .token_hash = "0123456789ab",
      .remote = "127.0.0.1",
      .repo = "local/acme/app",
      .ref = "refs/heads/feature/x",
      .old_id = OID0,
      .new_id = OID1,
      .action = "create",
      .decision = "allow",
      .rule = "features",
      .reason = "ok"},
     "decision",
     "push_id,run,token,remote,repo,ref,old,new,action,decision,rule,reason,outcome"},
    {{.kind = AUDIT_DECISION,
      .push_id = "p1",
      .ref = "refs/heads/main",
      .decision = "deny",
      .rule = "protect-main",
      .reason = "main is protected",
      .evaluate = "deny by trial",
      .outcome = "rejected"},
     "decision",
     "push_id,run,token,remote,repo,ref,old,new,action,decision,rule,reason,evaluate,outcome"},
    {{.kind = AUDIT_OUTCOME,
      .push_id = "p1",
      .repo = "local/acme/app",
      .ref = "refs/heads/feature/x",
      .decision_seq = 1,
      .outcome = "forwarded: ok"},
     "outcome",
     "push_id,repo,ref,decision_seq,outcome"},
    {{.kind = AUDIT_EVENT, .event = "start", .detail = "pid 1"}, "event", "event,detail"},
    {{.kind = AUDIT_EVENT, .event = "token-mint"}, "event", "event"},
    {{.kind = AUDIT_EVENT, .event = "token-revoke", .detail = "run r"}, "event", "event,detail"},
};

typedef struct case_index {
    int i;
} case_index;

static case_index *index_params(size_t n)
{
    case_index *c = cr_malloc(n * sizeof(*c));

    for (size_t i = 0; i < n; i++)
        c[i].i = (int)i;
    return c;
}

static void free_index_params(struct criterion_test_params *p)
{
    cr_free(p->params);
}

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

ParameterizedTestParameters(audit, v2_records_round_trip)
{
    return cr_make_param_array(case_index, index_params(NCASES(v2_cases)), NCASES(v2_cases),
                               free_index_params);
}

ParameterizedTest(case_index *ci, audit, v2_records_round_trip)
{
    const v2_case *c = &v2_cases[ci->i];
    static const char *const head[] = {"v", "seq", "prev", "time", "type"};
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    audit_record first = {.kind = AUDIT_EVENT, .event = "start"};
    char keys[256], want[256];
    uint64_t seq = 0;
    const char *k;
    json_t *j, *v;
    size_t i;
    void *it;

    /* Something for an outcome's decision_seq to point back to. */
    cr_assert_eq(audit_append(log, &first, &err), 0, "%s", err.msg);
    cr_assert_eq(audit_append_many(log, &c->rec, 1, &seq, &err), 0, "%s", err.msg);
    cr_assert_eq(seq, 2);
    audit_close(log);
    assert_intact(2);

    j = parse_line(2);
    keys[0] = '\0';
    for (i = 0, it = json_object_iter(j); it; it = json_object_iter_next(j, it), i++) {
        k = json_object_iter_key(it);
        if (i < 5) {
            cr_assert_str_eq(k, head[i], "key %zu is %s", i, k);
            continue;
        }
        strcat(keys, keys[0] ? "," : "");
        strcat(keys, k);
    }
    snprintf(want, sizeof(want), "%s", c->keys);
    cr_assert_str_eq(keys, want);
    cr_assert_eq(json_integer_value(json_object_get(j, "v")), 2);
    cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 2);
    cr_assert_str_eq(jstr(j, "type"), c->type);
    k = jstr(j, "time");
    cr_assert(k && strlen(k) == 24 && k[10] == 'T' && k[23] == 'Z', "%s", k);
    switch (c->rec.kind) {
    case AUDIT_DECISION:
        cr_assert_str_eq(jstr(j, "ref"), c->rec.ref);
        cr_assert_str_eq(jstr(j, "decision"), c->rec.decision);
        v = json_object_get(j, "outcome");
        if (c->rec.outcome == NULL)
            cr_assert(json_is_null(v), "a pending decision has outcome null");
        else
            cr_assert_str_eq(json_string_value(v), c->rec.outcome);
        break;
    case AUDIT_OUTCOME:
        cr_assert_eq(json_integer_value(json_object_get(j, "decision_seq")),
                     (json_int_t)c->rec.decision_seq);
        cr_assert_str_eq(jstr(j, "outcome"), c->rec.outcome);
        break;
    case AUDIT_EVENT:
        cr_assert_str_eq(jstr(j, "event"), c->rec.event);
        if (c->rec.detail)
            cr_assert_str_eq(jstr(j, "detail"), c->rec.detail);
        break;
    }
    json_decref(j);
}

/* A v1 line as today's gateway wrote it, chained to `prev`; `prev` becomes its hash. */
static void append_v1_line(int seq, char prev[65])
{
    char line[1024];

    snprintf(line, sizeof(line),
             "{\"time\":\"2026-11-30T12:00:0%d.000Z\",\"seq\":%d,\"prev\":\"%s\",\"push_id\":"
             "\"old-%d\",\"run\":\"run-v1\",\"token\":\"0123456789ab\",\"remote\":\"127.0.0.1\","
             "\"repo\":\"local/acme/app\",\"ref\":\"refs/heads/feature/v1\",\"old\":\"" OID0
             "\",\"new\":\"" OID1 "\",\"action\":\"create\",\"decision\":\"allow\",\"rule\":"
             "\"features\",\"reason\":\"ok\",\"outcome\":\"forwarded: ok\"}",
             seq, seq, prev, seq);
    sha256_hex(prev, line, strlen(line));
    strcat(line, "\n");
    spit_append(logpath, line);
}

Test(audit, a_v1_log_followed_by_v2_appends_verifies_and_lists)
{
    const char *cfg = config_path();
    char prev[65] = ZEROS, *out;
    json_t *j;
    int i;

    for (i = 1; i <= 3; i++)
        append_v1_line(i, prev);
    assert_intact(3);
    append_records(4, 2);
    assert_intact(5);
    j = parse_line(4);
    cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 4, "v2 continues v1's seq");
    cr_assert_str_eq(jstr(j, "prev"), prev, "and chains onto the last v1 line's bytes");
    json_decref(j);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--run", "run-v1", NULL), 0);
    cr_assert_eq(count_char(out, '\n'), 4, "a header and the three v1 rows:\n%s", out);
    cr_assert_not_null(strstr(out, "feature/v1"));
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--json", NULL), 0);
    cr_assert_eq(count_char(out, '\n'), 5, "%s", out);
    free(out);
}

/* ------------------------------------------------------------------------
 * Pending decisions and their recovery
 * ------------------------------------------------------------------------ */

/* A push of three refs: two forwarded (pending), one denied (complete). */
static uint64_t append_push(audit_log *log, const char *push)
{
    rg_error err = RG_ERROR_INIT;
    audit_record recs[3] = {
        {.kind = AUDIT_DECISION,
         .push_id = push,
         .repo = "local/acme/app",
         .ref = "refs/heads/feature/a",
         .decision = "allow",
         .action = "create"},
        {.kind = AUDIT_DECISION,
         .push_id = push,
         .repo = "local/acme/app",
         .ref = "refs/heads/feature/b",
         .decision = "allow",
         .action = "create"},
        {.kind = AUDIT_DECISION,
         .push_id = push,
         .repo = "local/acme/app",
         .ref = "refs/heads/main",
         .decision = "deny",
         .action = "force",
         .outcome = "rejected"},
    };
    uint64_t first = 0;

    cr_assert_eq(audit_append_many(log, recs, 3, &first, &err), 0, "%s", err.msg);
    return first;
}

static void append_outcome(audit_log *log, uint64_t decision_seq, const char *ref,
                           const char *outcome)
{
    rg_error err = RG_ERROR_INIT;
    audit_record r = {.kind = AUDIT_OUTCOME,
                      .push_id = "p",
                      .repo = "local/acme/app",
                      .ref = ref,
                      .decision_seq = decision_seq,
                      .outcome = outcome};

    cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
}

static size_t complete(void)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    size_t n = 99;

    cr_assert_eq(audit_complete_pending(log, &n, &err), 0, "%s", err.msg);
    audit_close(log);
    return n;
}

Test(audit, complete_pending_reads_back_only_to_the_last_start_event)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    audit_record start = {.kind = AUDIT_EVENT, .event = "start"};

    /* A start event promises everything before it was completed; the scan
     * trusts it, which is what keeps a gateway start from reading the log. */
    append_push(log, "before"); /* 1, 2 pending: not seen */
    cr_assert_eq(audit_append(log, &start, &err), 0);
    append_push(log, "after"); /* 5, 6 pending */
    audit_close(log);
    cr_assert_eq(complete(), 2);
    cr_assert_eq(log_lines(), 7 + 2 + 1);
}

/* ------------------------------------------------------------------------
 * Sizing
 * ------------------------------------------------------------------------ */

typedef struct size_case {
    const char *name;
    int hostile; /* fill every string field with bytes that escape the most */
    size_t len;  /* of each string field */
} size_case;

static const size_case size_cases[] = {
    {"plain", 0, 40},    {"plain long", 0, 3000},    {"plain over the cap", 0, 9000},
    {"controls", 1, 40}, {"controls long", 1, 3000}, {"controls over the cap", 1, 9000},
};

ParameterizedTestParameters(audit, size_max_bounds_the_written_line)
{
    return cr_make_param_array(case_index, index_params(NCASES(size_cases)), NCASES(size_cases),
                               free_index_params);
}

ParameterizedTest(case_index *ci, audit, size_max_bounds_the_written_line)
{
    const size_case *c = &size_cases[ci->i];
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    char *s = malloc(c->len + 1);
    audit_record recs[3];
    size_t i, len, max;
    char *buf;

    for (i = 0; i < c->len; i++)
        /* A control byte becomes \u00XX (6 bytes), 0xff \\xFF (5), a quote \" (2). */
        s[i] = c->hostile ? "\x01\xff\"\\\x7f/\n"[i % 7] : 'a';
    s[c->len] = '\0';
    recs[0] = (audit_record){.kind = AUDIT_DECISION,
                             .push_id = s,
                             .run = s,
                             .token_hash = s,
                             .remote = s,
                             .repo = s,
                             .ref = s,
                             .old_id = s,
                             .new_id = s,
                             .action = s,
                             .decision = s,
                             .rule = s,
                             .reason = s,
                             .evaluate = s,
                             .outcome = s};
    recs[1] = (audit_record){.kind = AUDIT_OUTCOME,
                             .push_id = s,
                             .repo = s,
                             .ref = s,
                             .decision_seq = UINT64_MAX / 4,
                             .outcome = s};
    recs[2] = (audit_record){.kind = AUDIT_EVENT, .event = "start", .detail = s};
    for (i = 0; i < 3; i++) {
        /* An outcome may name only an earlier record: give it one. */
        if (recs[i].kind == AUDIT_OUTCOME)
            recs[i].decision_seq = 1;
        cr_assert_eq(audit_append(log, &recs[i], &err), 0, "%s: %s", c->name, err.msg);
    }
    audit_close(log);
    buf = slurp(logpath, NULL);
    for (i = 0; i < 3; i++) {
        line_at(buf, (int)i + 1, &len);
        max = audit_record_size_max(&recs[i]);
        cr_assert_leq(len + 1, max, "%s, record %zu: %zu bytes, bound %zu", c->name, i, len + 1,
                      max);
    }
    /* A pending outcome counts at its largest, so any text filled in later fits. */
    recs[1].outcome = NULL;
    cr_assert_geq(audit_record_size_max(&recs[1]), 4096);
    free(buf);
    free(s);
}

Test(audit, ready_is_sized_by_the_push_not_a_flat_megabyte_per_record)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    audit_record r;
    rec_bufs b;
    size_t one, total = 0;
    int i;

    /* What a push of 10,000 forwarded refs asks for before it is
     * forwarded: its pending decisions and their outcome records, whose
     * text is not known yet. */
    for (i = 0; i < 10000; i++) {
        r = make_rec(&b, i);
        r.outcome = NULL;
        total += audit_record_size_max(&r);
        r = (audit_record){.kind = AUDIT_OUTCOME,
                           .push_id = b.push,
                           .repo = r.repo,
                           .ref = r.ref,
                           .decision_seq = 1};
        total += audit_record_size_max(&r);
    }
    r = make_rec(&b, 1);
    one = audit_record_size_max(&r);
    /* A complete record: its fields and the fixed part, nothing more. */
    cr_assert_lt(one, 2048, "%zu", one);
    /* Proportional to the push: about 5 KiB a ref (4 KiB of it the room
     * for an outcome text not known yet), not 1 MiB a record. */
    cr_assert_lt(total, (size_t)10000 * 6 * 1024, "a 10,000-ref push asks for %zu bytes", total);
    cr_assert_eq(audit_ready(log, total, &err), 0, "%s", err.msg);
    cr_assert_eq(audit_ready(log, SIZE_MAX / 2, &err), -ENOSPC);
    cr_assert(strstr(err.msg, "bytes free") != NULL, "%s", err.msg);
    audit_close(log);
}

/* ------------------------------------------------------------------------
 * The head, and cut tails
 * ------------------------------------------------------------------------ */

Test(audit, head_is_the_last_seq_and_its_line_hash)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    char hash[65], want[65], *buf, *p;
    uint64_t seq = 99;
    audit_record r;
    rec_bufs b;
    size_t len;

    cr_assert_eq(audit_head(log, &seq, hash, &err), 0);
    cr_assert_eq(seq, 0);
    cr_assert_str_eq(hash, ZEROS);
    r = make_rec(&b, 1);
    cr_assert_eq(audit_append(log, &r, &err), 0);
    cr_assert_eq(audit_append(log, &r, &err), 0);
    cr_assert_eq(audit_append(log, &r, &err), 0);
    cr_assert_eq(audit_head(log, &seq, hash, &err), 0);
    cr_assert_eq(seq, 3);
    buf = slurp(logpath, NULL);
    p = line_at(buf, 3, &len);
    sha256_hex(want, p, len);
    free(buf);
    cr_assert_str_eq(hash, want);

    /* Read from outside while the writer holds the log. */
    cr_assert_eq(audit_read_head(&seq, hash, &(audit_source){.path = logpath}, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(seq, 3);
    cr_assert_str_eq(hash, want);
    audit_close(log);

    /* An append in progress (no newline yet) is not part of the head. */
    spit_append(logpath, "{\"v\":2,\"seq\":4,\"pr");
    cr_assert_eq(audit_read_head(&seq, hash, &(audit_source){.path = logpath}, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(seq, 3);
    cr_assert_str_eq(hash, want);
    /* Reopening terminates the torn line; the head stays at the last record. */
    log = open_log();
    cr_assert_eq(audit_head(log, &seq, hash, &err), 0);
    cr_assert_eq(seq, 3);
    cr_assert_str_eq(hash, want);
    audit_close(log);
}

Test(audit, read_head_of_an_empty_or_missing_log)
{
    rg_error err = RG_ERROR_INIT;
    char hash[65];
    uint64_t seq = 5;

    cr_assert_eq(audit_read_head(&seq, hash, &(audit_source){.path = logpath}, &err), -ENOENT);
    audit_close(open_log());
    cr_assert_eq(audit_read_head(&seq, hash, &(audit_source){.path = logpath}, &err), 0);
    cr_assert_eq(seq, 0);
    cr_assert_str_eq(hash, ZEROS);
}

/* Remove the last n lines of the log. */
static void cut_tail(int n)
{
    size_t len;
    char *buf = slurp(logpath, &len);

    while (n-- > 0) {
        len--; /* the last newline */
        while (len > 0 && buf[len - 1] != '\n')
            len--;
    }
    spit(logpath, buf, len);
    free(buf);
}

typedef struct cut_case {
    int cut;     /* lines removed from the end */
    int rewrite; /* records appended again after the cut */
    int intact;  /* verify --head passes */
    const char *why;
} cut_case;

static const cut_case cut_cases[] = {
    {0, 0, 1, NULL},
    {1, 0, 0, "ends at seq 9 (line 9), before the head's seq 10: records were cut"},
    {3, 0, 0, "ends at seq 7 (line 7), before the head's seq 10: records were cut"},
    {2, 2, 0, "the record with seq 10 does not hash to the head's hash"},
};

ParameterizedTestParameters(audit, verify_head_finds_a_cut_tail)
{
    return cr_make_param_array(case_index, index_params(NCASES(cut_cases)), NCASES(cut_cases),
                               free_index_params);
}

ParameterizedTest(case_index *ci, audit, verify_head_finds_a_cut_tail)
{
    const cut_case *c = &cut_cases[ci->i];
    const char *cfg = config_path();
    rg_error err = RG_ERROR_INIT;
    audit_verify_result res;
    audit_log *log;
    char hash[65], head[100], *out;
    uint64_t seq;

    append_records(1, 10);
    log = open_log();
    cr_assert_eq(audit_head(log, &seq, hash, &err), 0);
    audit_close(log);
    snprintf(head, sizeof(head), "%llu:%s", (unsigned long long)seq, hash);

    cut_tail(c->cut);
    if (c->rewrite)
        append_records(100, c->rewrite);
    /* The chain alone cannot tell. */
    assert_intact((uint64_t)(10 - c->cut + c->rewrite));

    cr_assert_eq(audit_verify_head(&res, &(audit_source){.path = logpath}, seq, hash, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(res.bad_line, 0);
    cr_assert_eq(res.head_bad, !c->intact, "%s", res.why);
    if (c->why)
        cr_assert_not_null(strstr(res.why, c->why), "why '%s' should say '%s'", res.why, c->why);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "verify", "--config", cfg, "--head", head, NULL),
                 c->intact ? 0 : 1, "%s", out);
    if (c->intact)
        cr_assert_str_eq(out, "audit log intact: 10 records, reaching head 10\n");
    else
        cr_assert(strncmp(out, "audit log does not match head 10: ", 34) == 0 &&
                      strstr(out, c->why) != NULL,
                  "%s", out);
    free(out);
}

Test(audit, cli_head_prints_seq_and_hash_and_verify_checks_its_syntax)
{
    const char *cfg = config_path();
    rg_error err = RG_ERROR_INIT;
    char hash[65], want[100], *out;
    audit_log *log;
    uint64_t seq;

    append_records(1, 4);
    log = open_log();
    cr_assert_eq(audit_head(log, &seq, hash, &err), 0);
    /* While the writer holds the log, as a running gateway does. */
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "head", "--config", cfg, NULL), 0);
    audit_close(log);
    snprintf(want, sizeof(want), "4:%s\n", hash);
    cr_assert_str_eq(out, want);
    free(out);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "head", NULL), 2);
    free(out);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "verify", "--config", cfg, "--head", "4", NULL),
                 2);
    free(out);
    cr_assert_eq(
        run_cli(&out, cli_audit, "audit", "verify", "--config", cfg, "--head", "x:" ZEROS, NULL),
        2);
    free(out);
    cr_assert_eq(
        run_cli(&out, cli_audit, "audit", "verify", "--config", cfg, "--head", "4:abc", NULL), 2);
    free(out);
}

/* ------------------------------------------------------------------------
 * refgate audit: rows joined across records
 * ------------------------------------------------------------------------ */

Test(audit, cli_joins_each_outcome_to_its_decision_and_shows_pending)
{
    const char *cfg = config_path();
    audit_record start = {.kind = AUDIT_EVENT, .event = "start", .detail = "pid 1"};
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    char *out, *l;
    json_t *j;

    cr_assert_eq(audit_append(log, &start, &err), 0); /* 1 */
    append_push(log, "p1");                           /* 2, 3 forwarded; 4 denied */
    append_outcome(log, 2, "refs/heads/feature/a", "forwarded: ng stale info"); /* 5 */
    audit_close(log);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, NULL), 0);
    cr_assert_eq(count_char(out, '\n'), 4, "a header and three rows, no event:\n%s", out);
    l = strstr(out, "feature/a");
    cr_assert(l && strstr(l, "forwarded: ng stale info") < strchr(l, '\n'), "%s", out);
    l = strstr(out, "feature/b");
    cr_assert(l && strstr(l, "pending") && strstr(l, "pending") < strchr(l, '\n'), "%s", out);
    l = strstr(out, "main");
    cr_assert(l && strstr(l, "rejected") != NULL, "%s", out);
    cr_assert(strstr(out, "feature/a") < strstr(out, "feature/b"), "in decision order");
    free(out);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--json", NULL), 0);
    cr_assert_eq(count_char(out, '\n'), 3, "%s", out);
    j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
    cr_assert_not_null(j);
    cr_assert_str_eq(jstr(j, "type"), "decision");
    cr_assert_str_eq(jstr(j, "ref"), "refs/heads/feature/a");
    cr_assert_str_eq(jstr(j, "decision"), "allow");
    cr_assert_str_eq(jstr(j, "outcome"), "forwarded: ng stale info");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "outcome_record"), "seq")),
                 5);
    json_decref(j);
    l = strchr(out, '\n') + 1;
    j = json_loads(l, JSON_DISABLE_EOF_CHECK, NULL);
    cr_assert_str_eq(jstr(j, "ref"), "refs/heads/feature/b");
    cr_assert(json_is_null(json_object_get(j, "outcome")), "pending");
    cr_assert(json_is_null(json_object_get(j, "outcome_record")));
    json_decref(j);
    free(out);

    /* Filters apply to the row's decision. */
    cr_assert_eq(
        run_cli(&out, cli_audit, "audit", "--config", cfg, "--json", "--ref", "feature/a", NULL),
        0);
    cr_assert_eq(count_char(out, '\n'), 1, "%s", out);
    cr_assert_not_null(strstr(out, "forwarded: ng stale info"));
    free(out);

    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, "--events", NULL), 0);
    cr_assert_eq(count_char(out, '\n'), 2, "%s", out);
    cr_assert_not_null(strstr(out, "start"));
    cr_assert_not_null(strstr(out, "pid 1"));
    free(out);
}

Test(audit, cli_joins_outcomes_of_a_large_push)
{
    const char *cfg = config_path();
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    audit_record *recs = calloc(2000, sizeof(*recs));
    char(*refs)[32] = calloc(1000, sizeof(*refs));
    uint64_t first;
    char *out;
    int i;

    /* 1000 decisions in one batch, then their outcomes: every row joins. */
    for (i = 0; i < 1000; i++) {
        snprintf(refs[i], sizeof(refs[i]), "refs/heads/feature/%d", i);
        recs[i] = (audit_record){
            .kind = AUDIT_DECISION, .push_id = "big", .ref = refs[i], .decision = "allow"};
    }
    cr_assert_eq(audit_append_many(log, recs, 1000, &first, &err), 0, "%s", err.msg);
    for (i = 0; i < 1000; i++)
        recs[i] = (audit_record){.kind = AUDIT_OUTCOME,
                                 .push_id = "big",
                                 .ref = refs[i],
                                 .decision_seq = first + (uint64_t)i,
                                 .outcome = "forwarded: ok"};
    cr_assert_eq(audit_append_many(log, recs, 1000, NULL, &err), 0, "%s", err.msg);
    audit_close(log);
    cr_assert_eq(run_cli(&out, cli_audit, "audit", "--config", cfg, NULL), 0);
    cr_assert_eq(count_char(out, '\n'), 1001, "one row per ref");
    cr_assert_null(strstr(out, "pending"));
    free(out);
    free(recs);
    free(refs);
}

Test(audit, reopening_after_a_line_longer_than_the_reader_cap_chains_on_its_whole_bytes)
{
    size_t n = AUDIT_LINE_MAX + 100000;
    char *junk = malloc(n + 2), hash[65];
    json_t *j;

    /* The tail is found by reading backwards a block at a time: a line too
     * long to hold is still hashed whole, so the chain continues from it. */
    append_records(1, 2);
    memset(junk, 'j', n);
    junk[n] = '\n';
    junk[n + 1] = '\0';
    spit_append(logpath, junk);
    sha256_hex(hash, junk, n);
    free(junk);
    append_records(3, 1);
    j = parse_line(4);
    cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 3);
    cr_assert_str_eq(jstr(j, "prev"), hash);
    json_decref(j);
    assert_broken(3, "longer than");
}

Test(audit, complete_pending_reads_lines_laid_out_by_other_tools)
{
    char prev[65] = ZEROS, line[512];
    json_t *j;

    /* Recovery reads our own lines without parsing them; a line laid out
     * otherwise (spaces, another key order) is parsed, with the same result. */
    append_v1_line(1, prev);
    snprintf(line, sizeof(line),
             "{\"v\": 2, \"seq\": 2, \"prev\": \"%s\", \"time\": \"2026-12-01T00:00:00Z\", "
             "\"type\": \"decision\", \"outcome\": null, \"ref\": \"refs/heads/feature/s\", "
             "\"decision\": \"allow\", \"push_id\": \"spaced\", \"repo\": \"local/acme/app\"}\n",
             prev);
    spit_append(logpath, line);
    cr_assert_eq(complete(), 1);
    j = parse_line(3);
    cr_assert_str_eq(jstr(j, "type"), "outcome");
    cr_assert_eq(json_integer_value(json_object_get(j, "decision_seq")), 2);
    cr_assert_str_eq(jstr(j, "push_id"), "spaced");
    cr_assert_str_eq(jstr(j, "ref"), "refs/heads/feature/s");
    json_decref(j);
    assert_intact(4);
    cr_assert_eq(complete(), 0);
}
