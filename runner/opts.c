/*
 * refgate-run's options: the --help text and the parsing of the command
 * line into run_opts, with the checks that options agree with each other
 * (the network mode and the namespaces, -d and the fork's options).
 */
#include "runner/runner.h"

#include <getopt.h>

/*
 * The whole --help text, in one place: run_opts_help() is its only reader (the man
 * page will feed it). An array, not a literal in the function, so the function stays short.
 */
static const char run_help_text[] =
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

const char *run_opts_help(void)
{
    return run_help_text;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

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
static int run_parse_net(run_opts *o, rg_error *err)
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
        if (o->gateway != NULL && strcmp(o->gateway, m + 8) != 0)
            return rg_error_set(err, -EINVAL, "--net %s and --gateway %s name two gateways", m,
                                o->gateway);
        o->gateway = m + 8;
        o->net_mode = SANDBOX_NET_GATEWAY;
    } else if (strncmp(m, "allow=", 6) == 0) {
        o->net_mode = SANDBOX_NET_ALLOW;
        o->allow = m + 6;
    } else {
        return rg_error_set(err, -EINVAL,
                            "--net: unknown mode '%s' (expected none, gateway, gateway=HOST:PORT, "
                            "allow=HOST:PORT,... or host)",
                            m);
    }
    if (o->net_mode == SANDBOX_NET_GATEWAY && o->gateway == NULL)
        return rg_error_set(err, -EINVAL,
                            "--net gateway needs the gateway's address: --gateway URL or --net "
                            "gateway=HOST:PORT");
    if (o->net_mode == SANDBOX_NET_HOST) {
        o->ns &= ~SANDBOX_NS_NET;
    } else if (!(o->ns & SANDBOX_NS_NET)) {
        return rg_error_set(
            err, -EINVAL,
            "--net %s needs the net namespace: drop --share-net / --share=net, or use --net host",
            o->net_mode == SANDBOX_NET_NONE      ? "none"
            : o->net_mode == SANDBOX_NET_GATEWAY ? "gateway"
                                                 : "allow");
    }
    return 0;
}

/* getopt's tables, from the option table (options.h). */
static void run_getopt_tables(struct option *longopts, char *shorts)
{
    const runner_option *o;
    size_t n = 0, k = 0;

    /* "+": options end at the command, so its own options stay its own;
     * ":": a missing value is told apart from an unknown option. */
    shorts[k++] = '+';
    shorts[k++] = ':';
    for (o = runner_options; o->name != NULL; o++, n++) {
        longopts[n] = (struct option){o->name + 2, (int)o->arg, NULL, o->id};
        if (o->short_name == NULL)
            continue;
        shorts[k++] = o->short_name[1];
        if (o->arg == RUNNER_ARG_REQUIRED)
            shorts[k++] = ':';
    }
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    shorts[k] = '\0';
}

/* --unshare, --share and --debug-ns-unavailable: a list of namespaces. */
static int run_parse_ns(run_opts *o, unsigned *shared, int c, const char *arg, rg_error *err)
{
    unsigned set;

    if (sandbox_ns_parse(&set, arg,
                         c == RUNNER_OPT_UNSHARE ? "--unshare"
                         : c == RUNNER_OPT_SHARE ? "--share"
                                                 : "--debug-ns-unavailable",
                         err) < 0)
        return -EINVAL;
    if (c == RUNNER_OPT_UNSHARE)
        o->ns = set;
    else if (c == RUNNER_OPT_SHARE)
        *shared |= set;
    else
        o->debug_no_ns |= set;
    return 0;
}

/* What getopt could not take: an unknown option or one without its value. */
static int run_parse_bad(int c, char **argv, rg_error *err)
{
    const char *arg = argv[optind - 1];

    if (c == ':')
        return rg_error_set(err, -EINVAL, "%s needs a value; try 'refgate-run --help'", arg);
    if (optopt > 0 && optopt < 256)
        return rg_error_set(err, -EINVAL, "unknown option '-%c'; try 'refgate-run --help'", optopt);
    return rg_error_set(err, -EINVAL, "unknown option '%s'; try 'refgate-run --help'", arg);
}

/* The options once all are read: whether they agree. */
static int run_parse_check(run_opts *o, rg_error *err)
{
    if (run_parse_net(o, err) < 0)
        return -EINVAL;
    if (o->nhides > 0 && !(o->ns & SANDBOX_NS_MOUNT))
        return rg_error_set(err, -EINVAL, "--hide needs the mount namespace (drop --share=mount)");
    if (o->nbinds + o->nrobinds > 0 && !(o->ns & SANDBOX_NS_MOUNT))
        return rg_error_set(err, -EINVAL,
                            "--bind and --ro-bind need the mount namespace (drop --share=mount)");
    if (!o->check && o->argv[0] == NULL)
        return rg_error_set(err, -EINVAL,
                            "no command given; usage: refgate-run [options] -- CMD [ARGS...]");
    /* Without the mount namespace an excluded directory would be an empty
     * placeholder inside: refused rather than silently empty. */
    if ((o->nexcludes > 0 || o->exclude_ignored) && (o->dir != NULL || !(o->ns & SANDBOX_NS_MOUNT)))
        return rg_error_set(err, -EINVAL,
                            "--exclude and --exclude-ignored need a fork (no -d) and the mount "
                            "namespace (drop --share=mount): an excluded directory is shown "
                            "read-only from the original");
    if (o->dir != NULL && o->rm)
        return rg_error_set(err, -EINVAL, "--rm removes a fork; with -d there is none");
    if (o->dir != NULL && o->cont)
        return rg_error_set(err, -EINVAL, "--continue runs in a fork; with -d there is none");
    if (o->cont && (o->nexcludes > 0 || o->exclude_ignored))
        return rg_error_set(err, -EINVAL,
                            "--exclude and --exclude-ignored apply when a fork is made; a "
                            "continued fork keeps the exclusions it was made with");
    return 0;
}

int run_parse(run_opts *o, int argc, char **argv, rg_error *err)
{
    struct option longopts[64];
    char shorts[64];
    unsigned shared = 0;
    char *end;
    long v;
    int c, rc = 0;

    run_getopt_tables(longopts, shorts);
    o->debug_abi = -1;
    o->ns = SANDBOX_NS_ALL;
    /* From the start, and quietly: every message is the caller's to say. */
    optind = 0;
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
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
        case RUNNER_OPT_RM:
            o->rm = 1;
            break;
        case RUNNER_OPT_KEEP_TMP:
            o->keep_tmp = 1;
            break;
        case RUNNER_OPT_FORCE:
            o->force = 1;
            break;
        case RUNNER_OPT_NO_SCOPE:
            o->no_scope = 1;
            break;
        case RUNNER_OPT_NO_TRUNCATE:
            o->no_truncate = 1;
            break;
        case RUNNER_OPT_UNCONFINED:
            o->allow_unconfined = 1;
            break;
        case RUNNER_OPT_CHECK:
            o->check = 1;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case 'v':
            o->verbose = 1;
            break;
        case 'h':
            return RUN_PARSE_HELP;
        case RUNNER_OPT_VERSION:
            return RUN_PARSE_VERSION;
        case RUNNER_OPT_UNSHARE:
        case RUNNER_OPT_SHARE:
        case RUNNER_OPT_DEBUG_NS:
            if (run_parse_ns(o, &shared, c, optarg, err) < 0)
                return -EINVAL;
            break;
        case RUNNER_OPT_SHARE_NET:
            shared |= SANDBOX_NS_NET;
            break;
        case RUNNER_OPT_NO_PTY:
            o->no_pty = 1;
            break;
        case RUNNER_OPT_NET:
            o->net = optarg;
            break;
        case RUNNER_OPT_GATEWAY:
            o->gateway = optarg;
            break;
        case RUNNER_OPT_HIDE:
            rc = run_push(&o->hides, &o->nhides, optarg);
            break;
        case RUNNER_OPT_EXCLUDE:
            rc = run_push(&o->excludes, &o->nexcludes, optarg);
            break;
        case RUNNER_OPT_EXCLUDE_IGNORED:
            o->exclude_ignored = 1;
            break;
        case RUNNER_OPT_BIND:
            rc = run_push(&o->binds, &o->nbinds, optarg);
            break;
        case RUNNER_OPT_RO_BIND:
            rc = run_push(&o->robinds, &o->nrobinds, optarg);
            break;
        case RUNNER_OPT_CONTINUE:
            o->cont = 1;
            o->cont_fork = optarg;
            /* `--continue FORK`: the next argument, when it is a directory. */
            if (optarg == NULL && optind < argc && argv[optind][0] != '-' &&
                run_is_dir(argv[optind]))
                o->cont_fork = argv[optind++];
            break;
        case RUNNER_OPT_NO_CACHES:
            o->no_caches = 1;
            break;
        case RUNNER_OPT_CACHE_DIR:
            o->cache_dir = optarg;
            break;
        case RUNNER_OPT_MKDIR:
            o->mkdir = 1;
            break;
        case RUNNER_OPT_DEBUG_ABI:
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || v < 0 || v > 100)
                return rg_error_set(err, -EINVAL,
                                    "--debug-landlock-abi: expected a number from 0, got '%s'",
                                    optarg);
            o->debug_abi = (int)v;
            break;
        default:
            return run_parse_bad(c, argv, err);
        }
    }
    if (rc < 0)
        return rg_error_set(err, rc, "out of memory");
    o->ns &= ~shared;
    o->argv = argv + optind;
    return run_parse_check(o, err);
}
