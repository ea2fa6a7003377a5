# `refgate diff` end to end: an original git checkout is forked the way
# refgate-run forks it (`cp -a` to DIR.1 and .DIR.1.base, so this test does
# not depend on refgate-run), a "run" changes the fork in every way a patch
# has to carry, and the patch is applied with the real `git apply` to a copy
# of the original, which must then match the fork. Also: exit statuses,
# --stat, --apply, and a fork whose .git tries to run a command; --apply
# applies only the reviewed diff (--digest) and never while the run lives
# (finding 8); files over --max-file-size, an 8 TB sparse one included, are
# skipped in bounded time and never applied (finding 14).
if [ -z "${REFGATE:-}" ] || [ ! -x "$REFGATE" ]; then
  echo "skip: REFGATE is not set to an executable refgate binary"
  exit 77
fi
source "$(dirname "$0")/lib.sh"
umask 022 # git apply creates files 0666 less umask; the fork has 0644

W=$T/work
MARKER=$T/PWNED
mkdir -p "$W"

# The original: a git checkout with text, an executable, a binary, a
# symlink, an empty file, and ignored files.
make_original() {
  local o=$W/app
  mkdir -p "$o/src" "$o/docs" "$o/build"
  printf '# app\n\nA small project.\n' >"$o/README.md"
  printf 'int main(void)\n{\n    return 0;\n}\n' >"$o/src/main.c"
  printf 'int util(void) { return 1; }\n' >"$o/src/util.c"
  printf '#!/bin/sh\necho hi\n' >"$o/run.sh"
  chmod 755 "$o/run.sh"
  head -c 4096 /dev/urandom >"$o/logo.bin"
  printf 'old\n' >"$o/docs/old.txt"
  : >"$o/empty"
  ln -s src/main.c "$o/latest"
  printf '*.log\nbuild/\n' >"$o/.gitignore"
  printf 'old log\n' >"$o/debug.log"
  printf 'object\n' >"$o/build/out.o"
  git -C "$o" init -q
  git -C "$o" add -A
  git -C "$o" commit -q -m "Initial commit"
}

# What refgate-run leaves: the fork and, beside it, the base.
fork_original() {
  cp -a "$W/app" "$W/.app.1.base"
  cp -a "$W/app" "$W/app.1"
}

# The run: every kind of change, plus ignored files and a hostile .git.
run_changes() {
  local f=$W/app.1
  printf 'int main(void)\n{\n    return 1;\n}\n' >"$f/src/main.c"    # modify
  printf 'void fresh(void) {}\n' >"$f/src/new.c"                       # add
  rm "$f/docs/old.txt"                                                 # delete
  chmod 644 "$f/run.sh"                                                # chmod -x
  chmod 755 "$f/src/util.c"                                            # chmod +x
  ln -s ../README.md "$f/docs/readme-link"                             # new symlink
  ln -sfn src/util.c "$f/latest"                                       # retarget
  head -c 100 /dev/urandom >>"$f/logo.bin"                             # binary change
  head -c 2048 /dev/urandom >"$f/icon.bin"                             # binary add
  printf 'no newline' >"$f/nonl.txt"                                   # no final newline
  : >"$f/docs/empty-too"                                               # empty add
  rm "$f/empty"                                                        # empty delete
  printf 'tab\n' >"$f/odd	name.txt"                                    # a tab in a name
  printf 'new log\n' >"$f/debug.log"                                   # ignored: modify
  printf 'more\n' >"$f/more.log"                                       # ignored: add
  printf 'obj\n' >"$f/build/new.o"                                     # ignored directory
  # A hostile .git: if anything ran git (or read this config) in the fork,
  # the marker would appear.
  git -C "$f" config core.fsmonitor "touch $MARKER"
  git -C "$f" config core.pager "touch $MARKER"
  git -C "$f" config diff.external "touch $MARKER"
  printf '#!/bin/sh\ntouch %s\n' "$MARKER" >"$f/.git/hooks/post-checkout"
  chmod 755 "$f/.git/hooks/post-checkout"
  printf 'planted\n' >"$f/.git/planted"
}

# The digest `refgate diff --stat` prints for a fork (on stderr).
digest_of() {
  local out
  out=$("$REFGATE" diff --stat "$@" 2>&1 >/dev/null) || true # exits 1 on changes
  printf '%s\n' "$out" | sed -n 's/^refgate-diff-digest: //p'
}

# Everything but .git and ignored files, as "path type mode link-target".
listing() {
  (cd "$1" && find . \( -path ./.git -o -path ./build \) -prune -o ! -name '*.log' \
    -printf '%p %y %m %l\n' | sort) >"$2"
}

make_original
fork_original
run_changes

test_patch_applies_to_a_copy_of_the_original() {
  cd "$W"
  local rc=0
  "$REFGATE" diff app.1 >"$T/patch" 2>"$T/err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$T/err"; fail "refgate diff exited $rc, expected 1 (changes)"; }
  assert_contains "$T/err" "refgate-diff-digest: sha256:"
  # The patch and the summary name one digest.
  [ "$(sed -n 's/^refgate-diff-digest: //p' "$T/err")" = "$(digest_of app.1)" ] ||
    fail "refgate diff and refgate diff --stat give different digests"
  assert_contains "$T/patch" "GIT binary patch"
  assert_contains "$T/patch" "new file mode 120000"
  assert_contains "$T/patch" "old mode 100755"
  assert_not_contains "$T/patch" "more.log"
  assert_not_contains "$T/patch" "build/"
  assert_not_contains "$T/patch" ".git/"
  rm -rf "$T/copy"
  cp -a "$W/app" "$T/copy"
  (cd "$T/copy" && git apply --check "$T/patch" && git apply "$T/patch") ||
    fail "git apply failed"
  diff -r --no-dereference -x .git -x '*.log' -x build "$T/copy" "$W/app.1" ||
    fail "the patched copy's files differ from the fork's"
  listing "$T/copy" "$T/copy.list"
  listing "$W/app.1" "$T/fork.list"
  diff "$T/copy.list" "$T/fork.list" || fail "types, modes or link targets differ"
}

test_patch_is_what_git_itself_would_apply() {
  # git's own view of the same change: in the patched copy, git status
  # lists exactly the paths refgate diff showed.
  cd "$T/copy"
  git add -A
  git diff --cached --no-renames --name-only -z | tr '\0' '\n' | sort >"$T/git.names"
  git apply --numstat -z "$T/patch" | tr '\0' '\n' | cut -f3- | sort -u >"$T/refgate.names"
  [ -s "$T/git.names" ] || fail "git sees no change"
  diff "$T/git.names" "$T/refgate.names" || fail "git and refgate disagree on what changed"
}

test_no_changes_exits_0_with_no_output() {
  cd "$W"
  cp -a app same.1
  cp -a app .same.1.base
  local rc=0
  "$REFGATE" diff same.1 >"$T/out" || rc=$?
  [ "$rc" -eq 0 ] || fail "exit $rc for an unchanged fork"
  [ ! -s "$T/out" ] || fail "output for an unchanged fork"
  rc=0
  "$REFGATE" diff --stat "$W/same.1/" >"$T/out" || rc=$?
  [ "$rc" -eq 0 ] || fail "--stat: exit $rc for no changes"
  [ ! -s "$T/out" ] || fail "--stat: output for no changes"
}

test_errors_exit_2() {
  cd "$W"
  local rc=0
  "$REFGATE" diff nothere.1 >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "exit $rc for a missing fork"
  assert_contains "$T/err" "refgate diff:"
  rc=0
  "$REFGATE" diff --bogus app.1 >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "exit $rc for an unknown option"
  rc=0
  "$REFGATE" diff --apply --unreviewed "$W/app" "$W/.app.1.base" >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "exit $rc for --apply without a .N fork name"
  assert_contains "$T/err" "give --original"
  rc=0
  "$REFGATE" diff --apply app.1 >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "exit $rc for --apply with neither --digest nor --unreviewed"
  assert_contains "$T/err" "--apply needs --digest"
  "$REFGATE" diff --help >"$T/out"
  assert_contains "$T/out" "usage: refgate diff"
}

test_stat_summarises() {
  cd "$W"
  local rc=0
  "$REFGATE" diff --stat app.1 >"$T/stat" || rc=$?
  [ "$rc" -eq 1 ] || fail "--stat exited $rc, expected 1"
  assert_contains "$T/stat" "src/main.c"
  assert_contains "$T/stat" "Bin 4096 -> 4196 bytes"
  assert_contains "$T/stat" "files changed"
  assert_contains "$T/stat" "mode change 100755 => 100644 run.sh"
  assert_contains "$T/stat" "create mode 120000 docs/readme-link"
  assert_contains "$T/stat" "delete mode 100644 docs/old.txt"
}

test_explicit_base_and_positional_base_agree() {
  cd "$W"
  "$REFGATE" diff app.1 .app.1.base >"$T/p1" || true
  "$REFGATE" diff --base .app.1.base app.1 >"$T/p2" || true
  cmp "$T/patch" "$T/p1" || fail "a positional BASE gives another patch"
  cmp "$T/patch" "$T/p2" || fail "--base gives another patch"
}

test_apply_refuses_paths_the_original_changed_and_applies_the_rest() {
  cd "$W"
  # The user kept working in the original after the fork.
  printf 'int main(void) { return 42; }\n' >app/src/main.c
  printf 'created meanwhile\n' >app/src/new.c
  local rc=0 d
  d=$(digest_of app.1)
  "$REFGATE" diff --apply --digest "$d" app.1 >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$T/out" "$T/err"; fail "--apply exited $rc, expected 1"; }
  assert_contains "$T/err" "refused: src/main.c: changed in the original since the fork"
  assert_contains "$T/err" "refused: src/new.c: changed in the original since the fork"
  assert_contains "$T/out" "applied: docs/old.txt"
  assert_contains "$T/out" "applied: logo.bin"
  assert_contains "$T/out" 'applied: "odd\tname.txt"'
  [ "$(cat app/src/main.c)" = 'int main(void) { return 42; }' ] || fail "the user's edit was lost"
  # What is left between the original and the fork: only the refused two.
  rc=0
  "$REFGATE" diff app.1 app >"$T/left" || rc=$?
  [ "$rc" -eq 1 ] || fail "expected the refused paths to remain"
  [ "$(grep -c '^diff --git' "$T/left")" -eq 2 ] || { cat "$T/left"; fail "more than 2 paths left"; }
  assert_contains "$T/left" "a/src/main.c"
  assert_contains "$T/left" "a/src/new.c"
  [ -L app/docs/readme-link ] || fail "the symlink was not created as a symlink"
  [ -x app/src/util.c ] || fail "src/util.c did not become executable"
  [ ! -x app/run.sh ] || fail "run.sh is still executable"
  # The original's ignored files and .git are untouched.
  [ "$(cat app/debug.log)" = "old log" ] || fail "an ignored file was written"
  [ ! -e app/.git/planted ] || fail "the fork's .git leaked into the original"
}

test_apply_again_changes_nothing() {
  cd "$W"
  local rc=0
  "$REFGATE" diff --apply --unreviewed app.1 >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq 1 ] || fail "exit $rc, expected 1 (still refused)"
  ! grep -q '^applied: ' "$T/out" || { cat "$T/out"; fail "applied something twice"; }
  assert_contains "$T/out" "already applied: logo.bin"
}

# A second original, forked the same way, for the tests below.
fork_app2() {
  rm -rf "$W/app2" "$W/app2.1" "$W/.app2.1.base" "$W/.app2.1.run"
  mkdir -p "$W/app2"
  printf 'one\n' >"$W/app2/a.txt"
  cp -a "$W/app2" "$W/.app2.1.base"
  cp -a "$W/app2" "$W/app2.1"
}

test_apply_refuses_a_fork_changed_after_review() {
  cd "$W"
  fork_app2
  printf 'reviewed\n' >app2.1/a.txt
  local rc=0 d
  d=$(digest_of app2.1)
  [ -n "$d" ] || fail "no digest printed"
  # A process left running changes the fork after the review.
  printf 'evil\n' >app2.1/a.txt
  printf 'evil\n' >app2.1/planted.sh
  "$REFGATE" diff --apply --digest "$d" app2.1 >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$T/out" "$T/err"; fail "--apply of a changed fork exited $rc, expected 2"; }
  assert_contains "$T/err" "no longer the one reviewed"
  [ "$(cat app2/a.txt)" = one ] || fail "the changed fork was applied"
  [ ! -e app2/planted.sh ] || fail "a file added after the review was applied"
  # Normal work: the digest of what is there now applies it.
  d=$(digest_of app2.1)
  "$REFGATE" diff --apply --digest "$d" app2.1 >"$T/out" 2>"$T/err" ||
    { cat "$T/err"; fail "--apply with the current digest failed"; }
  [ "$(cat app2/a.txt)" = evil ] || fail "the reviewed change was not applied"
}

test_apply_refuses_while_the_run_is_alive() {
  cd "$W"
  fork_app2
  printf 'two\n' >app2.1/a.txt
  local rc=0 d pid
  d=$(digest_of app2.1)
  # What refgate-run does for the run's life: an exclusive lock on the marker.
  # One process holding it, which `kill $pid` ends.
  (flock -x 9 && exec sleep 600) 9>.app2.1.run &
  pid=$!
  # Bounded: until the lock is taken (or 10 s).
  for _ in $(seq 1 1000); do
    flock -n -s .app2.1.run true || break
    sleep 0.01
  done
  "$REFGATE" diff --apply --digest "$d" app2.1 >"$T/out" 2>"$T/err" || rc=$?
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  [ "$rc" -eq 2 ] || { cat "$T/err"; fail "--apply during the run exited $rc, expected 2"; }
  assert_contains "$T/err" "still running"
  [ "$(cat app2/a.txt)" = one ] || fail "applied while the run was alive"
  "$REFGATE" diff --apply --digest "$d" app2.1 >"$T/out" 2>"$T/err" ||
    { cat "$T/err"; fail "--apply after the run ended failed"; }
  [ "$(cat app2/a.txt)" = two ] || fail "not applied once the run ended"
}

test_a_sparse_8tb_file_is_skipped_in_bounded_time() {
  cd "$W"
  fork_app2
  printf 'small edit\n' >app2.1/a.txt
  truncate -s 8T app2.1/huge.img 2>/dev/null || { echo "# no 8 TB sparse file here"; return 0; }
  truncate -s 100M app2.1/big.bin
  local rc=0 d
  timeout 60 "$REFGATE" diff app2.1 >"$T/patch" 2>"$T/err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$T/err"; fail "refgate diff exited $rc (124: timed out), expected 1"; }
  assert_contains "$T/err" "huge.img | Binary/skipped: too large (fork 8796093022208 bytes"
  assert_contains "$T/err" "big.bin | Binary/skipped: too large"
  assert_not_contains "$T/patch" "huge.img"
  assert_contains "$T/patch" "+small edit"
  rc=0
  timeout 60 "$REFGATE" diff --stat app2.1 >"$T/stat" 2>/dev/null || rc=$?
  [ "$rc" -eq 1 ] || fail "--stat exited $rc"
  assert_contains "$T/stat" "huge.img | Binary/skipped: too large"
  # A higher limit shows the 100 MiB file.
  "$REFGATE" diff --stat --max-file-size 200M app2.1 >"$T/stat" 2>/dev/null || true
  assert_contains "$T/stat" "big.bin"
  assert_not_contains "$T/stat" "big.bin | Binary/skipped"
  # Applying: the skipped files are refused (fail closed), the rest applies.
  d=$(digest_of app2.1)
  rc=0
  timeout 60 "$REFGATE" diff --apply --digest "$d" app2.1 >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$T/out" "$T/err"; fail "--apply exited $rc, expected 1 (refused)"; }
  assert_contains "$T/err" "refused: huge.img: larger than the size limit"
  [ ! -e app2/huge.img ] || fail "a file never shown was applied"
  [ ! -e app2/big.bin ] || fail "a file never shown was applied"
  [ "$(cat app2/a.txt)" = "small edit" ] || fail "the normal edit was not applied"
  rm -f app2.1/huge.img app2.1/big.bin
}

test_nothing_planted_in_the_fork_ever_ran() {
  [ ! -e "$MARKER" ] || fail "a command from the fork's .git ran"
}

run_tests
