/*
 * The push core (gateway/receive.c, receive_inspect.c) in process: raw
 * receive-pack bodies (command list, flush, pack) fed in odd chunk sizes to
 * the pipeline against a local bare upstream in a temporary directory. Each
 * test asserts the phases the push passes, the decision per ref, what
 * reached the upstream (refs and objects) and, for a denied push, that
 * nothing did. The wire behaviour with the real git client and a running
 * gateway is tests/integration/test_push.sh and its neighbours.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "gateway/receive_int.h"
#include "gateway/route.h"
#include "support/gitfix.h"
#include "support/gwctx.h"
#include "support/shell.h"
#include "util/buf.h"
#include "util/fs.h"

#define ZERO "0000000000000000000000000000000000000000"

static char base[PATH_MAX], upstream[PATH_MAX], work[PATH_MAX], tmp[PATH_MAX];
static config_model *cfg;
static gateway_ctx ctx;
static atomic_int stopping;
static gateway_route route;
static upstream_target target;
static char *repo_dir;
static tokens_claims claims = {.run = (char *)"unit"};

/* main may only move forward; feature branches are open; blocked ones and
 * everything else are refused; creating a held branch asks for an approval
 * and holds the push a second for it (when the gateway keeps approvals). */
static const char *rules_json =
    "[{\"name\": \"protect-main\", \"refs\": [\"refs/heads/main\"], \"actions\": [\"force\", "
    "\"delete\"], \"effect\": \"deny\", \"reason\": \"main is protected\"},"
    " {\"name\": \"main-ff\", \"refs\": [\"refs/heads/main\"], \"actions\": [\"update\"], "
    "\"effect\": \"allow\"},"
    " {\"name\": \"features\", \"refs\": [\"refs/heads/feature/**\"], \"actions\": [\"create\", "
    "\"update\", \"delete\"], \"effect\": \"allow\"},"
    " {\"name\": \"blocked\", \"refs\": [\"refs/heads/blocked/**\"], \"actions\": [\"create\"], "
    "\"effect\": \"deny\", \"reason\": \"blocked\"},"
    " {\"name\": \"held\", \"refs\": [\"refs/heads/held/*\"], \"actions\": [\"create\"], "
    "\"effect\": \"ask\", \"hold\": 1}]";

static void setup(void)
{
    rg_error err = RG_ERROR_INIT;

    snprintf(base, sizeof(base), "/tmp/rg-receive-XXXXXX");
    test_gitfix_setup(base, upstream, work, tmp, sizeof(upstream), "echo one >a");
    cfg = test_gw_config(&ctx, base, rules_json);
    test_gw_audit(&ctx);
    ctx.stopping = &stopping;
    snprintf(ctx.tmp_dir, sizeof(ctx.tmp_dir), "%s", tmp);
    cr_assert_eq(
        gateway_route_parse(&route, "POST", "/local/upstream.git/git-receive-pack", NULL, &err), 0,
        "%s", err.msg);
    cr_assert_eq(gateway_route_local_dir(&repo_dir, &cfg->upstreams[0], &route, &err), 0, "%s",
                 err.msg);
    target =
        (upstream_target){.up = &cfg->upstreams[0], .repo_path = route.path, .repo_dir = repo_dir};
}

static void teardown(void)
{
    free(repo_dir);
    repo_dir = NULL;
    test_gw_free(&ctx, cfg, base);
}

/* ------------------------------------------------------------- helpers */

/* A commit on top of `parent` in the clone, not pushed anywhere; its id. */
static char *commit_on(const char *parent, const char *file, const char *text)
{
    return test_capture("cd '%s' && git checkout -q --detach %s && echo '%s' >%s && git add -A && "
                        "git commit -q -m '%s' && git rev-parse HEAD",
                        work, parent, text, file, text);
}

static char *upstream_ref(const char *ref)
{
    return test_capture("git --git-dir='%s' rev-parse --verify -q %s || true", upstream, ref);
}

static int upstream_has(const char *id)
{
    char cmd[PATH_MAX + 128];

    snprintf(cmd, sizeof(cmd), "git --git-dir='%s' cat-file -e %s 2>/dev/null", upstream, id);
    return system(cmd) == 0;
}

/* A command line; the first carries the capabilities after a NUL. */
static void command(rg_buf *b, const char *old, const char *new_id, const char *ref,
                    const char *caps)
{
    char line[512];
    size_t n = (size_t)snprintf(line, sizeof(line), "%s %s %s", old, new_id, ref);

    if (caps) {
        line[n] = '\0';
        n += 1 + (size_t)snprintf(line + n + 1, sizeof(line) - n - 1, "%s", caps);
    }
    line[n++] = '\n';
    cr_assert_eq(rg_buf_printf(b, "%04zx", n + 4), 0);
    cr_assert_eq(rg_buf_append(b, line, n), 0);
}

/* The pack of `revs` (e.g. "NEW ^OLD") from the clone, appended. */
static void pack(rg_buf *b, const char *revs)
{
    char path[PATH_MAX + 16];
    rg_buf p = RG_BUF_INIT(64 << 20);
    rg_error err = RG_ERROR_INIT;

    snprintf(path, sizeof(path), "%s/pack", base);
    test_run("cd '%s' && printf '%%s\\n' %s | git pack-objects -q --stdout --revs >'%s'", work,
             revs, path);
    cr_assert_eq(rg_fs_read_file(&p, path, &err), 0, "%s", err.msg);
    cr_assert_eq(rg_buf_append(b, p.data, p.len), 0);
    rg_buf_free(&p);
}

typedef struct outcome {
    push_phase after_commands; /* the phase once the flush was fed */
    push_phase before_end;     /* once the whole body was fed */
    push_phase after_end;
    unsigned status;
    rg_buf response;
} outcome;

static gateway_receive *start(void)
{
    gateway_receive_info info = {
        .ctx = &ctx,
        .route = &route,
        .target = &target,
        .claims = &claims,
        .token_hash = "0123456789ab",
        .remote = "127.0.0.1",
    };
    gateway_receive *r = NULL;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(gateway_receive_new(&r, &info, &err), 0, "%s", err.msg);
    cr_assert_eq(receive_phase(r), PUSH_COMMANDS);
    return r;
}

/*
 * Feed `body` in chunks of `chunk` bytes (`header_len` is where the
 * command list's flush ends: the phase is noted there), then end it. The
 * push is left for the caller to inspect and free.
 */
static void feed(outcome *o, gateway_receive *r, const rg_buf *body, size_t header_len,
                 size_t chunk)
{
    const char *ctype = NULL;
    size_t off = 0;

    o->after_commands = PUSH_COMMANDS;
    rg_buf_init(&o->response, 1 << 20);
    while (off < body->len) {
        size_t n = body->len - off < chunk ? body->len - off : chunk;

        /* Stop at the end of the command list once, to see the phase there. */
        if (off < header_len && off + n > header_len)
            n = header_len - off;
        cr_assert_geq(gateway_receive_body(r, body->data + off, n), 0, "at %zu", off);
        off += n;
        if (off < header_len)
            cr_assert_eq(receive_phase(r), PUSH_COMMANDS, "at %zu of %zu", off, header_len);
        if (off == header_len)
            o->after_commands = receive_phase(r);
    }
    o->before_end = receive_phase(r);
    gateway_receive_end(r, &o->response, &o->status, &ctype);
    o->after_end = receive_phase(r);
    /* No NUL in a report: strings can be looked for. */
    rg_buf_append(&o->response, "", 1);
}

static int said(const outcome *o, const char *line)
{
    return memmem(o->response.data, o->response.len, line, strlen(line)) != NULL;
}

/* The chunk sizes a body is cut into: a byte at a time, odd sizes that
 * split pkt-line headers and the pack, and all at once. */
static size_t chunks[] = {1, 3, 7, 61, 4096, 1 << 30};

TestSuite(receive, .init = setup, .fini = teardown, .timeout = 120);

ParameterizedTestParameters(receive, a_create_decided_on_names_streams_its_pack_upstream)
{
    return cr_make_param_array(size_t, chunks, sizeof(chunks) / sizeof(chunks[0]));
}

ParameterizedTest(size_t *chunk, receive, a_create_decided_on_names_streams_its_pack_upstream)
{
    rg_buf body = RG_BUF_INIT(64 << 20);
    char *base_id = test_capture("git -C '%s' rev-parse base", work);
    char *c1 = commit_on("base", "b", "feature work"), *after;
    gateway_receive *r = start();
    size_t header;
    outcome o;

    command(&body, ZERO, c1, "refs/heads/feature/x", "report-status");
    rg_buf_append(&body, "0000", 4);
    header = body.len;
    {
        char revs[200];

        snprintf(revs, sizeof(revs), "%s ^%s", c1, base_id);
        pack(&body, revs);
    }
    feed(&o, r, &body, header, *chunk);
    /* The names decide a create: forwarded at the flush, the pack streamed. */
    cr_expect_eq(o.after_commands, PUSH_FORWARDING);
    cr_expect_eq(o.before_end, PUSH_FORWARDING);
    cr_expect_eq(o.after_end, PUSH_FINISHED);
    cr_expect_eq(o.status, 200);
    cr_expect(r->cmds[0].plan.allowed);
    cr_expect(said(&o, "unpack ok\n"), "%s", o.response.data);
    cr_expect(said(&o, "ok refs/heads/feature/x\n"), "%s", o.response.data);
    after = upstream_ref("refs/heads/feature/x");
    cr_expect_str_eq(after, c1);
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    rg_buf_free(&body);
    free(after);
    free(c1);
    free(base_id);
}

/* Build "old new ref" pushes of main: a fast-forward or a rewrite. */
static void push_main(outcome *o, gateway_receive *r, const char *new_id, const char *base_id,
                      size_t chunk)
{
    rg_buf body = RG_BUF_INIT(64 << 20);
    char revs[200];
    size_t header;

    command(&body, base_id, new_id, "refs/heads/main", "report-status");
    rg_buf_append(&body, "0000", 4);
    header = body.len;
    snprintf(revs, sizeof(revs), "%s ^%s", new_id, base_id);
    pack(&body, revs);
    feed(o, r, &body, header, chunk);
    rg_buf_free(&body);
}

ParameterizedTestParameters(receive, a_fast_forward_of_main_is_inspected_then_forwarded)
{
    return cr_make_param_array(size_t, chunks, sizeof(chunks) / sizeof(chunks[0]));
}

ParameterizedTest(size_t *chunk, receive, a_fast_forward_of_main_is_inspected_then_forwarded)
{
    char *base_id = test_capture("git -C '%s' rev-parse base", work);
    char *c1 = commit_on("base", "a", "two"), *after;
    gateway_receive *r = start();
    outcome o;

    push_main(&o, r, c1, base_id, *chunk);
    /* An update needs ancestry: the pack is spooled and inspected first. */
    cr_expect_eq(o.after_commands, PUSH_INSPECTING);
    cr_expect_eq(o.before_end, PUSH_INSPECTING);
    cr_expect_eq(o.after_end, PUSH_FINISHED);
    cr_expect_eq(r->cmds[0].plan.action, CONFIG_ACTION_UPDATE);
    cr_expect(r->cmds[0].plan.allowed);
    cr_expect(said(&o, "ok refs/heads/main\n"), "%s", o.response.data);
    after = upstream_ref("refs/heads/main");
    cr_expect_str_eq(after, c1);
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    free(after);
    free(c1);
    free(base_id);
}

Test(receive, a_force_of_main_is_denied_and_nothing_reaches_upstream)
{
    char *base_id = test_capture("git -C '%s' rev-parse base", work);
    char *parent = test_capture("cd '%s' && git commit -q --allow-empty -m side && "
                                "git rev-parse HEAD",
                                work),
         *c1, *after;
    gateway_receive *r;
    outcome o;

    /* Upstream main moves to `parent`; the push rewrites it from there. */
    test_run("cd '%s' && git push -q '%s' HEAD:main", work, upstream);
    c1 = commit_on("base", "a", "rewritten");
    r = start();
    push_main(&o, r, c1, parent, 61);
    cr_expect_eq(o.after_commands, PUSH_INSPECTING);
    cr_expect_eq(o.after_end, PUSH_FINISHED);
    cr_expect_eq(r->cmds[0].plan.action, CONFIG_ACTION_FORCE);
    cr_expect_not(r->cmds[0].plan.allowed);
    cr_expect_eq(r->nforward, 0);
    cr_expect(said(&o, "ng refs/heads/main policy: main is protected"), "%s", o.response.data);
    after = upstream_ref("refs/heads/main");
    cr_expect_str_eq(after, parent);
    cr_expect_not(upstream_has(c1), "a denied push's objects must not reach upstream");
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    free(after);
    free(c1);
    free(parent);
    free(base_id);
}

/* A push of several refs: feature/a and blocked/b, with `caps`. */
static void two_refs(outcome *o, gateway_receive *r, const char *caps, char **ca, char **cb)
{
    rg_buf body = RG_BUF_INIT(64 << 20);
    char *base_id = test_capture("git -C '%s' rev-parse base", work), revs[300];
    size_t header;

    *ca = commit_on("base", "a", "for feature");
    *cb = commit_on("base", "b", "for blocked");
    command(&body, ZERO, *ca, "refs/heads/feature/a", caps);
    command(&body, ZERO, *cb, "refs/heads/blocked/b", NULL);
    rg_buf_append(&body, "0000", 4);
    header = body.len;
    snprintf(revs, sizeof(revs), "%s %s ^%s", *ca, *cb, base_id);
    pack(&body, revs);
    feed(o, r, &body, header, 7);
    rg_buf_free(&body);
    free(base_id);
}

Test(receive, each_ref_of_a_push_is_decided_on_its_own)
{
    gateway_receive *r = start();
    char *ca, *cb, *a, *b;
    outcome o;

    two_refs(&o, r, "report-status", &ca, &cb);
    cr_expect_eq(o.after_commands, PUSH_FORWARDING);
    cr_expect_eq(o.after_end, PUSH_FINISHED);
    cr_expect(r->cmds[0].plan.allowed);
    cr_expect_not(r->cmds[1].plan.allowed);
    cr_expect_eq(r->nforward, 1);
    cr_expect(said(&o, "ok refs/heads/feature/a\n"), "%s", o.response.data);
    cr_expect(said(&o, "ng refs/heads/blocked/b policy: blocked"), "%s", o.response.data);
    a = upstream_ref("refs/heads/feature/a");
    b = upstream_ref("refs/heads/blocked/b");
    cr_expect_str_eq(a, ca);
    cr_expect_str_eq(b, "");
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    free(a);
    free(b);
    free(ca);
    free(cb);
}

Test(receive, an_atomic_push_with_one_denied_ref_sends_nothing_upstream)
{
    gateway_receive *r = start();
    char *ca, *cb, *a;
    outcome o;

    two_refs(&o, r, "report-status atomic", &ca, &cb);
    cr_expect_eq(o.after_end, PUSH_FINISHED);
    cr_expect_not(r->cmds[0].plan.allowed);
    cr_expect_not(r->cmds[1].plan.allowed);
    cr_expect_eq(r->nforward, 0);
    cr_expect(said(&o, "ng refs/heads/feature/a policy: atomic push rejected"), "%s",
              o.response.data);
    a = upstream_ref("refs/heads/feature/a");
    cr_expect_str_eq(a, "");
    cr_expect_not(upstream_has(ca));
    cr_expect_not(upstream_has(cb));
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    free(a);
    free(ca);
    free(cb);
}

Test(receive, the_decisions_are_in_the_audit_log_before_the_answer)
{
    rg_buf log = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    gateway_receive *r = start();
    char path[PATH_MAX + 32], *ca, *cb;
    outcome o;

    two_refs(&o, r, "report-status", &ca, &cb);
    snprintf(path, sizeof(path), "%s/audit.jsonl", cfg->state_dir);
    cr_assert_eq(rg_fs_read_file(&log, path, &err), 0, "%s", err.msg);
    rg_buf_append(&log, "", 1);
    cr_expect(strstr(log.data, "\"ref\":\"refs/heads/feature/a\"") != NULL, "%s", log.data);
    cr_expect(strstr(log.data, "\"decision\":\"allow\"") != NULL, "%s", log.data);
    cr_expect(strstr(log.data, "\"decision\":\"deny\"") != NULL, "%s", log.data);
    cr_expect(strstr(log.data, "\"outcome\":\"forwarded: ok\"") != NULL, "%s", log.data);
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    rg_buf_free(&log);
    free(ca);
    free(cb);
}

Test(receive, a_denied_create_is_decided_at_the_flush_and_its_pack_dropped)
{
    rg_buf body = RG_BUF_INIT(64 << 20);
    char *base_id = test_capture("git -C '%s' rev-parse base", work);
    char *c1 = commit_on("base", "x", "blocked"), revs[200];
    gateway_receive *r = start();
    size_t header;
    outcome o;

    command(&body, ZERO, c1, "refs/heads/blocked/x", "report-status");
    rg_buf_append(&body, "0000", 4);
    header = body.len;
    snprintf(revs, sizeof(revs), "%s ^%s", c1, base_id);
    pack(&body, revs);
    feed(&o, r, &body, header, 1);
    cr_expect_eq(o.after_commands, PUSH_FORWARDING);
    cr_expect_eq(o.after_end, PUSH_FINISHED);
    cr_expect_not(r->cmds[0].plan.allowed);
    cr_expect_eq(r->nforward, 0);
    cr_expect_null(r->upstream, "no upstream request for a push with nothing allowed");
    cr_expect_not(upstream_has(c1));
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    rg_buf_free(&body);
    free(c1);
    free(base_id);
}

Test(receive, a_probe_without_commands_is_answered_empty)
{
    gateway_receive *r = start();
    rg_buf body = RG_BUF_INIT(16);
    outcome o;

    rg_buf_append(&body, "0000", 4);
    feed(&o, r, &body, 4, 1);
    cr_expect_eq(o.after_commands, PUSH_PROBE);
    cr_expect_eq(o.after_end, PUSH_PROBE);
    cr_expect_eq(o.status, 200);
    cr_expect_eq(o.response.len, 1, "nothing but the NUL the test added");
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    rg_buf_free(&body);
}

Test(receive, a_body_that_ends_inside_the_command_list_fails_with_400)
{
    gateway_receive *r = start();
    rg_buf body = RG_BUF_INIT(1024);
    outcome o;

    command(&body, ZERO, "1111111111111111111111111111111111111111", "refs/heads/feature/x",
            "report-status");
    feed(&o, r, &body, body.len + 1, 5);
    cr_expect_eq(o.before_end, PUSH_COMMANDS);
    cr_expect_eq(o.after_end, PUSH_FAILED);
    cr_expect_eq(o.status, 400);
    cr_expect(said(&o, "the request ended before its command list did"), "%s", o.response.data);
    gateway_receive_free(r);
    rg_buf_free(&o.response);
    rg_buf_free(&body);
}

Test(receive, a_malformed_command_fails_before_anything_is_forwarded)
{
    gateway_receive *r = start();
    const char *bad = "0010not a command0000";
    unsigned status = 0;
    const char *ctype = NULL;
    rg_buf resp = RG_BUF_INIT(4096);

    cr_expect_lt(gateway_receive_body(r, bad, strlen(bad)), 0);
    cr_expect_eq(receive_phase(r), PUSH_FAILED);
    gateway_receive_end(r, &resp, &status, &ctype);
    cr_expect_eq(status, 400);
    cr_expect_eq(r->nforward, 0);
    gateway_receive_free(r);
    rg_buf_free(&resp);
}

/* ---------------------------------------------------------------- hold */

/* Open an approvals store for this test; the push may then be held. */
static void with_approvals(void)
{
    char path[PATH_MAX + 32];
    rg_error err = RG_ERROR_INIT;

    snprintf(path, sizeof(path), "%s/approvals", cfg->state_dir);
    cr_assert_eq(approvals_file_open(&ctx.approvals, path, 3600, &err), 0, "%s", err.msg);
    snprintf(ctx.gateway_id, sizeof(ctx.gateway_id), "0123456789abcdef");
}

/* Create refs/heads/held/x with side-band, as git would; held after the end. */
static gateway_receive *push_held(outcome *o, char **c1)
{
    rg_buf body = RG_BUF_INIT(64 << 20);
    char *base_id = test_capture("git -C '%s' rev-parse base", work), revs[200];
    gateway_receive *r = start();
    size_t header;

    *c1 = commit_on("base", "h", "held");
    command(&body, ZERO, *c1, "refs/heads/held/x", "report-status side-band-64k");
    rg_buf_append(&body, "0000", 4);
    header = body.len;
    snprintf(revs, sizeof(revs), "%s ^%s", *c1, base_id);
    pack(&body, revs);
    feed(o, r, &body, header, 61);
    rg_buf_free(&body);
    free(base_id);
    return r;
}

/* Everything gateway_receive_read has to say, to its end. */
static void read_all(rg_buf *out, gateway_receive *r)
{
    char buf[97];
    size_t n;

    /* Bounded: the hold is a second; the test's timeout stops a hang. */
    while ((n = gateway_receive_read(r, buf, sizeof(buf))) > 0)
        cr_assert_eq(rg_buf_append(out, buf, n), 0);
    rg_buf_append(out, "", 1);
}

Test(receive, a_held_push_whose_hold_runs_out_is_refused_and_nothing_lands)
{
    rg_buf held = RG_BUF_INIT(1 << 20);
    gateway_receive *r;
    char *c1, *after;
    outcome o;

    with_approvals();
    r = push_held(&o, &c1);
    cr_expect_eq(o.after_commands, PUSH_INSPECTING);
    cr_expect_eq(o.after_end, PUSH_HELD);
    cr_expect(gateway_receive_held(r));
    cr_expect_eq(o.response.len, 1, "a held push answers through gateway_receive_read");
    read_all(&held, r);
    cr_expect_eq(receive_phase(r), PUSH_FINISHED);
    cr_expect(strstr(held.data, "waiting up to 1 s for approval") != NULL);
    cr_expect(memmem(held.data, held.len, "ng refs/heads/held/x", 20) != NULL);
    cr_expect_eq(r->nforward, 0);
    after = upstream_ref("refs/heads/held/x");
    cr_expect_str_eq(after, "");
    cr_expect_not(upstream_has(c1));
    gateway_receive_free(r);
    rg_buf_free(&held);
    rg_buf_free(&o.response);
    free(after);
    free(c1);
}

Test(receive, a_held_push_approved_meanwhile_is_forwarded_when_it_resumes)
{
    rg_buf held = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    approvals_entry e;
    gateway_receive *r;
    char *c1, *after;
    outcome o;

    with_approvals();
    r = push_held(&o, &c1);
    cr_assert_eq(o.after_end, PUSH_HELD);
    cr_assert(r->cmds[0].approval.id[0]);
    cr_assert_eq(
        approvals_approve(ctx.approvals, &e, r->cmds[0].approval.id, "alice", time(NULL), &err), 0,
        "%s", err.msg);
    read_all(&held, r);
    cr_expect_eq(receive_phase(r), PUSH_FINISHED);
    cr_expect(r->cmds[0].plan.allowed);
    cr_expect(memmem(held.data, held.len, "ok refs/heads/held/x", 20) != NULL);
    after = upstream_ref("refs/heads/held/x");
    cr_expect_str_eq(after, c1);
    gateway_receive_free(r);
    rg_buf_free(&held);
    rg_buf_free(&o.response);
    free(after);
    free(c1);
}
