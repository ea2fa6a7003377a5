/*
 * Tests for git/inspect.c over real pushes: a bare upstream and a clone
 * built with the git CLI, packs made with pack-objects --thin as a client
 * makes them, indexed into a real quarantine. What the walk over the
 * pack's objects sees (every new object, referenced or not, none of the
 * thin pack's upstream bases), what a range is (old..new; for a create,
 * what no upstream ref reaches), and the budget.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "git/inspect.h"
#include "support/gitfix.h"
#include "support/shell.h"
#include "util/buf.h"
#include "util/fs.h"

static char base[] = "/tmp/rg-test-inspect-XXXXXX";
static char upstream[512], work[512], tmp_parent[512];

static void setup(void)
{
    test_gitfix_setup(base, upstream, work, tmp_parent, sizeof(upstream),
                      "seq 1 2000 > big.txt && echo '# app' > README.md");
}

static void teardown(void)
{
    test_run("rm -rf '%s'", base);
}

TestSuite(inspect, .init = setup, .fini = teardown);

/* A quarantine of what a client pushing `revs` (pack-objects --revs input) sends. */
static rgit_quarantine *quarantine_of(const char *revs)
{
    rg_buf pack = RG_BUF_INIT(64 << 20);
    rg_error err = RG_ERROR_INIT;
    rgit_quarantine *q = NULL;
    char path[600];

    snprintf(path, sizeof(path), "%s/push.pack", base);
    test_run("cd '%s' && printf '%%s\\n' %s | git pack-objects -q --stdout --revs --thin "
             "--delta-base-offset > '%s'",
             work, revs, path);
    cr_assert_eq(rg_fs_read_file(&pack, path, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_quarantine_new(&q, upstream, tmp_parent, 40, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_quarantine_write(q, pack.data, pack.len, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_quarantine_finish(q, &err), 0, "%s", err.msg);
    rg_buf_free(&pack);
    return q;
}

typedef struct seen {
    char ids[64][41];
    int types[64];
    size_t n;
    uint64_t bytes; /* content handed over */
    int ends;
} seen;

static int on_object(const rgit_inspect_object *o, void *arg)
{
    seen *s = arg;

    cr_assert_lt(s->n, 64u);
    memcpy(s->ids[s->n], o->id, 41);
    s->types[s->n++] = o->type;
    return 0;
}

static int on_data(const rgit_inspect_object *o, const void *data, size_t len, void *arg,
                   rg_error *err)
{
    seen *s = arg;

    (void)o;
    (void)data;
    (void)err;
    s->bytes += len;
    return 0;
}

static int on_end(const rgit_inspect_object *o, void *arg, rg_error *err)
{
    (void)o;
    (void)err;
    ((seen *)arg)->ends++;
    return 0;
}

static int has(const seen *s, const char *id)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->ids[i], id))
            return 1;
    return 0;
}

Test(inspect, every_new_object_is_walked_referenced_or_not_and_no_upstream_base)
{
    seen s = {0};
    rgit_inspect_object_fns fns = {on_object, on_data, on_end, &s};
    rgit_inspect_budget b;
    rg_error err = RG_ERROR_INIT;
    rgit_quarantine *q;
    char *blob, *head, *old_big;

    old_big = test_capture("git -C '%s' rev-parse HEAD:big.txt", work);
    /* A small change to big.txt: sent as a thin delta against upstream's copy. */
    test_run("cd '%s' && sed -i 's/^1000$/changed/' big.txt && git commit -q -am edit", work);
    blob = test_capture("echo unreferenced | git -C '%s' hash-object -w --stdin", work);
    head = test_capture("git -C '%s' rev-parse HEAD", work);
    {
        char revs[200];

        snprintf(revs, sizeof(revs), "HEAD ^base %s", blob);
        q = quarantine_of(revs);
    }
    /* index-pack --fix-thin completed the pack with upstream's base. */
    {
        char *count = test_capture("git show-index < '%s' | grep -c %s",
                                   rgit_quarantine_pack_index(q), old_big);

        cr_assert_str_eq(count, "1");
        free(count);
    }
    rgit_inspect_budget_init(&b, 1 << 20, 60);
    cr_assert_eq(rgit_inspect_objects(q, &fns, &b, &err), 0, "%s", err.msg);
    /* The commit, its tree, the new big.txt and the unreferenced blob. */
    cr_assert_eq(s.n, 4u);
    cr_assert(has(&s, head));
    cr_assert(has(&s, blob));
    cr_assert_not(has(&s, old_big), "the thin pack's base is upstream's, not the push's");
    cr_assert_eq(s.ends, 3, "content for the blobs and the commit, never the tree");
    cr_assert_gt(s.bytes, 9000u);
    rgit_quarantine_free(q);
    free(blob);
    free(head);
    free(old_big);
}

Test(inspect, content_past_the_byte_budget_is_not_read)
{
    seen s = {0};
    rgit_inspect_object_fns fns = {on_object, on_data, on_end, &s};
    rgit_inspect_budget b;
    rg_error err = RG_ERROR_INIT;
    rgit_quarantine *q;

    test_run("cd '%s' && head -c 3000000 /dev/zero > zeros && git add zeros && "
             "git commit -q -m zeros",
             work);
    q = quarantine_of("HEAD ^base");
    rgit_inspect_budget_init(&b, 1 << 20, 60);
    cr_assert_eq(rgit_inspect_objects(q, &fns, &b, &err), RG_E_TOO_BIG);
    cr_assert_str_eq(err.msg,
                     "inspection budget exceeded (limits.inspect_bytes: 1048576 inflated bytes)");
    cr_assert_lt(s.bytes, 1u << 20);
    /* Without content, sizes alone cost nothing of the budget. */
    fns.data = NULL;
    s.n = 0;
    rgit_inspect_budget_init(&b, 1 << 20, 60);
    cr_assert_eq(rgit_inspect_objects(q, &fns, &b, &err), 0, "%s", err.msg);
    rgit_quarantine_free(q);
}

typedef struct commits {
    char ids[16][41];
    size_t n;
} commits;

static int on_commit(const rgit_inspect_commit *c, void *arg)
{
    commits *cs = arg;

    cr_assert_lt(cs->n, 16u);
    memcpy(cs->ids[cs->n++], c->id, 41);
    return 0;
}

Test(inspect, a_create_introduces_only_what_no_upstream_ref_reaches)
{
    commits cs = {0};
    rgit_inspect_range_fns fns = {on_commit, NULL, &cs};
    rgit_inspect_budget b;
    rg_error err = RG_ERROR_INIT;
    rgit_quarantine *q;
    char *one, *two, *base_id;

    /* Upstream gets a second branch at commit one; the push creates a branch at two. */
    test_run("cd '%s' && echo 1 > one && git add one && git commit -q -m one && "
             "git push -q '%s' HEAD:refs/heads/other && echo 2 > two && git add two && "
             "git commit -q -m two",
             work, upstream);
    one = test_capture("git -C '%s' rev-parse HEAD~1", work);
    two = test_capture("git -C '%s' rev-parse HEAD", work);
    base_id = test_capture("git -C '%s' rev-parse base", work);
    q = quarantine_of("HEAD ^HEAD~1");
    rgit_inspect_budget_init(&b, 1 << 20, 60);
    cr_assert_eq(rgit_inspect_range(q, NULL, two, &fns, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(cs.n, 1u);
    cr_assert_str_eq(cs.ids[0], two);
    /* As an update from base, both commits are introduced. */
    cs.n = 0;
    cr_assert_eq(rgit_inspect_range(q, base_id, two, &fns, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(cs.n, 2u);
    rgit_quarantine_free(q);
    free(one);
    free(two);
    free(base_id);
}

Test(inspect, a_new_id_that_is_no_commit_introduces_nothing_and_a_missing_old_fails)
{
    commits cs = {0};
    rgit_inspect_range_fns fns = {on_commit, NULL, &cs};
    rgit_inspect_budget b;
    rg_error err = RG_ERROR_INIT;
    rgit_quarantine *q;
    char *tag, *head;

    test_run("cd '%s' && echo x > x && git add x && git commit -q -m x && "
             "git tag -a -m t blobtag $(echo hi | git hash-object -w --stdin)",
             work);
    tag = test_capture("git -C '%s' rev-parse blobtag", work);
    head = test_capture("git -C '%s' rev-parse HEAD", work);
    q = quarantine_of("HEAD ^base blobtag");
    rgit_inspect_budget_init(&b, 1 << 20, 60);
    cr_assert_eq(rgit_inspect_range(q, NULL, tag, &fns, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(cs.n, 0u);
    cr_assert_lt(
        rgit_inspect_range(q, "1111111111111111111111111111111111111111", head, &fns, &b, &err), 0);
    rgit_quarantine_free(q);
    free(tag);
    free(head);
}
