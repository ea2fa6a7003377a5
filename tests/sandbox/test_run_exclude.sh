#!/usr/bin/env bash
# refgate-run --exclude / --exclude-ignored: an excluded directory is not
# copied (an empty placeholder in the base and the fork), is shown
# read-only from the original inside the run (readable, writes fail with
# EROFS, never silently empty), is recorded in .DIR.N.excluded beside the
# fork, and `refgate diff` neither shows it deleted nor lets --apply touch
# it. A secret linked inside an excluded directory still refuses the fork;
# without the mount namespace (or with -d) exclusions are refused.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v git >/dev/null; then
    echo "SKIP: git is not installed"
    exit 77
fi

# node_modules (ignored, at two depths), and assets (tracked).
mkdir -p "$PROJ/node_modules/lib" "$PROJ/web/node_modules/x" "$PROJ/assets"
echo "module-code" >"$PROJ/node_modules/lib/index.js"
echo "web-dep" >"$PROJ/web/node_modules/x/x.js"
echo "logo" >"$PROJ/assets/logo.svg"
printf 'node_modules/\n' >"$PROJ/.gitignore"
git -C "$PROJ" add .gitignore assets
git -C "$PROJ" -c user.name=t -c user.email=t@t commit -qm deps

F="$PROJ.1"
B="$T/.proj.1.base"
out=$(cd "$PROJ" && "$RUN" --exclude-ignored --exclude assets -- sh -c '
cat node_modules/lib/index.js web/node_modules/x/x.js assets/logo.svg
echo overwritten >node_modules/lib/index.js
rm -rf assets 2>&1
echo edited >>src/main.c
git status --porcelain' 2>"$T/err")
st=$?
err=$(cat "$T/err")
equals "the run succeeds" "$st" 0
contains "an excluded directory is readable inside (the original's content)" "$out" "module-code"
contains "a nested one too" "$out" "web-dep"
contains "an excluded tracked directory is readable inside" "$out" "logo"
contains "a write into an excluded directory fails loudly" "$err$out" "Read-only file system"
lacks "git in the run sees the excluded tracked files in place" "$out" " D assets"
contains "stderr says what was excluded" "$err" "excluded (not copied, shown read-only from $PROJ inside): 3 entries"
equals "the original is untouched" "$(cat "$PROJ/node_modules/lib/index.js")" "module-code"
check "the fork has a placeholder" test -d "$F/node_modules"
equals "the fork's placeholder is empty" "$(ls -A "$F/node_modules")" ""
equals "the base's placeholder is empty" "$(ls -A "$B/web/node_modules")" ""
equals "the tracked excluded directory is a placeholder too" "$(ls -A "$F/assets")" ""
check "the record lies beside the fork" test -f "$T/.proj.1.excluded"
rec=$(tr '\0' '\n' <"$T/.proj.1.excluded")
contains "the record names node_modules" "$rec" "
node_modules"
contains "the record names web/node_modules" "$rec" "web/node_modules"
contains "the record names assets" "$rec" "assets"
check "the run could not write the record (it lies outside the fork)" \
    sh -c "! (cd '$PROJ' && '$RUN' -q --rm -- sh -c 'echo x >>$T/.proj.1.excluded') 2>/dev/null"
equals "the record is unchanged" "$(tr '\0' '\n' <"$T/.proj.1.excluded" | grep -c .)" 4

if [ -n "${REFGATE:-}" ] && [ -x "$REFGATE" ]; then
    # Base and fork both hold the placeholder; what the record adds is that
    # whatever lands in a placeholder later (a build run in the fork after
    # the run) is never shown or applied either.
    echo planted >"$F/assets/planted.svg"
    patch=$("$REFGATE" diff "$F" 2>"$T/derr")
    equals "refgate diff exits 1 (changes)" "$?" 1
    contains "the diff shows the run's change" "$patch" "+edited"
    lacks "the diff proposes no deletion" "$patch" "deleted file"
    lacks "the diff does not show what lands in a placeholder after the run" "$patch" "assets"
    contains "refgate diff says what it leaves out" "$(cat "$T/derr")" "left out (excluded from the fork"
    "$REFGATE" diff --apply --unreviewed "$F" >"$T/apply" 2>/dev/null
    equals "--apply succeeds" "$?" 0
    contains "--apply applied the change" "$(cat "$PROJ/src/main.c")" "edited"
    equals "--apply left node_modules alone" "$(cat "$PROJ/node_modules/lib/index.js")" "module-code"
    equals "--apply left the tracked excluded directory alone" "$(cat "$PROJ/assets/logo.svg")" "logo"
    lacks "--apply applies nothing in an excluded path" "$(cat "$T/apply")" "assets"
    absent "--apply did not copy what landed in the placeholder" "$PROJ/assets/planted.svg"
else
    echo "# REFGATE unset: the diff checks are skipped"
fi

# A continued fork keeps its exclusions: the original shown over each
# placeholder again, not an empty directory; new exclusions are refused.
out=$("$RUN" -q --continue "$F" -- sh -c 'cat node_modules/lib/index.js; ls assets' 2>&1)
equals "--continue of a fork made with exclusions runs" "$?" 0
contains "--continue: an excluded directory shows the original again" "$out" "module-code"
contains "--continue: and the tracked one" "$out" "logo.svg"
out=$("$RUN" -q --continue "$F" --exclude assets -- true 2>&1)
equals "--continue with --exclude is refused" "$?" 125
contains "the refusal says why" "$out" "a continued fork keeps the exclusions it was made with"
out=$("$RUN" -q --continue "$F" --share=user,mount -- true 2>&1)
equals "--continue of a fork with exclusions without the mount namespace is refused" "$?" 125
contains "that refusal says why" "$out" "only with the mount namespace"

# --rm removes the record with the fork.
(cd "$PROJ" && "$RUN" -q --rm --exclude node_modules -- true) 2>/dev/null
absent "--rm leaves no record" "$T/.proj.2.excluded"

# Refusals: no mount namespace, -d, a bad pattern.
out=$(cd "$PROJ" && "$RUN" -q --rm --share=mount --exclude node_modules -- true 2>&1)
equals "--exclude without the mount namespace is refused" "$?" 125
contains "the refusal says why" "$out" "need a fork (no -d) and the mount namespace"
out=$(cd "$PROJ" && "$RUN" -q -d "$OUT" --exclude node_modules -- true 2>&1)
equals "--exclude with -d is refused" "$?" 125
out=$(cd "$PROJ" && "$RUN" -q --rm --exclude ../x -- true 2>&1)
equals "a pattern leaving the directory is refused" "$?" 125
absent "a refused run leaves no fork" "$PROJ.3"

# A secret hard-linked inside an excluded directory refuses the fork, as a
# copy would: the view would show it.
if ln "$HOME/.ssh/id_ed25519" "$PROJ/node_modules/lib/key" 2>/dev/null; then
    out=$(cd "$PROJ" && "$RUN" -q --rm --exclude node_modules -- cat node_modules/lib/key 2>&1)
    equals "a secret linked in an excluded directory refuses the run" "$?" 125
    contains "the refusal names it" "$out" "node_modules/lib/key"
    lacks "the secret did not leak" "$out" "SECRET-"
    rm -f "$PROJ/node_modules/lib/key"
fi

# Any mount inside an excluded directory refuses it: the view would carry it.
if [ "$(id -u)" = 0 ] && mkdir -p "$PROJ/node_modules/mnt" &&
    mount -t tmpfs -o size=1m tmpfs "$PROJ/node_modules/mnt" 2>/dev/null; then
    CLEANUPS+=("umount '$PROJ/node_modules/mnt' 2>/dev/null")
    out=$(cd "$PROJ" && "$RUN" -q --rm --exclude node_modules -- true 2>&1)
    st=$?
    umount "$PROJ/node_modules/mnt"
    equals "a mount inside an excluded directory refuses the run" "$st" 125
    contains "the refusal names the mount" "$out" "another mount inside an excluded directory"
    rmdir "$PROJ/node_modules/mnt"
fi

if user_setup; then
    OUTPUT=$(cd "$U/proj" && as_user "$RUN" -q --rm --exclude node_modules -- sh -c \
        'cat node_modules/lib/index.js; echo x >node_modules/lib/index.js' 2>&1)
    contains "unprivileged: an excluded directory is readable inside" "$OUTPUT" "module-code"
    contains "unprivileged: writes there fail" "$OUTPUT" "Read-only file system"
    equals "unprivileged: the original is untouched" "$(cat "$U/proj/node_modules/lib/index.js")" \
        "module-code"
fi

finish
