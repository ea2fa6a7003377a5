/*
 * Tests for review/ (dirdiff.h). Each test builds a base directory in a fresh
 * temporary root, forks it with `cp -a` the way refgate-run does (base and
 * fork side by side), changes the fork, and checks what the diff reports,
 * what its patch does to a copy of the base under the real `git apply`, and
 * what --apply does to an "original". The fork is treated as hostile
 * throughout: a malicious .git, symlinks pointing out, FIFOs.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/shell.h"
#include "review/dirdiff.h"
#include "util/buf.h"
#include "util/fs.h"

static char root[] = "/tmp/rg-test-dirdiff-XXXXXX";
static char base[600], fork_dir[600], other[600];

/* ---------------------------------------------------------------------------
 * Fixture helpers
 * ------------------------------------------------------------------------- */

static void path_in(char *out, size_t n, const char *dir, const char *rel)
{
    cr_assert_lt((size_t)snprintf(out, n, "%s/%s", dir, rel), n);
}

/* Write `len` bytes at dir/rel with `mode`, creating parent directories. */
static void put_bytes(const char *dir, const char *rel, const void *data, size_t len, mode_t mode)
{
    char path[1024], *slash;

    path_in(path, sizeof(path), dir, rel);
    slash = strrchr(path, '/');
    *slash = '\0';
    cr_assert_eq(rg_fs_mkdir_p(path, 0755, NULL), 0, "mkdir %s", path);
    *slash = '/';
    cr_assert_eq(rg_fs_write_atomic(path, data, len, mode, NULL), 0, "write %s", path);
}

static void put(const char *dir, const char *rel, const char *text)
{
    put_bytes(dir, rel, text, strlen(text), 0644);
}

static void put_link(const char *dir, const char *rel, const char *target)
{
    char path[1024];

    path_in(path, sizeof(path), dir, rel);
    unlink(path);
    cr_assert_eq(symlink(target, path), 0, "symlink %s", path);
}

static void remove_path(const char *dir, const char *rel)
{
    test_run("rm -rf '%s/%s'", dir, rel);
}

static void chmod_path(const char *dir, const char *rel, mode_t mode)
{
    char path[1024];

    path_in(path, sizeof(path), dir, rel);
    cr_assert_eq(chmod(path, mode), 0, "chmod %s", path);
}

static bool exists(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0;
}

static void setup(void)
{
    cr_assert_not_null(mkdtemp(root));
    snprintf(base, sizeof(base), "%s/.app.1.base", root);
    snprintf(fork_dir, sizeof(fork_dir), "%s/app.1", root);
    snprintf(other, sizeof(other), "%s/app", root);
    cr_assert_eq(mkdir(base, 0755), 0);
}

static void teardown(void)
{
    rg_fs_remove_tree(root, 0, NULL);
}

TestSuite(dirdiff, .init = setup, .fini = teardown, .timeout = 60);

/* A small project with every kind of entry the diff handles. */
static void make_project(void)
{
    static const unsigned char bin[] = {0, 1, 2, 3, 0xff, 0xfe, 0, 0, 'b', 'i', 'n', 0};

    put(base, "README.md", "# app\n\nA small project.\n");
    put(base, "src/main.c", "int main(void)\n{\n    return 0;\n}\n");
    put(base, "src/util.c", "int util(void) { return 1; }\n");
    put_bytes(base, "run.sh", "#!/bin/sh\necho hi\n", 18, 0755);
    put_bytes(base, "logo.bin", bin, sizeof(bin), 0644);
    put(base, "docs/old.txt", "old\n");
    put_link(base, "latest", "src/main.c");
}

static void fork_base(void)
{
    test_run("cp -a '%s' '%s'", base, fork_dir);
}

static review_dirdiff *diff_of(const char *b, const char *f)
{
    rg_error err = RG_ERROR_INIT;
    review_dirdiff *d = NULL;
    int rc = review_dirdiff_new(&d, b, f, NULL, &err);

    cr_assert_eq(rc, 0, "review_dirdiff_new: %s", err.msg);
    return d;
}

static char *patch_of(review_dirdiff *d)
{
    rg_buf b = RG_BUF_INIT(64 << 20);
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(review_dirdiff_patch(&b, d, &err), 0, "patch: %s", err.msg);
    return rg_buf_detach(&b);
}

/* The change at `path` with `status`, or fail. */
static review_dirdiff_change change_at(review_dirdiff *d, const char *path,
                                       review_dirdiff_status status)
{
    review_dirdiff_change c;
    size_t i;

    for (i = 0; i < review_dirdiff_count(d); i++) {
        cr_assert_eq(review_dirdiff_get(&c, d, i), 0);
        if (!strcmp(c.path, path) && c.status == status)
            return c;
    }
    cr_assert_fail("no %c change at %s", status, path);
    return c;
}

/* Apply the patch with the real `git apply` to a copy of the base and check,
 * with the diff itself, that the copy now matches the fork. */
static void assert_round_trip(review_dirdiff *d)
{
    char patch_path[700], copy[700];
    char *patch = patch_of(d);
    review_dirdiff *again;

    snprintf(patch_path, sizeof(patch_path), "%s/patch", root);
    snprintf(copy, sizeof(copy), "%s/copy", root);
    cr_assert_eq(rg_fs_write_atomic(patch_path, patch, strlen(patch), 0644, NULL), 0);
    free(patch);
    test_run("rm -rf '%s' && cp -a '%s' '%s'", copy, base, copy);
    test_run("cd '%s' && git apply --whitespace=nowarn '%s'", copy, patch_path);
    again = diff_of(copy, fork_dir);
    cr_assert_eq(review_dirdiff_count(again), 0, "the patched copy differs from the fork:\n%s",
                 patch_of(again));
    review_dirdiff_free(again);
}

static void free_indices(struct criterion_test_params *p)
{
    cr_free(p->params);
}

/*
 * Parameters for a table-driven test: 0..n-1. Criterion hands parameters to
 * a fresh process where the parent's pointers mean nothing, so tests take
 * an index into their table rather than a pointer to a row.
 */
static struct criterion_test_params indices(size_t n)
{
    int *v = cr_malloc(n * sizeof(*v));
    size_t i;

    for (i = 0; i < n; i++)
        v[i] = (int)i;
    return cr_make_param_array(int, v, n, free_indices);
}

/* ---------------------------------------------------------------------------
 * What the diff reports
 * ------------------------------------------------------------------------- */

Test(dirdiff, identical_trees_have_no_changes_and_an_empty_patch)
{
    rg_buf stat = RG_BUF_INIT(1 << 20);
    review_dirdiff *d;
    char *patch;

    make_project();
    fork_base();
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 0);
    patch = patch_of(d);
    cr_assert_str_empty(patch);
    cr_assert_eq(review_dirdiff_stat(&stat, d, 80, NULL), 0);
    cr_assert_eq(stat.len, 0);
    free(patch);
    rg_buf_free(&stat);
    review_dirdiff_free(d);
}

Test(dirdiff, mtime_alone_is_not_a_change_and_same_size_content_is)
{
    review_dirdiff *d;

    make_project();
    fork_base();
    test_run("touch -d '2001-01-01' '%s/README.md'", fork_dir);
    /* Same size, different bytes, mtime put back: only content tells. */
    test_run("cp -p '%s/src/util.c' '%s/t' && printf 'int util(void) { return 2; }\\n' > "
             "'%s/src/util.c' && touch -r '%s/t' '%s/src/util.c' && rm '%s/t'",
             fork_dir, root, fork_dir, root, fork_dir, root);
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 1);
    change_at(d, "src/util.c", REVIEW_DIRDIFF_MODIFIED);
    review_dirdiff_free(d);
}

/* One kind of change: what to do to the fork and what the diff must say. */
typedef struct change_case {
    const char *name;
    void (*mutate)(void);
    const char *path;
    review_dirdiff_status status;
    unsigned int old_mode, new_mode;
    const char *in_patch; /* text the patch must contain */
} change_case;

static void mut_modify(void)
{
    put(fork_dir, "src/main.c", "int main(void)\n{\n    return 1;\n}\n");
}
static void mut_add(void)
{
    put(fork_dir, "src/new.c", "void fresh(void) {}\n");
}
static void mut_delete(void)
{
    remove_path(fork_dir, "docs/old.txt");
}
static void mut_chmod(void)
{
    chmod_path(fork_dir, "run.sh", 0644);
}
static void mut_add_link(void)
{
    put_link(fork_dir, "docs/link", "../README.md");
}
static void mut_retarget_link(void)
{
    put_link(fork_dir, "latest", "src/util.c");
}
static void mut_binary(void)
{
    static const unsigned char bin[] = {0, 9, 8, 7, 0xff, 0, 'x'};
    put_bytes(fork_dir, "logo.bin", bin, sizeof(bin), 0644);
}
static void mut_delete_binary(void)
{
    remove_path(fork_dir, "logo.bin");
}
static void mut_empty(void)
{
    put(fork_dir, "empty", "");
}
static void mut_no_newline(void)
{
    put(fork_dir, "README.md", "# app\n\nNo newline at the end.");
}

static change_case change_cases[] = {
    {"modify", mut_modify, "src/main.c", REVIEW_DIRDIFF_MODIFIED, 0100644, 0100644,
     "+    return 1;"},
    {"add", mut_add, "src/new.c", REVIEW_DIRDIFF_ADDED, 0, 0100644, "new file mode 100644"},
    {"delete", mut_delete, "docs/old.txt", REVIEW_DIRDIFF_DELETED, 0100644, 0,
     "deleted file mode 100644"},
    {"chmod", mut_chmod, "run.sh", REVIEW_DIRDIFF_MODIFIED, 0100755, 0100644, "new mode 100644"},
    {"symlink", mut_add_link, "docs/link", REVIEW_DIRDIFF_ADDED, 0, 0120000, "+../README.md"},
    {"retarget", mut_retarget_link, "latest", REVIEW_DIRDIFF_MODIFIED, 0120000, 0120000,
     "+src/util.c"},
    {"binary", mut_binary, "logo.bin", REVIEW_DIRDIFF_MODIFIED, 0100644, 0100644,
     "GIT binary patch"},
    {"delete-binary", mut_delete_binary, "logo.bin", REVIEW_DIRDIFF_DELETED, 0100644, 0,
     "GIT binary patch"},
    {"empty", mut_empty, "empty", REVIEW_DIRDIFF_ADDED, 0, 0100644, "new file mode 100644"},
    {"no-newline", mut_no_newline, "README.md", REVIEW_DIRDIFF_MODIFIED, 0100644, 0100644,
     "\\ No newline at end of file"},
};

ParameterizedTestParameters(dirdiff, each_kind_of_change_is_reported_and_round_trips)
{
    return indices(sizeof(change_cases) / sizeof(change_cases[0]));
}

ParameterizedTest(int *i, dirdiff, each_kind_of_change_is_reported_and_round_trips)
{
    const change_case *cc = &change_cases[*i];
    review_dirdiff_change c;
    review_dirdiff *d;
    char *patch;

    make_project();
    fork_base();
    cc->mutate();
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 1, "%s: %zu changes", cc->name, review_dirdiff_count(d));
    c = change_at(d, cc->path, cc->status);
    cr_assert_eq(c.old_mode, cc->old_mode, "%s: old mode %o", cc->name, c.old_mode);
    cr_assert_eq(c.new_mode, cc->new_mode, "%s: new mode %o", cc->name, c.new_mode);
    patch = patch_of(d);
    cr_assert_not_null(strstr(patch, cc->in_patch), "%s: patch lacks '%s':\n%s", cc->name,
                       cc->in_patch, patch);
    free(patch);
    assert_round_trip(d);
    review_dirdiff_free(d);
}

Test(dirdiff, type_changes_are_a_deletion_and_an_addition)
{
    review_dirdiff *d;

    make_project();
    fork_base();
    remove_path(fork_dir, "latest");
    put(fork_dir, "latest", "now a file\n"); /* symlink -> file */
    remove_path(fork_dir, "docs");
    put(fork_dir, "docs", "docs is a file now\n"); /* directory -> file */
    remove_path(fork_dir, "run.sh");
    put(fork_dir, "run.sh/inner", "file -> directory\n");
    d = diff_of(base, fork_dir);
    change_at(d, "latest", REVIEW_DIRDIFF_DELETED);
    change_at(d, "latest", REVIEW_DIRDIFF_ADDED);
    change_at(d, "docs/old.txt", REVIEW_DIRDIFF_DELETED);
    change_at(d, "docs", REVIEW_DIRDIFF_ADDED);
    change_at(d, "run.sh", REVIEW_DIRDIFF_DELETED);
    change_at(d, "run.sh/inner", REVIEW_DIRDIFF_ADDED);
    cr_assert_eq(review_dirdiff_count(d), 6);
    assert_round_trip(d);
    review_dirdiff_free(d);
}

Test(dirdiff, odd_file_names_round_trip)
{
    review_dirdiff *d;
    char *patch;

    make_project();
    fork_base();
    put(fork_dir, "with space.txt", "a\n");
    put(fork_dir, "tab\there.txt", "b\n");
    put(fork_dir, "new\nline.txt", "c\n");
    put(fork_dir, "quote\"back\\slash.txt", "d\n");
    put(fork_dir, "caf\xc3\xa9.txt", "e\n");
    put(fork_dir, "-dash", "f\n");
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 6);
    patch = patch_of(d);
    /* git quotes such names; a raw newline would start a forged line. */
    cr_assert_null(strstr(patch, "new\nline"), "%s", patch);
    free(patch);
    assert_round_trip(d);
    review_dirdiff_free(d);
}

Test(dirdiff, stat_summarises_like_git)
{
    rg_buf stat = RG_BUF_INIT(1 << 20);
    review_dirdiff *d;

    make_project();
    fork_base();
    mut_modify();
    mut_add();
    mut_chmod();
    mut_binary();
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_stat(&stat, d, 80, NULL), 0);
    cr_assert_not_null(strstr(stat.data, " 4 files changed"), "%s", stat.data);
    cr_assert_not_null(strstr(stat.data, "create mode 100644 src/new.c"), "%s", stat.data);
    cr_assert_not_null(strstr(stat.data, "mode change 100755 => 100644 run.sh"), "%s", stat.data);
    cr_assert_not_null(strstr(stat.data, "Bin 12 -> 7 bytes"), "%s", stat.data);
    rg_buf_free(&stat);
    review_dirdiff_free(d);
}

/* ---------------------------------------------------------------------------
 * What is hidden, and by whose rules
 * ------------------------------------------------------------------------- */

Test(dirdiff, base_gitignore_hides_paths_on_both_sides)
{
    review_dirdiff *d;

    make_project();
    put(base, ".gitignore", "*.log\nbuild/\n");
    put(base, "app.log", "old log\n");
    put(base, "build/out.o", "old object\n");
    fork_base();
    put(fork_dir, "app.log", "new log\n");
    put(fork_dir, "more.log", "added log\n");
    put(fork_dir, "build/out.o", "new object\n");
    put(fork_dir, "build/sub/deep.txt", "inside an ignored directory\n");
    remove_path(fork_dir, "build/out.o");
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 0);
    review_dirdiff_free(d);
}

Test(dirdiff, nested_gitignore_of_the_base_applies_below_it)
{
    review_dirdiff *d;

    make_project();
    put(base, "src/.gitignore", "*.tmp\n");
    fork_base();
    put(fork_dir, "src/scratch.tmp", "hidden\n");
    put(fork_dir, "src/deeper/more.tmp", "hidden too\n");
    put(fork_dir, "top.tmp", "not under src: shown\n");
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 1);
    change_at(d, "top.tmp", REVIEW_DIRDIFF_ADDED);
    review_dirdiff_free(d);
}

Test(dirdiff, fork_gitignore_cannot_hide_a_change)
{
    review_dirdiff *d;

    make_project();
    put(base, ".gitignore", "*.log\n");
    fork_base();
    put(fork_dir, ".gitignore", "*.log\nsecret.txt\nsrc/\n");
    put(fork_dir, "secret.txt", "the run hid this\n");
    put(fork_dir, "src/main.c", "changed under a directory the fork ignores\n");
    put(fork_dir, "sub/.gitignore", "*\n");
    put(fork_dir, "sub/x.c", "x\n");
    d = diff_of(base, fork_dir);
    change_at(d, ".gitignore", REVIEW_DIRDIFF_MODIFIED);
    change_at(d, "secret.txt", REVIEW_DIRDIFF_ADDED);
    change_at(d, "src/main.c", REVIEW_DIRDIFF_MODIFIED);
    change_at(d, "sub/.gitignore", REVIEW_DIRDIFF_ADDED);
    change_at(d, "sub/x.c", REVIEW_DIRDIFF_ADDED);
    cr_assert_eq(review_dirdiff_count(d), 5);
    review_dirdiff_free(d);
}

Test(dirdiff, base_info_exclude_counts_and_tracked_files_stay_visible)
{
    review_dirdiff *d;

    make_project();
    put(base, ".gitignore", "*.env\nvendor/\n");
    put(base, "config.env", "tracked despite the rule\n");
    put(base, "vendor/lib.c", "tracked vendored code\n");
    put(base, "vendor/untracked.c", "ignored\n");
    test_run("cd '%s' && git init -q && git add -f config.env vendor/lib.c", base);
    put(base, ".git/info/exclude", "*.local\n");
    fork_base();
    put(fork_dir, "config.env", "changed\n");
    put(fork_dir, "vendor/lib.c", "changed\n");
    put(fork_dir, "vendor/untracked.c", "changed but ignored\n");
    put(fork_dir, "other.env", "new and ignored\n");
    put(fork_dir, "me.local", "excluded by info/exclude\n");
    d = diff_of(base, fork_dir);
    change_at(d, "config.env", REVIEW_DIRDIFF_MODIFIED);
    change_at(d, "vendor/lib.c", REVIEW_DIRDIFF_MODIFIED);
    cr_assert_eq(review_dirdiff_count(d), 2);
    review_dirdiff_free(d);
}

Test(dirdiff, dot_git_is_left_out_at_every_level_in_every_spelling)
{
    review_dirdiff *d;

    make_project();
    test_run("cd '%s' && git init -q", base);
    fork_base();
    put(fork_dir, ".git/config", "[core]\n\tbare = false\n\tworktree = /\n");
    put(fork_dir, ".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    put(fork_dir, "src/.git/HEAD", "ref: refs/heads/main\n");
    put(fork_dir, ".GIT/config", "x\n");
    put(fork_dir, "src/.Git/config", "x\n");
    put(fork_dir, "git~1/config", "x\n");
    put(fork_dir, ".git. /config", "x\n");
    put(fork_dir, ".gitx", "an ordinary file\n");
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 1);
    change_at(d, ".gitx", REVIEW_DIRDIFF_ADDED);
    review_dirdiff_free(d);
}

/* ---------------------------------------------------------------------------
 * Nothing in the fork runs, nothing is followed
 * ------------------------------------------------------------------------- */

Test(dirdiff, fork_git_config_hooks_and_attributes_never_run)
{
    char marker[700], shim[700], path[900], original[700], cfg[2048];
    rg_buf b = RG_BUF_INIT(1 << 20);
    review_dirdiff *d;
    size_t refused;

    snprintf(marker, sizeof(marker), "%s/PWNED", root);
    snprintf(shim, sizeof(shim), "%s/shim", root);
    snprintf(original, sizeof(original), "%s/app", root);
    make_project();
    put(base, ".gitattributes", "*.c filter=evil diff=evil\n");
    test_run("cd '%s' && git init -q && git add -A", base);
    fork_base();
    test_run("cp -a '%s' '%s'", base, original);
    /* Everything a hostile run could plant to get a command executed by
     * whoever looks at its work with git. */
    snprintf(cfg, sizeof(cfg),
             "[core]\n\tfsmonitor = touch %s\n\thooksPath = hooks\n\tpager = touch %s\n"
             "\tsshCommand = touch %s\n[diff \"evil\"]\n\ttextconv = touch %s\n"
             "\tcommand = touch %s\n[filter \"evil\"]\n\tclean = touch %s\n"
             "\tsmudge = touch %s\n\tprocess = touch %s\n",
             marker, marker, marker, marker, marker, marker, marker, marker);
    put(fork_dir, ".git/config", cfg);
    put(base, ".git/config", cfg); /* the base's .git is read for ignores */
    snprintf(cfg, sizeof(cfg), "#!/bin/sh\ntouch %s\n", marker);
    put_bytes(fork_dir, ".git/hooks/pre-commit", cfg, strlen(cfg), 0755);
    put_bytes(fork_dir, ".git/hooks/post-checkout", cfg, strlen(cfg), 0755);
    put_bytes(fork_dir, ".git/hooks/fsmonitor-watchman", cfg, strlen(cfg), 0755);
    put_bytes(fork_dir, "hooks/pre-commit", cfg, strlen(cfg), 0755);
    put(fork_dir, ".gitattributes", "* filter=evil diff=evil\n");
    put(fork_dir, "src/main.c", "int main(void) { return 2; }\n");
    /* And a `git` first on PATH, in case anything shells out. */
    path_in(path, sizeof(path), shim, "git");
    put_bytes(shim, "git", cfg, strlen(cfg), 0755);
    snprintf(path, sizeof(path), "%s:%s", shim, getenv("PATH") ? getenv("PATH") : "/usr/bin");
    setenv("PATH", path, 1);

    d = diff_of(base, fork_dir);
    cr_assert_gt(review_dirdiff_count(d), 0);
    cr_assert_eq(review_dirdiff_patch(&b, d, NULL), 0);
    cr_assert_eq(review_dirdiff_stat(&b, d, 80, NULL), 0);
    cr_assert_eq(review_dirdiff_apply(&refused, d, original, NULL, NULL, NULL), 0);
    review_dirdiff_free(d);
    rg_buf_free(&b);
    cr_assert(!exists(marker), "something ran a command planted in the fork");
}

Test(dirdiff, symlinks_pointing_outside_are_shown_as_links_never_followed)
{
    char target[700];
    review_dirdiff *d;
    char *patch;

    make_project();
    fork_base();
    put(other, "secret", "TOP-SECRET-CONTENT\n");
    put(other, "dir/inner", "TOP-SECRET-INNER\n");
    snprintf(target, sizeof(target), "%s/secret", other);
    put_link(fork_dir, "leak", target);
    snprintf(target, sizeof(target), "%s/dir", other);
    put_link(fork_dir, "leakdir", target);
    put_link(fork_dir, "passwd", "/etc/passwd");
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 3);
    cr_assert_eq(change_at(d, "leak", REVIEW_DIRDIFF_ADDED).new_mode, 0120000);
    cr_assert_eq(change_at(d, "leakdir", REVIEW_DIRDIFF_ADDED).new_mode, 0120000);
    cr_assert_eq(change_at(d, "passwd", REVIEW_DIRDIFF_ADDED).new_mode, 0120000);
    patch = patch_of(d);
    cr_assert_not_null(strstr(patch, "+/etc/passwd"), "%s", patch);
    cr_assert_null(strstr(patch, "TOP-SECRET"), "a symlink was followed:\n%s", patch);
    cr_assert_null(strstr(patch, "root:"), "a symlink was followed:\n%s", patch);
    free(patch);
    review_dirdiff_free(d);
}

Test(dirdiff, fifos_and_sockets_count_as_absent_and_never_block)
{
    review_dirdiff *d;
    char path[700];

    make_project();
    fork_base();
    path_in(path, sizeof(path), fork_dir, "pipe");
    cr_assert_eq(mkfifo(path, 0644), 0);
    /* A FIFO where the base had a file: the file is gone, nothing added. */
    remove_path(fork_dir, "README.md");
    path_in(path, sizeof(path), fork_dir, "README.md");
    cr_assert_eq(mkfifo(path, 0644), 0);
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_count(d), 1);
    change_at(d, "README.md", REVIEW_DIRDIFF_DELETED);
    review_dirdiff_free(d);
}

Test(dirdiff, content_changed_after_hashing_fails_instead_of_showing_other_bytes)
{
    rg_buf b = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    review_dirdiff *d;

    make_project();
    fork_base();
    mut_modify();
    d = diff_of(base, fork_dir);
    put(fork_dir, "src/main.c", "swapped after the diff was taken\n");
    cr_assert_lt(review_dirdiff_patch(&b, d, &err), 0);
    cr_assert_not_null(strstr(err.msg, "src/main.c"), "%s", err.msg);
    rg_buf_free(&b);
    review_dirdiff_free(d);
}

/* Every entry under `dir` with its size, mode and change time, one a line. */
static char *snapshot(const char *dir)
{
    char cmd[1024], *out;
    rg_buf b = RG_BUF_INIT(1 << 20);
    FILE *p;
    int c;

    snprintf(cmd, sizeof(cmd), "cd '%s' && find . -printf '%%p %%s %%m %%C@ %%T@\\n' | sort", dir);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    while ((c = fgetc(p)) != EOF) {
        char ch = (char)c;
        cr_assert_eq(rg_buf_append(&b, &ch, 1), 0);
    }
    cr_assert_eq(pclose(p), 0);
    out = rg_buf_detach(&b);
    return out;
}

/*
 * File times come from the kernel's coarse clock (or a finer one, at most
 * a tick ahead of it): once the coarse clock has ticked twice, anything
 * written would show a time the snapshot did not see. Bounded: it ticks
 * every few milliseconds; give up after 2 s.
 */
static void wait_for_a_clock_tick(void)
{
    struct timespec last, now, pause = {0, 1000 * 1000};
    int ticks = 0;

    clock_gettime(CLOCK_REALTIME_COARSE, &last);
    for (int i = 0; i < 2000 && ticks < 2; i++) {
        clock_gettime(CLOCK_REALTIME_COARSE, &now);
        if (now.tv_sec != last.tv_sec || now.tv_nsec != last.tv_nsec) {
            ticks++;
            last = now;
        }
        nanosleep(&pause, NULL);
    }
    cr_assert_eq(ticks, 2, "the coarse clock did not tick in 2 s");
}

Test(dirdiff, nothing_is_written_into_base_or_fork_and_the_private_repo_goes_away)
{
    review_dirdiff_opts opts = REVIEW_DIRDIFF_OPTS_INIT;
    rg_buf b = RG_BUF_INIT(1 << 20);
    char tmp[700], *before[2], *after[2];
    review_dirdiff *d = NULL;
    rg_error err = RG_ERROR_INIT;
    int s;

    make_project();
    put(base, ".gitignore", "*.log\n");
    test_run("cd '%s' && git init -q && git add -A", base);
    fork_base();
    mut_modify();
    mut_add();
    mut_binary();
    snprintf(tmp, sizeof(tmp), "%s/tmp", root);
    cr_assert_eq(mkdir(tmp, 0700), 0);
    before[0] = snapshot(base);
    before[1] = snapshot(fork_dir);
    wait_for_a_clock_tick();
    opts.tmp_parent = tmp;
    cr_assert_eq(review_dirdiff_new(&d, base, fork_dir, &opts, &err), 0, "%s", err.msg);
    cr_assert_eq(review_dirdiff_patch(&b, d, NULL), 0);
    cr_assert_eq(review_dirdiff_stat(&b, d, 80, NULL), 0);
    review_dirdiff_free(d);
    after[0] = snapshot(base);
    after[1] = snapshot(fork_dir);
    for (s = 0; s < 2; s++) {
        cr_assert_str_eq(before[s], after[s], "%s changed", s ? "the fork" : "the base");
        free(before[s]);
        free(after[s]);
    }
    cr_assert_eq(rmdir(tmp), 0, "the private repository was left behind in %s", tmp);
    rg_buf_free(&b);
}

Test(dirdiff, nesting_deeper_than_the_limit_fails)
{
    review_dirdiff_opts opts = REVIEW_DIRDIFF_OPTS_INIT;
    rg_error err = RG_ERROR_INIT;
    review_dirdiff *d = NULL;

    make_project();
    fork_base();
    put(fork_dir, "a/b/c/d/e/f.txt", "deep\n");
    opts.max_depth = 3;
    cr_assert_eq(review_dirdiff_new(&d, base, fork_dir, &opts, &err), -ELOOP, "%s", err.msg);
    cr_assert_null(d);
}

Test(dirdiff, base_and_fork_must_differ)
{
    rg_error err = RG_ERROR_INIT;
    review_dirdiff *d = NULL;

    cr_assert_eq(review_dirdiff_new(&d, base, base, NULL, &err), -EINVAL);
    cr_assert_eq(review_dirdiff_new(&d, base, "/nonexistent/fork", NULL, &err), -ENOENT);
    cr_assert_null(d);
}

/* ---------------------------------------------------------------------------
 * --apply
 * ------------------------------------------------------------------------- */

typedef struct outcomes {
    char text[4096];
} outcomes;

static void record(const char *path, review_dirdiff_outcome outcome, const char *reason, void *p)
{
    outcomes *o = p;
    size_t n = strlen(o->text);
    static const char *const names[] = {"applied", "already", "refused"};

    snprintf(o->text + n, sizeof(o->text) - n, "%s %s%s%s\n", names[outcome], path,
             reason ? ": " : "", reason ? reason : "");
}

Test(dirdiff, apply_refuses_paths_changed_in_the_original_and_applies_the_rest)
{
    rg_error err = RG_ERROR_INIT;
    outcomes o = {{0}};
    review_dirdiff *d, *left;
    size_t refused;

    make_project();
    fork_base();
    test_run("cp -a '%s' '%s'", base, other);
    mut_modify();
    mut_add();
    mut_delete();
    mut_chmod();
    mut_binary();
    mut_add_link();
    put(other, "src/main.c", "the user edited this meanwhile\n");
    put(other, "src/new.c", "and created this\n");

    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_apply(&refused, d, other, record, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(refused, 2, "%s", o.text);
    cr_assert_not_null(strstr(o.text, "refused src/main.c: changed in the original since the fork"),
                       "%s", o.text);
    cr_assert_not_null(strstr(o.text, "refused src/new.c"), "%s", o.text);
    cr_assert_not_null(strstr(o.text, "applied docs/old.txt"), "%s", o.text);

    /* Everything but the two refused paths now matches the fork. */
    left = diff_of(other, fork_dir);
    cr_assert_eq(review_dirdiff_count(left), 2);
    change_at(left, "src/main.c", REVIEW_DIRDIFF_MODIFIED);
    change_at(left, "src/new.c", REVIEW_DIRDIFF_MODIFIED);
    review_dirdiff_free(left);

    /* Again: nothing new to do; the two stay refused. */
    memset(&o, 0, sizeof(o));
    cr_assert_eq(review_dirdiff_apply(&refused, d, other, record, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(refused, 2, "%s", o.text);
    cr_assert_null(strstr(o.text, "applied"), "%s", o.text);
    review_dirdiff_free(d);
}

Test(dirdiff, apply_handles_type_changes_and_prunes_emptied_directories)
{
    review_dirdiff *d, *left;
    struct stat st;
    char path[700];
    size_t refused;

    make_project();
    /* Empty directories are invisible to a patch, yet in the way of a
     * file that replaces their parent. */
    test_run("mkdir -p '%s/docs/empty/deeper'", base);
    fork_base();
    test_run("cp -a '%s' '%s'", base, other);
    remove_path(fork_dir, "latest");
    put(fork_dir, "latest", "now a file\n");
    remove_path(fork_dir, "docs");
    put(fork_dir, "docs", "docs is a file now\n");
    remove_path(fork_dir, "run.sh");
    put_bytes(fork_dir, "run.sh/inner", "x\n", 2, 0755);
    remove_path(fork_dir, "src");

    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_apply(&refused, d, other, NULL, NULL, NULL), 0);
    cr_assert_eq(refused, 0);
    left = diff_of(other, fork_dir);
    cr_assert_eq(review_dirdiff_count(left), 0);
    review_dirdiff_free(left);
    path_in(path, sizeof(path), other, "src");
    cr_assert(!exists(path), "src/ should be gone once its files are");
    path_in(path, sizeof(path), other, "run.sh/inner");
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(st.st_mode & S_IXUSR);
    review_dirdiff_free(d);
}

Test(dirdiff, apply_keeps_permissions_and_follows_git_for_the_x_bit)
{
    review_dirdiff *d;
    struct stat st;
    char path[700];
    size_t refused;

    make_project();
    chmod_path(base, "src/util.c", 0600);
    fork_base();
    test_run("cp -a '%s' '%s'", base, other);
    put(fork_dir, "src/util.c", "int util(void) { return 3; }\n");
    chmod_path(fork_dir, "src/util.c", 0700);
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_apply(&refused, d, other, NULL, NULL, NULL), 0);
    path_in(path, sizeof(path), other, "src/util.c");
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0700, "mode %o", st.st_mode & 07777);
    review_dirdiff_free(d);
}

Test(dirdiff, apply_never_writes_through_a_symlink_in_the_original)
{
    char outside[700], path[900];
    outcomes o = {{0}};
    review_dirdiff *d;
    size_t refused;

    snprintf(outside, sizeof(outside), "%s/outside", root);
    cr_assert_eq(mkdir(outside, 0755), 0);
    make_project();
    fork_base();
    test_run("cp -a '%s' '%s'", base, other);
    put(fork_dir, "src/planted.c", "x\n");
    put(fork_dir, "latest2", "y\n");
    /* After the fork, the original's src/ became a symlink out. */
    remove_path(other, "src");
    put_link(other, "src", outside);
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_apply(&refused, d, other, record, &o, NULL), 0);
    cr_assert_eq(refused, 1, "%s", o.text);
    cr_assert_not_null(strstr(o.text, "refused src/planted.c"), "%s", o.text);
    path_in(path, sizeof(path), outside, "planted.c");
    cr_assert(!exists(path), "apply wrote through a symlink");
    review_dirdiff_free(d);
}

Test(dirdiff, apply_refuses_to_write_into_the_fork_or_base)
{
    rg_error err = RG_ERROR_INIT;
    review_dirdiff *d;
    size_t refused;

    make_project();
    fork_base();
    mut_add();
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_apply(&refused, d, fork_dir, NULL, NULL, &err), -EINVAL);
    cr_assert_eq(review_dirdiff_apply(&refused, d, base, NULL, NULL, &err), -EINVAL);
    review_dirdiff_free(d);
}

/* ---------------------------------------------------------------------------
 * refgate-run's names
 * ------------------------------------------------------------------------- */

typedef struct name_case {
    const char *fork;
    const char *base;     /* NULL: error */
    const char *original; /* NULL: error */
} name_case;

static name_case name_cases[] = {
    {"/src/app.3", "/src/.app.3.base", "/src/app"},
    {"/src/app.3/", "/src/.app.3.base", "/src/app"},
    {"app.12", ".app.12.base", "app"},
    {"../w/my.app.7", "../w/.my.app.7.base", "../w/my.app"},
    {"/src/app", "/src/.app.base", NULL},
    {"/src/app.", "/src/.app..base", NULL},
    {"/src/.3", "/src/..3.base", NULL},
    {"/", NULL, NULL},
    {"..", NULL, NULL},
};

ParameterizedTestParameters(dirdiff, default_base_and_original_follow_refgate_run)
{
    return indices(sizeof(name_cases) / sizeof(name_cases[0]));
}

ParameterizedTest(int *i, dirdiff, default_base_and_original_follow_refgate_run)
{
    const name_case *nc = &name_cases[*i];
    rg_buf b = RG_BUF_INIT(4096);
    int rc;

    rc = review_dirdiff_default_base(&b, nc->fork, NULL);
    if (nc->base == NULL) {
        cr_assert_eq(rc, -EINVAL, "%s", nc->fork);
    } else {
        cr_assert_eq(rc, 0, "%s", nc->fork);
        cr_assert_str_eq(b.data, nc->base);
    }
    rg_buf_free(&b);
    rc = review_dirdiff_default_original(&b, nc->fork, NULL);
    if (nc->original == NULL) {
        cr_assert_eq(rc, -EINVAL, "%s", nc->fork);
    } else {
        cr_assert_eq(rc, 0, "%s", nc->fork);
        cr_assert_str_eq(b.data, nc->original);
    }
    rg_buf_free(&b);
}

/* ---------------------------------------------------------------------------
 * Size limit and digest (findings 14 and 8)
 * ------------------------------------------------------------------------- */

Test(dirdiff, files_over_the_size_limit_are_skipped_listed_and_never_applied)
{
    review_dirdiff_opts opts = REVIEW_DIRDIFF_OPTS_INIT;
    rg_error err = RG_ERROR_INIT;
    review_dirdiff_skipped sk;
    outcomes o = {{0}};
    review_dirdiff *d = NULL;
    size_t refused;
    char *patch;

    make_project();
    put(base, "grows.txt", "small\n");
    fork_base();
    test_run("cp -a '%s' '%s'", base, other);
    put(fork_dir, "README.md", "edited\n");
    test_run("truncate -s 8T '%s/sparse.img'", fork_dir);
    test_run("head -c 2000 /dev/zero >'%s/grows.txt'", fork_dir);
    opts.max_file_size = 1000;
    cr_assert_eq(review_dirdiff_new(&d, base, fork_dir, &opts, &err), 0, "%s", err.msg);
    cr_assert_eq(review_dirdiff_count(d), 1); /* README.md only */
    cr_assert_eq(review_dirdiff_skipped_count(d), 2);
    cr_assert_eq(review_dirdiff_skipped_get(&sk, d, 0), 0);
    cr_assert_str_eq(sk.path, "grows.txt");
    cr_assert_eq(sk.base_size, 6);
    cr_assert_eq(sk.fork_size, 2000);
    cr_assert_eq(review_dirdiff_skipped_get(&sk, d, 1), 0);
    cr_assert_str_eq(sk.path, "sparse.img");
    cr_assert_eq(sk.base_size, -1);
    cr_assert_eq(sk.fork_size, 8LL << 40);
    cr_assert_eq(review_dirdiff_skipped_get(&sk, d, 2), -ERANGE);
    patch = patch_of(d);
    cr_assert_null(strstr(patch, "sparse.img"));
    free(patch);
    cr_assert_eq(review_dirdiff_apply(&refused, d, other, record, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(refused, 2, "%s", o.text);
    cr_assert(strstr(o.text, "refused sparse.img: larger than the size limit"), "%s", o.text);
    cr_assert(strstr(o.text, "applied README.md"), "%s", o.text);
    {
        char path[700];
        path_in(path, sizeof(path), other, "sparse.img");
        cr_assert_not(exists(path));
    }
    review_dirdiff_free(d);
}

Test(dirdiff, the_digest_changes_with_any_change_to_the_fork)
{
    char d1[REVIEW_DIRDIFF_DIGEST_SIZE], d2[REVIEW_DIRDIFF_DIGEST_SIZE];
    char d3[REVIEW_DIRDIFF_DIGEST_SIZE];
    review_dirdiff *d;

    make_project();
    fork_base();
    put(fork_dir, "README.md", "edited\n");
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_print_digest(d, NULL, NULL, d1, NULL), 0);
    review_dirdiff_free(d);
    cr_assert_eq(strncmp(d1, "sha256:", 7), 0);
    cr_assert_eq(strlen(d1), 71);
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_print_digest(d, NULL, NULL, d2, NULL), 0);
    review_dirdiff_free(d);
    cr_assert_str_eq(d1, d2, "the same fork gives the same digest");
    chmod_path(fork_dir, "README.md", 0755);
    d = diff_of(base, fork_dir);
    cr_assert_eq(review_dirdiff_print_digest(d, NULL, NULL, d3, NULL), 0);
    review_dirdiff_free(d);
    cr_assert_str_neq(d1, d3, "a mode change changes the digest");
}

/* ---------------------------------------------------------------------------
 * Paths refgate-run excluded from the fork
 * ------------------------------------------------------------------------- */

/* Write refgate-run's record for the fork: the comment line, then `n`
 * NUL-terminated paths. */
static void put_excluded_record(const char *const *paths, size_t n)
{
    char path[700], data[1024];
    size_t len, i;

    len = (size_t)snprintf(data, sizeof(data), "# refgate-run: paths left out\n");
    for (i = 0; i < n; i++) {
        memcpy(data + len, paths[i], strlen(paths[i]) + 1);
        len += strlen(paths[i]) + 1;
    }
    snprintf(path, sizeof(path), "%s/.app.1.excluded", root);
    cr_assert_eq(rg_fs_write_atomic(path, data, len, 0600, NULL), 0);
}

Test(dirdiff, excluded_paths_are_left_out_of_both_sides_and_never_applied)
{
    static const char *const excl[] = {"web/node_modules", "assets"};
    review_dirdiff_opts opts = REVIEW_DIRDIFF_OPTS_INIT;
    rg_buf list = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    outcomes o = {{0}};
    char path[700];
    review_dirdiff *d = NULL;
    size_t refused;

    make_project();
    /* The original holds the excluded content; base and fork hold the
     * empty placeholders refgate-run leaves there. */
    test_run("cp -a '%s' '%s'", base, other);
    put(other, "web/node_modules/lib/index.js", "dependency\n");
    put(other, "assets/big.bin", "tracked, but excluded\n");
    test_run("mkdir -p '%s/web/node_modules' '%s/assets'", base, base);
    put(base, "web/page.html", "<p>page</p>\n");
    put(other, "web/page.html", "<p>page</p>\n");
    fork_base();
    put(fork_dir, "web/page.html", "<p>changed</p>\n");
    /* A stray file in a placeholder (the run could not write there, but the
     * fork lives on after it) is not shown either. */
    put(fork_dir, "assets/planted", "never applied\n");
    put_excluded_record(excl, 2);

    cr_assert_eq(review_dirdiff_default_excluded(&list, fork_dir, &err), 0, "%s", err.msg);
    cr_assert_eq(list.len, strlen(excl[0]) + 1 + strlen(excl[1]) + 1);
    opts.excluded = list.data;
    opts.excluded_len = list.len;
    cr_assert_eq(review_dirdiff_new(&d, base, fork_dir, &opts, &err), 0, "%s", err.msg);
    cr_assert_eq(review_dirdiff_count(d), 1, "%s", patch_of(d));
    change_at(d, "web/page.html", REVIEW_DIRDIFF_MODIFIED);

    cr_assert_eq(review_dirdiff_apply(&refused, d, other, record, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(refused, 0, "%s", o.text);
    path_in(path, sizeof(path), other, "web/node_modules/lib/index.js");
    cr_assert(exists(path), "the original's excluded directory is untouched");
    path_in(path, sizeof(path), other, "assets/big.bin");
    cr_assert(exists(path));
    path_in(path, sizeof(path), other, "assets/planted");
    cr_assert_not(exists(path));
    review_dirdiff_free(d);

    /* Without the record the placeholders read as the fork's truth: the
     * diff of the original against the fork would delete the content. */
    d = diff_of(other, fork_dir);
    change_at(d, "web/node_modules/lib/index.js", REVIEW_DIRDIFF_DELETED);
    review_dirdiff_free(d);
    rg_buf_free(&list);
}

Test(dirdiff, the_excluded_record_is_read_beside_the_fork_and_checked)
{
    rg_buf list = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    char path[700];

    make_project();
    fork_base();
    cr_assert_eq(review_dirdiff_default_excluded(&list, fork_dir, &err), 0, "no record: nothing");
    cr_assert_eq(list.len, 0);
    snprintf(path, sizeof(path), "%s/.app.1.excluded", root);
    cr_assert_eq(rg_fs_write_atomic(path, "node_modules\0", 13, 0600, NULL), 0);
    cr_assert_eq(review_dirdiff_default_excluded(&list, fork_dir, &err), RG_E_TAMPER,
                 "a file without the header is not a record");
    unlink(path);
    cr_assert_eq(symlink("/etc/passwd", path), 0);
    cr_assert_lt(review_dirdiff_default_excluded(&list, fork_dir, &err), 0,
                 "a symlink is not followed");
    rg_buf_free(&list);
}

Test(dirdiff, a_live_run_is_found_however_the_fork_is_named)
{
    rg_error err = RG_ERROR_INIT;
    char marker[700], link[700], cwd[PATH_MAX];
    int fd;

    make_project();
    fork_base();
    snprintf(marker, sizeof(marker), "%s/.app.1.run", root);
    fd = open(marker, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(review_dirdiff_check_run(fork_dir, &err), 0, "a marker nobody holds: ended");
    cr_assert_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
    cr_assert_eq(review_dirdiff_check_run(fork_dir, &err), RG_E_DENIED, "held: still running");
    /* "." inside the fork and a symlink to it name the same fork. */
    cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
    cr_assert_eq(chdir(fork_dir), 0);
    cr_assert_eq(review_dirdiff_check_run(".", &err), RG_E_DENIED, "`.`: %s", err.msg);
    cr_assert_eq(chdir(cwd), 0);
    snprintf(link, sizeof(link), "%s/alias", root);
    cr_assert_eq(symlink(fork_dir, link), 0);
    cr_assert_eq(review_dirdiff_check_run(link, &err), RG_E_DENIED, "a symlink: %s", err.msg);
    close(fd);
    cr_assert_eq(review_dirdiff_check_run(fork_dir, &err), 0, "released: ended");
}
