# Protocol details with the real git client: protocol v1, push options,
# delete-only pushes, creates that send an empty pack, the advertisement
# filter, graceful shutdown with a push in flight, refusing a bad config,
# and the demo itself.
source "$(dirname "$0")/lib.sh"

RULES='[
  {"name": "protect-main", "refs": ["refs/heads/main"], "actions": ["update", "force", "delete"],
   "effect": "deny", "reason": "main is protected"},
  {"name": "scratch", "refs": ["refs/heads/scratch/**"], "effect": "allow"},
  {"name": "trial", "refs": ["refs/heads/scratch/**"], "actions": ["force"], "effect": "deny",
   "mode": "evaluate", "reason": "would forbid force"}
]'
make_upstream app
git --git-dir="$T/upstream/acme/app.git" config receive.advertisePushOptions true
git --git-dir="$T/upstream/acme/app.git" config receive.certNonceSeed not-a-secret
write_config "$RULES"
start_gateway
TOKEN=$(mint local/acme/app)

test_protocol_v1_push_lands() {
  use_token "$TOKEN"
  clone app "$T/v1"
  git -C "$T/v1" switch -q -c scratch/v1
  commit "$T/v1" v1.txt
  git -C "$T/v1" -c protocol.version=1 push origin scratch/v1 >"$T/out" 2>&1 ||
    { cat "$T/out"; fail "v1 push failed"; }
  [ -n "$(upstream_ref app refs/heads/scratch/v1)" ] || fail "did not land"
}

test_push_options_reach_upstream_hooks() {
  printf '#!/bin/sh\necho "option=$GIT_PUSH_OPTION_0 count=$GIT_PUSH_OPTION_COUNT"\n' \
    >"$T/upstream/acme/app.git/hooks/pre-receive"
  chmod +x "$T/upstream/acme/app.git/hooks/pre-receive"
  use_token "$TOKEN"
  clone app "$T/po"
  git -C "$T/po" switch -q -c scratch/po
  commit "$T/po" po.txt
  git -C "$T/po" push -o ci.skip origin scratch/po >"$T/out" 2>&1 || { cat "$T/out"; fail "push"; }
  rm "$T/upstream/acme/app.git/hooks/pre-receive"
  assert_contains "$T/out" "remote: option=ci.skip count=1"
}

test_allowed_delete_only_push_lands_without_a_pack() {
  use_token "$TOKEN"
  clone app "$T/del"
  git -C "$T/del" push -q origin HEAD:refs/heads/scratch/doomed 2>/dev/null
  [ -n "$(upstream_ref app refs/heads/scratch/doomed)" ] || fail "setup"
  git -C "$T/del" push origin --delete scratch/doomed >"$T/out" 2>&1 || { cat "$T/out"; fail "delete"; }
  assert_contains "$T/out" "[deleted]"
  [ -z "$(upstream_ref app refs/heads/scratch/doomed)" ] || fail "not deleted"
}

test_create_pointing_at_existing_objects_sends_an_empty_pack() {
  use_token "$TOKEN"
  clone app "$T/cp"
  GIT_TRACE_PACKET=$T/packet.trace git -C "$T/cp" push origin main:refs/heads/scratch/copy \
    >"$T/out" 2>&1 || { cat "$T/out"; fail "push"; }
  [ "$(upstream_ref app refs/heads/scratch/copy)" = "$(upstream_ref app refs/heads/main)" ] ||
    fail "copy did not land"
}

test_force_push_is_logged_by_the_evaluate_mode_rule_but_not_blocked() {
  use_token "$TOKEN"
  clone app "$T/ev"
  git -C "$T/ev" switch -q -c scratch/ev
  commit "$T/ev" a.txt
  git -C "$T/ev" push -q origin scratch/ev 2>/dev/null
  git -C "$T/ev" commit -q --amend -m rewritten
  git -C "$T/ev" push --force origin scratch/ev >"$T/out" 2>&1 || { cat "$T/out"; fail "blocked"; }
  audit_rows | grep '"ref":"refs/heads/scratch/ev"' | tail -1 >"$T/rec"
  assert_contains "$T/rec" '"action":"force"'
  assert_contains "$T/rec" '"decision":"allow"'
  assert_contains "$T/rec" '"evaluate":"deny by trial"'
}

test_advertisement_drops_push_cert() {
  git --git-dir="$T/upstream/acme/app.git" receive-pack --advertise-refs \
    "$T/upstream/acme/app.git" >"$T/direct" 2>/dev/null || true
  assert_contains "$T/direct" "push-cert"
  curl -s -u "run:$TOKEN" "$GW/local/acme/app.git/info/refs?service=git-receive-pack" >"$T/adv"
  assert_contains "$T/adv" "# service=git-receive-pack"
  assert_contains "$T/adv" "report-status"
  assert_not_contains "$T/adv" "push-cert"
}

test_sigterm_lets_an_in_flight_push_finish_then_exits_0_and_cleans_up() {
  # A gateway of this test's own (state apart), so this shell can wait for it.
  sed 's/"state_dir": "state"/"state_dir": "state-term"/' "$T/refgate.json" >"$T/term.json"
  # Left by a crash: the next start clears it.
  mkdir -p "$T/state-term/tmp/rg-quarantine-stale/objects"
  "$REFGATE" serve --config "$T/term.json" 2>"$T/term.log" &
  local gw=$! gw_url
  for _ in $(seq 100); do [ -s "$T/state-term/url" ] && break; sleep 0.05; done
  gw_url=$(cat "$T/state-term/url")
  [ ! -e "$T/state-term/tmp/rg-quarantine-stale" ] || fail "stale quarantine left in tmp"
  # The hook holds the push upstream until this test releases it, so the
  # push is certainly in flight when SIGTERM arrives. Bounded: 10 s.
  rm -f "$T/hook-started" "$T/hook-release"
  cat >"$T/upstream/acme/app.git/hooks/pre-receive" <<HOOK
#!/bin/sh
touch "$T/hook-started"
for _ in \$(seq 200); do [ -e "$T/hook-release" ] && exit 0; sleep 0.05; done
exit 0
HOOK
  chmod +x "$T/upstream/acme/app.git/hooks/pre-receive"
  GW=$gw_url use_token "$("$REFGATE" token mint --config "$T/term.json" --repo local/acme/app)"
  clone app "$T/term"
  git -C "$T/term" switch -q -c scratch/term
  commit "$T/term" t.txt
  git -C "$T/term" push origin scratch/term >"$T/out" 2>&1 &
  local push=$! rc=0
  for _ in $(seq 200); do [ -e "$T/hook-started" ] && break; sleep 0.05; done
  [ -e "$T/hook-started" ] || { cat "$T/out"; fail "the push never reached upstream's hook"; }
  kill -TERM "$gw"
  # Release the push only once the gateway is shutting down.
  for _ in $(seq 200); do
    grep -qF "SIGTERM received" "$T/term.log" && break
    sleep 0.05
  done
  touch "$T/hook-release"
  wait "$push" || { cat "$T/out"; fail "the in-flight push failed"; }
  wait "$gw" || rc=$?
  rm "$T/upstream/acme/app.git/hooks/pre-receive"
  [ "$rc" -eq 0 ] || { cat "$T/term.log"; fail "gateway exit status $rc"; }
  assert_contains "$T/term.log" "stopping signal=SIGTERM (finishing in-flight pushes)"
  [ -n "$(upstream_ref app refs/heads/scratch/term)" ] || fail "did not land"
  ! curl -s -o /dev/null "$gw_url/" || fail "still accepting connections"
  [ ! -e "$T/state-term/url" ] || fail "the url file outlived the gateway"
}

test_bad_config_refuses_to_start_and_names_the_key() {
  echo '{"state_dir": "state", "rules": [{"effect": "maybe"}]}' >"$T/bad.json"
  ! "$REFGATE" serve --config "$T/bad.json" 2>"$T/err" || fail "started"
  assert_contains "$T/err" "bad.json"
  assert_contains "$T/err" "rules[0].effect"
}

test_demo_runs_and_checks_itself() {
  TMPDIR=$T "$REFGATE" demo >"$T/demo" 2>&1 || { cat "$T/demo"; fail "demo failed"; }
  assert_contains "$T/demo" "* [new branch]      feature/login -> feature/login"
  assert_contains "$T/demo" "! [remote rejected] main -> main (policy: main is protected"
  assert_contains "$T/demo" "! [remote rejected] feature/login -> feature/login (policy: "
  # The gateway's start event and the three decisions.
  assert_contains "$T/demo" 'remote: refgate: rule "no-secrets": github-token in config.env line 1'
  assert_contains "$T/demo" "! [remote rejected] feature/config -> feature/config (policy: credentials never leave the machine"
  ! grep -q "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d" <(grep -v '^\$\|GITHUB_TOKEN' "$T/demo") || fail "the demo's output shows the token"
  assert_contains "$T/demo" "! [remote rejected] release/1.0 -> release/1.0 (policy: a release needs a reviewer (approval needed: refgate approve "
  assert_contains "$T/demo" " * [new branch]      release/1.0 -> release/1.0"
  assert_contains "$T/demo" "audit log intact: 12 records"
  assert_contains "$T/demo" "the token never reached upstream."
  ! ls -d "$T"/refgate-demo.* 2>/dev/null || fail "the demo left its directory"
}

run_tests
