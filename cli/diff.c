/*
 * `refgate diff`: show, summarise or apply what a sandboxed run changed in
 * its fork. The work is review/ (dirdiff.h); this file parses arguments, works out
 * refgate-run's default base and original paths, and decides what the user
 * sees and which exit status they get (0 nothing changed / everything
 * applied, 1 changes / something refused, 2 error).
 */
#include <errno.h>
#include <stdbool.h>
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

static void diff_usage(FILE *f)
{
    fprintf(f, "usage: refgate diff [--stat | --apply --digest SHA256 | --apply --unreviewed]\n"
               "                    [--max-file-size BYTES] [--base DIR] [--original DIR]\n"
               "                    FORK [BASE]\n"
               "\n"
               "Show what a sandboxed run changed in FORK as a patch against BASE, the\n"
               "directory as it was when refgate-run made the fork. `git apply` applies\n"
               "the patch to the original directory. The patch and --stat end with a line\n"
               "`refgate-diff-digest: sha256:...` on stderr: pass it to --apply --digest\n"
               "to apply exactly what you reviewed.\n"
               "\n"
               "  --stat          print a summary (git diff --stat --summary) instead\n"
               "  --apply         write the changes into the original directory, path by\n"
               "                  path, refusing any path the original changed since the fork;\n"
               "                  refused while the run that made FORK is still alive\n"
               "  --digest SHA256 with --apply: refuse unless the fork's diff still has this\n"
               "                  digest (the one printed when you reviewed it)\n"
               "  --unreviewed    with --apply: apply without a digest\n"
               "  --max-file-size BYTES\n"
               "                  files larger than this (apparent size; K, M, G suffixes)\n"
               "                  are not read but listed as skipped, and never applied\n"
               "                  (default 64M)\n"
               "  --base DIR      the base (default: <dir of FORK>/.<name of FORK>.base)\n"
               "  --original DIR  where --apply writes (default: FORK without its .<N>)\n"
               "  -h, --help      show this help\n"
               "\n"
               "FORK and BASE are read as plain directories: git never runs in them and the\n"
               "fork's .git (config, hooks, anything) is never read. .git is left out at every\n"
               "level; paths the base's .gitignore files (and .git/info/exclude) ignore are\n"
               "left out of both sides, unless the base's index tracks them. Paths refgate-run\n"
               "--exclude left out of the fork (recorded in .<name of FORK>.excluded beside\n"
               "it) are left out of both sides and never applied. Symlinks are\n"
               "shown as links and never followed; binary files as git binary patches.\n"
               "\n"
               "Exit status: 0 no changes (--apply: all applied), 1 changes (--apply: some\n"
               "refused), 2 error.\n");
}

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

/* Take an option's value from "--opt=value" or the next argument. */
static int diff_optarg(const char **out, int argc, char **argv, int *i, const char *opt)
{
    size_t n = strlen(opt);

    if (!strncmp(argv[*i], opt, n) && argv[*i][n] == '=') {
        *out = argv[*i] + n + 1;
        return 1;
    }
    if (strcmp(argv[*i], opt) != 0)
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "refgate diff: %s needs a value\n", opt);
        return -1;
    }
    *out = argv[++*i];
    return 1;
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

int cli_diff(int argc, char **argv)
{
    const char *fork = NULL, *base = NULL, *original = NULL, *want_digest = NULL, *size_arg = NULL;
    review_dirdiff_opts opts = REVIEW_DIRDIFF_OPTS_INIT;
    char digest[REVIEW_DIRDIFF_DIGEST_SIZE];
    bool unreviewed = false;
    rg_buf base_buf = RG_BUF_INIT(DIFF_PATH_MAX), orig_buf = RG_BUF_INIT(DIFF_PATH_MAX);
    rg_buf stat = RG_BUF_INIT(DIFF_STAT_MAX);
    rg_buf excluded = RG_BUF_INIT(DIFF_EXCLUDED_MAX);
    rg_error err = RG_ERROR_INIT;
    review_dirdiff *d = NULL;
    bool want_stat = false, want_apply = false, dashdash = false;
    size_t refused = 0;
    int i, r, status = DIFF_EXIT_ERROR;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!dashdash && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            diff_usage(stdout);
            status = DIFF_EXIT_SAME;
            goto done;
        } else if (!dashdash && !strcmp(a, "--stat")) {
            want_stat = true;
        } else if (!dashdash && !strcmp(a, "--apply")) {
            want_apply = true;
        } else if (!dashdash && !strcmp(a, "--unreviewed")) {
            unreviewed = true;
        } else if (!dashdash && (r = diff_optarg(&want_digest, argc, argv, &i, "--digest")) != 0) {
            if (r < 0)
                goto done;
        } else if (!dashdash &&
                   (r = diff_optarg(&size_arg, argc, argv, &i, "--max-file-size")) != 0) {
            if (r < 0)
                goto done;
        } else if (!dashdash && !strcmp(a, "--")) {
            dashdash = true;
        } else if (!dashdash && (r = diff_optarg(&base, argc, argv, &i, "--base")) != 0) {
            if (r < 0)
                goto done;
        } else if (!dashdash && (r = diff_optarg(&original, argc, argv, &i, "--original")) != 0) {
            if (r < 0)
                goto done;
        } else if (!dashdash && a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "refgate diff: unknown option '%s'\n\n", a);
            diff_usage(stderr);
            goto done;
        } else if (fork == NULL) {
            fork = a;
        } else if (base == NULL) {
            base = a;
        } else {
            fprintf(stderr, "refgate diff: too many arguments\n\n");
            diff_usage(stderr);
            goto done;
        }
    }
    if (fork == NULL) {
        diff_usage(stderr);
        goto done;
    }
    if (want_stat && want_apply) {
        fprintf(stderr, "refgate diff: --stat and --apply do not go together\n");
        goto done;
    }
    if ((want_digest != NULL || unreviewed) && !want_apply) {
        fprintf(stderr, "refgate diff: --digest and --unreviewed go with --apply\n");
        goto done;
    }
    /* Applying what nobody looked at would apply whatever the fork holds
     * now, including what a process left running changed after review. */
    if (want_apply && (want_digest == NULL) == !unreviewed) {
        fprintf(stderr, "refgate diff: --apply needs --digest SHA256 (printed by `refgate diff` "
                        "or `refgate diff --stat` as refgate-diff-digest) or --unreviewed\n");
        goto done;
    }
    if (size_arg != NULL && (opts.max_file_size = diff_parse_size(size_arg)) == 0) {
        fprintf(stderr, "refgate diff: --max-file-size: '%s' is not a size in bytes\n", size_arg);
        goto done;
    }
    if (opts.max_file_size == 0)
        opts.max_file_size = REVIEW_DIRDIFF_MAX_FILE_SIZE;
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
