#!/usr/bin/env bash
# Finding 9: the run planted core.fsmonitor, hooks, include paths, aliases,
# filters... in the fork's .git, which ran unconfined at the user's first
# `git status` or `git commit` in the fork after the run. refgate-run now
# rewrites the fork's .git/config keeping an allow-list of keys, moves the
# hooks and anything that redirects git (commondir, config.worktree, a .git
# made a symlink) aside, and names what it neutralised. The real git is run
# in the fork afterwards: nothing planted runs, and git still works.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v git >/dev/null; then
    echo "SKIP: needs git"
    exit 77
fi
git -C "$PROJ" remote add origin https://example.com/acme/app.git
git -C "$PROJ" config pull.rebase true

M="$OUT/marks"
mkdir -p "$M"
chmod 777 "$M" # the planting side runs as nobody when the suite is root
# Every mark below is written only if a planted program runs outside: the
# sandbox cannot write $OUT at all.
plant='set -e
cat >.git/fsm.sh <<EOS
#!/bin/sh
touch '"$M"'/\${1:-x}
EOS
chmod +x .git/fsm.sh
cp .git/fsm.sh .git/hooks/pre-commit
cp .git/fsm.sh .git/hooks/post-commit
git config core.fsmonitor "$PWD/.git/fsm.sh"
git config alias.st "!$PWD/.git/fsm.sh alias"
git config core.pager "$PWD/.git/fsm.sh pager"
git config filter.evil.clean "$PWD/.git/fsm.sh filter"
git config credential.helper "$PWD/.git/fsm.sh cred"
git config diff.external "$PWD/.git/fsm.sh diffext"
printf "[core]\n\tfsmonitor = %s\n" "$PWD/.git/fsm.sh" >.git/included
git config include.path "$PWD/.git/included"
git config --add "includeIf.gitdir:/.path" "$PWD/.git/included"
echo "* filter=evil" >.gitattributes
printf "[core]\n\tsshCommand = %s\n" "$PWD/.git/fsm.sh" >.git/config.worktree
chmod 555 .git # so that a rewrite by the same user would fail
echo planted'
out=$(cd "$PROJ" && "$RUN" -- sh -c "$plant" 2>"$T/err")
err=$(cat "$T/err")
F="$PROJ.1"
contains "the command planted its config" "$out" "planted"

git -C "$F" status >/dev/null 2>&1
git -C "$F" st >/dev/null 2>&1
git -C "$F" diff >/dev/null 2>&1
echo work >>"$F/README"
git -C "$F" -c user.name=t -c user.email=t@t commit -qam "after the run" >/dev/null 2>&1
st=$?
git -C "$F" -p log -1 >/dev/null 2>&1
planted=$(ls "$M")
equals "nothing planted in the fork's .git ran at git status/diff/commit/log" "$planted" ""

contains "the summary names core.fsmonitor" "$err" "config core.fsmonitor"
contains "the summary names include.path" "$err" "config include.path"
contains "the summary names the pre-commit hook" "$err" "hooks/pre-commit"
contains "the summary names config.worktree" "$err" "config.worktree"
lacks "the summary does not name kept keys" "$err" "core.filemode"
check "the run's config is kept for reading" test -f "$F/.git/config.refgate-run-orig"
equals "... readable only by its owner" "$(stat -c %a "$F/.git/config.refgate-run-orig")" 600
check "the hooks were moved aside" test -x "$F/.git/hooks.refgate-disabled/pre-commit"

# Normal work in the fork still succeeds after neutralising.
equals "git commit works in the fork" "$st" 0
equals "git log sees the commit" "$(git -C "$F" log -1 --format=%s)" "after the run"
check "git status works in the fork" git -C "$F" status --short
equals "the remote URL the base had is kept" "$(git -C "$F" config remote.origin.url)" \
    "https://example.com/acme/app.git"
equals "an allowed key is kept" "$(git -C "$F" config pull.rebase)" "true"
equals "core.repositoryformatversion is kept" "$(git -C "$F" config core.repositoryformatversion)" 0

# A run that changes the remote's URL (the user's credentials would go
# there at the next fetch) or makes .git a symlink to a crafted directory.
plant2='git config remote.origin.url https://attacker.example/x.git
mkdir ../evil 2>/dev/null; mkdir -p evilgit && cp -r .git/. evilgit/ && git --git-dir=evilgit config core.fsmonitor "$PWD/fsm" && rm -rf .git && ln -s evilgit .git
printf "#!/bin/sh\ntouch '"$M"'/symlinked\n" >fsm; chmod +x fsm; echo planted2'
out=$(cd "$PROJ" && "$RUN" -- sh -c "$plant2" 2>"$T/err2")
err=$(cat "$T/err2")
F2="$PROJ.2"
contains "the second command ran" "$out" "planted2"
git -C "$F2" status >/dev/null 2>&1
equals "a .git symlinked to a crafted directory runs nothing" "$(ls "$M")" ""
contains "the summary names the symlinked .git" "$err" ".git (a symlink)"
check "the symlink was moved aside" test -L "$F2/.git.refgate-disabled"

# A repository planted below the top and made a submodule (a gitlink in
# the index): `git status` at the top recurses into it and reads its config.
plant3='set -e
printf "#!/bin/sh\ntouch '"$M"'/nested\n" >.git/fsm.sh; chmod +x .git/fsm.sh
# The names refgate-run moves things to, taken first.
mkdir -p .git/config.refgate-run-orig/x .git/config.refgate-run-tmp/x
git config core.fsmonitor "$PWD/.git/fsm.sh"
mkdir sub && cd sub && git init -q && echo s >s && git add s
git -c user.name=t -c user.email=t@t commit -qm s
git config core.fsmonitor "$(cd .. && pwd)/.git/fsm.sh"
cd .. && git add sub 2>/dev/null; echo planted3'
out=$(cd "$PROJ" && "$RUN" -- sh -c "$plant3" 2>"$T/err4")
contains "the third command ran" "$out" "planted3"
F4=$(sed -n 's/^refgate-run: fork: \([^ ]*\) .*/\1/p' "$T/err4")
echo change >>"$F4/sub/s"
git -C "$F4" status >/dev/null 2>&1
git -C "$F4/sub" status >/dev/null 2>&1
equals "a nested repository's fsmonitor runs neither from the top nor inside it" "$(ls "$M")" ""
lacks "names taken in advance do not stop the rewrite" "$(cat "$F4/.git/config")" "fsmonitor"
contains "the summary names the nested repository's key" "$(cat "$T/err4")" \
    "sub/.git: config core.fsmonitor"
check "git status still works in the nested repository" git -C "$F4/sub" status --short

# A changed URL is dropped (no symlink this time).
out=$(cd "$PROJ" && "$RUN" -- sh -c 'git config remote.origin.url https://attacker.example/x.git' 2>"$T/err3")
F3=$(sed -n 's/^refgate-run: fork: \([^ ]*\) .*/\1/p' "$T/err3")
contains "a changed remote URL is named" "$(cat "$T/err3")" "config remote.origin.url"
lacks "a changed remote URL is not kept" "$(cat "$F3/.git/config")" "attacker"

if user_setup; then
    rm -f "$M"/*
    out=$(cd "$U/proj" && as_user "$RUN" -- sh -c "$plant" 2>"$T/erru")
    contains "unprivileged: the command planted its config" "$out" "planted"
    as_user git -C "$U/proj.1" status >/dev/null 2>&1
    echo more >>"$U/proj.1/README"
    as_user git -C "$U/proj.1" -c user.name=u -c user.email=u@u commit -qam u >/dev/null 2>&1
    equals "unprivileged: git commit works in the fork" "$?" 0
    equals "unprivileged: nothing planted ran at git status/commit" "$(ls "$M")" ""
    contains "unprivileged: the summary names core.fsmonitor" "$(cat "$T/erru")" \
        "config core.fsmonitor"
fi
finish
