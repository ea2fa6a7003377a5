/*
 * Tests for upstream/mirror.c. The "remote" upstream is a bare repository
 * reached through a file:// URL (repo_dir NULL in the target, as for an
 * HTTP upstream), so the real git clones and fetches it exactly as it would
 * over HTTP, without a server. Every test starts from a fresh directory.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/shell.h"
#include "upstream/mirror.h"
#include "util/buf.h"

static char base[] = "/tmp/rg-test-mirror-XXXXXX";
static char remote_root[512], remote[600], work[600], state[600], url[600];
static char host[] = "example", repo_path[] = "acme/app";
static config_upstream up;
static upstream_target target;

/* ---------------------------------------------------------------------------
 * Fixture helpers
 * ------------------------------------------------------------------------- */

/* Commit a change in the work clone and push `refspec` to the remote. */
static void commit_and_push(const char *file, const char *content, const char *refspec)
{
    test_run("cd '%s' && printf '%%s\\n' '%s' > '%s' && git add -A && git commit -q -m '%s' && "
             "git push -q -f origin '%s'",
             work, content, file, file, refspec);
}

/* The id `ref` names in repository `gitdir`, or "" when it does not exist. */
static char *ref_in(const char *gitdir, const char *ref)
{
    return test_capture("git --git-dir='%s' rev-parse --verify -q '%s' || true", gitdir, ref);
}

/* Every path, type, mode, size, mtime and content hash under the remote. */
static char *snapshot_remote(void)
{
    return test_capture("cd '%s' && find . -printf '%%p %%y %%m %%s %%T@\\n' | LC_ALL=C sort && "
                        "find . -type f -exec sha256sum {} + | LC_ALL=C sort",
                        remote);
}

static upstream_mirror *acquire_ok(void)
{
    upstream_mirror *m = NULL;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(upstream_mirror_acquire(&m, state, &target, NULL, 0, &err), 0, "%s", err.msg);
    cr_assert_not_null(m);
    return m;
}

static void setup(void)
{
    char home[600];

    cr_assert_not_null(mkdtemp(base));
    snprintf(remote_root, sizeof(remote_root), "%s/remote", base);
    snprintf(remote, sizeof(remote), "%s/acme/app.git", remote_root);
    snprintf(work, sizeof(work), "%s/work", base);
    snprintf(state, sizeof(state), "%s/state", base);
    snprintf(url, sizeof(url), "file://%s", remote_root);
    snprintf(home, sizeof(home), "%s/home", base);
    cr_assert_eq(mkdir(state, 0700), 0);
    cr_assert_eq(mkdir(home, 0755), 0);

    /* The developer's own git configuration must not change what the tests see. */
    test_git_env(home);

    test_run("git init -q --bare -b main '%s' && git init -q -b main '%s' && "
             "git -C '%s' remote add origin '%s'",
             remote, work, work, remote);
    commit_and_push("README", "hello", "main");

    memset(&up, 0, sizeof(up));
    up.host = host;
    up.url = url;
    up.connect_timeout = 10;
    up.idle_timeout = 60;
    target = (upstream_target){.up = &up, .repo_path = repo_path};
}

static void teardown(void)
{
    test_run("rm -rf '%s'", base);
}

TestSuite(mirror, .init = setup, .fini = teardown);

/* ---------------------------------------------------------------------------
 * Creating and updating
 * ------------------------------------------------------------------------- */

Test(mirror, first_acquire_clones_the_upstream_under_state_dir)
{
    upstream_mirror *m = acquire_ok();
    char expected[700];
    char *want = ref_in(remote, "refs/heads/main"), *got;

    snprintf(expected, sizeof(expected), "%s/mirrors/example/acme/app.git", state);
    cr_expect_str_eq(upstream_mirror_dir(m), expected);
    got = ref_in(upstream_mirror_dir(m), "refs/heads/main");
    cr_expect_str_eq(got, want);
    free(got);
    got = test_capture("git --git-dir='%s' rev-parse --is-bare-repository", expected);
    cr_expect_str_eq(got, "true");
    upstream_mirror_release(m);
    free(want);
    free(got);
}

/* The mirror holds `ref` exactly as the remote does. */
static void expect_same_ref(const upstream_mirror *m, const char *ref)
{
    char *want = ref_in(remote, ref), *got = ref_in(upstream_mirror_dir(m), ref);

    cr_expect_neq(strlen(want), 0, "%s is missing upstream", ref);
    cr_expect_str_eq(got, want, "%s", ref);
    free(want);
    free(got);
}

Test(mirror, second_acquire_fetches_new_upstream_commits)
{
    upstream_mirror *m = acquire_ok();

    upstream_mirror_release(m);
    commit_and_push("README", "second", "main");
    commit_and_push("NEW", "a new file", "main:refs/heads/topic");
    test_run("git -C '%s' tag v1 && git -C '%s' push -q origin v1", work, work);
    m = acquire_ok();
    expect_same_ref(m, "refs/heads/main");
    expect_same_ref(m, "refs/heads/topic");
    expect_same_ref(m, "refs/tags/v1");
    upstream_mirror_release(m);
}

Test(mirror, a_mirror_holding_the_old_ids_is_not_fetched_until_refreshed)
{
    upstream_mirror *m = acquire_ok();
    rg_error err = RG_ERROR_INIT;
    char *old = ref_in(remote, "refs/heads/main"), *mirrored;
    const char *have[] = {old};

    upstream_mirror_release(m);
    commit_and_push("README", "moved on", "main");
    /* The stamp must be older than this acquire for the fetch to be skipped. */
    cr_assert_eq(upstream_mirror_acquire(&m, state, &target, have, 1, &err), 0, "%s", err.msg);
    cr_expect(!upstream_mirror_fresh(m), "the mirror had the old id: no fetch");
    mirrored = ref_in(upstream_mirror_dir(m), "refs/heads/main");
    cr_expect_str_eq(mirrored, old, "not fetched yet");
    free(mirrored);
    cr_assert_eq(upstream_mirror_refresh(m, &target, &err), 0, "%s", err.msg);
    cr_expect(upstream_mirror_fresh(m));
    expect_same_ref(m, "refs/heads/main");
    upstream_mirror_release(m);

    /* An id the mirror lacks makes the acquire fetch. */
    commit_and_push("README", "moved again", "main");
    free(old);
    old = ref_in(remote, "refs/heads/main");
    have[0] = old;
    cr_assert_eq(upstream_mirror_acquire(&m, state, &target, have, 1, &err), 0, "%s", err.msg);
    cr_expect(upstream_mirror_fresh(m));
    expect_same_ref(m, "refs/heads/main");
    upstream_mirror_release(m);
    free(old);
}

Test(mirror, force_pushed_branch_is_updated_and_deleted_branch_is_pruned)
{
    upstream_mirror *m;
    char *before, *after, *got;

    commit_and_push("F", "feature work", "main:refs/heads/feature");
    test_run("git -C '%s' push -q origin main:refs/heads/doomed", work);
    m = acquire_ok();
    before = ref_in(upstream_mirror_dir(m), "refs/heads/feature");
    cr_assert_neq(strlen(before), 0);
    upstream_mirror_release(m);

    /* Rewrite the branch (not a fast-forward) and delete another. */
    test_run("cd '%s' && git reset -q --hard HEAD~1 && printf 'other\\n' > G && git add G && "
             "git commit -q -m rewritten && git push -q -f origin HEAD:refs/heads/feature && "
             "git push -q origin :refs/heads/doomed",
             work);
    after = ref_in(remote, "refs/heads/feature");
    cr_assert_str_neq(before, after);
    m = acquire_ok();
    got = ref_in(upstream_mirror_dir(m), "refs/heads/feature");
    cr_expect_str_eq(got, after, "the forced update reached the mirror");
    free(got);
    got = ref_in(upstream_mirror_dir(m), "refs/heads/doomed");
    cr_expect_str_eq(got, "", "the deleted branch was pruned");
    upstream_mirror_release(m);
    free(got);
    free(before);
    free(after);
}

Test(mirror, empty_upstream_is_mirrored_and_filled_later)
{
    upstream_mirror *m;
    char *got, *want;

    test_run("rm -rf '%s' && git init -q --bare -b main '%s'", remote, remote);
    m = acquire_ok();
    got = ref_in(upstream_mirror_dir(m), "refs/heads/main");
    cr_expect_str_eq(got, "");
    upstream_mirror_release(m);
    free(got);
    commit_and_push("README", "after all", "main");
    m = acquire_ok();
    got = ref_in(upstream_mirror_dir(m), "refs/heads/main");
    want = ref_in(remote, "refs/heads/main");
    cr_expect_str_eq(got, want);
    upstream_mirror_release(m);
    free(got);
    free(want);
}

Test(mirror, sha256_upstream_gets_a_sha256_mirror)
{
    upstream_mirror *m;
    char *got, *fmt;

    test_run(
        "rm -rf '%s' '%s' && git init -q --bare --object-format=sha256 -b main '%s' && "
        "git init -q --object-format=sha256 -b main '%s' && git -C '%s' remote add origin '%s'",
        remote, work, remote, work, work, remote);
    commit_and_push("README", "sha256", "main");
    m = acquire_ok();
    fmt = test_capture("git --git-dir='%s' rev-parse --show-object-format", upstream_mirror_dir(m));
    cr_expect_str_eq(fmt, "sha256");
    got = ref_in(upstream_mirror_dir(m), "refs/heads/main");
    cr_expect_eq(strlen(got), 64);
    upstream_mirror_release(m);
    free(got);
    free(fmt);
}

/* ---------------------------------------------------------------------------
 * Safety
 * ------------------------------------------------------------------------- */

Test(mirror, directories_are_private)
{
    upstream_mirror *m = acquire_ok();
    char path[700];
    struct stat st;

    cr_assert_eq(stat(upstream_mirror_dir(m), &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700, "mirror mode %o", st.st_mode & 0777);
    snprintf(path, sizeof(path), "%s/mirrors", state);
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700, "mirrors/ mode %o", st.st_mode & 0777);
    snprintf(path, sizeof(path), "%s/mirrors/example/acme", state);
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700);
    upstream_mirror_release(m);
}

Test(mirror, nothing_is_written_into_the_upstream)
{
    char *before = snapshot_remote(), *after;
    upstream_mirror *m = acquire_ok();

    upstream_mirror_release(m);
    m = acquire_ok();
    upstream_mirror_release(m);
    after = snapshot_remote();
    cr_expect_str_eq(after, before);
    free(before);
    free(after);
}

Test(mirror, unreachable_upstream_fails_with_a_message)
{
    upstream_mirror *m = (upstream_mirror *)&m;
    rg_error err = RG_ERROR_INIT;
    char missing[700];

    snprintf(missing, sizeof(missing), "file://%s/nowhere", base);
    up.url = missing;
    cr_expect_eq(upstream_mirror_acquire(&m, state, &target, NULL, 0, &err), RG_E_UPSTREAM);
    cr_expect_null(m);
    cr_expect_not_null(strstr(err.msg, "example/acme/app"), "message: %s", err.msg);
    cr_expect_not_null(strstr(err.msg, "git clone exited with status 128: fatal:"), "message: %s",
                       err.msg);
    cr_expect_not_null(strstr(err.msg, "does not appear to be a git repository"), "message: %s",
                       err.msg);
    /* No half-made mirror is left behind to be mistaken for a real one. */
    {
        char *left = test_capture("ls -A '%s/mirrors/example/acme'", state);

        cr_expect_str_eq(left, "app.git.lock\napp.git.use");
        free(left);
    }

    /* Nothing listens on port 1: the HTTP transport fails the same way. */
    up.url = (char *)"http://127.0.0.1:1";
    m = (upstream_mirror *)&m;
    cr_expect_eq(upstream_mirror_acquire(&m, state, &target, NULL, 0, &err), RG_E_UPSTREAM);
    cr_expect_null(m);
    cr_expect_not_null(strstr(err.msg, "unable to access"), "message: %s", err.msg);
}

Test(mirror, failed_fetch_of_an_existing_mirror_fails_closed)
{
    upstream_mirror *m = acquire_ok();
    rg_error err = RG_ERROR_INIT;

    upstream_mirror_release(m);
    test_run("rm -rf '%s'", remote);
    m = (upstream_mirror *)&m;
    cr_expect_eq(upstream_mirror_acquire(&m, state, &target, NULL, 0, &err), RG_E_UPSTREAM);
    cr_expect_null(m);
    cr_expect_not_null(strstr(err.msg, "git fetch exited with status 128: fatal:"), "message: %s",
                       err.msg);
}

Test(mirror, invalid_repository_paths_are_refused)
{
    static const char *const bad[] = {"../escape", "acme/../x", "/abs",
                                      "acme//x",   ".hidden",   "acme/"};
    rg_error err = RG_ERROR_INIT;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        upstream_mirror *m = (upstream_mirror *)&m;

        target.repo_path = bad[i];
        cr_expect_eq(upstream_mirror_acquire(&m, state, &target, NULL, 0, &err), -EINVAL, "%s",
                     bad[i]);
        cr_expect_null(m);
    }
}

/* ---------------------------------------------------------------------------
 * Concurrency
 * ------------------------------------------------------------------------- */

#define THREADS 4
#define ROUNDS  5

static atomic_int failures;

static void *acquire_rounds(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        upstream_mirror *m = NULL;
        rg_error err = RG_ERROR_INIT;
        char cmd[1024];

        if (upstream_mirror_acquire(&m, state, &target, NULL, 0, &err) < 0) {
            fprintf(stderr, "acquire failed: %s\n", err.msg);
            atomic_fetch_add(&failures, 1);
            continue;
        }
        /* Inspect while holding it, as a push does. */
        snprintf(cmd, sizeof(cmd), "git --git-dir='%s' rev-list --count refs/heads/main >/dev/null",
                 upstream_mirror_dir(m));
        if (system(cmd) != 0)
            atomic_fetch_add(&failures, 1);
        upstream_mirror_release(m);
    }
    return NULL;
}

Test(mirror, concurrent_acquires_all_succeed_and_leave_a_clean_mirror, .timeout = 300)
{
    pthread_t th[THREADS];
    upstream_mirror *m;
    char *want, *got;

    atomic_store(&failures, 0);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, acquire_rounds, NULL), 0);
    /* Upstream moves while they run. */
    for (int i = 0; i < 3; i++) {
        char content[32];

        snprintf(content, sizeof(content), "round %d", i);
        commit_and_push("README", content, "main");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    cr_expect_eq(atomic_load(&failures), 0);

    m = acquire_ok();
    test_run("git --git-dir='%s' fsck --strict --no-progress --no-dangling",
             upstream_mirror_dir(m));
    want = ref_in(remote, "refs/heads/main");
    got = ref_in(upstream_mirror_dir(m), "refs/heads/main");
    cr_expect_str_eq(got, want);
    upstream_mirror_release(m);
    free(want);
    free(got);
}

static atomic_int second_done;

static void *acquire_once(void *arg)
{
    upstream_mirror *m = NULL;
    rg_error err = RG_ERROR_INIT;

    (void)arg;
    if (upstream_mirror_acquire(&m, state, &target, NULL, 0, &err) < 0)
        atomic_fetch_add(&failures, 1);
    atomic_store(&second_done, 1);
    upstream_mirror_release(m);
    return NULL;
}

Test(mirror, an_update_does_not_wait_for_inspections_in_progress, .timeout = 60)
{
    upstream_mirror *inspecting = acquire_ok();
    pthread_t th;
    char *want, *got;
    upstream_mirror *m;

    /* While one push is inspected, another arrives after upstream moved. */
    commit_and_push("README", "moved", "main");
    atomic_store(&failures, 0);
    atomic_store(&second_done, 0);
    cr_assert_eq(pthread_create(&th, NULL, acquire_once, NULL), 0);
    pthread_join(th, NULL);
    cr_expect_eq(atomic_load(&failures), 0);
    cr_expect_eq(atomic_load(&second_done), 1);
    /* The first inspection still sees a working repository. */
    test_run("git --git-dir='%s' fsck --no-progress --no-dangling",
             upstream_mirror_dir(inspecting));
    upstream_mirror_release(inspecting);

    m = acquire_ok();
    want = ref_in(remote, "refs/heads/main");
    got = ref_in(upstream_mirror_dir(m), "refs/heads/main");
    cr_expect_str_eq(got, want);
    upstream_mirror_release(m);
    free(want);
    free(got);
}

static size_t count_packs(const char *gitdir)
{
    char *n = test_capture("ls '%s/objects/pack' | grep -c '\\.pack$' || true", gitdir);
    size_t count = strtoul(n, NULL, 10);

    free(n);
    return count;
}

Test(mirror, gc_runs_only_when_no_inspection_holds_the_mirror, .timeout = 120)
{
    upstream_mirror *inspecting, *m;
    char *packs_before, *packs_after, *line, *save = NULL;
    char dir[700];

    /* Every fetch keeps a pack, and more than one pack makes gc --auto repack. */
    m = acquire_ok();
    snprintf(dir, sizeof(dir), "%s", upstream_mirror_dir(m));
    test_run("git --git-dir='%s' config fetch.unpackLimit 1 && "
             "git --git-dir='%s' config gc.autoPackLimit 1",
             dir, dir);
    upstream_mirror_release(m);

    /* Held shared: the next update fetches but must not repack under it. */
    inspecting = acquire_ok();
    commit_and_push("README", "one", "main");
    packs_before = test_capture("ls '%s/objects/pack' | LC_ALL=C sort", dir);
    m = acquire_ok();
    upstream_mirror_release(m);
    cr_expect_eq(count_packs(dir), 2, "the fetch added a pack and nothing was repacked");
    packs_after = test_capture("ls '%s/objects/pack' | LC_ALL=C sort", dir);
    for (line = strtok_r(packs_before, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        cr_expect_not_null(strstr(packs_after, line), "%s was removed under an inspection", line);
    upstream_mirror_release(inspecting);

    /* With nobody inspecting, the next update does its housekeeping. */
    commit_and_push("README", "two", "main");
    m = acquire_ok();
    upstream_mirror_release(m);
    cr_expect_eq(count_packs(dir), 1, "gc --auto repacked");
    test_run("git --git-dir='%s' fsck --no-progress --no-dangling", dir);
    free(packs_before);
    free(packs_after);
}
