/* The secret scanner (content/secrets.c, content/detect.c): what each
 * detector reports and what it must not, fingerprints and the allow-list,
 * extra patterns, and the same findings whatever the chunking. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "content/detect.h"
#include "content/secrets.h"

#define FOUND_MAX 64

/* Tokens made up for these tests (random, not real credentials). */
#define GHP "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d"
#define GHO "gho_KLzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFR"
#define GHS "ghs_IBXuDL7DxtpYlSXpfKtHF4vUCsMehGAkWvj7"
#define PAT                                                                                        \
    "github_pat_FAc9QeWJKY40uvSwMFLZDe_"                                                           \
    "1f8rESQedUStPKR0CsTy4Qwb8DwkNhFdnXsiVpzz63FfkCzJr4i0B3JrTAw"
#define GLPAT  "glpat-WDtkwtDDb_xHKas1VOqg"
#define SLACK  "xoxb-786666176031-3721590109281-8xNbe3nNyjOq9wMxEhh2FDEE"
#define GOOGLE "AIzaNksnRH9ucAUsdMlHUvTCQCyEZDz-TddJ8Hy"
#define AKID   "AKIAW2WXFOGO4MVN4A4W"
#define AWSSEC "kpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLEPH1q"
#define B64A   "hP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY+uCu3ZR1zTOlUcR64cX"
#define B64B   "QLioDnkHIfxIq2HZt/PlJhx2jIclHkCiHp6bR1IqfEouHgxzNNAL5wIScGebcy8F"
#define B64C   "5n3/YNBDRzrZSgqbjG3uhkWKFLf6xuI5aHUQPFeNBTxaQWk8JzFalHlsZfYcMMDk"

struct finding {
    char kind[CONTENT_SECRETS_NAME_MAX + 1];
    uint64_t offset, line;
    char fingerprint[CONTENT_SECRETS_FINGERPRINT_MAX];
};

struct found {
    struct finding f[FOUND_MAX];
    size_t n;
    size_t stop_after; /* 0: never ask to stop */
};

static content_secrets *scanner;
static content_secrets_scan *scan;
static struct found found;

static int collect(const content_secret_finding *f, void *arg)
{
    struct found *fd = arg;

    if (fd->n < FOUND_MAX) {
        snprintf(fd->f[fd->n].kind, sizeof(fd->f[0].kind), "%s", f->kind);
        fd->f[fd->n].offset = f->offset;
        fd->f[fd->n].line = f->line;
        memcpy(fd->f[fd->n].fingerprint, f->fingerprint, sizeof(f->fingerprint));
    }
    fd->n++;
    return fd->stop_after != 0 && fd->n >= fd->stop_after;
}

static void setup_with(const content_secret_pattern *extra, size_t nextra, const char *const *allow,
                       size_t nallow)
{
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(content_secrets_new(&scanner, extra, nextra, allow, nallow, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(content_secrets_scan_new(&scan, scanner, collect, &found, &err), 0, "%s", err.msg);
}

static void setup(void)
{
    setup_with(NULL, 0, NULL, 0);
}

static void teardown(void)
{
    content_secrets_scan_free(scan);
    content_secrets_free(scanner);
    scan = NULL;
    scanner = NULL;
}

/* Scan `len` bytes as one object fed in chunks of `chunk` (0: all at once). */
static int scan_bytes(const void *data, size_t len, size_t chunk)
{
    const char *p = data;
    rg_error err = RG_ERROR_INIT;
    int rc = 0;

    memset(&found, 0, sizeof(found));
    if (chunk == 0)
        chunk = len > 0 ? len : 1;
    for (size_t off = 0; off < len && rc == 0; off += chunk)
        rc = content_secrets_scan_feed(scan, p + off, len - off < chunk ? len - off : chunk, &err);
    if (rc == 0)
        rc = content_secrets_scan_end(scan, &err);
    else
        content_secrets_scan_end(scan, &err);
    cr_assert_geq(rc, 0, "%s", err.msg);
    return rc;
}

static void scan_text(const char *text, size_t chunk)
{
    scan_bytes(text, strlen(text), chunk);
}

static void expected_fingerprint(char out[CONTENT_SECRETS_FINGERPRINT_MAX], const char *kind,
                                 const char *value)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    cr_assert_eq(EVP_Digest(value, strlen(value), md, &n, EVP_sha256(), NULL), 1);
    snprintf(out, CONTENT_SECRETS_FINGERPRINT_MAX, "%s:%02x%02x%02x%02x%02x%02x%02x%02x", kind,
             md[0], md[1], md[2], md[3], md[4], md[5], md[6], md[7]);
}

/* Every test of the suite gets a fresh scanner with the built-in detectors. */
TestSuite(secrets, .init = setup, .fini = teardown);

/* ------------------------------------------------------------------------
 * True and false positives, per detector
 * ------------------------------------------------------------------------ */

/* Parameters are indexes into the tables: Criterion runs each case in a
 * fresh process, where pointers in a parameter would not be valid. */
static size_t *indexes(size_t n)
{
    static size_t idx[128];

    cr_assert_leq(n, sizeof(idx) / sizeof(idx[0]));
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    return idx;
}

struct sample {
    const char *what;
    const char *text;
    const char *kind;  /* the one finding expected, or NULL for none */
    const char *value; /* the secret the fingerprint covers */
    const char *at;    /* the text the finding's offset points to */
};

#define KEY_RSA                                                                                    \
    "-----BEGIN RSA PRIVATE KEY-----\n" B64A "\n" B64B "\n" B64C "\n-----END RSA PRIVATE "         \
    "KEY-----\n"

static struct sample samples[] = {
    /* GitHub */
    {"classic PAT", "token: " GHP "\n", "github-token", GHP, GHP},
    {"OAuth token in a URL", "https://x:" GHO "@github.com/o/r.git", "github-token", GHO, GHO},
    {"server token at the very end", "GITHUB_TOKEN=" GHS, "github-token", GHS, GHS},
    {"fine-grained PAT", "\"" PAT "\"", "github-fine-grained-token", PAT, PAT},
    {"a PAT one character too long", GHP "x\n", NULL, NULL, NULL},
    {"a PAT inside a longer word", "xyz" GHP "\n", NULL, NULL, NULL},
    {"a placeholder PAT", "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", NULL, NULL, NULL},
    /* GitLab, Slack, Google */
    {"GitLab PAT", "export GL=" GLPAT "\n", "gitlab-token", GLPAT, GLPAT},
    {"GitLab prefix alone", "see glpat-tokens in the docs\n", NULL, NULL, NULL},
    {"Slack bot token", "SLACK=" SLACK "\n", "slack-token", SLACK, SLACK},
    {"Slack prefix in prose", "xoxb-tokens are bot tokens\n", NULL, NULL, NULL},
    {"Google API key", "key=" GOOGLE "&q=1", "google-api-key", GOOGLE, GOOGLE},
    {"Google key one short", "AIzaNksnRH9ucAUsdMlHUvTCQCyEZDz-TddJ8H\n", NULL, NULL, NULL},
    /* AWS */
    {"AWS key id and secret",
     "[default]\naws_access_key_id = " AKID "\naws_secret_access_key=\"" AWSSEC "\"\n",
     "aws-access-key", AKID ":" AWSSEC, AKID},
    {"AWS secret before its id", AWSSEC "," AKID "\n", "aws-access-key", AKID ":" AWSSEC, AKID},
    {"AWS key id and secret in JSON",
     "{\"AccessKeyId\": \"" AKID "\", \"SessionToken\": null, \"SecretAccessKey\": \"" AWSSEC "\"}",
     "aws-access-key", AKID ":" AWSSEC, AKID},
    {"AWS key id alone", "user " AKID " created\n", NULL, NULL, NULL},
    {"AWS documentation example",
     "AKIAIOSFODNN7EXAMPLE\nwJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", NULL, NULL, NULL},
    {"a git object id beside an AWS key id", AKID " 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n",
     NULL, NULL, NULL},
    /* Private keys */
    {"PEM RSA key", "x\n" KEY_RSA, "private-key", B64A B64B B64C, "-----BEGIN RSA"},
    {"PEM key with CRLF", "-----BEGIN PRIVATE KEY-----\r\n" B64A "\r\n" B64B "\r\n", "private-key",
     B64A B64B, "-----BEGIN PRIVATE"},
    {"key in a JSON string",
     "{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\n" B64A "\\n" B64B
     "\\n-----END PRIVATE KEY-----\\n\"}",
     "private-key", B64A B64B, "-----BEGIN PRIVATE"},
    {"encrypted PEM with armor headers",
     "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,"
     "0123456789ABCDEF\n\n" B64A "\n-----END EC PRIVATE KEY-----\n",
     "private-key", B64A, "-----BEGIN EC"},
    {"PGP key block with a version header",
     "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n" B64C "\n=abcd\n", "private-key",
     B64C "=abcd", "-----BEGIN PGP"},
    {"key header in code", "if line == \"-----BEGIN RSA PRIVATE KEY-----\":\n", NULL, NULL, NULL},
    {"public key", "-----BEGIN PUBLIC KEY-----\n" B64A "\n", NULL, NULL, NULL},
    /* Assignments */
    {"password assignment", "db_password = \"hT6^1#q*t&%c4xatws8p\"\n", "secret-assignment",
     "hT6^1#q*t&%c4xatws8p", "hT6^"},
    {"YAML secret", "client_secret: 9f8e7d6c5b4a39281706f5e4d3c2b1a0\n", "secret-assignment",
     "9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e"},
    {"JSON api key", "{\"apiKey\": \"Zx81-Qm7pL02vR9s\"}", "secret-assignment", "Zx81-Qm7pL02vR9s",
     "Zx81"},
    {"Go := assignment", "token := \"a1B2c3D4e5F6g7H8\"\r\n", "secret-assignment",
     "a1B2c3D4e5F6g7H8", "a1B2"},
    {"changeme", "password = \"changeme\"\n", NULL, NULL, NULL},
    {"a long placeholder", "password = \"changeme-changeme-123\"\n", NULL, NULL, NULL},
    {"an environment variable", "password = \"${PASSWORD}\"\n", NULL, NULL, NULL},
    {"os.environ", "password = os.environ[\"DB_PASSWORD\"]\n", NULL, NULL, NULL},
    {"a call", "token = os.getenv(\"GITHUB_TOKEN\")\n", NULL, NULL, NULL},
    {"a dotted identifier", "SECRET_KEY = settings.DJANGO_SECRET_KEY\n", NULL, NULL, NULL},
    {"a template", "password: {{ vault_db_password }}\n", NULL, NULL, NULL},
    {"a URL", "token_url: https://example.com/oauth/token\n", NULL, NULL, NULL},
    {"a path", "secret_file = /run/secrets/db-2024\n", NULL, NULL, NULL},
    {"low entropy", "password = \"aaaaaaaabbbbbbbb\"\n", NULL, NULL, NULL},
    {"a comparison", "if password == \"x\" {\n", NULL, NULL, NULL},
    {"a shell variable inside", "TOKEN=static-secret-$RANDOM$RANDOM\n", NULL, NULL, NULL},
    {"a struct literal", "clock_ops token = {clock_system_now, NULL};\n", NULL, NULL, NULL},
    {"words and a scope", "--token-scope: acme/app:write\n", NULL, NULL, NULL},
    {"sequential digits", "\"token\": \"0123456789abcdef\"\n", NULL, NULL, NULL},
    {"a string escape ends the value", "printf(\"password=%s\\n\", \"Xy7-Qm2-Lp9-Zr4\");", NULL,
     NULL, NULL},
    {"a value before an escape", "\"password: Q7w-E9r-T2y-U4i\\n\"", "secret-assignment",
     "Q7w-E9r-T2y-U4i", "Q7w-"},
    {"a known token under its own name", "token = \"" GHP "\"\n", "github-token", GHP, GHP},
};

#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

ParameterizedTestParameters(secrets, each_detector_reports_secrets_and_not_lookalikes)
{
    return cr_make_param_array(size_t, indexes(NSAMPLES), NSAMPLES);
}

ParameterizedTest(size_t *param, secrets, each_detector_reports_secrets_and_not_lookalikes)
{
    const struct sample *s = &samples[*param];
    char want[CONTENT_SECRETS_FINGERPRINT_MAX];

    scan_text(s->text, 0);
    if (s->kind == NULL) {
        cr_assert_eq(found.n, 0, "%s: unexpected %s", s->what, found.f[0].kind);
        return;
    }
    cr_assert_eq(found.n, 1, "%s: %zu findings, the first %s", s->what, found.n, found.f[0].kind);
    cr_assert_str_eq(found.f[0].kind, s->kind, "%s", s->what);
    expected_fingerprint(want, s->kind, s->value);
    cr_assert_str_eq(found.f[0].fingerprint, want, "%s", s->what);
    cr_assert_eq(found.f[0].offset, (uint64_t)(strstr(s->text, s->at) - s->text), "%s", s->what);
    cr_assert_null(strstr(found.f[0].fingerprint, s->value), "%s", s->what);
}

/* Every chunking finds the same secrets at the same places. */
ParameterizedTestParameters(secrets, chunk_boundaries_change_nothing)
{
    return cr_make_param_array(size_t, indexes(NSAMPLES), NSAMPLES);
}

ParameterizedTest(size_t *param, secrets, chunk_boundaries_change_nothing)
{
    const struct sample *s = &samples[*param];
    static const size_t chunks[] = {1, 2, 3, 7, 16, 61};
    struct found whole;

    scan_text(s->text, 0);
    whole = found;
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        scan_text(s->text, chunks[c]);
        cr_assert_eq(found.n, whole.n, "%s, chunks of %zu", s->what, chunks[c]);
        for (size_t i = 0; i < found.n; i++) {
            cr_assert_str_eq(found.f[i].fingerprint, whole.f[i].fingerprint, "%s", s->what);
            cr_assert_eq(found.f[i].offset, whole.f[i].offset, "%s", s->what);
            cr_assert_eq(found.f[i].line, whole.f[i].line, "%s", s->what);
        }
    }
}

/* ------------------------------------------------------------------------
 * Awkward input
 * ------------------------------------------------------------------------ */

Test(secrets, line_numbers_count_lf_and_crlf_lines)
{
    scan_text("a\r\nb\n\r\nc " GHP "\r\nd\n" GLPAT "\n", 0);
    cr_assert_eq(found.n, 2);
    cr_assert_eq(found.f[0].line, 4);
    cr_assert_eq(found.f[1].line, 6);
    scan_text("a\r\nb\n\r\nc " GHP "\r\nd\n" GLPAT "\n", 1);
    cr_assert_eq(found.f[0].line, 4);
    cr_assert_eq(found.f[1].line, 6);
}

Test(secrets, a_crlf_does_not_end_up_in_an_assigned_value)
{
    char want[CONTENT_SECRETS_FINGERPRINT_MAX];

    scan_text("password=Q7w-E9r-T2y-U4i\r\nx=1\r\n", 0);
    cr_assert_eq(found.n, 1);
    expected_fingerprint(want, "secret-assignment", "Q7w-E9r-T2y-U4i");
    cr_assert_str_eq(found.f[0].fingerprint, want);
}

Test(secrets, tokens_between_nul_bytes_and_in_binary_data_are_found)
{
    size_t len = 1 << 20;
    unsigned char *data = malloc(len);
    uint32_t x = 12345;
    size_t at = 700001;

    cr_assert_not_null(data);
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (unsigned char)(x >> 16);
    }
    data[at - 1] = '\0';
    memcpy(data + at, GHP, strlen(GHP));
    data[at + strlen(GHP)] = '\0';
    scan_bytes(data, len, 4096);
    cr_assert_geq(found.n, 1);
    {
        size_t hit = found.n;

        for (size_t i = 0; i < found.n; i++)
            if (strcmp(found.f[i].kind, "github-token") == 0 && found.f[i].offset == at)
                hit = i;
        cr_assert_lt(hit, found.n, "the token among %zu findings in random bytes", found.n);
    }
    free(data);
}

Test(secrets, a_huge_line_is_scanned_to_its_end)
{
    size_t len = 8 << 20;
    char *data = malloc(len);
    size_t tail = len - strlen(GLPAT) - 1;

    cr_assert_not_null(data);
    memset(data, 'a', len);
    for (size_t i = 0; i < len; i += 97)
        data[i] = ' ';
    memcpy(data + 10, " " GHP " ", strlen(GHP) + 2);
    memcpy(data + tail, GLPAT, strlen(GLPAT));
    data[tail - 1] = ' ';
    data[len - 1] = ' ';
    scan_bytes(data, len, 65536);
    cr_assert_eq(found.n, 2);
    cr_assert_eq(found.f[0].offset, 11);
    cr_assert_eq(found.f[1].offset, tail);
    cr_assert_eq(found.f[1].line, 1);
    free(data);
}

Test(secrets, a_key_pair_too_far_apart_is_not_a_pair)
{
    char text[2048];

    snprintf(text, sizeof(text), "%s\n%1000s\n%s\n", AKID, "", AWSSEC);
    scan_text(text, 0);
    cr_assert_eq(found.n, 0);
}

Test(secrets, each_row_of_a_credentials_file_pairs_its_own_key)
{
    const char *text = "User name,Access key ID,Secret access key\n"
                       "ci," AKID "," AWSSEC "\n"
                       "deploy,AKIAQ3EGR5JX7ZWQ2LKM,Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo\n";
    char want[CONTENT_SECRETS_FINGERPRINT_MAX];

    for (size_t chunk = 0; chunk < 40; chunk += 13) {
        scan_text(text, chunk);
        cr_assert_eq(found.n, 2, "chunks of %zu", chunk);
        expected_fingerprint(want, "aws-access-key", AKID ":" AWSSEC);
        cr_assert_str_eq(found.f[0].fingerprint, want);
        cr_assert_eq(found.f[0].line, 2);
        expected_fingerprint(want, "aws-access-key",
                             "AKIAQ3EGR5JX7ZWQ2LKM:Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo");
        cr_assert_str_eq(found.f[1].fingerprint, want);
        cr_assert_eq(found.f[1].line, 3);
    }
}

Test(secrets, two_openssh_keys_with_a_common_prefix_get_different_fingerprints)
{
    /* OpenSSH ed25519 bodies share their first 83 characters. */
    const char *prefix = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
                         "QyNTUxOQAAACB";
    char a[512], b[512];

    snprintf(a, sizeof(a), "-----BEGIN OPENSSH PRIVATE KEY-----\n%s%s\n", prefix, B64A);
    snprintf(b, sizeof(b), "-----BEGIN OPENSSH PRIVATE KEY-----\n%s%s\n", prefix, B64B);
    scan_text(a, 0);
    cr_assert_eq(found.n, 1);
    {
        struct finding first = found.f[0];

        scan_text(b, 0);
        cr_assert_eq(found.n, 1);
        cr_assert_str_neq(found.f[0].fingerprint, first.fingerprint);
    }
}

Test(secrets, the_scan_is_reset_between_objects)
{
    scan_text("x\ny\n" GHP "\n", 0);
    cr_assert_eq(found.f[0].line, 3);
    /* The first object ends inside a would-be token: nothing carries over. */
    scan_text("ghp_u8jzPde0IgxLd6GncfBAep", 0);
    cr_assert_eq(found.n, 0);
    scan_text("fJBd0Kh8oOOL8d\n" GLPAT, 0);
    cr_assert_eq(found.n, 1);
    cr_assert_eq(found.f[0].line, 2);
    cr_assert_eq(found.f[0].offset, 15);
}

Test(secrets, the_callback_can_stop_a_scan)
{
    found.stop_after = 1;
    {
        const char *text = GHP "\n" GLPAT "\n" SLACK "\n";
        rg_error err = RG_ERROR_INIT;

        memset(&found, 0, sizeof(found));
        found.stop_after = 1;
        cr_assert_eq(content_secrets_scan_feed(scan, text, strlen(text), &err), 1);
        cr_assert_eq(content_secrets_scan_feed(scan, text, strlen(text), &err), 1);
        cr_assert_eq(content_secrets_scan_end(scan, &err), 1);
        cr_assert_eq(found.n, 1);
    }
    scan_text(GLPAT "\n", 0);
    cr_assert_eq(found.n, 1, "the next object is scanned");
    /* A token only the object's end completes: stopping there is no error. */
    {
        rg_error err = RG_ERROR_INIT;

        memset(&found, 0, sizeof(found));
        found.stop_after = 1;
        cr_assert_eq(content_secrets_scan_feed(scan, GHS, strlen(GHS), &err), 0);
        cr_assert_eq(found.n, 0);
        cr_assert_eq(content_secrets_scan_end(scan, &err), 1, "%s", err.msg);
        cr_assert_eq(found.n, 1);
    }
}

/* ------------------------------------------------------------------------
 * Configuration: extra patterns and the allow-list
 * ------------------------------------------------------------------------ */

Test(secrets, allowed_fingerprints_are_not_reported)
{
    char fp[CONTENT_SECRETS_FINGERPRINT_MAX];
    const char *allow[1] = {fp};

    teardown();
    expected_fingerprint(fp, "github-token", GHP);
    setup_with(NULL, 0, allow, 1);
    scan_text(GHP "\n" GHO "\n", 0);
    cr_assert_eq(found.n, 1);
    cr_assert_eq(found.f[0].offset, strlen(GHP) + 1);
}

Test(secrets, extra_patterns_report_under_their_name)
{
    const content_secret_pattern extra[] = {
        {"acme-key", "\\bacme_[0-9a-f]{32}\\b"},
        {"internal.token", "\\bint-[A-Z]{8}\\b"},
    };
    char want[CONTENT_SECRETS_FINGERPRINT_MAX];

    teardown();
    setup_with(extra, 2, NULL, 0);
    scan_text("k = acme_0123456789abcdef0123456789abcdef;\nint-ABCDEFGH " GHP "\n", 3);
    cr_assert_eq(found.n, 3);
    cr_assert_str_eq(found.f[0].kind, "acme-key");
    cr_assert_eq(found.f[0].offset, 4);
    expected_fingerprint(want, "acme-key", "acme_0123456789abcdef0123456789abcdef");
    cr_assert_str_eq(found.f[0].fingerprint, want);
    cr_assert_str_eq(found.f[1].kind, "internal.token");
    cr_assert_eq(found.f[1].line, 2);
    cr_assert_str_eq(found.f[2].kind, "github-token");
}

struct bad_config {
    const char *name;
    const char *regex;
    const char *allow;
    const char *message; /* a part of the error */
};

static struct bad_config bad_configs[] = {
    {"broken", "acme_[0-9", NULL, "secret pattern \"broken\""},
    {"greedy", "acme_.*", NULL, "secret pattern \"greedy\" can match more than 1024 bytes"},
    {"long", "acme_[a-z]{2000}", NULL, "\"long\" can match more than"},
    {"empty", "(acme)?", NULL, "\"empty\" can match empty text"},
    {"bad name!", "acme", NULL, "its name must be"},
    {"github-token", "acme", NULL, "\"github-token\": the name is taken"},
    {"aws-access-key", "acme", NULL, "the name is taken"},
    {"ok", "acme_[0-9]{4}", "github-token:0123", "fingerprint 1 is not"},
    {"ok", "acme_[0-9]{4}", "github-token:0123456789ABCDEF", "fingerprint 1 is not"},
    {"ok", "acme_[0-9]{4}", "0123456789abcdef", "fingerprint 1 is not"},
};

#define NBAD (sizeof(bad_configs) / sizeof(bad_configs[0]))

ParameterizedTestParameters(secrets_config, a_bad_pattern_or_fingerprint_is_refused_by_name)
{
    return cr_make_param_array(size_t, indexes(NBAD), NBAD);
}

ParameterizedTest(size_t *param, secrets_config, a_bad_pattern_or_fingerprint_is_refused_by_name)
{
    const struct bad_config *b = &bad_configs[*param];
    content_secret_pattern extra = {b->name, b->regex};
    const char *allow[1] = {b->allow};
    content_secrets *s = (content_secrets *)1;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(content_secrets_new(&s, &extra, 1, allow, b->allow != NULL, &err), RG_E_CONFIG,
                 "%s", b->name);
    cr_assert_null(s);
    cr_assert_not_null(strstr(err.msg, b->message), "%s: %s", b->name, err.msg);
}

/* ------------------------------------------------------------------------
 * The pure parts
 * ------------------------------------------------------------------------ */

Test(detect, entropy_is_bits_per_byte)
{
    cr_assert_float_eq(content_detect_entropy((const unsigned char *)"aaaa", 4), 0.0, 1e-9);
    cr_assert_float_eq(content_detect_entropy((const unsigned char *)"abab", 4), 1.0, 1e-9);
    cr_assert_float_eq(content_detect_entropy((const unsigned char *)"abcdefgh", 8), 3.0, 1e-9);
}

Test(detect, every_builtin_detector_has_a_unique_valid_name)
{
    for (size_t i = 0; i < content_ndetectors; i++) {
        cr_assert_lt(strlen(content_detectors[i].name), CONTENT_SECRETS_NAME_MAX);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(content_detectors[i].name, content_detectors[j].name);
    }
}
