/* Reading an audited ref update back from upstream (console/refgit.c), on
 * real repositories made with the git CLI: an update's commits are
 * old..new, newest first, with its changed paths; a created ref's are what
 * no other ref has, its paths against its base; both caps cut and say so;
 * a new commit upstream lacks is unavailable; a delete brings nothing; a
 * long subject is cut on a UTF-8 boundary; and the repository is found
 * for local upstreams and for remote ones with a mirror, never outside. */
#include <criterion/criterion.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "console/refgit.h"
#include "support/shell.h"

static char base[64], up[128], work[128];

static void setup(void)
{
    char home[128];

    snprintf(base, sizeof(base), "/tmp/rg-refgit-XXXXXX");
    cr_assert_not_null(mkdtemp(base));
    snprintf(up, sizeof(up), "%s/up/acme/app.git", base);
    snprintf(work, sizeof(work), "%s/work", base);
    snprintf(home, sizeof(home), "%s/home", base);
    cr_assert_eq(mkdir(home, 0755), 0);
    test_git_env(home);
    test_run("git init -q --bare -b main '%s' && git init -q -b main '%s' && "
             "cd '%s' && git remote add origin '%s' && echo hi >README && git add README && "
             "git commit -qm base && git push -q origin main",
             up, work, work, up);
    git_libgit2_init();
}

static void teardown(void)
{
    git_libgit2_shutdown();
    test_run("rm -rf '%s'", base);
}

TestSuite(refgit, .init = setup, .fini = teardown);

static char *head(void)
{
    return test_capture("git -C '%s' rev-parse HEAD", work);
}

static const char *path_of(const console_refgit *g, size_t i)
{
    return g->paths[i].path;
}

Test(refgit, an_update_lists_old_to_new_newest_first_and_its_changed_paths)
{
    console_refgit g;
    rg_error e = RG_ERROR_INIT;
    char *old = head(), *new;

    test_run("cd '%s' && echo x >x && git add x && GIT_AUTHOR_NAME='A & \"B\" C' git commit -qm "
             "'first <b>' && git rm -q README && git commit -qm second && git push -q origin main",
             work);
    new = head();
    cr_assert_eq(console_refgit_read(&g, up, "refs/heads/main", old, new, &e), 0, "%s", e.msg);
    cr_assert(g.available && !g.deleted && !g.empty_base);
    cr_assert_eq(g.ncommits, 2);
    cr_assert_str_eq(g.commits[0].subject, "second");
    cr_assert_str_eq(g.commits[1].subject, "first <b>");
    cr_assert_str_eq(g.commits[1].author, "A & \"B\" C <author@example.com>");
    cr_assert_eq(strncmp(g.commits[0].id, new, 12), 0);
    cr_assert_eq(strlen(g.commits[0].id), 12);
    cr_assert_eq(g.npaths, 2);
    cr_assert_eq(g.paths[0].status, 'D');
    cr_assert_str_eq(path_of(&g, 0), "README");
    cr_assert_eq(g.paths[1].status, 'A');
    cr_assert_str_eq(path_of(&g, 1), "x");
    cr_assert(!g.commits_cut && !g.paths_cut);
    console_refgit_clear(&g);
    free(old);
    free(new);
}

Test(refgit, a_created_ref_lists_what_no_other_ref_has_against_its_base)
{
    console_refgit g;
    rg_error e = RG_ERROR_INIT;
    char *new;

    test_run("cd '%s' && git checkout -qb topic && echo y >y && git add y && git commit -qm one && "
             "echo z >z && git add z && git commit -qm two && git push -q origin topic",
             work);
    new = head();
    cr_assert_eq(console_refgit_read(&g, up, "refs/heads/topic",
                                     "0000000000000000000000000000000000000000", new, &e),
                 0, "%s", e.msg);
    cr_assert_eq(g.ncommits, 2);
    cr_assert(!g.empty_base);
    cr_assert_eq(g.npaths, 2, "README is main's: not a change");
    cr_assert_str_eq(path_of(&g, 0), "y");
    cr_assert_str_eq(path_of(&g, 1), "z");
    console_refgit_clear(&g);
    /* A ref created where another already points brings nothing. */
    test_run("git -C '%s' push -q origin topic:refs/heads/copy", work);
    cr_assert_eq(console_refgit_read(&g, up, "refs/heads/copy",
                                     "0000000000000000000000000000000000000000", new, &e),
                 0, "%s", e.msg);
    cr_assert(g.available);
    cr_assert_eq(g.ncommits, 0);
    cr_assert_eq(g.npaths, 0);
    console_refgit_clear(&g);
    free(new);
}

Test(refgit, both_caps_cut_and_say_so)
{
    console_refgit g;
    rg_error e = RG_ERROR_INIT;
    char *old = head(), *new;

    test_run("cd '%s' && mkdir d && for i in $(seq 1 210); do echo $i >d/$i; done && "
             "git add d && git commit -qm many && "
             "for i in $(seq 1 54); do git commit -q --allow-empty -m c$i; done && "
             "git push -q origin main",
             work);
    new = head();
    cr_assert_eq(console_refgit_read(&g, up, "refs/heads/main", old, new, &e), 0, "%s", e.msg);
    cr_assert_eq(g.ncommits, CONSOLE_REFGIT_COMMITS_MAX);
    cr_assert(g.commits_cut);
    cr_assert_str_eq(g.commits[0].subject, "c54");
    cr_assert_eq(g.npaths, CONSOLE_REFGIT_PATHS_MAX);
    cr_assert(g.paths_cut);
    console_refgit_clear(&g);
    free(old);
    free(new);
}

Test(refgit, objects_upstream_lacks_are_unavailable_and_a_delete_brings_nothing)
{
    console_refgit g;
    rg_error e = RG_ERROR_INIT;
    char *old = head(), *new;

    test_run("cd '%s' && git commit -q --allow-empty -m local-only", work);
    new = head();
    cr_assert_eq(console_refgit_read(&g, up, "refs/heads/main", old, new, &e), 0, "%s", e.msg);
    cr_assert(!g.available);
    cr_assert_str_eq(g.why, CONSOLE_REFGIT_UNAVAILABLE);
    console_refgit_clear(&g);
    cr_assert_eq(console_refgit_read(&g, up, "refs/heads/main", old, "not-hex", &e), 0);
    cr_assert(!g.available);
    console_refgit_clear(&g);
    cr_assert_eq(console_refgit_read(&g, up, "refs/heads/main", old,
                                     "0000000000000000000000000000000000000000", &e),
                 0);
    cr_assert(g.available && g.deleted);
    cr_assert_eq(g.ncommits + g.npaths, 0);
    console_refgit_clear(&g);
    free(old);
    free(new);
}

Test(refgit, a_long_subject_is_cut_on_a_character_boundary)
{
    console_refgit g;
    rg_error e = RG_ERROR_INIT;
    char *old = head(), *new;

    /* 300 two-byte characters: 600 bytes, more than the subject holds. */
    test_run("cd '%s' && git commit -q --allow-empty -m \"$(printf '\\303\\251%%.0s' $(seq 1 "
             "300))\" && git push -q origin main",
             work);
    new = head();
    cr_assert_eq(console_refgit_read(&g, up, "refs/heads/main", old, new, &e), 0, "%s", e.msg);
    cr_assert_eq(g.ncommits, 1);
    cr_assert_eq(strlen(g.commits[0].subject), sizeof(g.commits[0].subject) - 2);
    cr_assert_eq((unsigned char)g.commits[0].subject[0], 0xc3);
    console_refgit_clear(&g);
    free(old);
    free(new);
}

Test(refgit, the_repository_is_found_for_local_and_mirrored_upstreams_only_inside)
{
    char root[128], state[128], mirror[256], *dir = NULL, local[] = "local", gh[] = "gh",
                                             url[] = "https://x";
    config_upstream ups[2] = {{.host = local, .root = root}, {.host = gh, .url = url}};
    config_model cfg = {.state_dir = state, .upstreams = ups, .nupstreams = 2};
    rg_error e = RG_ERROR_INIT;
    int mirrored = -1;

    snprintf(root, sizeof(root), "%s/up", base);
    snprintf(state, sizeof(state), "%s/state", base);
    cr_assert_eq(console_refgit_dir(&dir, &mirrored, &cfg, "local/acme/app", &e), 0, "%s", e.msg);
    cr_assert_str_eq(dir, up);
    cr_assert_eq(mirrored, 0);
    free(dir);
    cr_assert_eq(console_refgit_dir(&dir, &mirrored, &cfg, "gh/acme/app", &e), -ENOENT);
    cr_assert_null(dir);
    cr_assert_str_eq(e.msg, "there is no mirror of gh/acme/app here");
    snprintf(mirror, sizeof(mirror), "%s/mirrors/gh/acme/app.git", state);
    test_run("mkdir -p '%s'", mirror);
    cr_assert_eq(console_refgit_dir(&dir, &mirrored, &cfg, "gh/acme/app", &e), 0, "%s", e.msg);
    cr_assert_str_eq(dir, mirror);
    cr_assert_eq(mirrored, 1);
    free(dir);
    cr_assert_eq(console_refgit_dir(&dir, &mirrored, &cfg, "gh/../../etc", &e), -ENOENT);
    cr_assert_eq(console_refgit_dir(&dir, &mirrored, &cfg, "local/acme/../acme/app", &e), -ENOENT);
    cr_assert_eq(console_refgit_dir(&dir, &mirrored, &cfg, "gone/acme/app", &e), -ENOENT);
    cr_assert_null(dir);
}
