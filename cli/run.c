/*
 * `refgate run`: one command that launches a command (an agent) under
 * refgate-run with a run token for the repositories of the current
 * directory, its git pushes rewritten to the gateway, and the token revoked
 * when the command ends.
 *
 * The token comes from the running gateway over its control socket
 * (gateway/control.h), since the developer usually cannot read state_dir.
 * It reaches the command only through the run's environment
 * (REFGATE_RUN_TOKEN, read by a credential helper that git runs): never in
 * a URL, argv or a file. Git is pointed at the gateway only through
 * GIT_CONFIG_COUNT/KEY_n/VALUE_n in that environment, so nothing is written
 * to any git config. The remotes are read from .git/config with libgit2,
 * which runs nothing from it.
 *
 * Exit status: the command's (a command killed by a signal ends refgate
 * run with the same signal); 1 when the run could not be set up; 2 for a
 * usage error or when no gateway answers on the control socket.
 */
#include "cli/cli.h"
#include "cli/profile.h"
#include "cli/runplace.h"
#include "cli/run_int.h"
#include "config/config.h"
#include "runner/options.h"
#include "tokens/token.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_SETUP     1
#define EXIT_USAGE     2
#define DEFAULT_CONFIG "/etc/refgate/refgate.json"
/* Forks (DIR.N) remembered before the run, to tell which one it made. */
#define FORKS_MAX 4096
/* refgate-run options passed on (words), at most. */
#define RUN_FORK_OPTS_MAX 64

/* ------------------------------------------------------------------------ */
/* Signals                                                                  */
/* ------------------------------------------------------------------------ */

static volatile sig_atomic_t run_child_pid;
static volatile sig_atomic_t run_pending_signal;

/*
 * Forward a signal someone sent to refgate run (kill, a supervisor) to the
 * runner, which passes it on to CMD. A signal the terminal generated
 * (Ctrl-C: si_code SI_KERNEL) already reached the runner, which shares our
 * process group: forwarding it too would deliver it twice.
 */
static void run_on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    run_pending_signal = sig;
    if (run_child_pid > 0 && si != NULL && si->si_code <= 0)
        kill((pid_t)run_child_pid, sig);
}

static void run_signals_install(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    size_t i;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = run_on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
}

/* ------------------------------------------------------------------------ */
/* The runner                                                               */
/* ------------------------------------------------------------------------ */

/* $REFGATE_RUN, else refgate-run beside this program; into out. */
static int run_find_runner(char *out, size_t cap)
{
    const char *env = getenv("REFGATE_RUN");
    char self[PATH_MAX];
    ssize_t n;
    char *slash;

    if (env != NULL && *env != '\0') {
        snprintf(out, cap, "%s", env);
        return 0;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    snprintf(out, cap, "%s/refgate-run", self);
    if (access(out, X_OK) == 0)
        return 0;
    /* A build tree keeps the two programs in sibling directories. */
    snprintf(out, cap, "%s/../runner/refgate-run", self);
    return access(out, X_OK) == 0 ? 0 : -1;
}

/*
 * What a run must not read: the gateway's state_dir (the key that mints
 * tokens), the config, every file it names (upstream credentials), the
 * local upstream roots (repositories the token does not name) and the
 * control socket, which serves the run's own user (a run that reached it
 * could mint itself tokens and approve its own pushes), each passed to
 * refgate-run as `--hide PATH`.
 */
static int run_hide_args(const char **args, size_t *nargs, size_t cap, const config_model *cfg)
{
    size_t i;

#define HIDE(p)                                                                                    \
    do {                                                                                           \
        if ((p) != NULL) {                                                                         \
            if (*nargs + 2 > cap)                                                                  \
                return -1;                                                                         \
            args[(*nargs)++] = "--hide";                                                           \
            args[(*nargs)++] = (p);                                                                \
        }                                                                                          \
    } while (0)
    HIDE(cfg->state_dir);
    HIDE(cfg->path);
    HIDE(cfg->control.socket);
    for (i = 0; i < cfg->nupstreams; i++) {
        const config_upstream *up = &cfg->upstreams[i];

        HIDE(up->root);
        HIDE(up->credentials.token_file);
        HIDE(up->credentials.private_key_file);
        HIDE(up->read_credentials.token_file);
        HIDE(up->read_credentials.private_key_file);
    }
#undef HIDE
    return 0;
}

/* The forks (DIR.N) of the current directory that exist now, into ns (sorted not needed). */
static size_t run_list_forks(unsigned *ns, size_t cap, const char *cwd)
{
    char parent[PATH_MAX];
    const char *base;
    size_t blen, n = 0;
    struct dirent *d;
    DIR *dir;

    snprintf(parent, sizeof(parent), "%s", cwd);
    base = strrchr(cwd, '/');
    if (base == NULL || base[1] == '\0')
        return 0;
    base++;
    blen = strlen(base);
    parent[base - cwd] = '\0';
    dir = opendir(parent);
    if (dir == NULL)
        return 0;
    /* Bounded: at most `cap` forks are remembered. */
    while (n < cap && (d = readdir(dir)) != NULL) {
        char *end;
        unsigned long v;

        if (strncmp(d->d_name, base, blen) != 0 || d->d_name[blen] != '.' ||
            d->d_name[blen + 1] < '0' || d->d_name[blen + 1] > '9')
            continue;
        v = strtoul(d->d_name + blen + 1, &end, 10);
        if (*end == '\0' && v <= UINT_MAX)
            ns[n++] = (unsigned)v;
    }
    closedir(dir);
    return n;
}

/* ------------------------------------------------------------------------ */
/* The agent profile                                                        */
/* ------------------------------------------------------------------------ */

/* What a profile adds to a run: the per-run copy of its config, the allow-list. */
typedef struct run_profile_state {
    char dir[PATH_MAX];               /* the copy; "" when none was made */
    char setenv[PATH_MAX + 64];       /* CONFIG_ENV=..., for -e, when needed */
    char bind_dir[2 * PATH_MAX + 8];  /* COPY/dir:REAL, for --bind */
    char bind_file[2 * PATH_MAX + 8]; /* COPY/file:REAL, for --bind */
    char allow[4096];                 /* allow=HOST:PORT,... for --net */
} run_profile_state;

static const char *run_home(void)
{
    const char *home = getenv("HOME");
    struct passwd *pw;

    if (home != NULL && home[0] == '/')
        return home;
    pw = getpwuid(getuid());
    return pw != NULL ? pw->pw_dir : NULL;
}

/*
 * The profile's part of the runner's arguments: `-e NAME` for each of its
 * variables set here (named, so the API key's value stays out of argv), the
 * copy of its config (made now, in $XDG_STATE_HOME/refgate/runs/, removed
 * by the caller) writable with -w and pointed at by its variable, and
 * `--net allow=...` with its hosts, which refgate-run serves beside the
 * gateway. Says on stderr what the run holds: names, never values.
 */
static int run_profile_args(run_profile_state *ps, const char **args, size_t *nargs, size_t cap,
                            char **owned, size_t *nowned, const cli_profile *p)
{
    extern char **environ;
    char base[PATH_MAX], src_dir[PATH_MAX], src_file[PATH_MAX], hostport[300];
    const char *home = run_home(), *state = getenv("XDG_STATE_HOME"), *v;
    rg_error err = RG_ERROR_INIT;
    size_t i, held = 0, len;
    int rc = -1;

    ps->dir[0] = ps->setenv[0] = '\0';
    fprintf(stderr, "refgate run: profile %s: the run holds", p->name);
    for (i = 0; environ[i]; i++) {
        char *name;

        if (!cli_profile_env_match(p, environ[i]))
            continue;
        if (*nargs + 2 > cap)
            goto done;
        name =
            run_own(owned, nowned, "%.*s", (int)(strchr(environ[i], '=') - environ[i]), environ[i]);
        if (name == NULL)
            goto done;
        args[(*nargs)++] = "-e";
        args[(*nargs)++] = name;
        fprintf(stderr, "%s %s", held++ ? "," : "", name);
    }
    fprintf(stderr, "%s\n", held ? " (from your environment)" : " none of its variables");

    len = (size_t)snprintf(ps->allow, sizeof(ps->allow), "allow=");
    for (i = 0; p->hosts[i] && len < sizeof(ps->allow); i++)
        len += (size_t)snprintf(ps->allow + len, sizeof(ps->allow) - len, "%s%s", i ? "," : "",
                                p->hosts[i]);
    v = p->base_url_env ? getenv(p->base_url_env) : NULL;
    if (v != NULL && *v != '\0') {
        if (cli_profile_url_host(hostport, sizeof(hostport), v) == 0)
            len += (size_t)snprintf(ps->allow + len,
                                    len < sizeof(ps->allow) ? sizeof(ps->allow) - len : 0, ",%s",
                                    hostport);
        else
            fprintf(stderr,
                    "refgate run: profile %s: %s is not an https://HOST[:PORT] URL; only "
                    "HTTPS goes through the run's proxy, so it is not reachable\n",
                    p->name, p->base_url_env);
    }
    if (len >= sizeof(ps->allow)) {
        fprintf(stderr, "refgate run: profile %s: too many hosts\n", p->name);
        goto done;
    }

    if (home == NULL) {
        fprintf(stderr, "refgate run: profile %s: no home directory to find its config in\n",
                p->name);
        goto done;
    }
    if (state != NULL && state[0] == '/')
        snprintf(base, sizeof(base), "%s/refgate/runs", state);
    else
        snprintf(base, sizeof(base), "%s/.local/state/refgate/runs", home);
    if (rg_fs_mkdir_p(base, 0700, &err) < 0) {
        fprintf(stderr, "refgate run: %s\n", err.msg);
        goto done;
    }
    if ((size_t)snprintf(ps->dir, sizeof(ps->dir), "%s/%s.XXXXXX", base, p->name) >=
            sizeof(ps->dir) ||
        mkdtemp(ps->dir) == NULL) {
        fprintf(stderr, "refgate run: cannot make a directory in %s: %s\n", base, strerror(errno));
        ps->dir[0] = '\0';
        goto done;
    }
    /* The agent's own pointer at its config wins over the default place:
     * that is where its config is (and, for Claude Code, its .claude.json). */
    v = getenv(p->config_env);
    if (v != NULL && v[0] == '/') {
        snprintf(src_dir, sizeof(src_dir), "%s", v);
        src_file[0] = '\0';
    } else {
        snprintf(src_dir, sizeof(src_dir), "%s/%s", home, p->config_dir);
        snprintf(src_file, sizeof(src_file), "%s/%s", home, p->config_file ? p->config_file : "");
    }
    if (cli_profile_copy_config(ps->dir, p, src_dir,
                                src_file[0] && p->config_file ? src_file : NULL, &err) < 0) {
        fprintf(stderr, "refgate run: profile %s: copying its config: %s\n", p->name, err.msg);
        goto done;
    }
    if (*nargs + 8 > cap)
        goto done;
    /* The copy at the real paths, where the agent looks and where paths it
     * recorded (projects by their directory) still mean the same. A real
     * path refgate-run cannot make a mount point for (outside the home
     * directory, not existing) gets the variable pointed at the copy. */
    len = strlen(home);
    if (access(src_dir, F_OK) == 0 || (!strncmp(src_dir, home, len) && src_dir[len] == '/')) {
        snprintf(ps->bind_dir, sizeof(ps->bind_dir), "%s/%s:%s", ps->dir, CLI_PROFILE_COPY_DIR,
                 src_dir);
        args[(*nargs)++] = "--bind";
        args[(*nargs)++] = ps->bind_dir;
        /* The agent found its config through its variable: it still must. */
        if (v != NULL && v[0] == '/')
            snprintf(ps->setenv, sizeof(ps->setenv), "%s=%s", p->config_env, src_dir);
    } else {
        snprintf(ps->setenv, sizeof(ps->setenv), "%s=%s/%s", p->config_env, ps->dir,
                 CLI_PROFILE_COPY_DIR);
        snprintf(ps->bind_dir, sizeof(ps->bind_dir), "%s/%s", ps->dir, CLI_PROFILE_COPY_DIR);
        args[(*nargs)++] = "-w";
        args[(*nargs)++] = ps->bind_dir;
    }
    if (src_file[0] && p->config_file) {
        snprintf(ps->bind_file, sizeof(ps->bind_file), "%s/%s:%s", ps->dir, CLI_PROFILE_COPY_FILE,
                 src_file);
        args[(*nargs)++] = "--bind";
        args[(*nargs)++] = ps->bind_file;
    }
    if (ps->setenv[0]) {
        args[(*nargs)++] = "-e";
        args[(*nargs)++] = ps->setenv;
    }
    args[(*nargs)++] = "--net";
    args[(*nargs)++] = ps->allow;
    fprintf(stderr,
            "refgate run: profile %s: reaches %s besides the gateway; its config is a copy of "
            "%s%s%s%s (made in %s, removed when the run ends)\n",
            p->name, ps->allow + 6, src_dir, src_file[0] && p->config_file ? " and " : "",
            src_file[0] && p->config_file ? src_file : "",
            ps->setenv[0] && strstr(ps->setenv, ps->dir) ? ", found through the variable"
                                                         : ", shown at the same paths",
            ps->dir);
    rc = 0;
done:
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */
/* ------------------------------------------------------------------------ */

static int run_revoke(const char *sock, const char *token)
{
    rg_error err = RG_ERROR_INIT;
    json_t *req = json_pack("{s:s, s:s}", "op", "revoke", "token", token), *ans = NULL;
    int rc = -1;

    if (req != NULL && cli_control_call(&ans, sock, req, &err) == 0 &&
        json_is_true(json_object_get(ans, "ok")))
        rc = 0;
    else
        fprintf(stderr, "refgate run: could not revoke the run token (%s); it expires by itself\n",
                ans == NULL ? err.msg
                : json_is_string(json_object_get(ans, "error"))
                    ? json_string_value(json_object_get(ans, "error"))
                    : "no reason given");
    json_decref(req);
    json_decref(ans);
    return rc;
}

/*
 * Run the command with the minted token: the git environment, the runner's
 * arguments, fork, exec, wait (forwarding signals), then find the fork the
 * runner made (*fork_n: its N in DIR.N, -1 when none is seen). *wst gets the runner's wait status
 * (a signal that came before it started counts as killing it). Returns the exit status.
 */
/* What run_with_token runs with. */
typedef struct run_call {
    const config_model *cfg;
    const unsigned char *used; /* used[i]: the run's repositories are on cfg's upstream i */
    const char *const *repos;
    size_t nrepos;
    const char *token;
    const json_t *ans;  /* the gateway's answer to the mint (its run name, its URL) */
    const char *gw_arg; /* --gateway-url, or NULL */
    const char *runner; /* refgate-run's path */
    const cli_runplace *pl;
    char **cmd; /* NULL-terminated */
    const cli_profile *prof;
    const char *const *fork_opts; /* refgate-run's options passed on, NULL-terminated */
    int quiet;
} run_call;

static int run_with_token(int *wst, long *fork_n, const run_call *c)
{
    const config_model *cfg = c->cfg;
    const char *const *repos = c->repos, *runner = c->runner;
    const cli_runplace *pl = c->pl;
    char **cmd = c->cmd;
    size_t nrepos = c->nrepos;
    extern char **environ;
    const char *value, **args = NULL;
    char **owned = NULL, **envp = NULL, *gw = NULL;
    size_t ncmd = 0, nargs = 0, nowned = 0, nenv = 0, cap, i, j, nbefore = 0, nafter;
    run_profile_state ps;
    unsigned before[FORKS_MAX], after[FORKS_MAX];
    run_env genv = {0};
    int status = EXIT_SETUP;
    pid_t pid;

    *wst = 0;
    *fork_n = -1;
    ps.dir[0] = '\0';
    /* The URL the run reaches the gateway at: said on the command line, in
     * the config, or by the gateway itself. */
    value = c->gw_arg          ? c->gw_arg
            : cfg->control.url ? cfg->control.url
                               : json_string_value(json_object_get(c->ans, "url"));
    if (value == NULL || strncmp(value, "http://", 7) != 0) {
        fprintf(stderr, "refgate run: the gateway's URL is unknown: set --gateway-url or "
                        "control.url\n");
        goto done;
    }
    gw = strdup(value);
    if (gw == NULL)
        goto done;
    while (strlen(gw) > 7 && gw[strlen(gw) - 1] == '/')
        gw[strlen(gw) - 1] = '\0';
    if (!c->quiet) {
        fprintf(stderr, "refgate run: run %s, token for",
                json_string_value(json_object_get(c->ans, "run")));
        for (i = 0; i < nrepos; i++)
            fprintf(stderr, " %s", repos[i]);
        fprintf(stderr, " through %s\n", gw);
    }

    if (run_git_env(&genv, cfg, c->used, gw) < 0) {
        fprintf(stderr, "refgate run: too many git settings for the run\n");
        goto done;
    }
    while (cmd[ncmd] != NULL)
        ncmd++;
    while (environ[nenv] != NULL)
        nenv++;
    /* runner, 2 + 2 + 4 per git setting, 2 per hidden path, 2 per profile
     * variable (at most every variable) and 6 for its copy and hosts, "--",
     * CMD, NULL. */
    cap = 4 * genv.n + 64 + 12 * cfg->nupstreams + 2 * nenv + RUN_FORK_OPTS_MAX;
    args = calloc(cap + ncmd, sizeof(*args));
    owned = calloc(4 * genv.n + 4 + nenv, sizeof(*owned));
    if (args == NULL || owned == NULL)
        goto done;
    args[nargs++] = runner;
    if (run_runner_env(&envp, args, &nargs, owned, &nowned, &genv, c->token) < 0)
        goto done;
    if (run_hide_args(args, &nargs, cap - 4, cfg) < 0)
        goto done;
    if (c->prof != NULL &&
        run_profile_args(&ps, args, &nargs, cap - 4, owned, &nowned, c->prof) < 0)
        goto done;
    /* The run's only network: the gateway, at the URL its git uses. */
    args[nargs++] = "--gateway";
    args[nargs++] = gw;
    if (pl->fork[0] != '\0') {
        args[nargs++] = "--continue";
        args[nargs++] = pl->fork;
    }
    for (i = 0; c->fork_opts[i] != NULL; i++)
        args[nargs++] = c->fork_opts[i];
    args[nargs++] = "--";
    for (i = 0; i < ncmd; i++)
        args[nargs++] = cmd[i];
    args[nargs] = NULL;

    nbefore = pl->fork[0] ? 0 : run_list_forks(before, FORKS_MAX, pl->top);
    if (run_pending_signal) {
        /* As if the command had been killed by it before it started. */
        *wst = run_pending_signal;
        status = 128 + run_pending_signal;
        goto done;
    }
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "refgate run: fork: %s\n", strerror(errno));
        goto done;
    }
    if (pid == 0) {
        execve(runner, (char *const *)args, envp);
        fprintf(stderr, "refgate run: cannot run %s: %s\n", runner, strerror(errno));
        _exit(126);
    }
    run_child_pid = pid;
    /* A signal that came between the mint and now was not forwarded. */
    if (run_pending_signal)
        kill(pid, run_pending_signal);
    /* Bounded: ends when the runner does; signals are forwarded meanwhile. */
    while (waitpid(pid, wst, 0) < 0 && errno == EINTR)
        ;
    run_child_pid = 0;
    status = WIFEXITED(*wst) ? WEXITSTATUS(*wst) : 128 + WTERMSIG(*wst);
    nafter = pl->fork[0] ? 0 : run_list_forks(after, FORKS_MAX, pl->top);
    for (i = 0; i < nafter; i++) {
        for (j = 0; j < nbefore && before[j] != after[i]; j++)
            ;
        if (j == nbefore) {
            *fork_n = (long)after[i];
            break;
        }
    }
done:
    if (ps.dir[0] != '\0') {
        rg_error err = RG_ERROR_INIT;

        /* The copy holds the agent's login: it does not outlive the run. */
        if (rg_fs_remove_tree(ps.dir, 0, &err) < 0)
            fprintf(stderr, "refgate run: could not remove %s: %s\n", ps.dir, err.msg);
    }
    for (i = 0; i < nowned; i++) {
        explicit_bzero(owned[i], strlen(owned[i]));
        free(owned[i]);
    }
    free(owned);
    free(envp);
    free(args);
    free(gw);
    run_env_free(&genv);
    return status;
}

/*
 * One of refgate-run's options at argv[*argi], added to opts (by its long
 * name, with its value) when refgate run passes it on (runner/options.h):
 * 1. 0 when it is none refgate run offers, -1 (said) when it is refused,
 * lacks its value or would pass the cap.
 */
static int run_pass_option(const char **opts, size_t *n, int *quiet, int argc, char **argv,
                           int *argi)
{
    const char *arg = argv[*argi], *value = NULL;
    const runner_option *o;
    char name[64];
    size_t len;

    o = runner_option_lookup(arg, &len);
    if (o == NULL || o->run == RUNNER_RUN_NOT_OFFERED)
        return 0;
    if (o->run != RUNNER_RUN_PASSED) {
        fprintf(stderr,
                "refgate run: %.*s is refgate run's to decide (%s); refgate-run itself takes it\n",
                (int)len, arg, o->why);
        return -1;
    }
    if (o->arg == RUNNER_ARG_NONE) {
        if (arg[len] != '\0')
            return 0;
    } else {
        snprintf(name, sizeof(name), "%.*s", (int)len, arg);
        if (cli_opt_value(&value, argc, argv, argi, name, "refgate run") < 0)
            return -1;
    }
    if (*n + 2 > RUN_FORK_OPTS_MAX) {
        fprintf(stderr, "refgate run: too many refgate-run options\n");
        return -1;
    }
    opts[(*n)++] = o->name;
    if (value != NULL)
        opts[(*n)++] = value;
    if (o->id == 'q')
        *quiet = 1;
    return 1;
}

/* refgate run's own options (refgate(1) says what they do). */
typedef struct run_opts {
    const char *config, *ttl, *run, *gateway_url, *profile;
    cli_opt_list repos;
    int cont;              /* --continue */
    const char *cont_fork; /* its FORK, or NULL */
    const char *fork_opts[RUN_FORK_OPTS_MAX + 1];
    size_t nfork_opts;
    int quiet;
} run_opts;

static const cli_opt run_opts_table[] = {
    {"--config", CLI_OPT_VALUE, offsetof(run_opts, config), "FILE"},
    {"--repo", CLI_OPT_LIST, offsetof(run_opts, repos), "HOST/PATH"},
    {"--ttl", CLI_OPT_VALUE, offsetof(run_opts, ttl), "DURATION"},
    {"--run", CLI_OPT_VALUE, offsetof(run_opts, run), "NAME"},
    {"--gateway-url", CLI_OPT_VALUE, offsetof(run_opts, gateway_url), "URL"},
    {"--profile", CLI_OPT_VALUE, offsetof(run_opts, profile), "NAME"},
};

/*
 * What the table cannot say: `--continue [FORK]`, whose value is optional
 * (the next argument when it is a directory), and refgate-run's options
 * passed on.
 */
static int run_other_option(void *dst, int argc, char **argv, int *argi)
{
    run_opts *o = dst;
    struct stat st;

    if (strcmp(argv[*argi], "--continue") != 0 && strncmp(argv[*argi], "--continue=", 11) != 0)
        return run_pass_option(o->fork_opts, &o->nfork_opts, &o->quiet, argc, argv, argi);
    o->cont = 1;
    if (argv[*argi][10] == '=')
        o->cont_fork = argv[*argi] + 11;
    else if (*argi + 1 < argc && argv[*argi + 1][0] != '-' && stat(argv[*argi + 1], &st) == 0 &&
             S_ISDIR(st.st_mode))
        o->cont_fork = argv[++*argi];
    return 1;
}

const cli_cmd cli_cmd_run = {"run", CLI_OPTS(run_opts_table), CLI_CMD_STOP, run_other_option};

/* The options checked on their own: -1 to go on, else the exit status (said). */
static int run_check_opts(const run_opts *o, const cli_args *args, const cli_profile **prof)
{
    rg_error err = RG_ERROR_INIT;

    if (args->rest == NULL)
        return cli_usage_error(&cli_cmd_run, "no command given");
    if (o->repos.n > TOKENS_REPOS_MAX)
        return cli_usage_error(&cli_cmd_run, "at most %d --repo options", TOKENS_REPOS_MAX);
    if (o->ttl != NULL && rg_duration_parse(o->ttl) <= 0) {
        fprintf(stderr, "refgate run: --ttl %s: expected a duration such as 3600, 30m or 2h\n",
                o->ttl);
        return EXIT_USAGE;
    }
    if (cli_profile_select(prof, o->profile, args->rest[0], &err) < 0) {
        fprintf(stderr, "refgate run: %s\n", err.msg);
        return EXIT_USAGE;
    }
    if (o->gateway_url != NULL && strncmp(o->gateway_url, "http://", 7) != 0) {
        fprintf(stderr, "refgate run: --gateway-url %s: expected http://HOST:PORT\n",
                o->gateway_url);
        return EXIT_USAGE;
    }
    return -1;
}

/*
 * The repositories the token is for: the --repo ones, each on an upstream
 * of cfg, else those the remotes of the git config at git_config name.
 * used[i] is set for each upstream i they are on. 0, or the exit status (said).
 */
static int run_pick_repos(char **repos, size_t *nrepos, unsigned char *used,
                          const config_model *cfg, const cli_opt_list *args, const char *git_config)
{
    size_t i;

    if (args->n == 0)
        return run_infer_repos(repos, nrepos, used, cfg, git_config) < 0 ? EXIT_USAGE : 0;
    for (i = 0; i < args->n; i++) {
        const char *slash = strchr(args->v[i], '/');
        const config_upstream *up = NULL;
        char host[128];

        if (slash != NULL && (size_t)(slash - args->v[i]) < sizeof(host)) {
            memcpy(host, args->v[i], (size_t)(slash - args->v[i]));
            host[slash - args->v[i]] = '\0';
            up = config_find_upstream(cfg, host);
        }
        if (up == NULL) {
            fprintf(stderr,
                    "refgate run: --repo %s: expected HOST/PATH with HOST an upstream of %s\n",
                    args->v[i], cfg->path);
            return EXIT_USAGE;
        }
        used[up - cfg->upstreams] = 1;
        repos[*nrepos] = strdup(args->v[i]);
        if (repos[(*nrepos)++] == NULL)
            return EXIT_SETUP;
    }
    return 0;
}

/*
 * Ask the gateway for the token: *out gets it (free with
 * tokens_secret_free), *ans the gateway's answer. 0, or the exit status (said).
 */
static int run_mint(char **out, json_t **ans, const config_model *cfg, const run_opts *o,
                    char *const *repos, size_t nrepos)
{
    rg_error err = RG_ERROR_INIT;
    json_t *req;
    size_t i;
    int status = EXIT_SETUP;

    *out = NULL;
    /* Without --ttl the gateway picks: 2h, or its control.max_ttl when shorter. */
    req = json_pack("{s:s, s:[], s:s*, s:s*}", "op", "mint", "repos", "ttl", o->ttl, "run", o->run);
    for (i = 0; req != NULL && i < nrepos; i++)
        json_array_append_new(json_object_get(req, "repos"), json_string(repos[i]));
    if (req == NULL)
        return EXIT_SETUP;
    if (cli_control_call(ans, cfg->control.socket, req, &err) < 0) {
        if (err.code == -ENOENT || err.code == -ECONNREFUSED) {
            fprintf(stderr,
                    "refgate run: no gateway is running for %s (nothing answers on %s).\n"
                    "Start one with: refgate serve --config %s\n",
                    cfg->path, cfg->control.socket, cfg->path);
            status = EXIT_USAGE;
        } else {
            fprintf(stderr, "refgate run: %s\n", err.msg);
        }
        goto done;
    }
    if (!json_is_true(json_object_get(*ans, "ok")) ||
        !json_is_string(json_object_get(*ans, "token"))) {
        const char *why = json_string_value(json_object_get(*ans, "error"));

        fprintf(stderr, "refgate run: the gateway refused to mint a token: %s\n",
                why ? why : "(no reason given)");
        goto done;
    }
    *out = strdup(json_string_value(json_object_get(*ans, "token")));
    if (*out == NULL) {
        /* Cannot even keep it to revoke: its TTL bounds it. */
        fprintf(stderr, "refgate run: out of memory\n");
        goto done;
    }
    status = 0;
done:
    json_decref(req);
    return status;
}

/* After the run: where its fork is, and the commands that review and continue it. */
static void run_say_fork(const cli_runplace *pl)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    /* By its absolute path: refgate may not be on PATH (a build tree, /opt). */
    self[n > 0 ? n : 0] = '\0';
    fprintf(stderr,
            "refgate run: the fork: %s\n"
            "refgate run: review it with: %s diff --stat %s\n"
            "refgate run: run in it again with: %s run --continue %s -- CMD\n",
            pl->fork, self[0] ? self : "refgate", pl->fork, self[0] ? self : "refgate", pl->fork);
}

int cli_run(int argc, char **argv)
{
    const char *config_path;
    const cli_profile *prof = NULL;
    char *repos[TOKENS_REPOS_MAX] = {0}, *token = NULL, runner[PATH_MAX], cwd[PATH_MAX];
    run_opts o = {0};
    cli_args args;
    cli_runplace pl;
    run_call call;
    size_t nrepos = 0, i;
    unsigned char used[256] = {0};
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *ans = NULL;
    int status = EXIT_SETUP, rc, wst = 0;
    long fork_n = -1;

    rc = cli_opts_parse(&cli_cmd_run, &o, &args, argc, argv);
    if (rc != 0)
        return cli_opts_exit(rc);
    if ((rc = run_check_opts(&o, &args, &prof)) >= 0)
        return rc;
    config_path = o.config;
    if (config_path == NULL)
        config_path = getenv("REFGATE_CONFIG");
    if (config_path == NULL || *config_path == '\0')
        config_path = DEFAULT_CONFIG;
    if (config_load(&cfg, config_path, &err) < 0) {
        fprintf(stderr, "refgate run: %s\n", err.msg);
        status = EXIT_USAGE;
        goto done;
    }
    if (cfg->control.socket == NULL) {
        fprintf(stderr,
                "refgate run: %s has no control socket (<state_dir>/control.sock would be too "
                "long a path); set control.socket there\n",
                cfg->path);
        goto done;
    }
    if (cfg->nupstreams > sizeof(used)) {
        fprintf(stderr, "refgate run: more than %zu upstreams\n", sizeof(used));
        goto done;
    }
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        fprintf(stderr, "refgate run: cannot find the current directory: %s\n", strerror(errno));
        goto done;
    }
    git_libgit2_init();
    if (cli_runplace_find(&pl, cwd, o.cont, o.cont_fork, &err) < 0) {
        fprintf(stderr, "refgate run: %s\n", err.msg);
        status = EXIT_USAGE;
        goto done;
    }
    if (pl.implicit && !o.quiet)
        fprintf(stderr, "refgate run: %s is a fork: the run continues it\n", pl.fork);
    if (run_find_runner(runner, sizeof(runner)) < 0) {
        fprintf(stderr, "refgate run: cannot find refgate-run beside refgate; set REFGATE_RUN\n");
        goto done;
    }
    if ((rc = run_pick_repos(repos, &nrepos, used, cfg, &o.repos, pl.config)) != 0) {
        status = rc;
        goto done;
    }
    /* Before the token exists: a signal now ends the run before it starts. */
    run_signals_install();
    if ((rc = run_mint(&token, &ans, cfg, &o, repos, nrepos)) != 0) {
        status = rc;
        goto done;
    }
    call = (run_call){.cfg = cfg,
                      .used = used,
                      .repos = (const char *const *)repos,
                      .nrepos = nrepos,
                      .token = token,
                      .ans = ans,
                      .gw_arg = o.gateway_url,
                      .runner = runner,
                      .pl = &pl,
                      .cmd = args.rest,
                      .prof = prof,
                      .fork_opts = o.fork_opts,
                      .quiet = o.quiet};
    status = run_with_token(&wst, &fork_n, &call);
    if (run_revoke(cfg->control.socket, token) == 0 && !o.quiet)
        fprintf(stderr, "refgate run: the run token is revoked\n");
    if (fork_n >= 0)
        snprintf(pl.fork, sizeof(pl.fork), "%s.%ld", pl.top, fork_n);
    if (pl.fork[0] != '\0' && !o.quiet)
        run_say_fork(&pl);
    if (WIFSIGNALED(wst)) {
        /* End the way the command ended, as a shell expects. */
        json_decref(ans);
        ans = NULL;
        tokens_secret_free(token);
        token = NULL;
        signal(WTERMSIG(wst), SIG_DFL);
        raise(WTERMSIG(wst));
    }
done:
    json_decref(ans);
    tokens_secret_free(token);
    for (i = 0; i < nrepos; i++)
        free(repos[i]);
    config_free(cfg);
    return status;
}
