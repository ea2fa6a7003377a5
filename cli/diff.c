/*
 * `refgate diff`: show, summarise or apply what a sandboxed run changed in
 * its fork. The work is review/ (dirdiff.h); this file parses arguments, works out
 * refgate-run's default base and original paths, and decides what the user
 * sees and which exit status they get (0 nothing changed / everything
 * applied, 1 changes / something refused, 2 error).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "review/dirdiff.h"

#define DIFF_PATH_MAX     4096
#define DIFF_STAT_MAX     ((size_t)64 << 20)
#define DIFF_EXIT_SAME    0
#define DIFF_EXIT_CHANGED 1
#define DIFF_EXIT_ERROR   2
#define DIFF_EXCLUDED_MAX ((size_t)8 << 20)

/* refgate diff's options and operands (refgate(1) says what they do). */
typedef struct diff_args {
    const char *base, *original, *digest, *max_file_size;
    int stat, apply, unreviewed;
    const char *fork;
} diff_args;

static const cli_opt diff_opts_table[] = {
    {"--stat", CLI_OPT_FLAG, offsetof(diff_args, stat), NULL},
    {"--apply", CLI_OPT_FLAG, offsetof(diff_args, apply), NULL},
    {"--unreviewed", CLI_OPT_FLAG, offsetof(diff_args, unreviewed), NULL},
    {"--digest", CLI_OPT_VALUE, offsetof(diff_args, digest), "SHA256"},
    {"--max-file-size", CLI_OPT_VALUE, offsetof(diff_args, max_file_size), "BYTES"},
    {"--base", CLI_OPT_VALUE, offsetof(diff_args, base), "DIR"},
    {"--original", CLI_OPT_VALUE, offsetof(diff_args, original), "DIR"},
};
const cli_cmd cli_cmd_diff = {"diff", CLI_OPTS(diff_opts_table), 0, NULL};

/*
 * Write a path for a message on one line, quoted the way git quotes it
 * when it holds control characters, quotes, backslashes or non-ASCII bytes,
 * so a crafted file name cannot forge extra output lines.
 */
static void diff_put_path(FILE *f, const char *path)
{
    const unsigned char *p;
    bool plain = true;

    for (p = (const unsigned char *)path; *p; p++)
        if (*p < 0x20 || *p >= 0x7f || *p == '"' || *p == '\\')
            plain = false;
    if (plain) {
        fputs(path, f);
        return;
    }
    fputc('"', f);
    for (p = (const unsigned char *)path; *p; p++) {
        switch (*p) {
        case '\t':
            fputs("\\t", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        default:
            if (*p < 0x20 || *p >= 0x7f)
                fprintf(f, "\\%03o", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static int diff_stdout_write(const void *data, size_t len, void *payload)
{
    (void)payload;
    return fwrite(data, 1, len, stdout) == len ? 0 : -EIO;
}

static void diff_report(const char *path, review_dirdiff_outcome outcome, const char *reason,
                        void *payload)
{
    (void)payload;
    switch (outcome) {
    case REVIEW_DIRDIFF_APPLIED:
        fputs("applied: ", stdout);
        diff_put_path(stdout, path);
        fputc('\n', stdout);
        break;
    case REVIEW_DIRDIFF_ALREADY:
        fputs("already applied: ", stdout);
        diff_put_path(stdout, path);
        fputc('\n', stdout);
        break;
    case REVIEW_DIRDIFF_REFUSED:
        fflush(stdout);
        fputs("refused: ", stderr);
        diff_put_path(stderr, path);
        fprintf(stderr, ": %s\n", reason ? reason : "refused");
        break;
    }
}

/* "123", "64M", "1G": bytes, 0 on a malformed or zero size. */
static unsigned long long diff_parse_size(const char *s)
{
    unsigned long long v, mul = 1;
    char *end;

    if (s[0] < '0' || s[0] > '9')
        return 0;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return 0;
    if (*end == 'K' || *end == 'k')
        mul = 1ULL << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ULL << 20;
    else if (*end == 'G' || *end == 'g')
        mul = 1ULL << 30;
    else if (*end != '\0')
        return 0;
    if (mul > 1 && end[1] != '\0')
        return 0;
    if (v > ~0ULL / mul)
        return 0;
    return v * mul;
}

/* Tell the skipped files: on stdout in the summary, else on stderr so the
 * patch stays one `git apply` accepts. */
static void diff_put_skipped(const review_dirdiff *d, FILE *f, unsigned long long max)
{
    review_dirdiff_skipped sk;
    size_t i;

    for (i = 0; review_dirdiff_skipped_get(&sk, d, i) == 0; i++) {
        fputs(f == stdout ? " " : "refgate diff: ", f);
        diff_put_path(f, sk.path);
        fprintf(f, " | Binary/skipped: too large (");
        if (sk.base_size >= 0)
            fprintf(f, "base %lld bytes", sk.base_size);
        if (sk.base_size >= 0 && sk.fork_size >= 0)
            fputs(", ", f);
        if (sk.fork_size >= 0)
            fprintf(f, "fork %lld bytes", sk.fork_size);
        fprintf(f, "; limit %llu: not compared, never applied)\n", max);
    }
}

/* Say which paths the fork left out (on stderr: the patch stays clean). */
static void diff_put_excluded(const rg_buf *excluded)
{
    size_t off, n = 0;

    for (off = 0; off < excluded->len; off += strlen(excluded->data + off) + 1) {
        if (n++ == 0)
            fputs("refgate diff: left out (excluded from the fork by refgate-run; never shown "
                  "or applied):",
                  stderr);
        fputc(' ', stderr);
        diff_put_path(stderr, excluded->data + off);
    }
    if (n > 0)
        fputc('\n', stderr);
}

/*
 * Parse and check refgate diff's arguments into *a and opts: -1 to go on,
 * else the exit status (0 after help, 2 after a mistake, said).
 */
static int diff_parse(diff_args *a, review_dirdiff_opts *opts, int argc, char **argv)
{
    cli_args args;
    int rc = cli_opts_parse(&cli_cmd_diff, a, &args, argc, argv);

    if (rc != 0)
        return rc == CLI_PARSE_HELP ? DIFF_EXIT_SAME : DIFF_EXIT_ERROR;
    if (args.n == 0 || args.n > 2) {
        cli_usage_error(&cli_cmd_diff, args.n ? "too many arguments" : "FORK is required");
        return DIFF_EXIT_ERROR;
    }
    a->fork = args.v[0];
    if (args.n == 2)
        a->base = args.v[1];
    if (a->stat && a->apply) {
        fprintf(stderr, "refgate diff: --stat and --apply do not go together\n");
        return DIFF_EXIT_ERROR;
    }
    if ((a->digest != NULL || a->unreviewed) && !a->apply) {
        fprintf(stderr, "refgate diff: --digest and --unreviewed go with --apply\n");
        return DIFF_EXIT_ERROR;
    }
    /* Applying what nobody looked at would apply whatever the fork holds
     * now, including what a process left running changed after review. */
    if (a->apply && (a->digest == NULL) == !a->unreviewed) {
        fprintf(stderr, "refgate diff: --apply needs --digest SHA256 (printed by `refgate diff` "
                        "or `refgate diff --stat` as refgate-diff-digest) or --unreviewed\n");
        return DIFF_EXIT_ERROR;
    }
    if (a->max_file_size != NULL &&
        (opts->max_file_size = diff_parse_size(a->max_file_size)) == 0) {
        fprintf(stderr, "refgate diff: --max-file-size: '%s' is not a size in bytes\n",
                a->max_file_size);
        return DIFF_EXIT_ERROR;
    }
    if (opts->max_file_size == 0)
        opts->max_file_size = REVIEW_DIRDIFF_MAX_FILE_SIZE;
    return -1;
}

int cli_diff(int argc, char **argv)
{
    const char *fork, *base, *original, *want_digest;
    review_dirdiff_opts opts = REVIEW_DIRDIFF_OPTS_INIT;
    char digest[REVIEW_DIRDIFF_DIGEST_SIZE];
    diff_args a = {0};
    rg_buf base_buf = RG_BUF_INIT(DIFF_PATH_MAX), orig_buf = RG_BUF_INIT(DIFF_PATH_MAX);
    rg_buf stat = RG_BUF_INIT(DIFF_STAT_MAX);
    rg_buf excluded = RG_BUF_INIT(DIFF_EXCLUDED_MAX);
    rg_error err = RG_ERROR_INIT;
    review_dirdiff *d = NULL;
    bool want_stat, want_apply;
    size_t refused = 0;
    int r, status = DIFF_EXIT_ERROR;

    r = diff_parse(&a, &opts, argc, argv);
    if (r >= 0)
        return r;
    fork = a.fork;
    base = a.base;
    original = a.original;
    want_digest = a.digest;
    want_stat = a.stat;
    want_apply = a.apply;
    /* From here on every failure is in `err`, reported once below. */
    if (base == NULL) {
        if (review_dirdiff_default_base(&base_buf, fork, &err) < 0)
            goto done;
        base = base_buf.data;
    }
    if (want_apply && original == NULL) {
        if (review_dirdiff_default_original(&orig_buf, fork, &err) < 0) {
            rg_error_wrap(&err, "give --original");
            goto done;
        }
        original = orig_buf.data;
    }
    /* Checked before the diff is made: nothing of the run may be left to
     * change the fork between this check and the end of the apply. */
    if (want_apply && review_dirdiff_check_run(fork, &err) < 0)
        goto done;
    if (!want_apply) {
        rg_error live = RG_ERROR_INIT;
        /* Showing a live fork is allowed; applying it later needs the
         * digest to match, so say why it may not. */
        if (review_dirdiff_check_run(fork, &live) < 0)
            fprintf(stderr, "refgate diff: warning: %s\n", live.msg);
    }
    /* What refgate-run left out of the fork (--exclude) is left out here
     * too: a placeholder stands there, so it must never read as deleted. */
    if (review_dirdiff_default_excluded(&excluded, fork, &err) < 0)
        goto done;
    opts.excluded = excluded.data;
    opts.excluded_len = excluded.len;
    diff_put_excluded(&excluded);
    if (review_dirdiff_new(&d, base, fork, &opts, &err) < 0)
        goto done;
    if (want_apply) {
        /* Everything applied below comes from this diff, its blobs checked
         * against their ids: a matching digest means exactly what was shown. */
        if (review_dirdiff_print_digest(d, NULL, NULL, digest, &err) < 0)
            goto done;
        if (want_digest != NULL && strcmp(want_digest, digest) != 0) {
            rg_error_set(&err, RG_E_TAMPER,
                         "the fork's diff is no longer the one reviewed (its digest is now %s, "
                         "not %s); nothing applied: review it again",
                         digest, want_digest);
            goto done;
        }
        if (review_dirdiff_apply(&refused, d, original, diff_report, NULL, &err) < 0)
            goto done;
        if (refused > 0)
            fprintf(stderr, "refgate diff: %zu of %zu changes refused; the fork still has them\n",
                    refused, review_dirdiff_count(d) + review_dirdiff_skipped_count(d));
        status = refused > 0 ? DIFF_EXIT_CHANGED : DIFF_EXIT_SAME;
    } else if (want_stat) {
        if (review_dirdiff_stat(&stat, d, 80, &err) < 0 ||
            review_dirdiff_print_digest(d, NULL, NULL, digest, &err) < 0)
            goto done;
        if (stat.len > 0 && fwrite(stat.data, 1, stat.len, stdout) != stat.len)
            rg_error_set(&err, -EIO, "writing the summary failed");
        diff_put_skipped(d, stdout, opts.max_file_size);
        fflush(stdout);
        fprintf(stderr, "refgate-diff-digest: %s\n", digest);
        status = review_dirdiff_count(d) + review_dirdiff_skipped_count(d) > 0 ? DIFF_EXIT_CHANGED
                                                                               : DIFF_EXIT_SAME;
    } else {
        if (review_dirdiff_print_digest(d, diff_stdout_write, NULL, digest, &err) < 0)
            goto done;
        fflush(stdout);
        diff_put_skipped(d, stderr, opts.max_file_size);
        fprintf(stderr, "refgate-diff-digest: %s\n", digest);
        status = review_dirdiff_count(d) + review_dirdiff_skipped_count(d) > 0 ? DIFF_EXIT_CHANGED
                                                                               : DIFF_EXIT_SAME;
    }
    if ((fflush(stdout) != 0 || ferror(stdout)) && err.code == 0)
        rg_error_set(&err, -EIO, "writing the output failed");
done:
    if (err.code != 0) {
        fflush(stdout);
        fprintf(stderr, "refgate diff: %s\n", err.msg);
        status = DIFF_EXIT_ERROR;
    }
    review_dirdiff_free(d);
    rg_buf_free(&base_buf);
    rg_buf_free(&orig_buf);
    rg_buf_free(&stat);
    rg_buf_free(&excluded);
    return status;
}
