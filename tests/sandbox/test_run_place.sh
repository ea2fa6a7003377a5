#!/usr/bin/env bash
# Where the fork appears: with the mount namespace, at the project's own
# path (a CMake build tree and a virtualenv made before the run keep
# working, a write there lands in the fork, never the original); started
# in a subdirectory of a work tree, the top is forked and the command
# starts in the same subdirectory; a linked worktree's fork is a repository
# of its own (the main repository and its branch untouched); --bind and
# --ro-bind show a path elsewhere, refused for a secret like -w, and need
# the mount namespace. As root and as an unprivileged account.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v git >/dev/null; then
    echo "SKIP: needs git"
    exit 77
fi
NO_MOUNT=--share=mount
[ "$(id -u)" = 0 ] && NO_MOUNT=--share=user,mount

# --- the fork at the project's own path --------------------------------------
# A virtualenv records its absolute path in its scripts' #! lines.
mkdir -p "$PROJ/.venv/bin"
ln -s /bin/sh "$PROJ/.venv/bin/python"
printf '#!%s/.venv/bin/python\necho venv-tool-ok\n' "$PROJ" >"$PROJ/.venv/bin/tool"
chmod +x "$PROJ/.venv/bin/tool"
# A CMake build tree records its source and build directories: cmake
# refuses a CMakeCache.txt made for another path.
if command -v cmake >/dev/null; then
    printf 'cmake_minimum_required(VERSION 3.10)\nproject(p NONE)\n' >"$PROJ/CMakeLists.txt"
    printf 'add_custom_target(hello ALL COMMAND ${CMAKE_COMMAND} -E echo cmake-build-ok)\n' \
        >>"$PROJ/CMakeLists.txt"
    cmake -S "$PROJ" -B "$PROJ/cbuild" >/dev/null
fi
OUTPUT=$(cd "$PROJ" && "$RUN" -- sh -c 'pwd; basename "$PWD"; .venv/bin/tool
if [ -f cbuild/CMakeCache.txt ]; then cmake --build cbuild 2>&1; fi
echo inside >written; echo more >>README; cat README' 2>"$T/err")
STATUS=$?
F=$(fork_path <"$T/err")
equals "the command ran" "$STATUS" 0
equals "the fork is <dir>.1 outside" "$F" "$PROJ.1"
contains "the command's working directory is the project's own path" "$OUTPUT" "$PROJ
proj"
contains "a virtualenv's absolute #! path works inside" "$OUTPUT" "venv-tool-ok"
if command -v cmake >/dev/null; then
    contains "a CMake build tree configured before the run builds inside" "$OUTPUT" "cmake-build-ok"
    lacks "cmake does not see another directory" "$OUTPUT" "is different"
fi
equals "a write to the project's path inside lands in the fork" "$(cat "$F/written")" inside
equals "an append inside lands in the fork" "$(tail -1 "$F/README")" more
absent "the original gets nothing" "$PROJ/written"
equals "the original README is unchanged" "$(tail -1 "$PROJ/README")" "uncommitted"
contains "the end-of-run hint names refgate diff by its absolute path" "$(cat "$T/err")" \
    "\`${REFGATE:-refgate} diff $F\`"
contains "the end-of-run hint says how to continue" "$(cat "$T/err")" \
    "\`$RUN --continue $F -- CMD\` runs in it again"

# Without the mount namespace the fork is at its own path, as before.
OUTPUT=$(cd "$PROJ" && "$RUN" -q --rm $NO_MOUNT -- pwd 2>&1)
contains "without the mount namespace the command runs at the fork's path" "$OUTPUT" "$PROJ.2"

# --- a subdirectory: the work tree's top is forked ---------------------------
OUTPUT=$(cd "$PROJ/src" && "$RUN" -q -- sh -c 'pwd; git rev-parse --show-toplevel; ls ..' 2>"$T/err")
equals "started in a subdirectory, the top is forked" "$(fork_path <"$T/err")" "$PROJ.2"
contains "the command starts in the same subdirectory" "$OUTPUT" "$PROJ/src
$PROJ"
contains "the rest of the work tree is there" "$OUTPUT" "README"
absent "no fork of the subdirectory is made" "$PROJ/src.1"
absent "nothing is created inside the user's repository" "$PROJ/src/.src.1.base"

# --- a linked worktree ---------------------------------------------------------
git -C "$PROJ" worktree add -q -b side "$T/wt"
main_head=$(git -C "$PROJ" rev-parse side)
OUTPUT=$(cd "$T/wt/src" && "$RUN" -q -- sh -c 'pwd; echo wt >>main.c && git add -A &&
git -c user.name=t -c user.email=t@t commit -qm in-fork && git log --format=%s -1 &&
git config core.fsmonitor "touch /tmp/pwned"' 2>"$T/err")
STATUS=$?
W=$(fork_path <"$T/err")
equals "git commits in a linked worktree's fork" "$STATUS" 0
contains "the command starts in the worktree's subdirectory" "$OUTPUT" "$T/wt/src"
contains "the commit is made inside" "$OUTPUT" "in-fork"
check "the fork's .git is a directory of its own" test -d "$W/.git"
equals "the fork's history has the run's commit (git outside, after the run)" \
    "$(git -C "$W" log --format=%s -1)" in-fork
equals "the main repository's branch did not move" "$(git -C "$PROJ" rev-parse side)" "$main_head"
equals "the linked worktree is clean" "$(git -C "$T/wt" status --porcelain)" ""
contains "the fork's own .git is neutralised after the run" "$(cat "$T/err")" "config core.fsmonitor"
equals "... its config has no fsmonitor left" "$(git -C "$W" config core.fsmonitor)" ""
equals "the fork reads the main repository's objects as an alternate" \
    "$(cat "$W/.git/objects/info/alternates")" "$(cd "$PROJ/.git/objects" && pwd -P)"

# A submodule: its superproject is forked (with the submodule's repository
# in .git/modules), never the submodule alone inside the superproject.
git init -q "$T/subsrc"
echo s >"$T/subsrc/s"
git -C "$T/subsrc" add s && git -C "$T/subsrc" -c user.name=t -c user.email=t@t commit -qm sub-init
git -C "$PROJ" -c protocol.file.allow=always submodule add -q "$T/subsrc" mod 2>/dev/null
git -C "$PROJ" -c user.name=t -c user.email=t@t commit -qm with-mod
OUTPUT=$(cd "$PROJ/mod" && "$RUN" -q -- sh -c 'pwd; echo in-sub >>s &&
git -c user.name=t -c user.email=t@t commit -qam sub-edit && git log --format=%s -1' 2>"$T/err")
S=$(fork_path <"$T/err")
case "$S" in "$PROJ."[0-9]*) ok "in a submodule, the superproject is forked" ;;
*) not_ok "in a submodule, the superproject is forked (fork: $S)" ;; esac
contains "the command starts in the submodule" "$OUTPUT" "$PROJ/mod"
contains "git commits in the submodule inside" "$OUTPUT" "sub-edit"
absent "no fork is made inside the superproject" "$PROJ/mod.1"
equals "the original submodule's history is unchanged" \
    "$(git -C "$PROJ/mod" log --format=%s -1)" sub-init

# The main repository in the home directory (a tmpfs inside): its object
# store is bound read-only, so the alternate resolves.
git init -q "$HOME/repo"
echo r >"$HOME/repo/r"
git -C "$HOME/repo" add r && git -C "$HOME/repo" -c user.name=t -c user.email=t@t commit -qm home-main
git -C "$HOME/repo" worktree add -q -b other "$T/wt2"
OUTPUT=$(cd "$T/wt2" && "$RUN" -q --rm -- sh -c 'git log --format=%s -1; cat "$HOME/repo/r"' 2>&1)
contains "a worktree of a repository in the home directory reads its objects" "$OUTPUT" home-main
denied "the rest of that repository stays hidden" "$OUTPUT" "$HOME/repo/r"

# --- --bind and --ro-bind ---------------------------------------------------------
mkdir -p "$HOME/.local/state/cfg" "$OUT/ro"
echo conf >"$HOME/.local/state/cfg/a"
echo '{}' >"$HOME/.local/state/cfg.json"
echo ro-content >"$OUT/ro/file"
mkdir -p "$T/target"
sandbox --bind "$HOME/.local/state/cfg:$HOME/.agent" \
    --bind "$HOME/.local/state/cfg.json:$HOME/.agent.json" --ro-bind "$OUT/ro:$T/target" \
    -- sh -c 'ls ~/.local/state; cat ~/.agent/a; echo w >~/.agent/b; echo j >>~/.agent.json; cat '"$T/target/file"'
echo no >'"$T/target/new"' || echo ro-refused'
contains "a run with binds succeeds" "$OUTPUT" "ro-refused"
contains "a --bind directory appears at DST in the tmpfs home" "$OUTPUT" "conf"
equals "it is writable, through to SRC" "$(cat "$HOME/.local/state/cfg/b")" w
equals "a --bind file is writable at DST" "$(tail -1 "$HOME/.local/state/cfg.json")" j
contains "a --ro-bind appears over an existing path" "$OUTPUT" "ro-content"
denied "a --ro-bind is read-only" "$OUTPUT" "$T/target/new"
absent "nothing was written through --ro-bind" "$OUT/ro/new"
denied "SRC's own place stays hidden" "$OUTPUT" "'$HOME/.local/state'"

sandbox --bind "$HOME/.ssh:$T/target" -- cat "$T/target/id_ed25519"
equals "--bind of a secret is refused" "$STATUS" 125
contains "the refusal says why" "$OUTPUT" "refusing --bind $HOME/.ssh: it is, contains or lies inside"
lacks "the secret did not leak" "$OUTPUT" "SECRET-"
sandbox --ro-bind "$HOME:$T/target" -- true
equals "--ro-bind of the home directory is refused" "$STATUS" 125
sandbox --ro-bind "$HOME/.ssh:$T/target" --force -- cat "$T/target/id_ed25519"
contains "--force grants it anyway, with a warning" "$OUTPUT" "exposes"
sandbox --bind "$OUT:/nonexistent-dst" -- true
equals "a DST outside the home directory must exist" "$STATUS" 125
sandbox $NO_MOUNT --bind "$OUT:$T/target" -- true
equals "--bind needs the mount namespace" "$STATUS" 125
contains "... and says so" "$OUTPUT" "need the mount namespace"
sandbox --bind "nocolon" -- true
contains "a spec without DST is refused" "$OUTPUT" "expected SRC:DST"

# --- the same as an unprivileged account -----------------------------------------
if user_setup; then
    mkdir -p "$U/home/cfg"
    echo user-conf >"$U/home/cfg/a"
    chown -R "$RG_TEST_USER:" "$U/home/cfg"
    OUTPUT=$(cd "$U/proj/src" && as_user "$RUN" -q --bind "$U/home/cfg:$U/home/.agent" -- \
        sh -c 'pwd; cat ~/.agent/a; echo here >../written' 2>"$T/uerr")
    equals "unprivileged: the fork of the top is made" "$(fork_path <"$T/uerr")" "$U/proj.1"
    contains "unprivileged: the command starts at the project's own path" "$OUTPUT" "$U/proj/src"
    contains "unprivileged: --bind works" "$OUTPUT" "user-conf"
    equals "unprivileged: the write lands in the fork" "$(cat "$U/proj.1/written" 2>&1)" here
    absent "unprivileged: the original gets nothing" "$U/proj/written"
    as_user git -C "$U/proj" worktree add -q -b uside "$U/wt"
    ubefore=$(as_user git -C "$U/proj" rev-parse uside)
    OUTPUT=$(cd "$U/wt" && as_user "$RUN" -q -- sh -c 'git -c user.name=u -c user.email=u@u \
        commit -q --allow-empty -m user-fork && git log --format=%s -1' 2>&1)
    contains "unprivileged: git commits in a linked worktree's fork" "$OUTPUT" user-fork
    check "unprivileged: the branch is there to compare" test -n "$ubefore"
    equals "unprivileged: the main repository's branch did not move" \
        "$(as_user git -C "$U/proj" rev-parse uside)" "$ubefore"
fi

finish
