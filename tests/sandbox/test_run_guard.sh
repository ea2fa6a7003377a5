#!/usr/bin/env bash
# The fork is hardened even when refgate-run is SIGKILLed mid-run: its
# guardian (a process in a session of its own, outside the sandbox) sees
# the runner gone, waits for the run to end and neutralises the fork's
# .git, so `git status` and `git commit` there run nothing the command
# planted (core.fsmonitor, a pre-commit hook). Killing the runner's whole
# process group does not reach it. After a normal run it exits at once.
# As root and as the unprivileged test user.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v git >/dev/null || ! command -v setsid >/dev/null; then
    echo "SKIP: needs git and setsid"
    exit 77
fi
export GIT_CEILING_DIRECTORIES=$T
TAG="rg-guard-test-$$"
PLANT='git config core.fsmonitor "touch $PWNED.fsmonitor"
mkdir -p .git/hooks && printf "#!/bin/sh\ntouch $PWNED.hook\n" >.git/hooks/pre-commit
chmod +x .git/hooks/pre-commit
: >planted
sleep 300'

# first_fork SRC: the first fork of SRC that appears (bounded, 10 s).
first_fork() {
    local i
    for i in $(seq 200); do
        [ -e "$1.1/planted" ] && echo "$1.1" && return 0
        sleep 0.05
    done
    return 1
}

# guarded WHO SRC PWNED CMD...: start CMD (ending in setsid refgate-run, so
# the runner leads a process group of its own; every step execs, so $! is
# the runner) planting in a fork of SRC, SIGKILL
# the runner's process group once the command has planted, and check the
# fork is hardened.
guarded() {
    local who=$1 src=$2 pwned=$3 pid fork i
    shift 3
    rm -f "$pwned".*
    (cd "$src" && exec "$@" -q -- env PWNED="$pwned" sh -c "$PLANT; : $TAG") \
        >"$T/guard.out" 2>&1 &
    pid=$!
    if ! fork=$(first_fork "$src"); then
        not_ok "$who: the command planted in its fork"
        cat "$T/guard.out"
        kill -KILL "$pid" 2>/dev/null
        return
    fi
    kill -KILL -- "-$pid"
    wait "$pid" 2>/dev/null
    # The guardian's work: bounded, 10 s.
    for i in $(seq 200); do
        grep -q "its guardian neutralised" "$T/guard.out" && break
        sleep 0.05
    done
    contains "$who: the guardian says what it neutralised" "$(cat "$T/guard.out")" \
        "its guardian neutralised 2 things in $fork/.git: .git: config core.fsmonitor, .git: hooks/pre-commit"
    equals "$who: no fsmonitor left in the fork" "$(git -C "$fork" config core.fsmonitor)" ""
    git -C "$fork" status >/dev/null 2>&1
    git -C "$fork" -c user.name=t -c user.email=t@t commit -q --allow-empty -m x >/dev/null 2>&1
    absent "$who: git status in the fork runs no planted fsmonitor" "$pwned.fsmonitor"
    absent "$who: git commit in the fork runs no planted hook" "$pwned.hook"
    equals "$who: nothing of the run is left" "$(pgrep -f "$TAG" || true)" ""
    rm -rf "$fork" "$(dirname "$fork")/.$(basename "$src").1.base" \
        "$(dirname "$fork")/.$(basename "$src").1.run"
}

PWNED="$T/pwned"
guarded root "$PROJ" "$PWNED" setsid "$RUN"

# After a normal run, the runner hardened the fork and the guardian is gone.
OUTPUT=$(cd "$PROJ" && "$RUN" -q -- sh -c "git config core.fsmonitor true; : $TAG" 2>&1)
lacks "a normal run: the guardian does nothing" "$OUTPUT" "its guardian"
contains "a normal run: the runner neutralised the fork itself" "$OUTPUT" \
    "neutralised 1 thing in the fork's .git"
equals "a normal run: no guardian is left" "$(pgrep -f "$TAG" || true)" ""
rm -rf "$PROJ.1" "$T/.proj.1.base" "$T/.proj.1.run"

contains "--help names the guardian" "$("$RUN" --help)" "A guardian (a process of"

if user_setup; then
    chmod 777 "$T"
    # as_user, spelt out: a shell function cannot be exec'd.
    guarded unprivileged "$U/proj" "$T/upwned" setpriv --reuid "$RG_TEST_USER" \
        --regid "$RG_TEST_USER" --init-groups env HOME="$U/home" USER="$RG_TEST_USER" \
        LOGNAME="$RG_TEST_USER" setsid "$RUN"
    chmod 755 "$T"
fi

finish
