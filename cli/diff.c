/*
 * `refgate diff`: show, summarise or apply what a sandboxed run changed in
 * its fork. The work is git/dirdiff.c; this file parses arguments, works out
 * refgate-run's default base and original paths, and decides what the user
 * sees and which exit status they get (0 nothing changed / everything
 * applied, 1 changes / something refused, 2 error).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "git/dirdiff.h"

#define DIFF_PATH_MAX     4096
#define DIFF_STAT_MAX     ((size_t)64 << 20)
#define DIFF_EXIT_SAME    0
#define DIFF_EXIT_CHANGED 1
#define DIFF_EXIT_ERROR   2

static void diff_usage(FILE *f)
{
    fprintf(f, "usage: refgate diff [--stat | --apply] [--base DIR] [--original DIR] FORK [BASE]\n"
               "\n"
               "Show what a sandboxed run changed in FORK as a patch against BASE, the\n"
               "directory as it was when refgate-run made the fork. `git apply` applies\n"
               "the patch to the original directory.\n"
               "\n"
               "  --stat          print a summary (git diff --stat --summary) instead\n"
               "  --apply         write the changes into the original directory, path by\n"
               "                  path, refusing any path the original changed since the fork\n"
               "  --base DIR      the base (default: <dir of FORK>/.<name of FORK>.base)\n"
               "  --original DIR  where --apply writes (default: FORK without its .<N>)\n"
               "  -h, --help      show this help\n"
               "\n"
               "FORK and BASE are read as plain directories: git never runs in them and the\n"
               "fork's .git (config, hooks, anything) is never read. .git is left out at every\n"
               "level; paths the base's .gitignore files (and .git/info/exclude) ignore are\n"
               "left out of both sides, unless the base's index tracks them. Symlinks are\n"
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

static void diff_report(const char *path, rgit_dirdiff_outcome outcome, const char *reason,
                        void *payload)
{
    (void)payload;
    switch (outcome) {
    case RGIT_DIRDIFF_APPLIED:
        fputs("applied: ", stdout);
        diff_put_path(stdout, path);
        fputc('\n', stdout);
        break;
    case RGIT_DIRDIFF_ALREADY:
        fputs("already applied: ", stdout);
        diff_put_path(stdout, path);
        fputc('\n', stdout);
        break;
    case RGIT_DIRDIFF_REFUSED:
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
        fprintf(stderr, "refgate diff: %s needs a directory\n", opt);
        return -1;
    }
    *out = argv[++*i];
    return 1;
}

int cli_diff(int argc, char **argv)
{
    const char *fork = NULL, *base = NULL, *original = NULL;
    rg_buf base_buf = RG_BUF_INIT(DIFF_PATH_MAX), orig_buf = RG_BUF_INIT(DIFF_PATH_MAX);
    rg_buf stat = RG_BUF_INIT(DIFF_STAT_MAX);
    rg_error err = RG_ERROR_INIT;
    rgit_dirdiff *d = NULL;
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
    /* From here on every failure is in `err`, reported once below. */
    if (base == NULL) {
        if (rgit_dirdiff_default_base(&base_buf, fork, &err) < 0)
            goto done;
        base = base_buf.data;
    }
    if (want_apply && original == NULL) {
        if (rgit_dirdiff_default_original(&orig_buf, fork, &err) < 0) {
            rg_error_wrap(&err, "give --original");
            goto done;
        }
        original = orig_buf.data;
    }
    if (rgit_dirdiff_new(&d, base, fork, NULL, &err) < 0)
        goto done;
    if (want_apply) {
        if (rgit_dirdiff_apply(&refused, d, original, diff_report, NULL, &err) < 0)
            goto done;
        if (refused > 0)
            fprintf(stderr, "refgate diff: %zu of %zu changes refused; the fork still has them\n",
                    refused, rgit_dirdiff_count(d));
        status = refused > 0 ? DIFF_EXIT_CHANGED : DIFF_EXIT_SAME;
    } else if (want_stat) {
        if (rgit_dirdiff_stat(&stat, d, 80, &err) < 0)
            goto done;
        if (stat.len > 0 && fwrite(stat.data, 1, stat.len, stdout) != stat.len)
            rg_error_set(&err, -EIO, "writing the summary failed");
        status = rgit_dirdiff_count(d) > 0 ? DIFF_EXIT_CHANGED : DIFF_EXIT_SAME;
    } else {
        if (rgit_dirdiff_print(d, diff_stdout_write, NULL, &err) < 0)
            goto done;
        status = rgit_dirdiff_count(d) > 0 ? DIFF_EXIT_CHANGED : DIFF_EXIT_SAME;
    }
    if ((fflush(stdout) != 0 || ferror(stdout)) && err.code == 0)
        rg_error_set(&err, -EIO, "writing the output failed");
done:
    if (err.code != 0) {
        fflush(stdout);
        fprintf(stderr, "refgate diff: %s\n", err.msg);
        status = DIFF_EXIT_ERROR;
    }
    rgit_dirdiff_free(d);
    rg_buf_free(&base_buf);
    rg_buf_free(&orig_buf);
    rg_buf_free(&stat);
    return status;
}
