# `refgate policy check` and `refgate policy lint` as a user runs them (exit
# codes, the trace, JSON), with ids classified in a real git repository;
# then a real push through the gateway where a `runs` rule lets one run's
# token push a release tag and another run's not, and `policy check`
# agrees with what the gateway decided.
source "$(dirname "$0")/lib.sh"

make_upstream app
RULES='[
  {"name": "protect-main", "refs": ["refs/heads/main"], "actions": ["update", "force", "delete"],
   "effect": "deny", "reason": "main is protected"},
  {"name": "features", "refs": ["refs/heads/feature/**"], "actions": ["create", "update", "delete"],
   "effect": "allow"},
  {"name": "release-tags", "refs": ["refs/tags/v*"], "actions": ["create"], "runs": ["release-*"],
   "effect": "allow"},
  {"name": "hotfix", "refs": ["refs/heads/hotfix/*"], "effect": "ask", "reason": "hotfixes need a maintainer"},
  {"name": "trial-no-force", "actions": ["force"], "effect": "deny", "mode": "evaluate",
   "reason": "trial"}
]'
write_config "$RULES"
CFG=$T/refgate.json
ZERO=0000000000000000000000000000000000000000

# check ARGS...: runs `refgate policy check` on $CFG for local/acme/app into
# $T/out; prints its exit status.
check() {
  local rc=0
  "$REFGATE" policy check --config "$CFG" --repo local/acme/app "$@" >"$T/out" 2>&1 || rc=$?
  echo "$rc"
}

expect_rc() { # expect_rc WANT GOT
  [ "$1" = "$2" ] || { cat "$T/out"; fail "exit status $2, expected $1"; }
}

test_check_exit_status_says_allow_deny_ask_or_error() {
  expect_rc 0 "$(check --ref refs/heads/feature/x --action create)"
  assert_contains "$T/out" "decision: allow"
  expect_rc 1 "$(check --ref refs/heads/main --action update)"
  assert_contains "$T/out" "reason:   main is protected"
  expect_rc 2 "$(check --ref refs/heads/hotfix/1 --action create)"
  assert_contains "$T/out" "decision: ask"
  assert_contains "$T/out" "refused until a reviewer approves this update"
  assert_contains "$T/out" "(the gateway refuses it until the update is approved: refgate approvals)"
  expect_rc 1 "$(check --ref refs/heads/other --action create)"
  assert_contains "$T/out" "rule:     default (no enforced rule matched)"
  # Errors: usage, a short ref name, an unknown host, a bad action, a bad config.
  expect_rc 3 "$(check --ref refs/heads/main)"
  expect_rc 3 "$(check --ref main --action update)"
  assert_contains "$T/out" "give the full name, e.g. refs/heads/main"
  expect_rc 3 "$(check --ref refs/heads/main --action push)"
  local rc=0
  "$REFGATE" policy check --config "$CFG" --repo nohost/acme/app --ref refs/heads/x \
    --action create >"$T/out" 2>&1 || rc=$?
  expect_rc 3 "$rc"
  assert_contains "$T/out" "'nohost' is not an upstream host"
  echo '{"state_dir": "s", "rules": [{"effect": "maybe"}]}' >"$T/bad.json"
  rc=0
  "$REFGATE" policy check --config "$T/bad.json" --repo local/acme/app --ref refs/heads/x \
    --action create >"$T/out" 2>&1 || rc=$?
  expect_rc 3 "$rc"
  assert_contains "$T/out" 'rules[0].effect: unknown effect "maybe"'
}

test_the_trace_names_every_rule_and_what_failed() {
  expect_rc 1 "$(check --ref refs/heads/main --action force)"
  assert_contains "$T/out" "rules[0] protect-main"
  assert_contains "$T/out" "matched, ref refs/heads/main  <- decides"
  assert_contains "$T/out" "rules[1] features"
  assert_contains "$T/out" "no: ref not in [refs/heads/feature/**]; action not in [create, update, delete]"
  assert_contains "$T/out" "run unknown, the rule wants [release-*]"
  assert_contains "$T/out" "(evaluate mode) matched  <- decides among evaluate-mode rules"
  assert_contains "$T/out" "evaluate: rule trial-no-force would deny"
  assert_contains "$T/out" "(not used: a rule matched)"
}

test_check_json_carries_the_decision_and_trace() {
  local rc=0
  "$REFGATE" policy check --config "$CFG" --repo local/acme/app.git --ref refs/tags/v1 \
    --action create --run agent-1 --json >"$T/out.json" 2>"$T/err" || rc=$?
  expect_rc 1 "$rc"
  [ "$(jq -r .decision "$T/out.json")" = deny ] || fail "decision"
  [ "$(jq -r .run "$T/out.json")" = agent-1 ] || fail "run"
  [ "$(jq -r .repo "$T/out.json")" = local/acme/app ] || fail "repo without .git"
  [ "$(jq -c '.traces[0].rules[2].failed' "$T/out.json")" = '["run"]' ] || fail "failed selectors"
  [ "$(jq -r '.traces[0].rules[2].ref_pattern' "$T/out.json")" = 'refs/tags/v*' ] ||
    fail "matching pattern"
  [ "$(jq '.traces[0].rules | length' "$T/out.json")" = 5 ] || fail "every rule is traced"
}

test_check_treats_content_conditions_as_unknown_and_says_so() {
  cat >"$T/cond.json" <<JSON
{"state_dir": "state", "upstreams": [{"host": "local", "url": "file://$T/upstream"}],
 "rules": [{"name": "scanned-ok", "refs": ["refs/heads/scanned/**"], "secrets": true, "effect": "allow"},
           {"name": "features", "refs": ["refs/heads/feature/**"], "effect": "allow"},
           {"name": "no-secrets", "secrets": true, "effect": "deny"}]}
JSON
  local rc=0
  "$REFGATE" policy check --config "$T/cond.json" --repo local/acme/app --ref refs/heads/feature/x \
    --action create >"$T/out" 2>&1 || rc=$?
  expect_rc 1 "$rc"
  assert_contains "$T/out" "its conditions are unknown here, so assumed to hold (rule \"no-secrets\")"
  assert_contains "$T/out" "conditions unknown without the push's content: assumed to hold  <- decides"
  rc=0
  "$REFGATE" policy check --config "$T/cond.json" --repo local/acme/app --ref refs/heads/scanned/x \
    --action create --json >"$T/out.json" 2>&1 || rc=$?
  expect_rc 1 "$rc"
  [ "$(jq -c '.traces[0].rules[0].failed' "$T/out.json")" = '["conditions"]' ] || fail "allow rule"
  [ "$(jq -r '.traces[0].rules[0].conditions' "$T/out.json")" = unknown ] || fail "conditions"
}

test_check_classifies_ids_in_a_real_repository() {
  local w=$T/classify
  clone app "$w"
  local c1 c2 side
  c1=$(git -C "$w" rev-parse HEAD)
  commit "$w" a.txt
  c2=$(git -C "$w" rev-parse HEAD)
  git -C "$w" switch -q -c side "$c1"
  commit "$w" b.txt
  side=$(git -C "$w" rev-parse HEAD)
  git -C "$w" symbolic-ref refs/heads/alias refs/heads/main

  expect_rc 0 "$(check --ref refs/heads/feature/x --old "$c1" --new "$c2" --git-dir "$w")"
  assert_contains "$T/out" "action:   update (old is an ancestor of new)"
  expect_rc 1 "$(check --ref refs/heads/feature/x --old "$c2" --new "$side" --git-dir "$w/.git")"
  assert_contains "$T/out" "action:   force (old is not an ancestor of new)"
  expect_rc 0 "$(check --ref refs/heads/feature/x --old "$ZERO" --new "$side" --git-dir "$w")"
  assert_contains "$T/out" "action:   create"
  expect_rc 0 "$(check --ref refs/heads/feature/x --old "$c2" --new "$ZERO" --git-dir "$w")"
  assert_contains "$T/out" "action:   delete"
  # Revisions work too; a zero/zero command is refused as the gateway refuses it.
  expect_rc 0 "$(check --ref refs/heads/feature/x --old main~1 --new main --git-dir "$w")"
  expect_rc 1 "$(check --ref refs/heads/feature/x --old "$ZERO" --new "$ZERO" --git-dir "$w")"
  assert_contains "$T/out" "rule:     protocol (refused before any rule)"
  # A symbolic ref is decided on the ref it moves too.
  expect_rc 1 "$(check --ref refs/heads/alias --old main~1 --new main --git-dir "$w")"
  assert_contains "$T/out" "a symbolic ref to refs/heads/main: both names are decided"
  assert_contains "$T/out" "trace for refs/heads/main"
  # An id the repository lacks is an error, not a guess.
  expect_rc 3 "$(check --ref refs/heads/feature/x --old nosuchrev --new main --git-dir "$w")"
  expect_rc 3 "$(check --ref refs/heads/feature/x --old "$c1" --new "$c2" --git-dir "$T/nowhere")"
  expect_rc 3 "$(check --ref refs/heads/feature/x --old "$c1" --new "$c2")"
}

test_check_run_selects_rules_with_runs() {
  expect_rc 0 "$(check --ref refs/tags/v1.0 --action create --run release-7)"
  assert_contains "$T/out" "matched, ref refs/tags/v*, run release-*  <- decides"
  expect_rc 1 "$(check --ref refs/tags/v1.0 --action create --run agent-1)"
  assert_contains "$T/out" "run not in [release-*]"
  expect_rc 1 "$(check --ref refs/tags/v1.0 --action create)"
  assert_contains "$T/out" 'run:      unknown (rules with "runs" do not match; see --run)'
}

test_lint_exit_status_and_findings() {
  local rc=0
  cat >"$T/lint.json" <<JSON
{"state_dir": "state", "upstreams": [{"host": "local", "url": "file://$T/upstream"}],
 "rules": [
  {"name": "all-heads", "refs": ["refs/heads/**"], "effect": "deny"},
  {"name": "features", "refs": ["refs/heads/feature/*"], "effect": "allow"},
  {"name": "gh", "repos": ["gh*/acme/app"], "effect": "allow"}
 ]}
JSON
  "$REFGATE" policy lint --config "$T/lint.json" >"$T/out" 2>&1 || rc=$?
  expect_rc 1 "$rc"
  assert_contains "$T/out" 'rules[0] all-heads: warning: no-reason:'
  assert_contains "$T/out" 'rules[1] features: error: shadowed: never decides: rule "all-heads" (rules[0]) denies every update this rule allows'
  assert_contains "$T/out" 'rules[2] gh: error: never-matches: no pattern of "repos" can match'
  assert_contains "$T/out" "2 errors, 1 warning"
  rc=0
  "$REFGATE" policy lint --config "$T/lint.json" --json >"$T/out.json" 2>&1 || rc=$?
  expect_rc 1 "$rc"
  [ "$(jq -r '[.[].kind] | join(",")' "$T/out.json")" = "no-reason,shadowed,never-matches" ] ||
    fail "JSON kinds: $(cat "$T/out.json")"
  # Warnings alone fail only at --fail-on warning (the default).
  cat >"$T/warn.json" <<JSON
{"state_dir": "state", "upstreams": [{"host": "local", "url": "file://$T/upstream"}],
 "rules": [{"refs": ["refs/heads/main"], "effect": "deny"}]}
JSON
  rc=0; "$REFGATE" policy lint --config "$T/warn.json" >"$T/out" 2>&1 || rc=$?
  expect_rc 1 "$rc"
  rc=0; "$REFGATE" policy lint --config "$T/warn.json" --fail-on error >"$T/out" 2>&1 || rc=$?
  expect_rc 0 "$rc"
  assert_contains "$T/out" "0 errors, 1 warning"
  # Usage and bad configs.
  rc=0; "$REFGATE" policy lint >"$T/out" 2>&1 || rc=$?
  expect_rc 2 "$rc"
  rc=0; "$REFGATE" policy lint --config "$T/missing.json" >"$T/out" 2>&1 || rc=$?
  expect_rc 2 "$rc"
  rc=0; "$REFGATE" policy lint --config "$T/warn.json" --fail-on never >"$T/out" 2>&1 || rc=$?
  expect_rc 2 "$rc"
}

# The configs the repository shows people must not make the linter cry wolf.
test_lint_is_clean_on_the_example_configs() {
  local rc=0
  "$REFGATE" policy lint --config "$CFG" >"$T/out" 2>&1 || rc=$?
  expect_rc 0 "$rc"
  assert_contains "$T/out" "5 rules, no findings"
  write_config "$STANDARD_RULES"
  rc=0; "$REFGATE" policy lint --config "$CFG" >"$T/out" 2>&1 || rc=$?
  expect_rc 0 "$rc"
  sed "s|file:///srv/git|file://$T/upstream|; s|/var/lib/refgate|$T/state|" \
    "$REFGATE_SRC/deploy/refgate.example.json" >"$T/example.json"
  rc=0; "$REFGATE" policy lint --config "$T/example.json" >"$T/out" 2>&1 || rc=$?
  expect_rc 0 "$rc"
  # The README's quick start config.
  sed -n '/^cat > refgate.json <<.JSON.$/,/^JSON$/p' "$REFGATE_SRC/README.md" | sed '1d;$d' |
    sed "s|file:///srv/git|file://$T/upstream|" >"$T/quick.json"
  jq -e '.rules | length > 0' "$T/quick.json" >/dev/null || fail "README quick start not found"
  rc=0; "$REFGATE" policy lint --config "$T/quick.json" >"$T/out" 2>&1 || rc=$?
  expect_rc 0 "$rc"
  write_config "$RULES"
}

# A release agent's token may push a tag that another run's token may not,
# and `policy check --run` says beforehand what the gateway then does.
test_a_runs_rule_lets_one_runs_token_push_a_tag_and_not_another() {
  start_gateway
  local release agent w=$T/tags
  release=$("$REFGATE" token mint --config "$CFG" --repo local/acme/app --run release-7)
  agent=$("$REFGATE" token mint --config "$CFG" --repo local/acme/app --run agent-42)
  clone app "$w"
  git -C "$w" tag v1.0
  git -C "$w" tag v1.1

  expect_rc 1 "$(check --ref refs/tags/v1.1 --action create --run agent-42)"
  use_token "$agent"
  ! git -C "$w" push origin v1.1 >"$T/push.out" 2>&1 || fail "agent-42 pushed a release tag"
  assert_contains "$T/push.out" "[remote rejected] v1.1 -> v1.1 (policy: no rule allows create on refs/tags/v1.1 (default: deny))"
  [ -z "$(upstream_ref app refs/tags/v1.1)" ] || fail "v1.1 landed"

  expect_rc 0 "$(check --ref refs/tags/v1.0 --action create --run release-7)"
  use_token "$release"
  git -C "$w" push origin v1.0 >"$T/push.out" 2>&1 || { cat "$T/push.out"; fail "release-7 could not push v1.0"; }
  [ "$(upstream_ref app refs/tags/v1.0)" = "$(git -C "$w" rev-parse v1.0)" ] || fail "v1.0 did not land"

  # The audit log names each run and the rule that decided.
  audit_rows >"$T/rows"
  [ "$(jq -r 'select(.ref == "refs/tags/v1.1") | .run + " " + .decision' "$T/rows")" = "agent-42 deny" ] ||
    { cat "$T/rows"; fail "audit of v1.1"; }
  [ "$(jq -r 'select(.ref == "refs/tags/v1.0") | .run + " " + .rule' "$T/rows")" = "release-7 release-tags" ] ||
    { cat "$T/rows"; fail "audit of v1.0"; }
  stop_gateway
}

run_tests
