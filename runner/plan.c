/*
 * What the run will do, decided from the options before anything is
 * created (refusals first): Landlock's plan, the gateway's addresses, the
 * paths granted (-r, -w, -d, --bind) and refused, the private TMPDIR, the
 * environment, the tool caches and configs, then the fork itself.
 */
#include "runner/runner.h"

/* Secret inodes indexed before a fork, at most (a bound against caches). */
#define RUN_SECRET_INODES_MAX 100000

int run_plan(run_state *s)
{
    rg_error why_none = RG_ERROR_INIT, err = RG_ERROR_INIT;
    unsigned accept = 0;
    int abi, rc;

    sandbox_landlock_probe(&abi, s->o.debug_abi, &why_none);
    if (s->o.no_scope)
        accept |= SANDBOX_LANDLOCK_ACCEPT_NO_SCOPE;
    if (s->o.no_truncate)
        accept |= SANDBOX_LANDLOCK_ACCEPT_NO_TRUNCATE;
    if (s->o.allow_unconfined)
        accept |= SANDBOX_LANDLOCK_ACCEPT_ANY;
    rc = sandbox_landlock_plan_make(&s->plan, abi, accept, &err);
    if (rc < 0) {
        if (abi == 0)
            say("%s", why_none.msg);
        say("%s", err.msg);
    }
    return rc;
}

/* The gateway's addresses, resolved outside before anything is created. */
int run_plan_net(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    int rc;

    memset(&s->gw, 0, sizeof(s->gw));
    if (s->o.net_mode != SANDBOX_NET_GATEWAY && s->o.net_mode != SANDBOX_NET_ALLOW)
        return 0;
    rc = s->o.gateway ? sandbox_net_resolve(&s->gw, s->o.gateway, &err) : 0;
    if (rc == 0 && s->o.net_mode == SANDBOX_NET_ALLOW)
        rc = sandbox_net_allow_parse(&s->gw, s->o.allow, &err);
    if (rc < 0)
        say("refusing to run: %s", err.msg);
    return rc;
}

void run_report_plan(const run_state *s)
{
    size_t i;

    if (s->plan.loud) {
        say("WARNING: ******************************************************");
        say("WARNING: %s", s->plan.enforce ? "RUNNING WITH WEAKENED CONFINEMENT"
                                           : "RUNNING UNCONFINED (--allow-unconfined)");
        for (i = 0; i < s->plan.ndegraded; i++)
            say("WARNING: %s", s->plan.degraded[i]);
        say("WARNING: ******************************************************");
        return;
    }
    for (i = 0; i < s->plan.ndegraded; i++)
        say("degraded: %s", s->plan.degraded[i]);
}

static int run_grant_path(run_state *s, char **out, const char *arg, const char *opt);

/* Whether a path has a "." or ".." component. */
static int run_has_dot_component(const char *p)
{
    size_t n;

    for (; *p; p += n) {
        p += strspn(p, "/");
        n = strcspn(p, "/");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 1;
    }
    return 0;
}

/*
 * A -w path that does not exist: refused, saying how to create it, unless
 * --mkdir asks refgate-run to (`mkdir -p`, modes from the umask). Not a
 * prompt: an agent's runner has no one to answer it, and a typo should not
 * make directories unasked.
 */
static int run_grant_missing(run_state *s, char **out, const char *arg)
{
    rg_error err = RG_ERROR_INIT;
    char abs[PATH_MAX], base[PATH_MAX], *cut;

    if (!s->o.mkdir) {
        say("-w %s: no such file or directory; create it first (mkdir -p %s) or add --mkdir", arg,
            arg);
        return -ENOENT;
    }
    if (run_has_dot_component(arg)) {
        say("--mkdir -w %s: name it without . or .. components", arg);
        return -EINVAL;
    }
    if (arg[0] != '/' && getcwd(base, sizeof(base)) != NULL)
        snprintf(abs, sizeof(abs), "%s/%s", base, arg);
    else
        snprintf(abs, sizeof(abs), "%s", arg);
    /* Canonical, as far as it exists: a symlink on the way may lead into a
     * secret, which the string compare below must see. Bounded: one step
     * per component. */
    snprintf(base, sizeof(base), "%s", abs);
    while ((cut = strrchr(base, '/')) != NULL && cut != base) {
        char real[PATH_MAX];

        *cut = '\0';
        if (realpath(base, real) != NULL) {
            snprintf(base, sizeof(base), "%s%s", strcmp(real, "/") ? real : "", abs + (cut - base));
            snprintf(abs, sizeof(abs), "%s", base);
            break;
        }
    }
    /* Refuse before creating: a secret's path must not appear by -w. */
    if (sandbox_home_conflict(&s->home, abs) != NULL && !s->o.force) {
        say("refusing --mkdir -w %s: it lies inside %s, which must stay unreadable", arg,
            sandbox_home_conflict(&s->home, abs));
        return RG_E_DENIED;
    }
    if (sandbox_caches_mkdirs(abs, 0777, &err) < 0) {
        say("-w %s: %s", arg, err.msg);
        return -EIO;
    }
    note("created %s (--mkdir)", abs);
    return run_grant_path(s, out, abs, "-w");
}

/* Canonicalise a -r/-w/-d path and refuse one that would expose a secret. */
static int run_grant_path(run_state *s, char **out, const char *arg, const char *opt)
{
    char buf[PATH_MAX];
    const char *secret;

    if (realpath(arg, buf) == NULL && errno == ENOENT && strcmp(opt, "-w") == 0)
        return run_grant_missing(s, out, arg);
    if (realpath(arg, buf) == NULL) {
        say("%s %s: %s", opt, arg, strerror(errno));
        return -errno;
    }
    secret = sandbox_home_conflict(&s->home, buf);
    if (secret != NULL) {
        if (!s->o.force) {
            say("refusing %s %s: it is, contains or lies inside %s, which must stay "
                "unreadable; --force grants it anyway",
                opt, buf, secret);
            return RG_E_DENIED;
        }
        say("warning: %s %s exposes %s (--force)", opt, buf, secret);
    }
    *out = strdup(buf);
    return *out ? 0 : -ENOMEM;
}

/* --bind and --ro-bind, resolved (place.h), refused like -w when they expose a secret. */
static int run_resolve_binds(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    const char *exposed;
    size_t i, n = s->o.nbinds + s->o.nrobinds;
    int rc = 0;

    s->binds = calloc(n + 1, sizeof(*s->binds));
    if (s->binds == NULL)
        return -ENOMEM;
    for (i = 0; rc == 0 && i < n; i++) {
        int ro = i >= s->o.nbinds;

        rc = fork_place_bind_resolve(&s->binds[i],
                                     ro ? s->o.robinds[i - s->o.nbinds] : s->o.binds[i], ro,
                                     &s->home, s->o.force, &exposed, &err);
        if (rc < 0)
            say("%s", err.msg);
        else if (exposed != NULL)
            say("warning: %s %s exposes %s (--force)", ro ? "--ro-bind" : "--bind", s->binds[i].src,
                exposed);
        else
            verbose("%s %s at %s", ro ? "--ro-bind" : "--bind", s->binds[i].src, s->binds[i].dst);
    }
    return rc;
}

/*
 * What is forked (the work tree's top), or which fork is continued, and
 * where the command starts (place.h); a linked worktree's object store is
 * granted read-only, as with -r.
 */
static int run_place_paths(run_state *s, const char *cwd)
{
    rg_error err = RG_ERROR_INIT;
    size_t i;
    int rc;

    rc = fork_place_find(&s->place, cwd, s->o.cont_fork, s->o.cont, &s->home, &err);
    if (rc < 0) {
        say("%s", err.msg);
        return rc;
    }
    if (s->place.implicit)
        note("%s is a fork: continuing it (as --continue does), not forking it again",
             s->place.top);
    if (s->place.is_fork)
        return 0;
    if (s->place.narrowed)
        note("the work tree around %s starts where secrets are: forking %s only", cwd, cwd);
    else if (s->place.sub[0] != '\0')
        note("forking the work tree's top %s; the command starts in %s", s->place.top,
             s->place.sub);
    rc = fork_worktree_find(&s->wt, s->place.top, &err);
    if (rc <= 0) {
        if (rc < 0)
            say("%s", err.msg);
        return rc;
    }
    for (i = 0; s->reads[i] != NULL; i++)
        ;
    return run_grant_path(s, &s->reads[i], s->wt.objects, "the worktree's object store");
}

int run_resolve_paths(run_state *s)
{
    char cwd[PATH_MAX];
    const char *secret;
    size_t i;
    int rc = 0;

    /* One more read: a linked worktree's object store (run_place_paths). */
    s->reads = calloc(s->o.nreads + 2, sizeof(char *));
    s->writes = calloc(s->o.nwrites + 1, sizeof(char *));
    if (s->reads == NULL || s->writes == NULL)
        return -ENOMEM;
    for (i = 0; rc == 0 && i < s->o.nreads; i++)
        rc = run_grant_path(s, &s->reads[i], s->o.reads[i], "-r");
    for (i = 0; rc == 0 && i < s->o.nwrites; i++)
        rc = run_grant_path(s, &s->writes[i], s->o.writes[i], "-w");
    if (rc == 0)
        rc = run_resolve_binds(s);
    if (rc < 0)
        return rc;
    if (s->o.dir != NULL) {
        struct stat st;

        rc = run_grant_path(s, &s->workdir, s->o.dir, "-d");
        if (rc == 0 && (stat(s->workdir, &st) < 0 || !S_ISDIR(st.st_mode))) {
            say("-d %s: not a directory", s->workdir);
            rc = -ENOTDIR;
        }
        if (rc == 0) {
            rg_error err = RG_ERROR_INIT;

            rc = fork_dirgit_plan(&s->dirgit, s->workdir, (s->o.ns & SANDBOX_NS_MOUNT) != 0, &err);
            if (rc < 0)
                say("%s", err.msg);
        }
        return rc;
    }
    if (realpath(".", cwd) == NULL) {
        say("the working directory: %s", strerror(errno));
        return -errno;
    }
    rc = run_place_paths(s, cwd);
    if (rc < 0)
        return rc;
    secret = sandbox_home_conflict(&s->home, s->place.top);
    if (secret != NULL) {
        if (!s->o.force) {
            say("refusing to %s %s: it is, contains or lies inside %s, and the fork would "
                "copy that where the command can read it; --force forks anyway",
                s->place.is_fork ? "run in" : "fork", s->place.top, secret);
            return RG_E_DENIED;
        }
        say("warning: the fork of %s copies %s (--force)", s->place.top, secret);
    }
    if (strcmp(s->place.top, "/") == 0) {
        say("refusing to fork /: a fork lives beside its directory");
        return -EINVAL;
    }
    s->workdir = strdup(s->place.top); /* replaced by the fork's path once made */
    return s->workdir ? 0 : -ENOMEM;
}

/*
 * A TMPDIR name under /tmp that exists only inside the run: with the mount
 * namespace the run has a /tmp of its own (a tmpfs), so its TMPDIR can be a
 * tmpfs there too. That saves creating and removing a directory on the
 * host's disk each run (on ext4, allocating a directory inode scans for
 * recently deleted ones: the largest single cost of a run's start), and
 * there is nothing to remove or leave behind afterwards.
 */
static int run_tmpdir_inside(run_state *s)
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char rnd[6];
    char name[32];
    size_t i;

    if (getentropy(rnd, sizeof(rnd)) < 0)
        return -errno;
    memcpy(name, "/tmp/refgate-run.", 17);
    for (i = 0; i < sizeof(rnd); i++)
        name[17 + i] = abc[rnd[i] % (sizeof(abc) - 1)];
    name[17 + sizeof(rnd)] = '\0';
    s->tmpdir = strdup(name);
    if (s->tmpdir == NULL)
        return -ENOMEM;
    s->tmp_inside = 1;
    return 0;
}

/*
 * The private TMPDIR: under the caller's TMPDIR when usable, else /tmp or
 * /var/tmp; made 0700 by mkdtemp(), so no other user can reach it. Under
 * /tmp with the mount namespace, a 0700 tmpfs inside the run instead
 * (run_tmpdir_inside).
 */
int run_make_tmpdir(run_state *s)
{
    const char *cands[] = {getenv("TMPDIR"), "/tmp", "/var/tmp"};
    char parent[PATH_MAX], tmpl[PATH_MAX + 32];
    size_t i;

    for (i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
        if (cands[i] == NULL || cands[i][0] != '/' || realpath(cands[i], parent) == NULL)
            continue;
        /* --keep-tmp needs it on disk, to be kept. */
        if (strcmp(parent, "/tmp") == 0 && (s->o.ns & SANDBOX_NS_MOUNT) && !s->o.keep_tmp &&
            sandbox_home_conflict(&s->home, "/tmp/refgate-run.x") == NULL)
            return run_tmpdir_inside(s);
        snprintf(tmpl, sizeof(tmpl), "%s/refgate-run.XXXXXX", strcmp(parent, "/") ? parent : "");
        if (mkdtemp(tmpl) == NULL)
            continue;
        if (sandbox_home_conflict(&s->home, tmpl) != NULL) {
            rmdir(tmpl);
            continue;
        }
        s->tmpdir = strdup(tmpl);
        if (s->tmpdir == NULL) {
            rmdir(tmpl);
            return -ENOMEM;
        }
        return 0;
    }
    say("cannot create a private temporary directory in $TMPDIR, /tmp or /var/tmp");
    return -ENOENT;
}

int run_build_env(run_state *s)
{
    sandbox_env_opts eo = SANDBOX_ENV_OPTS_INIT;
    rg_error err = RG_ERROR_INIT;
    char *names = NULL;
    size_t i, len;
    int rc;

    eo.named = s->o.envs;
    eo.nnamed = s->o.nenvs;
    eo.home = s->home.env;
    eo.tmpdir = s->tmpdir;
    rc = sandbox_env_build(&s->env, environ, &eo, &err);
    if (rc < 0) {
        say("%s", err.msg);
        return rc;
    }
    for (i = 0; run_verbose && environ[i]; i++) {
        len = strcspn(environ[i], "=");
        if (sandbox_env_check(environ[i]) != SANDBOX_ENV_PASS)
            say("env: %.*s dropped: %s", (int)len, environ[i],
                sandbox_env_verdict_str(sandbox_env_check(environ[i])));
    }
    /* By name only, never a value. */
    if (!run_verbose && sandbox_env_dropped(&names, environ, s->env, 4096) == 0 && names)
        note("env: not passed: %s (-e NAME passes one; -v says why)", names);
    free(names);
    for (i = 0; i < s->o.nenvs; i++) {
        const char *a = s->o.envs[i];
        sandbox_env_verdict v;

        len = strcspn(a, "=");
        v = sandbox_env_classify(a, len);
        if (a[len] == '\0' && getenv(a) == NULL)
            say("warning: --env %s: not set here, so not passed", a);
        else if (v == SANDBOX_ENV_HOOK || v == SANDBOX_ENV_CREDENTIAL)
            note("passing %.*s as asked, although it %s", (int)len, a, sandbox_env_verdict_str(v));
    }
    return 0;
}

/*
 * With --net allow, the proxy for the command's HTTP clients: every usual
 * spelling (curl reads the lower-case ones, others the upper), and the
 * loopback (the gateway's path) kept off it.
 */
int run_proxy_env(run_state *s)
{
    static const char *const names[] = {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
                                        "http_proxy",  "NO_PROXY",    "no_proxy"};
    const size_t nnames = sizeof(names) / sizeof(names[0]);
    char **grown, url[64];
    size_t n = 0, i, j, len;

    if (s->o.net_mode != SANDBOX_NET_ALLOW)
        return 0;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", s->gw.proxy_port);
    while (s->env[n] != NULL)
        n++;
    grown = realloc(s->env, (n + nnames + 1) * sizeof(*grown));
    if (grown == NULL) {
        say("out of memory");
        return -ENOMEM;
    }
    s->env = grown;
    for (i = 0; i < nnames; i++) {
        len = strlen(names[i]);
        /* An --env of the same name gives way: the proxy is the only path. */
        for (j = 0; j < n; j++)
            if (strncmp(s->env[j], names[i], len) == 0 && s->env[j][len] == '=') {
                free(s->env[j]);
                s->env[j] = s->env[--n];
                j--;
            }
        if (asprintf(&s->env[n], "%s=%s", names[i], i < 4 ? url : "127.0.0.1,localhost,::1") < 0) {
            s->env[n] = NULL;
            say("out of memory");
            return -ENOMEM;
        }
        n++;
    }
    s->env[n] = NULL;
    return 0;
}

/* --exclude patterns checked and --exclude-ignored asked of git, before
 * anything is created. */
int run_plan_exclude(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    size_t i, n;
    int rc = 0;

    for (i = 0; rc == 0 && i < s->o.nexcludes; i++)
        rc = fork_exclude_add_pattern(&s->excl, s->o.excludes[i], &err);
    if (rc == 0 && s->o.exclude_ignored) {
        rc = fork_exclude_add_ignored(&n, &s->excl, s->workdir, &err);
        if (rc == -ENOENT) {
            note("--exclude-ignored: %s: %s; nothing excluded by it", s->workdir, err.msg);
            rc = 0;
        } else if (rc == 0) {
            verbose("--exclude-ignored: %zu ignored dependency director%s", n,
                    n == 1 ? "y" : "ies");
        }
    }
    if (rc < 0)
        say("%s", err.msg);
    return rc;
}

/*
 * Toolchains: refgate's own writable caches (unless --no-caches), the
 * toolchain configs that hold no credential, and what they imply for the
 * environment; a git config that signs is worth a warning, since signing
 * cannot work inside.
 */
int run_tools(run_state *s)
{
    const int mounted = (s->o.ns & SANDBOX_NS_MOUNT) != 0;
    rg_error err = RG_ERROR_INIT;
    char *root = NULL, *copies = NULL, *what = NULL;
    int rc = 0;

    if (s->o.cache_dir != NULL)
        rc = (root = strdup(s->o.cache_dir)) ? 0 : -ENOMEM;
    else
        rc = sandbox_caches_default_root(&root, s->home.path, environ, &err);
    /* Caches are writable inside: never in (or holding) a secret. */
    if (rc == 0 && sandbox_home_conflict(&s->home, root) != NULL && !s->o.force)
        rc = rg_error_set(&err, RG_E_DENIED, "the cache directory %s is, holds or lies in %s", root,
                          sandbox_home_conflict(&s->home, root));
    /* Filtered copies live beside the caches: refgate's, the caller's only. */
    if (rc == 0)
        rc = asprintf(&copies, "%s/conf", root) < 0 ? -ENOMEM : 0;
    if (rc == 0 && !s->o.no_caches)
        rc = sandbox_caches_prepare(&s->caches, root, s->home.path,
                                    sandbox_env_get(s->env, "CARGO_HOME"), &err);
    if (rc == 0)
        rc = sandbox_caches_seed_go(&s->caches, &s->home, s->env, mounted, &err);
    if (rc == 0)
        rc = sandbox_toolconf_scan(&s->conf, s->home.path, copies, &err);
    if (rc == 0)
        rc = sandbox_caches_env(&s->caches, &s->env, mounted, &err);
    if (rc == 0)
        rc = sandbox_toolconf_env(&s->conf, &s->env, mounted, &err);
    if (rc < 0) {
        say("refusing to run: %s", rc == -ENOMEM ? "out of memory" : err.msg);
        goto done;
    }
    if (s->caches.n > 0)
        verbose("tool caches: refgate's own, writable, in %s", s->caches.root);
    if (sandbox_toolconf_describe(&what, &s->conf) == 0 && what != NULL)
        note("toolchain configs: %s", what);
    if (s->conf.gpgsign)
        say("warning: your git config sets %s: signing fails inside (keys and agents are "
            "hidden); `git -c commit.gpgsign=false -c tag.gpgsign=false ...` there",
            s->conf.gpgsign == SANDBOX_TOOLCONF_GPG_COMMIT ? "commit.gpgsign"
            : s->conf.gpgsign == SANDBOX_TOOLCONF_GPG_TAG  ? "tag.gpgsign"
                                                           : "commit.gpgsign and tag.gpgsign");
done:
    free(what);
    free(copies);
    free(root);
    return rc;
}

/* Stat the home and the secrets once: a directory of the copy is compared with them. */
static int run_secret_tops(run_state *s)
{
    struct stat st;

    if (s->tops_state != 0)
        return s->tops_state;
    s->tops = calloc(s->home.nsecrets + 1, sizeof(*s->tops));
    if (s->tops == NULL)
        return s->tops_state = -1;
    if (stat(s->home.path, &st) == 0)
        s->tops[s->ntops++] = (sandbox_home_inode){st.st_dev, st.st_ino};
    for (size_t i = 0; i < s->home.nsecrets; i++)
        if (stat(s->home.secrets[i], &st) == 0)
            s->tops[s->ntops++] = (sandbox_home_inode){st.st_dev, st.st_ino};
    return s->tops_state = 1;
}

/*
 * Whether the copy must refuse this entry, a secret reached another way.
 * A directory (the source, or a mount point inside it, which is skipped
 * anyway) is compared with the home directory and the secrets themselves: a
 * stat each. Only a file with more than one link can be a hard link of a
 * secret, and only then is everything in the secret directories indexed
 * (once): walking them (a whole passwd home when $HOME is elsewhere, browser
 * profiles) cost more than the fork itself, and most trees hold no such file.
 * When the index cannot be built, the file is refused (fail closed).
 */
static int run_refuse_inode(void *ctx, const struct stat *st)
{
    run_state *s = ctx;
    rg_error err = RG_ERROR_INIT;
    int truncated = 0;

    if (!S_ISREG(st->st_mode)) {
        if (run_secret_tops(s) < 0)
            return 1; /* fail closed */
        for (size_t i = 0; i < s->ntops; i++)
            if (s->tops[i].dev == st->st_dev && s->tops[i].ino == st->st_ino)
                return 1;
        return 0;
    }
    if (s->inodes_state == 0) {
        s->inodes_state = sandbox_home_secret_inodes(&s->inodes, &s->ninodes, &truncated, &s->home,
                                                     RUN_SECRET_INODES_MAX, &err) < 0
                              ? -1
                              : 1;
        if (s->inodes_state < 0)
            say("%s", err.msg);
        else if (truncated)
            say("warning: more than %d entries in secret directories; hard links to the "
                "rest are not recognised",
                RUN_SECRET_INODES_MAX);
    }
    return s->inodes_state < 0 ||
           sandbox_home_inode_find(s->inodes, s->ninodes, st->st_dev, st->st_ino);
}

static void run_human_bytes(char *out, size_t len, unsigned long long b)
{
    if (b >= 1024ULL * 1024 * 1024)
        snprintf(out, len, "%.1f GiB", (double)b / (1024.0 * 1024 * 1024));
    else if (b >= 1024ULL * 1024)
        snprintf(out, len, "%.1f MiB", (double)b / (1024.0 * 1024));
    else
        snprintf(out, len, "%.1f KiB", (double)b / 1024.0);
}

/* Told by the copy for each entry on another mount, which it skips. */
static void run_said_mount(void *ctx, const char *path)
{
    run_state *s = ctx;

    s->mounts_skipped++;
    say("not copied into the fork: %s is on another mount (bind-mounted or mounted there); "
        "a fork never crosses a mount point",
        path);
}

/*
 * Where the command works inside (place.h): with the mount namespace the
 * fork is shown at the directory it was forked from (when that still
 * exists), else at its own path; -d DIR at DIR. The command starts in the
 * subdirectory it was started in.
 */
int run_place_fork(run_state *s)
{
    struct stat st;

    if (s->o.dir == NULL && (s->o.ns & SANDBOX_NS_MOUNT) && s->fork.src != NULL &&
        stat(s->fork.src, &st) == 0 && S_ISDIR(st.st_mode))
        s->shown = strdup(s->fork.src);
    else
        s->shown = strdup(s->workdir);
    if (s->shown == NULL)
        return -ENOMEM;
    if (s->o.dir == NULL && (s->o.ns & SANDBOX_NS_MOUNT) && strcmp(s->shown, s->workdir) == 0)
        note("%s no longer exists: the fork is shown at its own path", s->fork.src);
    if (asprintf(&s->cwd, "%s%s%s", s->shown, s->place.sub && s->place.sub[0] ? "/" : "",
                 s->place.sub ? s->place.sub : "") < 0) {
        s->cwd = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* --continue: the existing fork, its marker taken (refused while its run lives). */
static int run_open_fork(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    int rc;

    rc = fork_open(&s->fork, s->place.top, &err);
    /* Its exclusions again: the original shown read-only over each placeholder. */
    if (rc == 0)
        rc = fork_exclude_load(&s->excl, s->fork.path, &err);
    if (rc == 0 && s->excl.nexcluded > 0 && !(s->o.ns & SANDBOX_NS_MOUNT))
        rc = rg_error_set(&err, -EINVAL,
                          "%s was made with exclusions, shown read-only from the original only "
                          "with the mount namespace (drop --share=mount)",
                          s->fork.path);
    if (rc < 0) {
        say("%s", err.msg);
        return rc;
    }
    free(s->workdir);
    s->workdir = strdup(s->fork.path);
    if (s->workdir == NULL)
        return -ENOMEM;
    say("fork: %s (base %s), continued", s->fork.path, s->fork.base);
    return 0;
}

/* A linked worktree's fork and base get a .git of their own (worktree.h). */
static int run_fork_worktree(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    int rc;

    rc = fork_worktree_standalone(s->fork.base, &s->wt, &err);
    if (rc == 0)
        rc = fork_worktree_standalone(s->fork.path, &s->wt, &err);
    if (rc < 0)
        say("%s", err.msg);
    else
        note("%s is a linked worktree (or a submodule) of %s: the fork's .git is a repository of "
             "its own, reading %s as an alternate object store",
             s->place.top, s->wt.common, s->wt.objects);
    return rc;
}

int run_make_fork(run_state *s)
{
    fork_tree_opts to = FORK_TREE_OPTS_INIT;
    const fork_tree_stats *b = &s->fork.base_stats, *f = &s->fork.fork_stats;
    rg_error err = RG_ERROR_INIT;
    unsigned long cloned, copied;
    int rc, why;
    char size[32];

    if (s->place.is_fork)
        return run_open_fork(s);
    if (!s->o.force)
        to.refuse = run_refuse_inode;
    /* Under a user namespace a root caller's command is nobody outside and
     * owns the fork through an id-mapped mount: files must be root's. */
    to.keep_owner = geteuid() == 0 && !(s->o.ns & SANDBOX_NS_USER);
    to.mounted = run_said_mount;
    to.ctx = s;
    if (s->excl.npatterns + s->excl.npaths > 0) {
        to.exclude = fork_exclude_tree_cb;
        to.exclude_ctx = &s->excl;
    }
    rc = fork_create(&s->fork, s->workdir, &to, &err);
    if (rc < 0) {
        say("%s%s", err.msg,
            rc == RG_E_DENIED ? "; refusing to copy a secret into the fork (--force copies it)"
            : rc == -E2BIG    ? "; exclude their parent directory instead"
                              : "");
        return rc;
    }
    if (fork_exclude_record(&s->excl, s->fork.path, &err) < 0) {
        say("%s", err.msg);
        return -EIO;
    }
    free(s->workdir);
    s->workdir = strdup(s->fork.path);
    if (s->workdir == NULL)
        return -ENOMEM;
    say("fork: %s (base %s)", s->fork.path, s->fork.base);
    cloned = b->cloned + f->cloned;
    copied = b->copied + f->copied;
    why = f->clone_errno ? f->clone_errno : b->clone_errno;
    run_human_bytes(size, sizeof(size), f->bytes);
    if (copied == 0 && cloned > 0)
        note("%lu file%s cloned with FICLONE (reflink): %s, no data copied, in %.2f s", f->files,
             f->files == 1 ? "" : "s", size, s->fork.seconds);
    else if (cloned == 0 && copied > 0)
        note("%lu file%s copied with copy_file_range (no reflink here: %s): %s twice "
             "(base and fork), in %.2f s",
             f->files, f->files == 1 ? "" : "s", strerror(why), size, s->fork.seconds);
    else if (cloned > 0)
        note("%lu files: %lu cloned with FICLONE, %lu copied with copy_file_range (%s), "
             "in %.2f s",
             f->files, cloned, copied, strerror(why), s->fork.seconds);
    else
        note("no files to clone; %lu directories, in %.2f s", f->dirs, s->fork.seconds);
    /* Counted on the first copy: the base has no hard links left. */
    if (b->hardlinks > 0)
        note("note: %lu hard-linked names became independent files in the fork "
             "(hard links are not kept)",
             b->hardlinks);
    if (b->skipped > 0)
        note("note: %lu sockets or device nodes were not copied", b->skipped);
    if (b->excluded > 0) {
        run_human_bytes(size, sizeof(size), b->excluded_bytes);
        note("excluded (not copied, shown read-only from %s inside): %lu entr%s, %lu files, %s%s%s",
             s->fork.src, b->excluded, b->excluded == 1 ? "y" : "ies", b->excluded_files, size,
             b->excluded == 1 ? ": " : "", b->excluded == 1 ? s->excl.excluded[0] : "");
        for (size_t i = 0; b->excluded > 1 && i < s->excl.nexcluded; i++)
            verbose("excluded: %s", s->excl.excluded[i]);
    }
    return s->wt.common != NULL ? run_fork_worktree(s) : 0;
}

/* The fork's guardian (guard.h), before any thread: refused without one. */
int run_guard(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    int rc;

    rc = fork_guard_start(&s->guard, s->fork.path, s->fork.base, s->fork.lock_fd, &err);
    if (rc < 0)
        say("refusing to run: %s", err.msg);
    return rc;
}
