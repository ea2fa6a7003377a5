# shellcheck shell=bash disable=SC2034  # OUTPUT, STATUS are read by the tests
# Shared setup for the refgate-run script tests (sourced, not a test: only
# test_*.sh files are registered). Each test gets a throwaway directory $T
# with a test HOME holding fake secrets and a git project $PROJ to fork, and
# a tiny assertion vocabulary. The suite may run as root: root bypasses file
# permissions, so every denial asserted here is Landlock's (or the runner's)
# doing, not the DAC's.

set -u

if [ -z "${REFGATE_RUN:-}" ] || [ ! -x "${REFGATE_RUN}" ]; then
    echo "SKIP: REFGATE_RUN does not point at the refgate-run binary"
    exit 77
fi
RUN=$REFGATE_RUN

# Not under /tmp: the sandbox's /tmp is a private tmpfs, which would hide
# the test HOME and project wholesale and leave the finer layers untested.
T=$(mktemp -d /var/tmp/rg-sandbox-test.XXXXXX)
# Searchable by others: run as root, the sandboxed command is nobody outside
# and must reach its fork and HOME through the directories above them.
chmod 755 "$T"
FAILURES=0
CLEANUPS=()

at_exit() {
    local c
    for c in "${CLEANUPS[@]+"${CLEANUPS[@]}"}"; do
        eval "$c" || true
    done
    # Copies of read-only directories stay read-only: make them removable.
    chmod -R u+rwx "$T" 2>/dev/null
    rm -rf "$T"
}
trap at_exit EXIT

# A home with the secrets the issue names, and toolchain config.
export HOME="$T/home"
mkdir -p "$HOME/.ssh" "$HOME/.aws" "$HOME/.gnupg" "$HOME/.kube" "$HOME/.docker" \
    "$HOME/.config/gh" "$HOME/.local/bin" "$HOME/docs"
echo "SECRET-SSH-KEY" >"$HOME/.ssh/id_ed25519"
printf '[default]\naws_secret_access_key = SECRET-AWS\n' >"$HOME/.aws/credentials"
echo "machine example.com login me password SECRET-NETRC" >"$HOME/.netrc"
echo "SECRET-GH" >"$HOME/.config/gh/hosts.yml"
echo "SECRET-KUBE" >"$HOME/.kube/config"
printf '[user]\n\tname = Test\n\temail = test@example.com\n' >"$HOME/.gitconfig"
echo "readable doc" >"$HOME/docs/readme"
printf '#!/bin/sh\necho local-bin-ok\n' >"$HOME/.local/bin/hello"
chmod +x "$HOME/.local/bin/hello"
chmod 700 "$HOME/.ssh"
chmod 600 "$HOME/.ssh/id_ed25519"

# A project with history, uncommitted work and build output.
PROJ="$T/proj"
mkdir -p "$PROJ/src" "$PROJ/build" "$PROJ/empty"
echo "int main(void) { return 0; }" >"$PROJ/src/main.c"
echo "readme" >"$PROJ/README"
if command -v git >/dev/null 2>&1; then
    git -C "$PROJ" init -q
    git -C "$PROJ" add README src
    git -C "$PROJ" -c user.name=t -c user.email=t@t commit -qm init
fi
echo "uncommitted" >>"$PROJ/README"
echo "object" >"$PROJ/build/main.o"
# A directory outside both the project and HOME, for "outside" targets.
OUT="$T/outside"
mkdir -p "$OUT"

ok() { echo "ok - $1"; }
not_ok() {
    echo "FAIL - $1"
    FAILURES=$((FAILURES + 1))
}

# check NAME CMD...: the command must succeed.
check() {
    local name=$1
    shift
    if "$@"; then ok "$name"; else not_ok "$name"; fi
}

# contains NAME HAYSTACK NEEDLE / lacks NAME HAYSTACK NEEDLE
contains() {
    case "$2" in
    *"$3"*) ok "$1" ;;
    *)
        not_ok "$1"
        echo "  expected to find: $3"
        echo "  in: $2" | head -20
        ;;
    esac
}
lacks() {
    case "$2" in
    *"$3"*)
        not_ok "$1"
        echo "  did not expect: $3"
        echo "  in: $2" | head -20
        ;;
    *) ok "$1" ;;
    esac
}

# denied NAME HAYSTACK NEEDLE: NEEDLE followed by an error one of the
# sandbox's layers answers with: EACCES (Landlock, a hidden path's modes),
# ENOENT (the private home, /tmp and /dev, a pid outside the namespace),
# EROFS (the read-only host tree) or EPERM. Which layer answers first is
# not the point; that the access fails is.
denied() {
    local e
    for e in "Permission denied" "No such file or directory" "Read-only file system" \
        "Operation not permitted" "No such process"; do
        case "$2" in *"$3: $e"*)
            ok "$1"
            return
            ;;
        esac
    done
    not_ok "$1"
    echo "  expected a refusal of: $3"
    echo "  in: $2" | head -20
}

# equals NAME GOT WANT
equals() {
    if [ "$2" = "$3" ]; then ok "$1"; else
        not_ok "$1"
        echo "  got:  $2"
        echo "  want: $3"
    fi
}

absent() {
    if [ -e "$2" ] || [ -L "$2" ]; then
        not_ok "$1"
        echo "  exists: $2"
    else ok "$1"; fi
}

finish() {
    if [ "$FAILURES" -gt 0 ]; then
        echo "$FAILURES check(s) failed"
        exit 1
    fi
    echo "all checks passed"
    exit 0
}

# The kernel's Landlock ABI as refgate-run sees it (0: none).
landlock_abi() {
    "$RUN" --check 2>/dev/null | sed -n 's/^Landlock: ABI \([0-9]*\).*/\1/p' | head -1
}

# Skip the test when the kernel cannot confine the way these tests assert.
require_abi() {
    local abi
    abi=$(landlock_abi)
    if [ -z "$abi" ] || [ "$abi" -lt "$1" ]; then
        echo "SKIP: needs Landlock ABI >= $1; this kernel offers ${abi:-none}"
        exit 77
    fi
}

# fork_path: the fork's path from refgate-run's stderr on stdin ("fork: X (base Y)").
fork_path() {
    sed -n 's/^refgate-run: fork: \(.*\) (base .*/\1/p' | head -1
}

# sandbox ARGS...: run refgate-run quietly in a throwaway fork of $PROJ,
# stdout and stderr together in $OUTPUT, exit status in $STATUS.
sandbox() {
    OUTPUT=$(cd "$PROJ" && "$RUN" -q --rm "$@" 2>&1)
    STATUS=$?
}

# sandbox_sh SCRIPT: run a shell script in a throwaway fork.
sandbox_sh() {
    sandbox -- /bin/sh -c "$1"
}

# --- the unprivileged variant ------------------------------------------------
# Escape tests run as root (the suite's usual case) and again as an
# unprivileged account, created here when absent. user_setup prepares $U
# (a HOME with a secret and a copy of the project, owned by that account)
# and returns 1, after saying why, when that is impossible.
RG_TEST_USER=rgtest-sandbox
user_setup() {
    if [ "$(id -u)" != 0 ]; then
        echo "# not root: the unprivileged variant is the run above"
        return 1
    fi
    if ! command -v setpriv >/dev/null; then
        echo "# no setpriv (util-linux): unprivileged variant skipped"
        return 1
    fi
    if ! id "$RG_TEST_USER" >/dev/null 2>&1 &&
        ! useradd -m -s /bin/sh "$RG_TEST_USER" >/dev/null 2>&1; then
        echo "# cannot create the account $RG_TEST_USER: unprivileged variant skipped"
        return 1
    fi
    U="$T/u"
    mkdir -p "$U/home/.ssh" "$U/proj"
    echo "SECRET-USER-SSH-KEY" >"$U/home/.ssh/id_ed25519"
    printf '[user]\n\tname = U\n' >"$U/home/.gitconfig"
    cp -a "$PROJ/." "$U/proj/"
    chown -R "$RG_TEST_USER:" "$U"
    # The binary (and the sanitizer runtime's paths) must be reachable.
    if ! as_user test -x "$RUN"; then
        echo "# $RG_TEST_USER cannot run $RUN: unprivileged variant skipped"
        return 1
    fi
}

# as_user CMD...: run CMD as the unprivileged account, HOME=$U/home.
as_user() {
    setpriv --reuid "$RG_TEST_USER" --regid "$RG_TEST_USER" --init-groups \
        env HOME="$U/home" USER="$RG_TEST_USER" LOGNAME="$RG_TEST_USER" "$@"
}

# user_sandbox_sh SCRIPT: sandbox_sh as the unprivileged account, in a
# throwaway fork of $U/proj.
user_sandbox_sh() {
    OUTPUT=$(cd "$U/proj" && as_user "$RUN" -q --rm -- /bin/sh -c "$1" 2>&1)
    STATUS=$?
}

# wait_for_file PATH: poll (bounded, 10 s) until PATH exists and is not empty.
wait_for_file() {
    local i
    for i in $(seq 200); do
        [ -s "$1" ] && return 0
        sleep 0.05
    done
    return 1
}

# serve NAME: an HTTP server ($PY's http.server) on a free loopback port
# serving "content-of-NAME" at /index.txt; its port in PORT_NAME. Stopped
# with the test's other CLEANUPS.
serve() {
    local dir="$T/www-$1" log="$T/$1.log" port
    mkdir -p "$dir"
    echo "content-of-$1" >"$dir/index.txt"
    "$PY" -u -m http.server 0 --bind 127.0.0.1 --directory "$dir" >"$log" 2>&1 &
    CLEANUPS+=("kill $!")
    wait_for_file "$log" || {
        echo "the $1 server did not start"
        exit 1
    }
    port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$log" | head -1)
    eval "PORT_$1=$port"
}
