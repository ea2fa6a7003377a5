#!/usr/bin/env bash
# -d DIR runs in the user's own directory, so what the command planted in
# DIR/.git would run outside the sandbox at the user's next git command
# there. A DIR/.git that exists is bound read-only inside (and, a mount
# point, cannot be renamed or replaced): planting core.fsmonitor or a hook
# fails, reading the repository works. A .git the run creates is moved
# aside afterwards and named in the summary. A .git that is a symlink, or
# one without the mount namespace to bind it, is refused. As root and as
# the unprivileged test user.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v git >/dev/null; then
    echo "SKIP: needs git"
    exit 77
fi
# No repository above the test's directories is git's business here.
export GIT_CEILING_DIRECTORIES=$T

PLANT='git config core.fsmonitor "touch $PWNED" 2>&1 || echo "config: refused"
printf "#!/bin/sh\ntouch $PWNED\n" >.git/hooks/pre-commit 2>&1 && chmod +x .git/hooks/pre-commit || echo "hook: refused"
mv .git .git.moved 2>&1 || echo "rename: refused"
rm -rf .git 2>&1 || echo "remove: refused"
git log --oneline | head -1 | sed "s/^/log: /"
git status --short >/dev/null && echo "status: works"
echo new >written && echo "write: works"'

# check_repo WHO DIR: a -d run in DIR (a repository) as `run` runs it.
check_repo() {
    local who=$1 dir=$2
    contains "$who: the run succeeds" "$OUTPUT" "write: works"
    contains "$who: core.fsmonitor cannot be planted" "$OUTPUT" "config: refused"
    contains "$who: a hook cannot be planted" "$OUTPUT" "hook: refused"
    contains "$who: .git cannot be renamed" "$OUTPUT" "rename: refused"
    contains "$who: .git cannot be removed" "$OUTPUT" "remove: refused"
    contains "$who: the history is readable" "$OUTPUT" "log: "
    contains "$who: git status works" "$OUTPUT" "status: works"
    equals "$who: no fsmonitor in DIR/.git afterwards" "$(git -C "$dir" config core.fsmonitor)" ""
    absent "$who: no hook in DIR/.git afterwards" "$dir/.git/hooks/pre-commit"
    git -C "$dir" status >/dev/null 2>&1
    absent "$who: git status in DIR afterwards runs nothing planted" "$PWNED"
}

PWNED="$T/pwned"
W="$T/repo"
cp -a "$PROJ" "$W"
OUTPUT=$("$RUN" -q -d "$W" -- env PWNED="$PWNED" sh -c "$PLANT" 2>&1)
check_repo root "$W"

# A .git the run creates: moved aside, named in the summary.
E="$T/empty"
mkdir -p "$E"
chmod 777 "$E"
OUTPUT=$("$RUN" -q -d "$E" -- env PWNED="$PWNED" sh -c \
    'git init -q && git config core.fsmonitor "touch $PWNED" && echo created' 2>&1)
contains "a .git can be created in a -d run" "$OUTPUT" "created"
absent "the created .git is not left in place" "$E/.git"
check "it is moved to .git.refgate-disabled" test -d "$E/.git.refgate-disabled"
contains "the summary names it" "$OUTPUT" \
    "1 thing in the directory's .git neutralised (.git (created by the run): moved to .git.refgate-disabled)"
git -C "$E" status >/dev/null 2>&1
absent "git status there afterwards runs nothing planted" "$PWNED"

# A gitfile (a worktree's .git) is bound read-only as well.
G="$T/gitfile"
mkdir -p "$G"
git -C "$W" worktree add -q "$G/wt" 2>/dev/null
OUTPUT=$("$RUN" -q -d "$G/wt" -- sh -c 'echo "gitdir: /tmp/evil" >.git || echo "gitfile: refused"' 2>&1)
contains "a gitfile cannot be rewritten" "$OUTPUT" "gitfile: refused"

# Refusals: a .git symlink; a .git without the mount namespace.
L="$T/linked"
mkdir -p "$L"
ln -s "$W/.git" "$L/.git"
OUTPUT=$("$RUN" -q -d "$L" -- true 2>&1)
equals "a -d DIR whose .git is a symlink is refused" "$?" 125
contains "... saying why" "$OUTPUT" "its .git is a symlink"
# As root the user namespace needs the mount namespace: share both.
OUTPUT=$("$RUN" -q --share=user,mount -d "$W" -- true 2>&1)
equals "a -d DIR with a .git and no mount namespace is refused" "$?" 125
contains "... naming the way out" "$OUTPUT" "needs the mount namespace (drop --share=mount)"
OUTPUT=$("$RUN" -q --share=user,mount -d "$E" -- true 2>&1)
equals "without a .git, -d runs without the mount namespace" "$?" 0

contains "--help states the -d rule" "$("$RUN" --help)" "With -d (no fork): DIR/.git"

if user_setup; then
    chmod 777 "$T"
    rm -f "$PWNED"
    OUTPUT=$(as_user "$RUN" -q -d "$U/proj" -- env PWNED="$PWNED" sh -c "$PLANT" 2>&1)
    check_repo unprivileged "$U/proj"
    OUTPUT=$(as_user "$RUN" -q --share=mount -d "$U/proj" -- true 2>&1)
    equals "unprivileged: a -d DIR with a .git and no mount namespace is refused" "$?" 125
    chmod 755 "$T"
fi

finish
