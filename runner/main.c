/*
 * refgate-run: run a command in a copy-on-write fork of the working
 * directory that only it may write, with secrets unreadable and a clean
 * environment, and exit with its status.
 *
 * This file holds main(), which decides in which order the steps run, the
 * callbacks sandbox_proc_spawn() calls and the messages; the steps live in
 * opts.c (the command line), plan.c (what the run will do) and mounts.c
 * (what it sees), and each layer in its own module of sandbox/ and fork/:
 * home.c (what must stay hidden), fork.c and tree.c (the fork), env.c (the
 * environment), ns.c (namespaces, id maps), mount.c (the mount namespace's
 * layout), landlock.c (file access and scoping), privs.c (no_new_privs,
 * capabilities), seccomp.c (the system call deny-list), proc.c (session,
 * descriptors, init, exec, signals) and net.c (the gateway's bridge into
 * the net namespace). Every refusal happens before anything is created,
 * so a refused run leaves no trace.
 *
 * The order: the runner (outside) makes the fork and TMPDIR and plans the
 * mounts; clone() creates the namespaces; the runner writes the id maps;
 * the child (init of the pid namespace) takes its ids, brings up loopback,
 * builds the mounts and the Landlock ruleset; it forks the command, which
 * drops its privileges, enforces Landlock, installs seccomp last and execs.
 */
#include "runner/runner.h"

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

int run_quiet, run_verbose;

void say(const char *fmt, ...)
{
    va_list ap;

    fputs("refgate-run: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void run_trace_rule(void *ctx, const char *path, const char *what)
{
    (void)ctx;
    say("rule: %-6s %s", what, path);
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */
/* ------------------------------------------------------------------------ */

/*
 * Make sure 0, 1 and 2 are open, so nothing opened later lands on them and
 * reaches the command as its stdin or stdout.
 */
static void run_guard_stdio(void)
{
    int fd;

    while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2)
        fcntl(fd, F_SETFD, 0);
    if (fd > 2)
        close(fd);
}

/* Runner side, once the child exists: its uid and gid maps. */
static int run_map(void *ctx, pid_t child, rg_error *err)
{
    const run_state *s = ctx;

    /* Before the child may start the command. */
    if (fork_guard_watch(s->guard, child, err) < 0)
        return err->code;
    if (!(s->o.ns & SANDBOX_NS_USER))
        return 0;
    if (s->root_mapped)
        return sandbox_ns_write_maps(child, SANDBOX_NS_ROOT_UID, SANDBOX_NS_ROOT_UID,
                                     SANDBOX_NS_ROOT_GID, SANDBOX_NS_ROOT_GID, err);
    return sandbox_ns_write_maps(child, geteuid(), geteuid(), getegid(), getegid(), err);
}

/*
 * Runner side, while the child sets up: compile the seccomp filter and send
 * it. A failure sends a short or no program, which the command refuses.
 */
static void run_started(void *ctx)
{
    run_state *s = ctx;
    rg_error err = RG_ERROR_INIT;

    /* The relay first: the child waits for it to take the sockets. A relay
     * that cannot start closes the runner's end, which fails the run. */
    if (s->netsock[0] >= 0) {
        close(s->netsock[1]);
        s->netsock[1] = -1;
        if (sandbox_net_relay_start(&s->relay, s->netsock[0], &s->gw, &err) < 0)
            say("%s", err.msg);
        s->netsock[0] = -1;
    }
    /* The supervisor next: without it, the command's passing of the
     * listener fails, and with it the run. */
    if (s->notify) {
        close(s->notifysock[1]);
        s->notifysock[1] = -1;
        if (sandbox_notify_start(&s->sup, s->notifysock[0], &err) < 0)
            say("%s", err.msg);
        s->notifysock[0] = -1;
        sandbox_seccomp_export_notify(s->bpf[1], &err);
    } else {
        sandbox_seccomp_export(s->bpf[1], &err);
    }
    close(s->bpf[1]);
    s->bpf[1] = -1;
}

/* In the sandbox's first process (init of the pid namespace). */
static int run_setup(void *ctx, rg_error *err)
{
    run_state *s = ctx;
    sandbox_mount_opts mo = {0};
    int rc = 0;

    /* Only the runner writes the filter: the command reads it to the end. */
    close(s->bpf[1]);
    s->bpf[1] = -1;
    /* Only the runner receives the listener. */
    if (s->notifysock[0] >= 0)
        close(s->notifysock[0]);
    s->notifysock[0] = -1;

    /* A root caller's child becomes nobody, the one id mapped (it keeps the
     * namespace's capabilities for the setup; the command loses them at
     * exec); root's supplementary groups (shadow, disk, ...) go. */
    if (s->root_mapped &&
        (setgroups(0, NULL) < 0 ||
         setresgid(SANDBOX_NS_ROOT_GID, SANDBOX_NS_ROOT_GID, SANDBOX_NS_ROOT_GID) < 0 ||
         setresuid(SANDBOX_NS_ROOT_UID, SANDBOX_NS_ROOT_UID, SANDBOX_NS_ROOT_UID) < 0))
        return rg_error_set(err, -errno, "taking uid %d in the user namespace: %s",
                            SANDBOX_NS_ROOT_UID, strerror(errno));
    if (s->o.ns & SANDBOX_NS_NET)
        rc = sandbox_ns_loopback_up(err);
    /* The gateway's address inside, served by the runner from outside. */
    if (s->netsock[1] >= 0) {
        close(s->netsock[0]);
        s->netsock[0] = -1;
        if (rc == 0)
            rc = sandbox_net_serve_inside(s->netsock[1], &s->gw, err);
        close(s->netsock[1]);
        s->netsock[1] = -1;
    }
    if (rc == 0 && (s->o.ns & SANDBOX_NS_MOUNT)) {
        mo.proc = (s->o.ns & SANDBOX_NS_PID) != 0;
        rc = sandbox_mount_apply(&s->mounts, &mo, err);
        if (rc < 0)
            rg_error_wrap(err, "refusing to run: the mount namespace cannot be built "
                               "(--share=mount runs without it)");
    }
    if (rc == 0)
        rc = run_build_rules(s, err);
    return rc;
}

/* Runs in the child, just before exec. */
static int run_confine(void *ctx, rg_error *err)
{
    run_state *s = ctx;
    int rc;

    rc = (s->o.ns & SANDBOX_NS_USER) ? sandbox_privs_drop_all(err) : sandbox_privs_drop(err);
    if (rc == 0)
        rc = sandbox_landlock_enforce(s->ll, err);
    /* Last: the filter denies calls the steps above make. */
    if (rc == 0)
        rc = s->notify ? sandbox_notify_install(s->bpf[0], s->notifysock[1], err)
                       : sandbox_seccomp_load(s->bpf[0], err);
    return rc;
}

/* The summary of what was neutralised in the fork's .git. */
#define RUN_NEUTRALISED_MAX 2048

typedef struct run_told {
    rg_buf b;
    int full; /* the summary passed its cap (rg_buf then starts over): stop */
} run_told;

static void run_tell_neutralised(void *ctx, const char *where, const char *what)
{
    run_told *t = ctx;

    /* A full summary stops growing: the count is said as well. */
    if (!t->full && rg_buf_printf(&t->b, "%s%s%s%s", t->b.len ? ", " : "", where,
                                  where[0] ? ": " : "", what) < 0)
        t->full = 1;
}

/*
 * After the command: what the run planted in the fork's .git would run
 * unconfined at the user's first git command there (gitconf.h). With the
 * pid namespace every process of the run is gone by now, so nothing
 * rewrites it afterwards; the marker (fork.h) is still held meanwhile, so
 * `refgate diff --apply` waits for this too.
 */
static void run_neutralise_git(run_state *s)
{
    run_told t = {RG_BUF_INIT(RUN_NEUTRALISED_MAX), 0};
    rg_error err = RG_ERROR_INIT;
    int n = 0;

    if (fork_gitconf_neutralise(&n, s->fork.path, s->fork.base, run_tell_neutralised, &t, &err) < 0)
        say("WARNING: %s; do not run git in %s before checking its .git", err.msg, s->fork.path);
    if (n > 0)
        say("neutralised %d thing%s in the fork's .git that would run outside the sandbox at "
            "your first git command there: %s%s (config kept as .git/config.refgate-run-orig, "
            "hooks as .git/hooks.refgate-disabled)",
            n, n == 1 ? "" : "s", t.full || t.b.data == NULL ? "" : t.b.data,
            t.full ? "(too many to list)" : "");
    s->neutralised = n;
    snprintf(s->neutralised_what, sizeof(s->neutralised_what), "%s",
             t.full || t.b.data == NULL ? "too many to list" : t.b.data);
    rg_buf_free(&t.b);
}

/*
 * After the command, when anything was denied: one line saying what, from
 * the runner's own accounting (the seccomp supervisor's count, the relay's
 * refusals, mounts left out of the fork, the fork's .git neutralised).
 * Landlock's denials are not counted here: the kernel tells them only to
 * its audit log, which refgate-run does not read (an audit netlink socket
 * needs CAP_AUDIT_READ); the summary says so rather than looking complete.
 */
static void run_summarise(run_state *s)
{
    sandbox_notify_tally tally;
    sandbox_net_blocked nb;
    char net[RUN_BLOCKED_ITEM_MAX], calls[RUN_BLOCKED_ITEM_MAX], ll[256];
    rg_buf b = RG_BUF_INIT(5 * RUN_BLOCKED_ITEM_MAX);

    sandbox_notify_tally_get(&tally, s->sup);
    sandbox_notify_tally_format(calls, sizeof(calls), &tally);
    if (tally.total > 0 && rg_buf_printf(&b, "%lu system call%s denied by seccomp: %s", tally.total,
                                         tally.total == 1 ? "" : "s", calls) < 0)
        goto done;
    sandbox_net_relay_blocked(&nb, s->relay);
    sandbox_net_blocked_format(net, sizeof(net), &nb);
    if (net[0] && rg_buf_printf(&b, "%s%s", b.len ? ", " : "", net) < 0)
        goto done;
    if (s->mounts_skipped > 0 &&
        rg_buf_printf(&b, "%s%lu entr%s on other mounts left out of the fork", b.len ? ", " : "",
                      s->mounts_skipped, s->mounts_skipped == 1 ? "y" : "ies") < 0)
        goto done;
    if (s->neutralised > 0 &&
        rg_buf_printf(&b, "%s%d thing%s in the %s's .git neutralised (%s)", b.len ? ", " : "",
                      s->neutralised, s->neutralised == 1 ? "" : "s",
                      s->o.dir ? "directory" : "fork", s->neutralised_what) < 0)
        goto done;
    sandbox_notify_landlock_why(ll, sizeof(ll));
    if (b.len > 0)
        say("blocked during the run: %s (%s%s%s)", b.data, ll, s->notify ? "" : "; ",
            s->notify ? "" : s->notify_off);
done:
    rg_buf_free(&b);
}

static void run_cleanup(run_state *s, int started)
{
    rg_error err = RG_ERROR_INIT;

    if (s->tmpdir != NULL && !s->tmp_inside) {
        if (s->o.keep_tmp)
            note("kept TMPDIR %s", s->tmpdir);
        else if (fork_tree_remove(s->tmpdir, &err) < 0)
            say("warning: %s", err.msg);
    }
    if (s->fork.path != NULL && !s->o.rm)
        run_neutralise_git(s);
    if (started && s->o.dir != NULL) {
        if (fork_dirgit_after(&s->neutralised, &s->dirgit, &err) < 0)
            say("WARNING: %s; do not run git in %s before checking it", err.msg, s->workdir);
        snprintf(s->neutralised_what, sizeof(s->neutralised_what),
                 ".git (created by the run): moved to .git.refgate-disabled");
    }
    if (started)
        run_summarise(s);
    if (s->fork.path == NULL)
        return;
    if (s->o.rm) {
        if (fork_remove(&s->fork, &err) < 0)
            say("warning: %s", err.msg);
        fork_guard_free(s->guard);
        s->guard = NULL;
    } else {
        char rg[PATH_MAX], self[PATH_MAX];

        /* By absolute paths: refgate may not be on PATH (a build tree, /opt). */
        fork_place_sibling(rg, sizeof(rg), "refgate", "../cli");
        fork_place_sibling(self, sizeof(self), "refgate-run", ".");
        note("the fork stays at %s; `%s diff %s` shows what the run changed; "
             "`%s --continue %s -- CMD` runs in it again",
             s->fork.path, rg[0] ? rg : "refgate", s->fork.path, self[0] ? self : "refgate-run",
             s->fork.path);
    }
}

static void run_free(run_state *s)
{
    size_t i;

    for (i = 0; s->reads && s->reads[i]; i++)
        free(s->reads[i]);
    for (i = 0; s->writes && s->writes[i]; i++)
        free(s->writes[i]);
    free(s->reads);
    free(s->writes);
    free(s->o.reads);
    free(s->o.writes);
    free(s->o.envs);
    free(s->o.hides);
    free(s->o.excludes);
    fork_exclude_free(&s->excl);
    sandbox_mount_plan_free(&s->mounts);
    sandbox_net_relay_free(s->relay);
    sandbox_notify_free(s->sup);
    if (s->notifysock[0] >= 0)
        close(s->notifysock[0]);
    if (s->notifysock[1] >= 0)
        close(s->notifysock[1]);
    if (s->netsock[0] >= 0)
        close(s->netsock[0]);
    if (s->netsock[1] >= 0)
        close(s->netsock[1]);
    if (s->bpf[0] >= 0)
        close(s->bpf[0]);
    if (s->bpf[1] >= 0)
        close(s->bpf[1]);
    for (i = 0; s->binds && s->binds[i].dst; i++)
        fork_place_bind_free(&s->binds[i]);
    free(s->binds);
    free(s->o.binds);
    free(s->o.robinds);
    fork_place_free(&s->place);
    fork_worktree_free(&s->wt);
    free(s->shown);
    free(s->cwd);
    free(s->workdir);
    free(s->tmpdir);
    free(s->inodes);
    free(s->tops);
    sandbox_env_free(s->env);
    sandbox_caches_free(&s->caches);
    sandbox_toolconf_free(&s->conf);
    sandbox_landlock_free(s->ll);
    /* The fork is hardened (or removed): its guardian is not needed. */
    fork_guard_free(s->guard);
    fork_free(&s->fork);
    fork_dirgit_free(&s->dirgit);
    sandbox_home_free(&s->home);
}

/* Exit as the command did: with its code, or killed by the same signal. */
static void __attribute__((noreturn)) run_exit_like(int status)
{
    if (WIFSIGNALED(status)) {
        struct rlimit none = {0, 0};
        int sig = WTERMSIG(status);
        sigset_t set;

        /* The command dumped its core already, if it was to. */
        setrlimit(RLIMIT_CORE, &none);
        signal(sig, SIG_DFL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        fflush(NULL);
        raise(sig);
    }
    exit(sandbox_proc_status_code(status));
}

static int run_check(run_state *s)
{
    rg_error why = RG_ERROR_INIT, err = RG_ERROR_INIT;
    sandbox_landlock_plan plan;
    char buf[PATH_MAX];
    struct stat st;
    size_t i;
    int abi, rc;

    sandbox_landlock_probe(&abi, s->o.debug_abi, &why);
    if (abi == 0)
        printf("Landlock: not available: %s\n", why.msg);
    else
        printf("Landlock: ABI %d (refgate-run knows up to %d)\n", abi, SANDBOX_LANDLOCK_ABI_LAST);
    rc = sandbox_landlock_plan_make(&plan, abi, 0, &err);
    if (rc < 0) {
        printf("  a run would be refused: %s\n", err.msg);
        sandbox_landlock_plan_make(&plan, abi, SANDBOX_LANDLOCK_ACCEPT_ANY, &err);
    } else {
        printf("  a run is fully confined\n");
    }
    for (i = 0; i < plan.ndegraded; i++)
        printf("  lost at this ABI: %s\n", plan.degraded[i]);
    {
        rg_error nerr = RG_ERROR_INIT;
        char names[64];

        sandbox_ns_names(names, sizeof(names), s->o.ns);
        if (sandbox_ns_probe(s->o.ns, s->o.debug_no_ns, &nerr) == 0) {
            printf("namespaces: %s can be created\n", names);
        } else {
            printf("namespaces: a run would be refused: %s\n", nerr.msg);
            rc = -EPERM;
        }
    }
    {
        rg_error serr = RG_ERROR_INIT;

        if (sandbox_seccomp_notify_probe(&serr) == 0)
            printf("seccomp: denials answered and counted by refgate-run's supervisor\n");
        else
            printf("seccomp: denials not counted (the plain filter denies the same): %s\n",
                   serr.msg);
    }
    printf("home: %s\n", s->home.path);
    for (i = 0; i < s->home.nsecrets; i++)
        if (lstat(s->home.secrets[i], &st) == 0)
            printf("  secret present (unreadable): %s\n", s->home.secrets[i]);
    for (i = 1; i < s->home.nhidden; i++)
        printf("  hidden outside home: %s\n", s->home.hidden[i]);
    for (i = 0; sandbox_home_readable_names[i]; i++) {
        snprintf(buf, sizeof(buf), "%s/%s", s->home.path, sandbox_home_readable_names[i]);
        if (lstat(buf, &st) == 0)
            printf("  toolchain path readable: %s\n", buf);
    }
    return rc < 0 ? SANDBOX_PROC_EXIT_FAILED : 0;
}

/* ------------------------------------------------------------------------ */
/* main                                                                      */
/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    sandbox_proc_opts po = SANDBOX_PROC_OPTS_INIT;
    rg_error err = RG_ERROR_INIT;
    run_state s;
    int rc, status = 0, code = SANDBOX_PROC_EXIT_FAILED, started = 0;
    pid_t pid;

    memset(&s, 0, sizeof(s));
    s.bpf[0] = s.bpf[1] = -1;
    s.netsock[0] = s.netsock[1] = -1;
    s.notifysock[0] = s.notifysock[1] = -1;
    run_guard_stdio();
    rc = run_parse(&s.o, argc, argv, &err);
    if (rc == RUN_PARSE_HELP)
        fputs(run_opts_help(), stdout);
    else if (rc == RUN_PARSE_VERSION)
        printf("refgate-run %s (Landlock ABI up to %d)\n", RUN_VERSION, SANDBOX_LANDLOCK_ABI_LAST);
    else if (rc < 0)
        say("%s", err.msg);
    if (rc != 0) {
        code = rc > 0 ? 0 : SANDBOX_PROC_EXIT_FAILED;
        goto done;
    }
    run_quiet = s.o.quiet;
    run_verbose = s.o.verbose;
    rc = sandbox_home_load(&s.home, environ, &err);
    if (rc < 0) {
        say("%s", err.msg);
        goto done;
    }
    if (s.o.check) {
        code = run_check(&s);
        goto done;
    }
    /* Every refusal comes before anything is created. */
    if (run_plan(&s) < 0 || run_check_ns(&s) < 0 || run_plan_net(&s) < 0 ||
        run_resolve_paths(&s) < 0 || run_plan_exclude(&s) < 0)
        goto done;
    run_report_plan(&s);
    if (run_make_tmpdir(&s) < 0 || run_build_env(&s) < 0 || run_proxy_env(&s) < 0 ||
        run_tools(&s) < 0)
        goto done;
    if ((s.o.dir == NULL && (run_make_fork(&s) < 0 || run_guard(&s) < 0)) || run_place_fork(&s) < 0)
        goto done;
    if (run_plan_mounts(&s) < 0)
        goto done;
    {
        char names[64];

        sandbox_ns_names(names, sizeof(names), s.o.ns);
        if (s.plan.enforce)
            note("confined by namespaces (%s), Landlock ABI %d and seccomp: writes only to %s, "
                 "TMPDIR%s%s; home %s hidden%s",
                 names, s.plan.abi, s.shown, s.o.nwrites ? ", the -w paths" : "",
                 s.caches.n ? ", tool caches" : "", s.home.path,
                 s.root_mapped ? "; runs as nobody outside" : "");
    }
    if (s.o.net_mode == SANDBOX_NET_HOST) {
        say("WARNING: --net host: the command reaches the network as you do (no net namespace)");
    } else if (s.o.net_mode == SANDBOX_NET_GATEWAY || s.o.net_mode == SANDBOX_NET_ALLOW) {
        if (s.gw.naddr > 0)
            note("network: loopback and the gateway %s:%u%s", s.gw.host, s.gw.port,
                 s.gw.proxy_port ? "" : " only");
        if (s.gw.proxy_port)
            note("network: %s through the proxy at 127.0.0.1:%u (HTTPS_PROXY): %s",
                 s.gw.naddr ? "and" : "loopback, and", s.gw.proxy_port, s.o.allow);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s.netsock) < 0) {
            say("socketpair: %s", strerror(errno));
            goto done;
        }
    }
    if (run_plan_notify(&s) < 0)
        goto done;
    po.argv = s.o.argv;
    po.envp = s.env;
    po.cwd = s.cwd;
    po.confine = run_confine;
    po.ctx = &s;
    po.clone_flags = sandbox_ns_clone_flags(s.o.ns);
    po.map = run_map;
    po.setup = run_setup;
    po.started = run_started;
    /* Non-blocking: a filter larger than the pipe fails the export (and so
     * the run) instead of waiting on a child that may never read it. */
    if (pipe2(s.bpf, O_CLOEXEC) < 0 || fcntl(s.bpf[1], F_SETFL, O_NONBLOCK) < 0) {
        say("pipe: %s", strerror(errno));
        goto done;
    }
    /* A pty of the run's own needs its devpts (mount) and init (pid). Only
     * in the foreground: in the background, making the terminal raw would
     * stop refgate-run (SIGTTOU), and init, in a session of its own, would
     * read what you type to your shell. */
    po.pty = !s.o.no_pty && isatty(0) && tcgetpgrp(0) == getpgrp() &&
             (s.o.ns & (SANDBOX_NS_MOUNT | SANDBOX_NS_PID)) == (SANDBOX_NS_MOUNT | SANDBOX_NS_PID);
    fflush(NULL);
    rc = sandbox_proc_spawn(&pid, &code, &po, &err);
    if (rc == SANDBOX_PROC_E_NAMESPACE) {
        /* The kernel said no to the set; find which one, and say so. */
        say("%s", err.msg);
        sandbox_ns_explain(s.o.ns, 0, EPERM, &err);
    }
    if (rc < 0) {
        say("%s", err.msg);
        goto done;
    }
    started = 1;
    /* Without namespaces there was no map step to tell the guardian. */
    if (fork_guard_watch(s.guard, pid, &err) < 0)
        say("warning: %s", err.msg);
    rc = sandbox_proc_wait(&status, pid, &err);
    if (rc < 0) {
        say("%s", err.msg);
        code = SANDBOX_PROC_EXIT_FAILED;
        started = 0;
    }
done:
    /* A fork the command never ran in is of no use: remove it (not one continued). */
    if (!started && s.fork.path != NULL && !s.fork.continued)
        s.o.rm = 1;
    run_cleanup(&s, started);
    run_free(&s);
    if (started)
        run_exit_like(status);
    return code;
}
