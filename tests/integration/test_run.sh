# `refgate run` end to end with the real git client: a clone whose remote is
# the local upstream, a command under refgate-run that pushes through the
# gateway with a token minted over the control socket, the token revoked
# when the command ends however it ends, and the audit log showing the run.
source "$(dirname "$0")/lib.sh"

: "${REFGATE_RUN:?set REFGATE_RUN to the refgate-run binary}"
mkdir "$T/probe"
if ! "$REFGATE_RUN" -q -d "$T/probe" -- true >"$T/check" 2>&1; then
  echo "skipped: refgate-run cannot confine on this kernel: $(cat "$T/check")"
  exit 77
fi
make_upstream app
write_config "$STANDARD_RULES"
# The same directory again under a forge's host name: a clone whose remote
# is https://git.acme.test/acme/app.git pushes to it through the gateway.
jq --arg root "file://$T/upstream" '.upstreams += [{"host": "git.acme.test", "url": $root}]' \
  "$T/refgate.json" >"$T/refgate.json.new"
mv "$T/refgate.json.new" "$T/refgate.json"
start_gateway

# A working clone straight from the upstream, with a feature branch and a
# commit on main to push.
clone app "$T/w"
git -C "$T/w" switch -q -c feature/x
commit "$T/w" x.c
git -C "$T/w" switch -q main
commit "$T/w" main.c

# rg_run DIR ARGS...: refgate run in DIR; output in $T/run.out, status in RUN_RC.
rg_run() {
  local dir=$1; shift
  set +e
  (cd "$dir" && "$REFGATE" run --config "$T/refgate.json" "$@") >"$T/run.out" 2>&1
  RUN_RC=$?
  set -e
  # refgate run's own stderr is here, not in ctest's output: look for ASan/LSan reports.
  ! grep -q 'Sanitizer' "$T/run.out" || { cat "$T/run.out"; fail "sanitizer report"; }
}
# newest_fork DIR: the fork refgate run said it made.
fork_of() { sed -n 's/^refgate run: the fork: //p' "$T/run.out"; }

test_a_run_pushes_through_the_gateway_feature_lands_main_is_rejected() {
  rg_run "$T/w" -- sh -c 'echo "$REFGATE_RUN_TOKEN" >.token; git push origin feature/x && ! git push origin main'
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$T/run.out" ' * [new branch]      feature/x -> feature/x'
  assert_contains "$T/run.out" ' ! [remote rejected] main -> main (policy: main is protected)'
  assert_contains "$T/run.out" "To $GW/local/acme/app.git"
  [ "$(upstream_ref app refs/heads/feature/x)" = "$(git -C "$T/w" rev-parse feature/x)" ] ||
    fail "feature/x did not land"
  [ "$(upstream_ref app refs/heads/main)" != "$(git -C "$T/w" rev-parse main)" ] || fail "main landed"
  local fork; fork=$(fork_of)
  [ -d "$fork" ] || { cat "$T/run.out"; fail "no fork named"; }
  assert_contains "$T/run.out" "review it with: $REFGATE diff --stat $fork"
  assert_contains "$T/run.out" "run in it again with: $REFGATE run --continue $fork -- CMD"
  cp "$fork/.token" "$T/token-run1"
  # Nothing was written to any git config: the rewrite lived in the run's environment.
  ! grep -rqF "$GW" "$T/w/.git/config" "$fork/.git/config" "$HOME" || fail "the gateway URL was written to a config"
  ! grep -qF "$(cat "$T/token-run1")" "$fork/.git/config" || fail "the token is in the fork's config"
}

test_after_the_run_its_token_is_refused_and_the_audit_log_shows_the_run() {
  local tok; tok=$(cat "$T/token-run1")
  assert_contains "$T/run.out" 'the run token is revoked'
  use_token "$tok"
  commit "$T/w" later.c
  git -C "$T/w" switch -q feature/x
  commit "$T/w" later2.c
  ! git -C "$T/w" push origin feature/x >"$T/out" 2>&1 || fail "the run's token still pushes"
  assert_contains "$T/out" 'revoked'
  git -C "$T/w" switch -q main
  ! grep -qF "$tok" "$T/state/audit.jsonl" || fail "the token is in the audit log"
  local run; run=$(jq -r 'select(.event == "token-mint") | .detail' "$T/state/audit.jsonl" | sed -n '1s/.*, run \([^,]*\),.*/\1/p')
  [ -n "$run" ] || fail "no token-mint event"
  audit_rows | jq -r --arg run "$run" 'select(.run == $run) | "\(.ref) \(.decision)"' >"$T/rows"
  assert_contains "$T/rows" 'refs/heads/feature/x allow'
  assert_contains "$T/rows" 'refs/heads/main deny'
  jq -r 'select(.type == "event") | .event' "$T/state/audit.jsonl" | tr '\n' ' ' >"$T/events"
  assert_contains "$T/events" 'token-mint token-revoke'
  "$REFGATE" audit verify --config "$T/refgate.json" >/dev/null 2>&1 || fail "audit verify"
}

test_a_command_killed_by_a_signal_still_revokes() {
  rg_run "$T/w" -- sh -c 'echo "$REFGATE_RUN_TOKEN" >.token; kill -KILL $$'
  [ "$RUN_RC" -eq $((128 + 9)) ] || { cat "$T/run.out"; fail "status $RUN_RC, expected 137"; }
  assert_contains "$T/run.out" 'the run token is revoked'
  use_token "$(cat "$(fork_of)/.token")"
  git -C "$T/w" switch -q feature/x
  ! git -C "$T/w" push origin feature/x >"$T/out" 2>&1 || fail "the killed run's token still pushes"
  git -C "$T/w" switch -q main
  assert_contains "$T/out" 'revoked'
}

test_sigterm_to_refgate_run_reaches_the_command_and_revokes() {
  (cd "$T/w" && exec "$REFGATE" run --config "$T/refgate.json" -- \
    sh -c 'echo "$REFGATE_RUN_TOKEN" >.token; echo started; while :; do sleep 0.1; done') >"$T/run.out" 2>&1 &
  local pid=$! i
  for i in $(seq 1 200); do grep -q '^started' "$T/run.out" && break; sleep 0.05; done
  grep -q '^started' "$T/run.out" || { cat "$T/run.out"; fail "the command did not start"; }
  local fork; fork=$(sed -n 's/^refgate-run: fork: \([^ ]*\) .*/\1/p' "$T/run.out")
  cp "$fork/.token" "$T/token-term"
  kill -TERM "$pid"
  set +e; wait "$pid"; RUN_RC=$?; set -e
  [ "$RUN_RC" -eq $((128 + 15)) ] || { cat "$T/run.out"; fail "status $RUN_RC, expected 143"; }
  assert_contains "$T/run.out" 'the run token is revoked'
  use_token "$(cat "$T/token-term")"
  git -C "$T/w" switch -q feature/x
  ! git -C "$T/w" push origin feature/x >"$T/out" 2>&1 || fail "the token still pushes"
  git -C "$T/w" switch -q main
  assert_contains "$T/out" 'revoked'
}

test_explicit_repo_and_exit_status_of_the_command() {
  rg_run "$T/w" --repo local/acme/app --run named-run --ttl 30m -- sh -c 'exit 7'
  [ "$RUN_RC" -eq 7 ] || { cat "$T/run.out"; fail "status $RUN_RC, expected 7"; }
  assert_contains "$T/run.out" 'refgate run: run named-run, token for local/acme/app'
}

test_with_no_gateway_running_it_exits_2_and_says_how_to_start_one() {
  sed "s|\"state_dir\": \"state\",|\"state_dir\": \"state\", \"control\": {\"socket\": \"$T/none.sock\"},|" \
    "$T/refgate.json" >"$T/nogw.json"
  set +e
  (cd "$T/w" && "$REFGATE" run --config "$T/nogw.json" -- true) >"$T/out" 2>&1
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || { cat "$T/out"; fail "status $rc, expected 2"; }
  assert_contains "$T/out" "no gateway is running"
  assert_contains "$T/out" "Start one with: refgate serve --config $T/nogw.json"
}

test_from_a_subdirectory_the_top_is_forked_and_the_command_starts_below() {
  mkdir -p "$T/w/sub"
  echo s >"$T/w/sub/s.txt"
  rg_run "$T/w/sub" -- sh -c 'pwd; git rev-parse --show-toplevel; echo sub-edit >>s.txt'
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$T/run.out" 'token for local/acme/app through'
  local fork; fork=$(fork_of)
  case "$fork" in "$T/w."[0-9]*) ;; *) cat "$T/run.out"; fail "fork $fork is not one of $T/w";; esac
  grep -qx "$T/w/sub" "$T/run.out" || { cat "$T/run.out"; fail "the command did not start in sub"; }
  grep -qx "$T/w" "$T/run.out" || fail "git inside does not see the work tree's top at $T/w"
  assert_contains "$fork/sub/s.txt" 'sub-edit'
  assert_not_contains "$T/w/sub/s.txt" 'sub-edit'
  [ ! -e "$T/w/sub.1" ] || fail "a fork of the subdirectory was made"
  rm -rf "$T/w/sub"
}

test_continue_runs_a_second_command_in_the_same_fork_and_diff_shows_both() {
  rg_run "$T/w" -- sh -c 'echo one >first.txt'
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  local fork; fork=$(fork_of)
  [ -d "$fork" ] || { cat "$T/run.out"; fail "no fork named"; }
  rg_run "$T" --continue "$fork" -- sh -c 'pwd; cat first.txt; echo two >second.txt'
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  # The repositories come from the fork's remotes; it is shown at the original path.
  assert_contains "$T/run.out" 'token for local/acme/app through'
  grep -qx "$T/w" "$T/run.out" || { cat "$T/run.out"; fail "not at the original path"; }
  grep -qx one "$T/run.out" || fail "the second command did not see the first's file"
  [ "$(fork_of)" = "$fork" ] || fail "the continued run names $(fork_of), not $fork"
  # From inside the fork, without --continue: continued, never nested.
  rg_run "$fork" -- sh -c 'echo three >third.txt'
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$T/run.out" "refgate run: $fork is a fork: the run continues it"
  [ ! -e "$fork.1" ] || fail "a fork of the fork was made"
  # Exit status 1: there are changes.
  "$REFGATE" diff --stat "$fork" >"$T/diff.out" 2>&1 || [ $? -eq 1 ] || { cat "$T/diff.out"; fail "refgate diff"; }
  assert_contains "$T/diff.out" 'first.txt'
  assert_contains "$T/diff.out" 'second.txt'
  assert_contains "$T/diff.out" 'third.txt'
  # Not a fork: a usage error.
  rg_run "$T" --continue "$T/w" -- true
  [ "$RUN_RC" -eq 2 ] || { cat "$T/run.out"; fail "status $RUN_RC, expected 2"; }
  assert_contains "$T/run.out" 'not a fork made by refgate-run'
}

test_exclude_options_reach_refgate_run() {
  mkdir -p "$T/w/node_modules/dep"
  echo dep-code >"$T/w/node_modules/dep/index.js"
  echo node_modules/ >>"$T/w/.git/info/exclude"
  rg_run "$T/w" --exclude-ignored -- sh -c 'cat node_modules/dep/index.js; echo x >node_modules/dep/index.js'
  [ "$RUN_RC" -ne 0 ] || { cat "$T/run.out"; fail "a write into the excluded directory succeeded"; }
  assert_contains "$T/run.out" 'dep-code'
  assert_contains "$T/run.out" 'Read-only file system'
  local fork; fork=$(fork_of)
  [ -z "$(ls -A "$fork/node_modules")" ] || fail "node_modules was copied into the fork"
  rg_run "$T/w" --exclude node_modules -- true
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$T/run.out" 'excluded (not copied'
  rm -rf "$T/w/node_modules"
}

test_refgate_run_options_pass_on_and_network_options_are_refused() {
  mkdir -p "$T/extra"
  rg_run "$T/w" -q --rm -w "$T/extra" -e RG_PASSED=yes -- sh -c 'echo "$RG_PASSED" >"$1/out"' sh "$T/extra"
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  [ "$(cat "$T/extra/out")" = yes ] || fail "-w or -e did not reach refgate-run"
  # -q: refgate run's own lines are gone (the token's, the fork's hints).
  ! grep -q '^refgate run: ' "$T/run.out" || { cat "$T/run.out"; fail "-q left refgate run's lines"; }
  # --rm: no fork is left.
  [ -z "$(fork_of)" ] || fail "a fork was named"
  local f
  for f in "--net host" "--share-net" "--unshare=none" "-d $T/extra" "--allow-unconfined" "--gateway 127.0.0.1:1"; do
    # shellcheck disable=SC2086
    rg_run "$T/w" $f -- true
    [ "$RUN_RC" -eq 2 ] || { cat "$T/run.out"; fail "$f: status $RUN_RC, expected a refusal"; }
    assert_contains "$T/run.out" "is refgate run's to decide"
  done
}

test_a_linked_worktree_pushes_from_a_fork_of_its_own() {
  git -C "$T/w" worktree add -q -b feature/wt "$T/wt"
  commit "$T/wt" wt.c
  local head; head=$(git -C "$T/wt" rev-parse HEAD)
  rg_run "$T/wt" -- sh -c 'git -c user.name=t -c user.email=t@t commit -q --allow-empty -m in-run && git push -q origin feature/wt'
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  # The remotes are the main repository's (its config is the common one).
  assert_contains "$T/run.out" 'token for local/acme/app through'
  local fork; fork=$(fork_of)
  case "$fork" in "$T/wt."[0-9]*) ;; *) cat "$T/run.out"; fail "fork $fork is not one of $T/wt";; esac
  [ "$(upstream_ref app refs/heads/feature/wt)" = "$(git -C "$fork" rev-parse HEAD)" ] ||
    fail "the fork's commit did not land"
  [ "$(git -C "$T/wt" rev-parse HEAD)" = "$head" ] || fail "the linked worktree's branch moved"
  git -C "$T/w" worktree remove --force "$T/wt"
}

test_from_a_submodule_the_superproject_is_forked() {
  git init -q "$T/modsrc"
  commit "$T/modsrc" m.c
  git -C "$T/w" -c protocol.file.allow=always submodule add -q "$T/modsrc" mod 2>/dev/null
  git -C "$T/w" commit -q -m with-mod
  rg_run "$T/w/mod" --repo local/acme/app -- sh -c 'pwd; echo in-mod >>m.c'
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  local fork; fork=$(fork_of)
  case "$fork" in "$T/w."[0-9]*) ;; *) cat "$T/run.out"; fail "fork $fork is not one of $T/w";; esac
  grep -qx "$T/w/mod" "$T/run.out" || { cat "$T/run.out"; fail "the command did not start in mod"; }
  assert_contains "$fork/mod/m.c" 'in-mod'
  [ ! -e "$T/w/mod.1" ] || fail "a fork was made inside the superproject"
  git -C "$T/w" reset -q --hard HEAD~1
  rm -rf "$T/w/mod" "$T/w/.git/modules"
}

test_a_directory_whose_remotes_are_on_no_upstream_is_refused() {
  git init -q "$T/elsewhere"
  git -C "$T/elsewhere" remote add origin https://example.com/acme/app.git
  rg_run "$T/elsewhere" -- true
  [ "$RUN_RC" -eq 2 ] || { cat "$T/run.out"; fail "status $RUN_RC, expected 2"; }
  assert_contains "$T/run.out" 'is on an upstream of'
  assert_contains "$T/run.out" 'https://example.com/acme/app.git'
  assert_contains "$T/run.out" '--repo HOST/PATH'
}

test_a_clone_of_a_forge_url_pushes_to_the_local_upstream_named_like_the_forge() {
  # The issue's end-to-end case: the clone's remote is https://<configured
  # host>/acme/app.git and that host is a local upstream. The agent pushes a
  # feature branch (lands), main (rejected), then tries to go around the
  # gateway (fails); afterwards its token is refused and the audit shows it.
  clone app "$T/fw"
  git -C "$T/fw" remote set-url origin https://git.acme.test/acme/app.git
  git -C "$T/fw" switch -q -c feature/forge
  commit "$T/fw" forge.c
  git -C "$T/fw" switch -q main
  commit "$T/fw" forge-main.c
  local before; before=$(upstream_ref app refs/heads/main)
  cat >"$T/agent.sh" <<AGENT
echo "\$REFGATE_RUN_TOKEN" >.token
git push origin feature/forge || exit 10
git push origin main && exit 11
GIT_CONFIG_COUNT=0 git push file://$T/upstream/acme/app.git main:refs/heads/around1 && exit 12
GIT_CONFIG_COUNT=0 git push origin main:refs/heads/around2 && exit 13
git -c url.file://$T/upstream/.pushInsteadOf=https://git.acme.test/ push origin main:refs/heads/around3 && exit 14
exit 0
AGENT
  # The run sees a private /tmp: the script goes in by argv.
  rg_run "$T/fw" -- sh -c "$(cat "$T/agent.sh")"
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$T/run.out" 'token for git.acme.test/acme/app through'
  assert_contains "$T/run.out" "To $GW/git.acme.test/acme/app.git"
  assert_contains "$T/run.out" ' * [new branch]      feature/forge -> feature/forge'
  assert_contains "$T/run.out" ' ! [remote rejected] main -> main (policy: main is protected)'
  [ "$(upstream_ref app refs/heads/feature/forge)" = "$(git -C "$T/fw" rev-parse feature/forge)" ] ||
    fail "feature/forge did not land"
  [ "$(upstream_ref app refs/heads/main)" = "$before" ] || fail "main moved"
  local r; for r in around1 around2 around3; do
    [ -z "$(upstream_ref app "refs/heads/$r")" ] || fail "$r went around the gateway"
  done
  local fork tok; fork=$(fork_of); tok=$(cat "$fork/.token")
  use_token "$tok"
  git -C "$T/fw" remote set-url origin "$GW/git.acme.test/acme/app.git"
  git -C "$T/fw" switch -q feature/forge
  commit "$T/fw" forge2.c
  ! git -C "$T/fw" push origin feature/forge >"$T/out" 2>&1 || fail "the run's token still pushes"
  assert_contains "$T/out" 'revoked'
  local run; run=$(sed -n 's/^refgate run: run \([^,]*\),.*/\1/p' "$T/run.out")
  [ -n "$run" ] || { cat "$T/run.out"; fail "no run name printed"; }
  audit_rows | jq -r --arg run "$run" 'select(.run == $run) | "\(.repo) \(.ref) \(.decision)"' >"$T/rows"
  assert_contains "$T/rows" 'git.acme.test/acme/app refs/heads/feature/forge allow'
  assert_contains "$T/rows" 'git.acme.test/acme/app refs/heads/main deny'
  "$REFGATE" audit verify --config "$T/refgate.json" >/dev/null 2>&1 || fail "audit verify"
}

test_https_and_ssh_remotes_on_an_http_upstream_map_and_are_rewritten() {
  # An http(s) upstream nobody contacts here: the mapping and the rewrite only.
  stop_gateway
  jq '.upstreams += [{"host": "forge", "url": "https://git.example.org/base"}]' "$T/refgate.json" \
    >"$T/forge.json"
  cp "$T/forge.json" "$T/refgate.json"
  start_gateway
  git init -q "$T/forged"
  git -C "$T/forged" remote add origin https://git.example.org/base/acme/one.git
  git -C "$T/forged" remote add scp git@git.example.org:base/acme/two.git
  git -C "$T/forged" remote add ssh ssh://git@git.example.org/base/acme/three
  git -C "$T/forged" remote add other https://elsewhere.example.org/base/acme/four.git
  git -C "$T/forged" config remote.origin.pushurl ssh://git@git.example.org:2222/base/acme/five.git
  rg_run "$T/forged" -- sh -c 'git config --get-regexp "^(url|credential)\." | sed "s/^/CFG /"'
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$T/run.out" 'token for forge/acme/one forge/acme/five forge/acme/two forge/acme/three through'
  assert_not_contains "$T/run.out" 'four'
  assert_contains "$T/run.out" "CFG url.$GW/forge/.insteadof https://git.example.org/base/"
  assert_contains "$T/run.out" "CFG url.$GW/forge/.insteadof git@git.example.org:base/"
  assert_contains "$T/run.out" "CFG url.$GW/forge/.insteadof ssh://git@git.example.org/base/"
  assert_contains "$T/run.out" "CFG url.$GW/forge/.pushinsteadof ssh://git@git.example.org/base/"
  assert_contains "$T/run.out" "CFG credential.$GW.helper !f()"
  # Only the upstreams the run's repositories are on are rewritten.
  assert_not_contains "$T/run.out" "CFG url.$GW/local/"
}

run_tests
