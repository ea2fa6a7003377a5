/*
 * refgate-run's private header: the options as parsed (opts.c), the run's
 * state, the messages (main.c) and the steps the program takes in order,
 * each in the file of its stage: opts.c (help and parsing), plan.c (what
 * the run will do, decided from the options: paths, TMPDIR, environment,
 * tools, the fork), mounts.c (namespaces, the mounts it plans and the
 * Landlock ruleset over the same paths) and main.c (main and the
 * callbacks sandbox_proc_spawn calls).
 */
#ifndef REFGATE_RUNNER_RUNNER_H
#define REFGATE_RUNNER_RUNNER_H

#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <net/if.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "fork/dirgit.h"
#include "sandbox/caches.h"
#include "sandbox/env.h"
#include "fork/exclude.h"
#include "fork/fork.h"
#include "fork/gitconf.h"
#include "fork/guard.h"
#include "sandbox/home.h"
#include "sandbox/landlock.h"
#include "sandbox/mount.h"
#include "sandbox/net.h"
#include "sandbox/notify.h"
#include "sandbox/ns.h"
#include "fork/place.h"
#include "sandbox/privs.h"
#include "sandbox/proc.h"
#include "sandbox/seccomp.h"
#include "fork/worktree.h"
#include "sandbox/toolconf.h"
#include "runner/options.h"
#include "util/buf.h"

#define RUN_VERSION "0.1.0"

/* One item of the end-of-run summary, at most (longer ones are cut). */
#define RUN_BLOCKED_ITEM_MAX 512

extern char **environ;

typedef struct run_opts {
    const char *dir; /* -d */
    const char **reads, **writes, **envs, **hides, **binds, **robinds;
    size_t nreads, nwrites, nenvs, nhides, nbinds, nrobinds;
    const char **excludes; /* --exclude */
    size_t nexcludes;
    int exclude_ignored;   /* --exclude-ignored */
    int cont;              /* --continue */
    const char *cont_fork; /* its FORK, or NULL */
    unsigned ns;           /* SANDBOX_NS_*: the namespaces to create */
    unsigned debug_no_ns;  /* --debug-ns-unavailable */
    int rm, keep_tmp, force, no_scope, no_truncate, allow_unconfined;
    int quiet, verbose, check, no_pty;
    int debug_abi;       /* -1 unless --debug-landlock-abi */
    const char *net;     /* --net as given, or NULL */
    const char *gateway; /* --gateway, or gateway=ADDR of --net */
    const char *allow;   /* allow=LIST of --net */
    sandbox_net_mode net_mode;
    char **argv; /* the command */

    int no_caches, mkdir;  /* --no-caches, --mkdir */
    const char *cache_dir; /* --cache-dir, or NULL: the default */
} run_opts;

typedef struct run_state {
    run_opts o;
    sandbox_home home;
    sandbox_landlock_plan plan;
    sandbox_landlock *ll;
    fork_ws fork;
    char *workdir; /* canonical: the fork or -d */
    char *shown;   /* where the workdir is inside: with the mount namespace, the forked DIR */
    char *cwd;     /* the command's working directory inside: shown, or below it */
    fork_place place;
    fork_worktree wt; /* the forked work tree's gitfile repository, if any */
    sandbox_bind *binds;
    char *tmpdir;   /* the private TMPDIR, once created */
    int tmp_inside; /* TMPDIR is a tmpfs inside the run's own /tmp: nothing on disk */
    char **reads, **writes;
    char **env;
    sandbox_home_inode *inodes; /* everything in secret directories: built lazily */
    size_t ninodes;
    int inodes_state;         /* 0 not built, 1 built, -1 could not be built */
    sandbox_home_inode *tops; /* the home and the secrets that exist: stat'ed once */
    size_t ntops;
    int tops_state; /* 0 not stat'ed, 1 done, -1 out of memory */
    sandbox_mount_plan mounts;
    int root_mapped;              /* a root caller runs as SANDBOX_NS_ROOT_UID outside */
    int bpf[2];                   /* the seccomp filter, compiled by the runner meanwhile */
    sandbox_net_gateway gw;       /* with --net gateway */
    int netsock[2];               /* the listening sockets' way out: [0] runner, [1] child */
    sandbox_net_relay *relay;     /* in the runner, once the child sets up */
    unsigned long mounts_skipped; /* entries on other mounts left out of the fork */
    int notify;                   /* seccomp denials go to the supervisor (notify.h) */
    int notifysock[2];            /* the listener's way out: [0] runner, [1] child */
    sandbox_notify *sup;          /* in the runner, once the child sets up */
    char notify_off[256];         /* why seccomp denials are not counted */
    fork_guard *guard;            /* hardens the fork if the runner dies (guard.h) */
    fork_dirgit dirgit;           /* -d: DIR/.git, bound read-only (dirgit.h) */
    int neutralised;              /* things neutralised in the fork's .git */
    char neutralised_what[RUN_BLOCKED_ITEM_MAX];

    fork_exclude excl;     /* what the fork leaves out (exclude.h) */
    sandbox_caches caches; /* writable tool caches (caches.h) */
    sandbox_toolconf conf; /* toolchain configs given (toolconf.h) */
} run_state;

/* Messages (main.c): every line refgate-run writes goes through say(). */
extern int run_quiet, run_verbose;
void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...);

#define note(...)                                                                                  \
    do {                                                                                           \
        if (!run_quiet)                                                                            \
            say(__VA_ARGS__);                                                                      \
    } while (0)

#define verbose(...)                                                                               \
    do {                                                                                           \
        if (run_verbose)                                                                           \
            say(__VA_ARGS__);                                                                      \
    } while (0)

void run_trace_rule(void *ctx, const char *path, const char *what);

/* opts.c */
#define RUN_PARSE_HELP    1 /* run_parse: --help was given */
#define RUN_PARSE_VERSION 2 /* run_parse: --version was given */

/* refgate-run's whole --help text. */
const char *run_opts_help(void);

/*
 * The command line into `o` (whose lists the caller frees): 0 to run,
 * RUN_PARSE_HELP or RUN_PARSE_VERSION, or a negative error with its
 * message in `err`. Prints nothing.
 */
int run_parse(run_opts *o, int argc, char **argv, rg_error *err);

/* plan.c */
int run_plan(run_state *s);
int run_plan_net(run_state *s);
void run_report_plan(const run_state *s);
int run_resolve_paths(run_state *s);
int run_make_tmpdir(run_state *s);
int run_build_env(run_state *s);
int run_proxy_env(run_state *s);
int run_plan_exclude(run_state *s);
int run_tools(run_state *s);
int run_place_fork(run_state *s);
int run_make_fork(run_state *s);
int run_guard(run_state *s);

/* mounts.c */
int run_build_rules(run_state *s, rg_error *err);
int run_check_ns(run_state *s);
int run_plan_notify(run_state *s);
int run_plan_mounts(run_state *s);

#endif
