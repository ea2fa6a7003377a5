/*
 * refgate-run: run a command in a copy-on-write fork of the working
 * directory that only it may write, with secrets unreadable and a clean
 * environment, and exit with its status.
 *
 * This file decides what the user sees and in which order the layers are
 * set up; each layer lives in its own module: home.c (what must stay
 * hidden), fork.c and tree.c (the fork), env.c (the environment), ns.c
 * (namespaces, id maps), mount.c (the mount namespace's layout), landlock.c
 * (file access and scoping), privs.c (no_new_privs, capabilities),
 * seccomp.c (the system call deny-list) and proc.c (session, descriptors,
 * init, exec, signals) and net.c (the gateway's bridge into the net
 * namespace). Every refusal happens before anything is created,
 * so a refused run leaves no trace.
 *
 * The order: the runner (outside) makes the fork and TMPDIR and plans the
 * mounts; clone() creates the namespaces; the runner writes the id maps;
 * the child (init of the pid namespace) takes its ids, brings up loopback,
 * builds the mounts and the Landlock ruleset; it forks the command, which
 * drops its privileges, enforces Landlock, installs seccomp last and execs.
 */
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
#include "util/buf.h"

#define RUN_VERSION "0.1.0"

/* Secret inodes indexed before a fork, at most (a bound against caches). */
#define RUN_SECRET_INODES_MAX 100000

/* One item of the end-of-run summary, at most (longer ones are cut). */
#define RUN_BLOCKED_ITEM_MAX 512

/* Other mounts of the home directory hidden, at most. */
#define RUN_ALIASES_MAX 256

/* /proc/self/mountinfo read, at most. */
#define RUN_MOUNTINFO_MAX (4 * 1024 * 1024)

/*
 * Agent and daemon sockets outside the home directory a command could use
 * to act as the user (ssh-agent, gpg-agent, D-Bus, container engines).
 * The home and /tmp are private already; these live in /run.
 */
static const char *const run_hidden_sockets[] = {
    "/run/dbus/system_bus_socket",
    "/run/docker.sock",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/user",
    "/run/snapd.socket",
    "/run/systemd/private",
    NULL,
};

/* Variables naming sockets or credential files to hide wherever they are. */
static const char *const run_hidden_vars[] = {
    "XDG_RUNTIME_DIR",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "KRB5CCNAME",
    "DOCKER_HOST",
    "DBUS_SESSION_BUS_ADDRESS",
    NULL,
};

extern char **environ;

/* Devices the command may open: the bit buckets, randomness, terminals. */
static const struct {
    const char *path;
    unsigned access;
} run_devices[] = {
    {"/dev/null", SANDBOX_LANDLOCK_DEV},     {"/dev/zero", SANDBOX_LANDLOCK_DEV},
    {"/dev/full", SANDBOX_LANDLOCK_DEV},     {"/dev/random", SANDBOX_LANDLOCK_READ},
    {"/dev/urandom", SANDBOX_LANDLOCK_READ}, {"/dev/tty", SANDBOX_LANDLOCK_DEV},
    {"/dev/ptmx", SANDBOX_LANDLOCK_DEV},     {"/dev/pts", SANDBOX_LANDLOCK_DEV},
    {"/dev/shm", SANDBOX_LANDLOCK_WRITE},
};

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

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

static int run_quiet, run_verbose;

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
    va_list ap;

    fputs("refgate-run: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

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

static void run_trace_rule(void *ctx, const char *path, const char *what)
{
    (void)ctx;
    say("rule: %-6s %s", what, path);
}

static const char help_text[] =
    "usage: refgate-run [options] -- CMD [ARGS...]\n"
    "\n"
    "Run CMD in a copy-on-write fork of the current directory that only it may\n"
    "write, with your secrets unreadable and a clean environment. refgate-run\n"
    "exits with CMD's status.\n"
    "\n"
    "The fork: the working directory's git work tree DIR (its top: the nearest\n"
    "directory up with a .git, not crossing a mount; outside a work tree the\n"
    "working directory itself) is cloned to .DIR.N.base beside it (the directory\n"
    "as it was) and that to DIR.N (N: the first free number); the path is printed\n"
    "on stderr. With the mount namespace, DIR.N is bound over DIR inside the run:\n"
    "CMD sees the fork at the project's own path (a virtualenv, a CMakeCache.txt\n"
    "or a package name that records it keeps working; DIR itself is out of\n"
    "reach) and starts in the subdirectory you started in; every write lands in\n"
    "DIR.N. Without the mount namespace CMD runs at DIR.N's own path, as before.\n"
    "Everything is in it: .git, uncommitted work, build output. A linked\n"
    "worktree's (or a submodule's) .git is a gitfile into another repository: in\n"
    "the fork it becomes a repository of its own (HEAD, index, config, refs\n"
    "copied; the original's object store read-only as an alternate), so nothing\n"
    "of the original repository is written. Files are cloned with FICLONE on\n"
    "btrfs, XFS (reflink=1) and bcachefs, so a fork takes no space until\n"
    "written, and copied with copy_file_range elsewhere; stderr says which.\n"
    "Modes, times, symlinks (as\n"
    "links, never followed), FIFOs and empty directories are kept; owners too\n"
    "when run as root. Each hard-linked name becomes an independent file (the\n"
    "fork never shares an inode with anything). Sockets and device nodes are\n"
    "skipped. `refgate diff DIR.N` shows what the run changed (stderr names\n"
    "refgate by its absolute path when it is beside refgate-run).\n"
    "\n"
    "Continuing: `refgate-run --continue DIR.N -- CMD` runs CMD in that fork\n"
    "again (shown at DIR again), so a second command sees the first's edits and\n"
    "`refgate diff` shows both. A fork is a DIR.N with .DIR.N.base beside it. Run\n"
    "from inside a fork, refgate-run continues that fork and says so (it never\n"
    "makes DIR.N.1). A fork whose run is still alive is refused.\n"
    "\n"
    "The fork's .git after the run: what CMD planted there would run outside the\n"
    "sandbox at your first git command in the fork, so when CMD has exited its\n"
    ".git/config keeps only an allow-list of keys that run nothing (the rest,\n"
    "core.fsmonitor, hooksPath, aliases, filters, include..., removed; the file\n"
    "kept as .git/config.refgate-run-orig), hooks move to .git/hooks.refgate-\n"
    "disabled, a changed gitfile, commondir or config.worktree moves aside, and\n"
    "the same for .git/modules/*; stderr names each. A guardian (a process of\n"
    "its own session, outside the sandbox) does the same if refgate-run is\n"
    "killed (SIGKILL included): it waits for the run's last process, then\n"
    "hardens the fork; after a normal run it just exits.\n"
    "With -d (no fork): DIR/.git, a directory or a gitfile, is bound read-only\n"
    "inside (git log, diff and status work, commits fail; .git cannot be moved or\n"
    "replaced), which needs the mount namespace: a -d DIR holding a .git is\n"
    "refused with --share=mount, and so is one whose .git is a symlink. A .git\n"
    "the run creates in DIR is moved to DIR/.git.refgate-disabled after it.\n"
    "Repositories below DIR are not covered: use a fork.\n"
    "\n"
    "Options:\n"
    "  -d, --dir DIR        run in DIR itself, no fork; DIR is writable but its\n"
    "                       .git is read-only (see above)\n"
    "  -r, --read PATH      also let CMD read PATH (repeatable)\n"
    "  -w, --write PATH     also let CMD write PATH (repeatable); a missing PATH is\n"
    "                       refused unless --mkdir\n"
    "      --mkdir          create missing -w paths (mkdir -p; never in a secret)\n"
    "  -e, --env NAME       pass NAME from this environment (repeatable)\n"
    "  -e, --env NAME=VAL   set NAME for CMD\n"
    "      --exclude PATTERN\n"
    "                       leave what matches PATTERN out of the fork (repeatable):\n"
    "                       not copied; inside, the original is shown read-only\n"
    "                       over an empty placeholder (see Exclusions below)\n"
    "      --exclude-ignored\n"
    "                       also leave out the directories git ignores whose name\n"
    "                       says they hold fetched dependencies: node_modules,\n"
    "                       bower_components, jspm_packages, .pnpm-store, vendor\n"
    "      --bind SRC:DST   show SRC (a file or a directory) at DST inside, writable\n"
    "                       by CMD; repeatable; needs the mount namespace. DST\n"
    "                       under the home directory is made in its tmpfs;\n"
    "                       elsewhere it must exist and is covered. SRC that is,\n"
    "                       contains or lies inside a secret is refused, as for -w\n"
    "      --ro-bind SRC:DST\n"
    "                       the same, read-only\n"
    "      --continue [FORK]\n"
    "                       run in the existing fork FORK (the next argument when\n"
    "                       it is a directory; default: the fork the working\n"
    "                       directory is in) instead of making a new one\n"
    "      --rm             remove the fork and its base after CMD exits\n"
    "      --keep-tmp       keep CMD's private TMPDIR (removed by default)\n"
    "      --no-caches      no writable tool caches (see Toolchains)\n"
    "      --cache-dir DIR  keep the tool caches in DIR (default:\n"
    "                       $XDG_CACHE_HOME/refgate/caches, ~/.cache/refgate/caches)\n"
    "      --unshare=LIST   the namespaces to create, comma-separated: user, mount,\n"
    "                       pid, ipc, uts, net, or all (the default) or none\n"
    "      --share=LIST     keep these of the caller's namespaces instead (applied\n"
    "                       after --unshare); a namespace that cannot be created\n"
    "                       refuses the run and names the --share that skips it\n"
    "      --share-net      same as --share=net, i.e. --net host\n"
    "      --net MODE       none: loopback only; gateway or gateway=HOST:PORT:\n"
    "                       loopback and the gateway, reachable inside at its own\n"
    "                       address, nothing else; allow=HOST:PORT,...: also these\n"
    "                       hosts (exact names) through a CONNECT proxy inside\n"
    "                       (HTTPS_PROXY is set); host: no net namespace, the\n"
    "                       network as you reach it (a warning says so). Default:\n"
    "                       gateway when --gateway is given, else none\n"
    "      --gateway URL    the gateway (http://HOST:PORT/... or HOST:PORT; HOST\n"
    "                       on this host's loopback)\n"
    "      --hide PATH      make PATH (a file or a directory) unreadable inside;\n"
    "                       repeatable; needs the mount namespace\n"
    "      --no-pty         give CMD your terminal itself, not a pty of the run's\n"
    "                       own relayed to it (the default when stdin is a\n"
    "                       terminal, with the mount and pid namespaces)\n"
    "      --force          allow a fork, -d, -r or -w that is, contains or lies\n"
    "                       inside a secret, or contains the home directory\n"
    "      --no-scope       on Landlock ABI < 6, run although CMD could signal, or\n"
    "                       connect to abstract sockets of, processes outside\n"
    "      --no-truncate-control\n"
    "                       on Landlock ABI < 3, run although truncate(2) is not\n"
    "                       confined\n"
    "      --allow-unconfined\n"
    "                       run even without Landlock, or with an ABI that lacks\n"
    "                       what is needed; a loud warning says what is lost\n"
    "      --check          say what this kernel can confine, and exit\n"
    "  -q, --quiet          print only the fork's path, warnings and errors\n"
    "  -v, --verbose        also print every rule and environment decision\n"
    "  -h, --help           print this text\n"
    "      --version        print the version\n"
    "\n"
    "Exclusions (--exclude, --exclude-ignored; need the mount namespace):\n"
    "  Where the filesystem cannot reflink, a fork costs a copy of everything;\n"
    "  a big dependency directory is most of it. An excluded directory or file\n"
    "  is not copied: the base and the fork get an empty placeholder and, inside\n"
    "  the run, the original is bound read-only over it (a build that only reads\n"
    "  node_modules works; one that writes there fails with EROFS, never finds\n"
    "  it empty). The view is the original as it is now, not a snapshot, so\n"
    "  nothing is excluded unless asked. PATTERN is relative to DIR, .gitignore\n"
    "  style: `node_modules` matches at any depth, `a/b` or `/b` only there, a\n"
    "  trailing / only directories, `**` any number of directories\n"
    "  (`**/__pycache__`). .git is never excluded. Excluded entries are still\n"
    "  walked: one that is, holds or links a secret refuses the run as a copy\n"
    "  would, and so does a mount inside one. At most 1024 entries. They are\n"
    "  recorded in .DIR.N.excluded beside the fork (outside it, so CMD cannot\n"
    "  change it): `refgate diff` leaves them out of both sides, so it never\n"
    "  shows or applies a change there. Not excluded by --exclude-ignored:\n"
    "  build outputs (target, build, dist: their tools write there) and\n"
    "  virtualenvs (pip writes there); name them with --exclude if reading is\n"
    "  enough.\n"
    "\n"
    "Namespaces (default: all; fail closed):\n"
    "  user   CMD holds no capability outside. Run as root, CMD is uid/gid 65534\n"
    "         (nobody), inside and outside, with no capability: /root,\n"
    "         /etc/shadow and chmod of root's files are out of reach. Its fork,\n"
    "         TMPDIR, -r and -w paths are id-mapped mounts (root's files there\n"
    "         appear as its own); seccomp stops it making setuid files there.\n"
    "  mount  / is the host's tree bound read-only, nosuid, nodev, recursively\n"
    "         (chmod, chown, xattrs, utimes outside fail: EROFS); the fork (over\n"
    "         DIR), TMPDIR, -w and --bind paths are bound writable; /tmp and\n"
    "         /dev/shm are private\n"
    "         tmpfs; /dev holds only null, zero, full, random, urandom, tty and\n"
    "         a new devpts (no other terminal exists inside); the home\n"
    "         directory is a tmpfs holding only the readable paths below (the\n"
    "         passwd entry's home too, or hidden); /run/user, $XDG_RUNTIME_DIR,\n"
    "         agent, D-Bus and container sockets, $KRB5CCNAME, other mounts of\n"
    "         the home directory and --hide paths are hidden (an empty,\n"
    "         unreadable, read-only directory or file over them).\n"
    "  pid    a fresh /proc; refgate-run's child is init: when CMD exits, every\n"
    "         process it left is killed, so nothing outlives the run. When\n"
    "         stdin is your terminal (in the foreground), init gives CMD a pty\n"
    "         of the run's own and relays it to yours (raw mode, window size),\n"
    "         so CMD never holds your terminal (--no-pty gives it yours).\n"
    "  ipc    SysV shared memory, semaphores and queues of the host are invisible.\n"
    "  uts    host name changes stay inside.  net: only loopback (see --net).\n"
    "\n"
    "Confinement (Landlock, fail closed):\n"
    "  Writable: the fork (at DIR with the mount namespace; or -d DIR), a private\n"
    "    TMPDIR made for the run, /dev/null, /dev/zero, /dev/full, /dev/tty,\n"
    "    /dev/ptmx, /dev/pts, -w paths, --bind destinations.\n"
    "  Readable: everything outside the home directory ($HOME, else the passwd\n"
    "    entry; when $HOME is elsewhere, the passwd entry's home is hidden too)\n"
    "    except /dev, where only the devices above and /dev/random and\n"
    "    /dev/urandom are. The directories leading to the home directory can\n"
    "    be traversed but not listed (`ls /` fails, `ls /usr` works). Inside\n"
    "    the home directory: only the fork, -r and -w paths, and what\n"
    "    toolchains need: ~/.gitconfig, ~/.config/git/{config,ignore,attributes},\n"
    "    ~/.local/bin, ~/.local/lib, ~/.cargo/{bin,registry,git}, ~/.rustup,\n"
    "    ~/go/bin, ~/go/pkg/mod, ~/.cache/go-build, ~/.nvm, ~/.volta, ~/.npm,\n"
    "    ~/.bun/bin, ~/.deno, ~/.pyenv, ~/.cache/pip, ~/.cache/uv,\n"
    "    ~/.local/share/uv, ~/.rbenv, ~/.local/share/gem, ~/.m2/repository,\n"
    "    ~/.gradle/{caches,wrapper}, ~/.sdkman/candidates, ~/.asdf,\n"
    "    ~/.local/share/mise, read-only, and the toolchain configs and tool\n"
    "    caches below.\n"
    "  So ~/.ssh, ~/.aws, ~/.gnupg, ~/.kube, ~/.docker, ~/.netrc, ~/.config/gh\n"
    "    and every other file in the home directory are unreadable without being\n"
    "    listed. A fork, -d, -r or -w that is, contains or lies inside a known\n"
    "    secret (those, git and registry credentials, cloud CLIs' configs, password\n"
    "    stores, browser profiles, and paths named by GNUPGHOME, KUBECONFIG,\n"
    "    AWS_SHARED_CREDENTIALS_FILE and the like) is refused unless --force, and\n"
    "    so is one that contains the home directory. A fork of a tree holding a\n"
    "    hard link or bind mount of a secret is refused too.\n"
    "  Signals and abstract unix sockets are scoped (ABI 6): CMD cannot signal,\n"
    "    or connect to an abstract socket of, anything outside the sandbox.\n"
    "  Also: no_new_privs; a new session, so CMD has no controlling terminal and\n"
    "    TIOCSTI cannot type into yours; every descriptor but 0-2 closed; in a\n"
    "    user namespace, every capability dropped; as root with --share=user,\n"
    "    the capabilities that bypass file rules dropped (all but CHOWN,\n"
    "    DAC_OVERRIDE, FOWNER, FSETID, SETUID, SETGID, NET_BIND_SERVICE,\n"
    "    SYS_CHROOT, AUDIT_WRITE, SYS_RESOURCE, IPC_LOCK, LEASE).\n"
    "  seccomp, installed last: ptrace, process_vm_*, keyctl, add_key,\n"
    "    request_key, bpf, perf_event_open, io_uring, userfaultfd,\n"
    "    open_by_handle_at, module and kexec calls, the mount API, unshare,\n"
    "    setns and clone with namespace flags fail (EPERM; clone3: ENOSYS);\n"
    "    ioctl TIOCSTI and TIOCLINUX fail; sockets other than unix, IPv4, IPv6\n"
    "    and route netlink fail (EAFNOSUPPORT). Each denial but clone3's and\n"
    "    openat2's ENOSYS (libc's cue to fall back) goes to a supervisor in\n"
    "    refgate-run, outside the sandbox, which answers with that errno (it never\n"
    "    lets a call through) and counts it for the end-of-run summary (\"blocked\n"
    "    during the run: 3 system calls denied by seccomp: keyctl x2, ptrace (by\n"
    "    sh, pid 812)\"); CMD never holds its descriptor. Where the kernel cannot\n"
    "    give one, the plain filter denies the same and the summary says the\n"
    "    count is off. Landlock's denials are not counted: the kernel reports\n"
    "    them only to its audit log, which refgate-run does not read.\n"
    "  Without Landlock, or when the kernel's ABI cannot express the above,\n"
    "    refgate-run refuses and says why. ABI 1 lacks REFER: renames across\n"
    "    directories fail with EXDEV even in the fork (run anyway). ABI < 3 cannot\n"
    "    confine truncate(2) (--no-truncate-control). ABI < 5 cannot confine\n"
    "    device ioctls (run anyway: only the devices above can be opened).\n"
    "    ABI < 6 cannot scope signals and abstract sockets (--no-scope).\n"
    "  Network: with --net gateway, refgate-run binds the gateway's address on\n"
    "    the sandbox's loopback and relays each connection to the real gateway\n"
    "    (at most 64 at once); every other host port, UDP to the host and the\n"
    "    outside world are unreachable. With --net allow, 127.0.0.1:3128 inside\n"
    "    is a CONNECT proxy: listed host:port entries only, resolved outside,\n"
    "    never to this host's loopback or link. Raw, packet and MPTCP sockets\n"
    "    fail.\n"
    "  Not covered yet: with --net host, the network; without the mount\n"
    "    namespace, unix sockets by path and chmod/chown of files CMD owns\n"
    "    outside the fork.\n"
    "\n"
    "Toolchains:\n"
    "  Caches: refgate's own, persistent, per user, never yours (a run must not\n"
    "    poison what your builds use): --cache-dir or\n"
    "    $XDG_CACHE_HOME/refgate/caches/TOOL (~/.cache/...), each 0700 and yours\n"
    "    or the run is refused; bound writable where the tool looks, and named by\n"
    "    its variable: ~/.cache/go-build (GOCACHE), ~/go/pkg/mod (GOMODCACHE),\n"
    "    ~/.npm (npm_config_cache), ~/.cache/yarn (YARN_CACHE_FOLDER),\n"
    "    ~/.cache/pip (PIP_CACHE_DIR), ~/.cache/uv (UV_CACHE_DIR),\n"
    "    ~/.cargo/{registry,git} (under $CARGO_HOME when it is in the home),\n"
    "    ~/.m2/repository, ~/.gradle/caches, ~/.local/share/gem. The first run\n"
    "    fills them; go's is seeded from yours, read-only: GOPROXY=file://<your\n"
    "    GOMODCACHE/cache/download>,<your GOPROXY> (not when GOPROXY=off).\n"
    "    Without the mount namespace only the tools with a variable get one.\n"
    "    --no-caches: none.\n"
    "  Configs readable unless they hold a credential (a key naming a token,\n"
    "    password, secret or auth, or a URL with user:password@; then hidden):\n"
    "    ~/.config/pip/pip.conf, ~/.pip/pip.conf, ~/.cargo/config.toml,\n"
    "    ~/.cargo/config, ~/.config/go/env. ~/.npmrc: a copy without its auth\n"
    "    lines (_auth, _authToken, _password, username, email, certfile,\n"
    "    keyfile, //host/... scoped ones). stderr names what was filtered or\n"
    "    hidden (setting names, never values). ~/.cargo/credentials.toml stays\n"
    "    hidden. A git config that sets commit.gpgsign or tag.gpgsign gets a\n"
    "    warning: signing keys and agents are unreadable inside.\n"
    "\n"
    "Environment: only PATH, HOME, USER, LOGNAME, LANG, LC_*, TERM, TZ, SHELL,\n"
    "  SSL_CERT_*, EDITOR, VISUAL, GIT_EDITOR, PAGER, CC, CXX, CFLAGS, CXXFLAGS,\n"
    "  CPPFLAGS, LDFLAGS, MAKEFLAGS, GOFLAGS, GOPATH, CARGO_HOME, RUSTUP_HOME,\n"
    "  RUSTUP_TOOLCHAIN, VIRTUAL_ENV, CI, the proxy variables (http_proxy,\n"
    "  HTTPS_PROXY, NO_PROXY, ALL_PROXY... either case) and GOPROXY, GOPRIVATE,\n"
    "  GONOPROXY, GONOSUMDB, GOSUMDB when they hold no user:password@ (--net\n"
    "  allow sets the proxies itself), the tool caches' variables, and --env\n"
    "  names pass; stderr names the rest in one line (-q: not; -v: each with\n"
    "  why). TMPDIR is the private directory (inside the private /tmp with the\n"
    "  mount namespace). PYTHONPATH, LD_*,\n"
    "  DYLD_*, NODE_OPTIONS, BASH_ENV, ENV, PYTHONSTARTUP, PERL5OPT, RUBYOPT,\n"
    "  JAVA_TOOL_OPTIONS, GIT_SSH_COMMAND, GIT_CONFIG_* (and similar startup\n"
    "  hooks) and names that look like credentials (*TOKEN*, *SECRET*,\n"
    "  *PASSWORD*, *_KEY) never pass unless named with --env.\n"
    "\n"
    "Exit status: CMD's; when a signal kills CMD, the same signal ends\n"
    "  refgate-run. 125: refused, or the sandbox could not be set up;\n"
    "  126: CMD cannot run; 127: CMD not found. SIGINT, SIGTERM, SIGHUP, SIGQUIT,\n"
    "  SIGUSR1, SIGUSR2 and SIGWINCH are forwarded to CMD's process group;\n"
    "  SIGTSTP (Ctrl-Z) stops CMD and refgate-run, SIGCONT resumes both.\n"
    "\n"
    "Testing:\n"
    "  --debug-landlock-abi=N  act as if the kernel offered at most Landlock ABI\n"
    "                          N (0: none), to exercise refusals; it can only\n"
    "                          lower the ABI, never raise it.\n"
    "  --debug-ns-unavailable=LIST\n"
    "                          act as if the kernel refused these namespaces.\n"
    "\n"
    "Examples:\n"
    "  refgate-run -- claude                 # an agent in a fork of $PWD\n"
    "  refgate-run --rm -- make test         # throwaway fork\n"
    "  refgate-run --continue ../app.1 -- make test   # again in that fork\n"
    "  refgate-run --bind ~/cfg-copy:$HOME/.tool -- tool   # a copy at the real path\n"
    "  refgate-run -d /tmp/scratch -- sh     # no fork\n"
    "  GOFLAGS=-mod=mod refgate-run -- go test ./...   # caches warm after run 1\n";

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

enum {
    OPT_RM = 256,
    OPT_KEEP_TMP,
    OPT_FORCE,
    OPT_NO_SCOPE,
    OPT_NO_TRUNCATE,
    OPT_UNCONFINED,
    OPT_CHECK,
    OPT_VERSION,
    OPT_DEBUG_ABI,
    OPT_UNSHARE,
    OPT_SHARE,
    OPT_SHARE_NET,
    OPT_HIDE,
    OPT_DEBUG_NS,
    OPT_NO_PTY,
    OPT_NET,
    OPT_GATEWAY,
    OPT_EXCLUDE,
    OPT_EXCLUDE_IGNORED,
    OPT_BIND,
    OPT_RO_BIND,
    OPT_CONTINUE,
    OPT_NO_CACHES,
    OPT_CACHE_DIR,
    OPT_MKDIR,
};

static int run_is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int run_push(const char ***list, size_t *n, const char *v)
{
    const char **grown = realloc(*list, (*n + 1) * sizeof(*grown));

    if (grown == NULL)
        return -ENOMEM;
    grown[(*n)++] = v;
    *list = grown;
    return 0;
}

/*
 * --net MODE, --gateway ADDR and the net namespace agree. The default is
 * the narrowest that works: `gateway` when a gateway is named (refgate run
 * names it: its git must reach it and nothing else), else `none`. Sharing
 * the net namespace (--share-net, --share=net, --unshare without net) is
 * `host`, as before; asking for none or gateway without the namespace is
 * refused rather than quietly run open.
 */
static int run_parse_net(run_opts *o)
{
    const char *m = o->net;

    if (m == NULL)
        o->net_mode = !(o->ns & SANDBOX_NS_NET) ? SANDBOX_NET_HOST
                      : o->gateway != NULL      ? SANDBOX_NET_GATEWAY
                                                : SANDBOX_NET_NONE;
    else if (strcmp(m, "none") == 0)
        o->net_mode = SANDBOX_NET_NONE;
    else if (strcmp(m, "host") == 0)
        o->net_mode = SANDBOX_NET_HOST;
    else if (strcmp(m, "gateway") == 0)
        o->net_mode = SANDBOX_NET_GATEWAY;
    else if (strncmp(m, "gateway=", 8) == 0) {
        if (o->gateway != NULL && strcmp(o->gateway, m + 8) != 0) {
            say("--net %s and --gateway %s name two gateways", m, o->gateway);
            return -EINVAL;
        }
        o->gateway = m + 8;
        o->net_mode = SANDBOX_NET_GATEWAY;
    } else if (strncmp(m, "allow=", 6) == 0) {
        o->net_mode = SANDBOX_NET_ALLOW;
        o->allow = m + 6;
    } else {
        say("--net: unknown mode '%s' (expected none, gateway, gateway=HOST:PORT, "
            "allow=HOST:PORT,... or host)",
            m);
        return -EINVAL;
    }
    if (o->net_mode == SANDBOX_NET_GATEWAY && o->gateway == NULL) {
        say("--net gateway needs the gateway's address: --gateway URL or --net gateway=HOST:PORT");
        return -EINVAL;
    }
    if (o->net_mode == SANDBOX_NET_HOST) {
        o->ns &= ~SANDBOX_NS_NET;
    } else if (!(o->ns & SANDBOX_NS_NET)) {
        say("--net %s needs the net namespace: drop --share-net / --share=net, or use --net host",
            o->net_mode == SANDBOX_NET_NONE      ? "none"
            : o->net_mode == SANDBOX_NET_GATEWAY ? "gateway"
                                                 : "allow");
        return -EINVAL;
    }
    return 0;
}

/* Returns 0 to run, 1 to exit 0 (help, version), or a negative error. */
static int run_parse(run_opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"read", required_argument, NULL, 'r'},
        {"write", required_argument, NULL, 'w'},
        {"env", required_argument, NULL, 'e'},
        {"rm", no_argument, NULL, OPT_RM},
        {"keep-tmp", no_argument, NULL, OPT_KEEP_TMP},
        {"force", no_argument, NULL, OPT_FORCE},
        {"no-scope", no_argument, NULL, OPT_NO_SCOPE},
        {"no-truncate-control", no_argument, NULL, OPT_NO_TRUNCATE},
        {"allow-unconfined", no_argument, NULL, OPT_UNCONFINED},
        {"check", no_argument, NULL, OPT_CHECK},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"debug-landlock-abi", required_argument, NULL, OPT_DEBUG_ABI},
        {"unshare", required_argument, NULL, OPT_UNSHARE},
        {"share", required_argument, NULL, OPT_SHARE},
        {"share-net", no_argument, NULL, OPT_SHARE_NET},
        {"hide", required_argument, NULL, OPT_HIDE},
        {"no-pty", no_argument, NULL, OPT_NO_PTY},
        {"net", required_argument, NULL, OPT_NET},
        {"gateway", required_argument, NULL, OPT_GATEWAY},
        {"exclude", required_argument, NULL, OPT_EXCLUDE},
        {"exclude-ignored", no_argument, NULL, OPT_EXCLUDE_IGNORED},
        {"bind", required_argument, NULL, OPT_BIND},
        {"ro-bind", required_argument, NULL, OPT_RO_BIND},
        {"continue", optional_argument, NULL, OPT_CONTINUE},
        {"no-caches", no_argument, NULL, OPT_NO_CACHES},
        {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
        {"mkdir", no_argument, NULL, OPT_MKDIR},
        {"debug-ns-unavailable", required_argument, NULL, OPT_DEBUG_NS},
        {NULL, 0, NULL, 0},
    };
    rg_error err = RG_ERROR_INIT;
    unsigned set, shared = 0;
    char *end;
    long v;
    int c, rc = 0;

    o->debug_abi = -1;
    o->ns = SANDBOX_NS_ALL;
    /* "+": options end at the command, so its own options stay its own. */
    while (rc == 0 && (c = getopt_long(argc, argv, "+d:r:w:e:qvh", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o->dir = optarg;
            break;
        case 'r':
            rc = run_push(&o->reads, &o->nreads, optarg);
            break;
        case 'w':
            rc = run_push(&o->writes, &o->nwrites, optarg);
            break;
        case 'e':
            rc = run_push(&o->envs, &o->nenvs, optarg);
            break;
        case OPT_RM:
            o->rm = 1;
            break;
        case OPT_KEEP_TMP:
            o->keep_tmp = 1;
            break;
        case OPT_FORCE:
            o->force = 1;
            break;
        case OPT_NO_SCOPE:
            o->no_scope = 1;
            break;
        case OPT_NO_TRUNCATE:
            o->no_truncate = 1;
            break;
        case OPT_UNCONFINED:
            o->allow_unconfined = 1;
            break;
        case OPT_CHECK:
            o->check = 1;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case 'v':
            o->verbose = 1;
            break;
        case 'h':
            fputs(help_text, stdout);
            return 1;
        case OPT_VERSION:
            printf("refgate-run %s (Landlock ABI up to %d)\n", RUN_VERSION,
                   SANDBOX_LANDLOCK_ABI_LAST);
            return 1;
        case OPT_UNSHARE:
        case OPT_SHARE:
        case OPT_DEBUG_NS:
            if (sandbox_ns_parse(&set, optarg,
                                 c == OPT_UNSHARE ? "--unshare"
                                 : c == OPT_SHARE ? "--share"
                                                  : "--debug-ns-unavailable",
                                 &err) < 0) {
                say("%s", err.msg);
                return -EINVAL;
            }
            if (c == OPT_UNSHARE)
                o->ns = set;
            else if (c == OPT_SHARE)
                shared |= set;
            else
                o->debug_no_ns |= set;
            break;
        case OPT_SHARE_NET:
            shared |= SANDBOX_NS_NET;
            break;
        case OPT_NO_PTY:
            o->no_pty = 1;
            break;
        case OPT_NET:
            o->net = optarg;
            break;
        case OPT_GATEWAY:
            o->gateway = optarg;
            break;
        case OPT_HIDE:
            rc = run_push(&o->hides, &o->nhides, optarg);
            break;
        case OPT_EXCLUDE:
            rc = run_push(&o->excludes, &o->nexcludes, optarg);
            break;
        case OPT_EXCLUDE_IGNORED:
            o->exclude_ignored = 1;
            break;
        case OPT_BIND:
            rc = run_push(&o->binds, &o->nbinds, optarg);
            break;
        case OPT_RO_BIND:
            rc = run_push(&o->robinds, &o->nrobinds, optarg);
            break;
        case OPT_CONTINUE:
            o->cont = 1;
            o->cont_fork = optarg;
            /* `--continue FORK`: the next argument, when it is a directory. */
            if (optarg == NULL && optind < argc && argv[optind][0] != '-' &&
                run_is_dir(argv[optind]))
                o->cont_fork = argv[optind++];
            break;
        case OPT_NO_CACHES:
            o->no_caches = 1;
            break;
        case OPT_CACHE_DIR:
            o->cache_dir = optarg;
            break;
        case OPT_MKDIR:
            o->mkdir = 1;
            break;
        case OPT_DEBUG_ABI:
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || v < 0 || v > 100) {
                say("--debug-landlock-abi: expected a number from 0, got '%s'", optarg);
                return -EINVAL;
            }
            o->debug_abi = (int)v;
            break;
        default:
            say("try 'refgate-run --help'");
            return -EINVAL;
        }
    }
    if (rc < 0) {
        say("out of memory");
        return rc;
    }
    o->ns &= ~shared;
    if (run_parse_net(o) < 0)
        return -EINVAL;
    if (o->nhides > 0 && !(o->ns & SANDBOX_NS_MOUNT)) {
        say("--hide needs the mount namespace (drop --share=mount)");
        return -EINVAL;
    }
    if (o->nbinds + o->nrobinds > 0 && !(o->ns & SANDBOX_NS_MOUNT)) {
        say("--bind and --ro-bind need the mount namespace (drop --share=mount)");
        return -EINVAL;
    }
    o->argv = argv + optind;
    if (!o->check && o->argv[0] == NULL) {
        say("no command given; usage: refgate-run [options] -- CMD [ARGS...]");
        return -EINVAL;
    }
    /* Without the mount namespace an excluded directory would be an empty
     * placeholder inside: refused rather than silently empty. */
    if ((o->nexcludes > 0 || o->exclude_ignored) &&
        (o->dir != NULL || !(o->ns & SANDBOX_NS_MOUNT))) {
        say("--exclude and --exclude-ignored need a fork (no -d) and the mount namespace (drop "
            "--share=mount): an excluded directory is shown read-only from the original");
        return -EINVAL;
    }
    if (o->dir != NULL && o->rm) {
        say("--rm removes a fork; with -d there is none");
        return -EINVAL;
    }
    if (o->dir != NULL && o->cont) {
        say("--continue runs in a fork; with -d there is none");
        return -EINVAL;
    }
    if (o->cont && (o->nexcludes > 0 || o->exclude_ignored)) {
        say("--exclude and --exclude-ignored apply when a fork is made; a continued fork keeps "
            "the exclusions it was made with");
        return -EINVAL;
    }
    return 0;
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

static int run_plan(run_state *s)
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
static int run_plan_net(run_state *s)
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

static void run_report_plan(const run_state *s)
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

static int run_resolve_paths(run_state *s)
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
static int run_make_tmpdir(run_state *s)
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

static int run_build_env(run_state *s)
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
static int run_proxy_env(run_state *s)
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
static int run_plan_exclude(run_state *s)
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
static int run_tools(run_state *s)
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
static int run_place_fork(run_state *s)
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

static int run_make_fork(run_state *s)
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
static int run_guard(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    int rc;

    rc = fork_guard_start(&s->guard, s->fork.path, s->fork.base, s->fork.lock_fd, &err);
    if (rc < 0)
        say("refusing to run: %s", err.msg);
    return rc;
}

/* In the sandbox's first process, after the mounts: the Landlock ruleset. */
static int run_build_rules(run_state *s, rg_error *err)
{
    const char *skip[] = {"/dev"};
    char buf[PATH_MAX];
    size_t i;
    int rc;

    rc = sandbox_landlock_new(&s->ll, &s->plan, err);
    if (rc < 0)
        return rc;
    if (run_verbose)
        sandbox_landlock_set_trace(s->ll, run_trace_rule, NULL);
    /* Everything outside the home directory and the hidden secrets... */
    rc = sandbox_landlock_allow_all_except(s->ll, (const char *const *)s->home.hidden,
                                           s->home.nhidden, skip, 1, err);
    /* ...but of /dev only what a command needs, not raw disks or memory. */
    for (i = 0; rc == 0 && i < sizeof(run_devices) / sizeof(run_devices[0]); i++)
        rc = sandbox_landlock_allow(s->ll, run_devices[i].path,
                                    run_devices[i].access | SANDBOX_LANDLOCK_OPTIONAL, err);
    for (i = 0; rc == 0 && sandbox_home_readable_names[i]; i++) {
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/%s", s->home.path, sandbox_home_readable_names[i]);
        /* A toolchain path may be a symlink (dotfiles); grant where it points,
         * unless that is a secret. */
        if (realpath(path, buf) == NULL)
            continue;
        if (sandbox_home_conflict(&s->home, buf) != NULL) {
            verbose("not granting %s: it resolves to %s", path, buf);
            continue;
        }
        rc = sandbox_landlock_allow(s->ll, buf, SANDBOX_LANDLOCK_READ | SANDBOX_LANDLOCK_OPTIONAL,
                                    err);
    }
    if (rc == 0)
        rc = sandbox_caches_allow(&s->caches, s->ll, (s->o.ns & SANDBOX_NS_MOUNT) != 0, err);
    if (rc == 0)
        rc = sandbox_toolconf_allow(&s->conf, s->ll, (s->o.ns & SANDBOX_NS_MOUNT) != 0, err);
    for (i = 0; rc == 0 && s->reads[i] != NULL; i++)
        rc = sandbox_landlock_allow(s->ll, s->reads[i], SANDBOX_LANDLOCK_READ, err);
    for (i = 0; rc == 0 && s->binds[i].dst != NULL; i++)
        rc = sandbox_landlock_allow(s->ll, s->binds[i].dst,
                                    s->binds[i].ro ? SANDBOX_LANDLOCK_READ : SANDBOX_LANDLOCK_WRITE,
                                    err);
    for (i = 0; rc == 0 && i < s->o.nwrites; i++)
        rc = sandbox_landlock_allow(s->ll, s->writes[i], SANDBOX_LANDLOCK_WRITE, err);
    if (rc == 0)
        rc = sandbox_landlock_allow(s->ll, s->shown, SANDBOX_LANDLOCK_WRITE, err);
    if (rc == 0)
        rc = sandbox_landlock_allow(s->ll, s->tmpdir, SANDBOX_LANDLOCK_WRITE, err);
    /* The private /tmp is the run's own: tools that ignore TMPDIR work. */
    if (rc == 0 && (s->o.ns & SANDBOX_NS_MOUNT))
        rc = sandbox_landlock_allow(s->ll, "/tmp", SANDBOX_LANDLOCK_WRITE, err);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Namespaces and mounts                                                     */
/* ------------------------------------------------------------------------ */

static int run_check_ns(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    int rc;

    rc = sandbox_ns_check(s->o.ns, geteuid() == 0, &err);
    if (rc == 0 && (s->o.ns & s->o.debug_no_ns))
        rc = sandbox_ns_explain(s->o.ns & s->o.debug_no_ns, s->o.debug_no_ns, EPERM, &err);
    if (rc < 0) {
        say("%s", err.msg);
        return rc;
    }
    s->root_mapped = geteuid() == 0 && (s->o.ns & SANDBOX_NS_USER);
    /* Without the mount namespace there is no id-mapped mount: nobody could
     * not write a fork root owns. */
    if (s->root_mapped && !(s->o.ns & SANDBOX_NS_MOUNT)) {
        say("run as root, the user namespace needs the mount namespace: the command is nobody "
            "outside and gets its fork through an id-mapped mount; share both "
            "(--share=user,mount) or neither");
        return -EINVAL;
    }
    return 0;
}

/* Hide `path` (resolved) if it exists; a missing one has nothing to hide. */
static int run_hide(run_state *s, const char *path, rg_error *err)
{
    char buf[PATH_MAX];

    if (path == NULL || path[0] != '/' || realpath(path, buf) == NULL)
        return 0;
    verbose("hidden: %s", buf);
    return sandbox_mount_plan_add(&s->mounts, SANDBOX_MOUNT_HIDE, NULL, buf, 0, err);
}

/* The path inside a socket address or credential cache name: from the
 * first '/' to the first ',' or ':' (unix:path=/run/x,guid=..., FILE:/tmp/y,
 * unix:///run/docker.sock, /run/gpg:1234:1). */
static int run_hide_var(run_state *s, const char *value, rg_error *err)
{
    char buf[PATH_MAX];
    const char *p = value ? strchr(value, '/') : NULL;
    size_t len;

    if (p == NULL)
        return 0;
    while (p[1] == '/')
        p++;
    len = strcspn(p, ",:;");
    if (len >= sizeof(buf))
        return 0;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return run_hide(s, buf, err);
}

/* Hide every other mount through which `dir` is visible. */
static int run_hide_aliases(run_state *s, const char *text, const char *dir, rg_error *err)
{
    char **aliases = NULL;
    size_t n = 0, i;
    int rc;

    rc = sandbox_mount_aliases(&aliases, &n, text, dir, RUN_ALIASES_MAX, err);
    for (i = 0; i < n; i++) {
        if (rc == 0) {
            verbose("%s is also mounted at %s: hidden there", dir, aliases[i]);
            rc = sandbox_mount_plan_add(&s->mounts, SANDBOX_MOUNT_HIDE, NULL, aliases[i], 0, err);
        }
        free(aliases[i]);
    }
    free(aliases);
    return rc;
}

static char *run_read_mountinfo(void)
{
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap + 1), *grown;
    ssize_t n;
    int fd;

    if (buf == NULL)
        return NULL;
    fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return NULL;
    }
    /* Bounded: RUN_MOUNTINFO_MAX bytes. */
    while ((n = read(fd, buf + len, cap - len)) > 0) {
        len += (size_t)n;
        if (len == cap) {
            if (cap >= RUN_MOUNTINFO_MAX)
                break;
            grown = realloc(buf, cap * 2 + 1);
            if (grown == NULL)
                break;
            buf = grown;
            cap *= 2;
        }
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

/*
 * The mount namespace's layout (see mount.h): planned here, in the runner,
 * where the paths are resolved and refusals can still be made cleanly.
 */
/*
 * The seccomp supervisor, when this kernel can give the command a listener;
 * else the plain filter (the same denials), and the summary says why they
 * are not counted.
 */
static int run_plan_notify(run_state *s)
{
    rg_error why = RG_ERROR_INIT;

    if (sandbox_seccomp_notify_probe(&why) < 0) {
        snprintf(s->notify_off, sizeof(s->notify_off), "seccomp denials not counted: %s", why.msg);
        verbose("%s", s->notify_off);
        return 0;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s->notifysock) < 0) {
        say("socketpair: %s", strerror(errno));
        return -errno;
    }
    s->notify = 1;
    return 0;
}

static int run_plan_mounts(run_state *s)
{
    /* A root caller's command is nobody outside: what it is given, root's
     * files included, must appear as its own (id-mapped), or a 0700 ~/.cargo
     * or a root-owned fork would be out of its reach. */
    const unsigned idmap = s->root_mapped ? SANDBOX_MOUNT_IDMAP : 0;
    const unsigned rw = SANDBOX_MOUNT_RW | idmap;
    sandbox_mount_plan *p = &s->mounts;
    rg_error err = RG_ERROR_INIT;
    char buf[PATH_MAX], path[PATH_MAX], *pwhome = NULL, *info = NULL;
    struct passwd *pw;
    size_t i;
    int rc, userns_fd = -1;

    if (!(s->o.ns & SANDBOX_NS_MOUNT))
        return 0;
    /* Writable: the private /tmp, then TMPDIR, the fork and -w paths in it. */
    rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_TMPFS, NULL, "/tmp", 0, &err);
    if (rc == 0)
        rc = s->tmp_inside
                 ? sandbox_mount_plan_add(p, SANDBOX_MOUNT_TMPFS, NULL, s->tmpdir,
                                          SANDBOX_MOUNT_PRIVATE, &err)
                 : sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->tmpdir, s->tmpdir, rw, &err);
    /* The fork over the directory it was forked from (run_place_fork). */
    if (rc == 0)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->workdir, s->shown, rw, &err);
    if (rc == 0 && s->fork.src != NULL)
        rc = fork_exclude_plan_mounts(p, &s->excl, s->fork.src, s->shown, idmap, &err);
    /* -d DIR's .git: read-only, and a mount point nothing can replace (dirgit.h). */
    if (rc == 0 && s->dirgit.existed)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->dirgit.git, s->dirgit.git, idmap,
                                    &err);
    for (i = 0; rc == 0 && i < s->o.nwrites; i++)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->writes[i], s->writes[i], rw, &err);
    for (i = 0; rc == 0 && s->reads[i] != NULL; i++)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->reads[i], s->reads[i], idmap, &err);
    for (i = 0; rc == 0 && s->binds[i].dst != NULL; i++)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->binds[i].src, s->binds[i].dst,
                                    s->binds[i].ro ? idmap : rw, &err);
    /* The home directory: a tmpfs with only the toolchain paths in it. */
    if (rc == 0)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_TMPFS, NULL, s->home.path, 0, &err);
    /* Before the toolchain paths: the first entry for a path wins. */
    if (rc == 0)
        rc = sandbox_caches_mount(&s->caches, p, idmap, &err);
    if (rc == 0)
        rc = sandbox_toolconf_mount(&s->conf, p, idmap, &err);
    for (i = 0; rc == 0 && sandbox_home_readable_names[i]; i++) {
        snprintf(path, sizeof(path), "%s/%s", s->home.path, sandbox_home_readable_names[i]);
        if (realpath(path, buf) == NULL || sandbox_home_conflict(&s->home, buf) != NULL)
            continue;
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, buf, path, SANDBOX_MOUNT_OPTIONAL, &err);
    }
    /* The passwd entry's home around $HOME: emptied too, so the rest of
     * the real home (shell history, agents' credentials) is not there. */
    pw = getpwuid(getuid());
    if (rc == 0 && pw != NULL && pw->pw_dir[0] == '/' && (pwhome = realpath(pw->pw_dir, NULL)) &&
        strcmp(pwhome, "/") != 0 &&
        sandbox_home_relate(pwhome, s->home.path) == SANDBOX_HOME_CONTAINS)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_TMPFS, NULL, pwhome, 0, &err);
    /* Secrets outside the home directory (and the passwd home apart from it). */
    for (i = 1; rc == 0 && i < s->home.nhidden; i++)
        rc = run_hide(s, s->home.hidden[i], &err);
    for (i = 0; rc == 0 && run_hidden_sockets[i]; i++)
        rc = run_hide(s, run_hidden_sockets[i], &err);
    for (i = 0; rc == 0 && run_hidden_vars[i]; i++)
        rc = run_hide_var(s, getenv(run_hidden_vars[i]), &err);
    for (i = 0; rc == 0 && i < s->o.nhides; i++) {
        if (realpath(s->o.hides[i], buf) == NULL) {
            verbose("--hide %s: %s; nothing to hide", s->o.hides[i], strerror(errno));
            continue;
        }
        rc = run_hide(s, buf, &err);
    }
    /* The home directory mounted elsewhere too (a bind mount, the disk twice). */
    info = rc == 0 ? run_read_mountinfo() : NULL;
    if (rc == 0 && info == NULL) {
        rc = -EIO;
        rg_error_set(&err, rc, "cannot read /proc/self/mountinfo to find other mounts of %s",
                     s->home.path);
    }
    if (rc == 0)
        rc = run_hide_aliases(s, info, s->home.path, &err);
    if (rc == 0 && pwhome != NULL && strcmp(pwhome, s->home.path) != 0 && strcmp(pwhome, "/"))
        rc = run_hide_aliases(s, info, pwhome, &err);
    if (rc == 0)
        rc = sandbox_mount_plan_finish(p, &err);
    if (rc == 0 && s->root_mapped)
        rc = sandbox_ns_idmap_userns(&userns_fd, SANDBOX_NS_ROOT_UID, SANDBOX_NS_ROOT_GID, &err);
    if (rc == 0 && geteuid() == 0)
        rc = sandbox_mount_prepare(p, userns_fd, &err);
    if (userns_fd >= 0)
        close(userns_fd);
    free(info);
    free(pwhome);
    if (rc < 0)
        say("%s", err.msg);
    return rc;
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
    rc = run_parse(&s.o, argc, argv);
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
