# Attacks over the wire with a raw receive-pack client (tests/support/
# rawpush.py), not git: command shapes git never sends and requests that end
# in ways git never ends them. For each, what upstream holds afterwards and
# what the audit log says must agree.
source "$(dirname "$0")/lib.sh"

RAW="python3 $REFGATE_SRC/tests/support/rawpush.py"
ZERO=0000000000000000000000000000000000000000

make_upstream app
# main: no update, force or delete; any branch may be created but
# reserved/**; feature branches and `master` may also be fast-forwarded.
RULES='[
  {"name": "reserved", "refs": ["refs/heads/reserved/**"], "effect": "deny",
   "reason": "reserved names are not for pushing"},
  {"name": "protect-main", "refs": ["refs/heads/main"], "actions": ["update", "force", "delete"],
   "effect": "deny", "reason": "main is protected"},
  {"name": "create-any", "refs": ["refs/heads/**"], "actions": ["create"], "effect": "allow"},
  {"name": "features", "refs": ["refs/heads/feature/**", "refs/heads/master"], "actions": ["update"],
   "effect": "allow"}
]'
write_config "$RULES" '"max_body_bytes": 2097152'
start_gateway
TOKEN=$(mint local/acme/app)
URL=$GW/local/acme/app.git
UP=$T/upstream/acme/app.git
MAIN=$(upstream_ref app main)

# A commit on top of main in a scratch clone; prints its id.
WORK=$T/work
clone app "$WORK"
new_commit() {
  commit "$WORK" "f-$RANDOM.txt" >/dev/null
  git -C "$WORK" rev-parse HEAD
}

# audit_outcome REF: the last decision's outcome for REF, whether the
# decision record carries it or an outcome record completes it; "none"
# when REF has no decision, "pending" when nothing completed it.
audit_outcome() {
  jq -rs --arg ref "$1" '. as $all
    | [.[] | select(.ref == $ref and (.type == "decision" or .type == null))] | last as $d
    | if $d == null then "none"
      elif $d.outcome != null then $d.outcome
      else ([$all[] | select(.type == "outcome" and .decision_seq == $d.seq)] | last
            | .outcome // "pending") end' "$T/state/audit.jsonl"
}
audit_field() {
  jq -rs --arg ref "$1" --arg f "$2" \
    '[.[] | select(.ref == $ref and (.type == "decision" or .type == null))] | last | .[$f]' \
    "$T/state/audit.jsonl"
}

# wait_outcome REF: the outcome once it is no longer pending (bounded).
wait_outcome() {
  local o
  for _ in $(seq 1 200); do
    o=$(audit_outcome "$1")
    [ "$o" != none ] && [ "$o" != pending ] && { echo "$o"; return 0; }
    sleep 0.05
  done
  echo "$o"
}

# The audit log and upstream agree on REF: "forwarded: ok" exactly when
# upstream now holds NEW.
assert_audit_agrees() {
  local ref=$1 new=$2 outcome held
  outcome=$(wait_outcome "$ref")
  held=$(git --git-dir="$UP" rev-parse -q --verify "$ref" || true)
  if [ "$held" = "$new" ]; then
    [ "$outcome" = "forwarded: ok" ] || fail "$ref landed upstream but the audit says '$outcome'"
  else
    case "$outcome" in
      "forwarded: ok"|none|pending) fail "$ref did not land but the audit says '$outcome'" ;;
    esac
  fi
}

test_zero_zero_command_on_a_protected_branch_is_refused() {
  $RAW "$URL" "$TOKEN" "$ZERO:$ZERO:refs/heads/main" >"$T/out"
  assert_contains "$T/out" "HTTP 200"
  assert_contains "$T/out" "ng refs/heads/main"
  [ "$(upstream_ref app main)" = "$MAIN" ] || fail "main was deleted"
  # Recorded as what upstream would have done with it: a delete.
  [ "$(audit_field refs/heads/main action)" = delete ] || fail "audited as $(audit_field refs/heads/main action)"
  [ "$(audit_field refs/heads/main decision)" = deny ] || fail "not audited as a denial"
}

test_zero_zero_command_is_refused_even_where_deletes_are_allowed() {
  git --git-dir="$UP" update-ref refs/heads/scratch "$MAIN"
  $RAW "$URL" "$TOKEN" "$ZERO:$ZERO:refs/heads/scratch" >"$T/out"
  assert_contains "$T/out" "ng refs/heads/scratch"
  [ "$(upstream_ref app refs/heads/scratch)" = "$MAIN" ] || fail "scratch was deleted"
}

test_update_through_a_symbolic_ref_is_decided_on_the_ref_it_moves() {
  git --git-dir="$UP" symbolic-ref refs/heads/master refs/heads/main
  local new
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$MAIN:$new:refs/heads/master" \
    --pack-repo "$WORK" --pack-revs "$new ^$MAIN" >"$T/out"
  assert_contains "$T/out" "ng refs/heads/master"
  assert_contains "$T/out" "main is protected"
  [ "$(upstream_ref app main)" = "$MAIN" ] || fail "main moved through master"
  git --git-dir="$UP" symbolic-ref --delete refs/heads/master
}

test_create_through_a_dangling_symbolic_ref_is_decided_on_its_target() {
  # `alias` points at a branch that does not exist yet: creating alias
  # creates that branch, so the rules on it decide.
  git --git-dir="$UP" symbolic-ref refs/heads/alias refs/heads/reserved/x
  local new
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$ZERO:$new:refs/heads/alias" \
    --pack-repo "$WORK" --pack-revs "$new ^$MAIN" >"$T/out"
  assert_contains "$T/out" "ng refs/heads/alias"
  assert_contains "$T/out" "reserved names are not for pushing"
  [ -z "$(upstream_ref app refs/heads/reserved/x)" ] || fail "reserved/x was created"
  git --git-dir="$UP" symbolic-ref --delete refs/heads/alias
}

test_push_without_report_status_is_audited_with_its_real_outcome() {
  local new
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$ZERO:$new:refs/heads/feature/no-report" --caps "side-band-64k" \
    --pack-repo "$WORK" --pack-revs "$new ^$MAIN" >"$T/out"
  assert_contains "$T/out" "HTTP 200"
  [ "$(upstream_ref app refs/heads/feature/no-report)" = "$new" ] || fail "did not land"
  [ "$(audit_outcome refs/heads/feature/no-report)" = "forwarded: ok" ] ||
    fail "audit says '$(audit_outcome refs/heads/feature/no-report)'"
}

test_client_that_hangs_up_after_the_pack_still_gets_its_outcome_audited() {
  local new ref=refs/heads/feature/hangup
  new=$(new_commit)
  # The request never ends: the pack is sent, then the connection closes
  # once upstream applied the update.
  $RAW "$URL" "$TOKEN" "$ZERO:$new:$ref" --pack-repo "$WORK" --pack-revs "$new ^$MAIN" \
    --hangup-when "git --git-dir='$UP' rev-parse -q --verify $ref" >"$T/out" || true
  [ "$(upstream_ref app $ref)" = "$new" ] || fail "the pack did not land"
  assert_audit_agrees "$ref" "$new"
}

test_client_that_hangs_up_mid_pack_lands_nothing_and_says_so() {
  local new ref=refs/heads/feature/midpack
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$ZERO:$new:$ref" --pack-repo "$WORK" --pack-revs "$new ^$MAIN" \
    --cut 30 --hangup-when "true" >"$T/out" || true
  local o
  o=$(wait_outcome "$ref")
  [ -z "$(upstream_ref app $ref)" ] || fail "a cut pack landed"
  case "$o" in "forwarded: ok"|pending|none) fail "audit says '$o'" ;; esac
}

test_gzip_body_with_its_trailer_cut_is_audited_as_what_upstream_did() {
  local new ref=refs/heads/feature/gzip-cut
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$ZERO:$new:$ref" --pack-repo "$WORK" --pack-revs "$new ^$MAIN" \
    --gzip --cut 4 >"$T/out"
  assert_audit_agrees "$ref" "$new"
}

test_gzip_body_with_junk_after_its_end_is_audited_as_what_upstream_did() {
  local new ref=refs/heads/feature/gzip-junk
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$ZERO:$new:$ref" --pack-repo "$WORK" --pack-revs "$new ^$MAIN" \
    --gzip --junk "JUNKJUNKJUNK" >"$T/out"
  assert_audit_agrees "$ref" "$new"
}

test_body_over_the_cap_after_a_complete_pack_is_audited_as_what_upstream_did() {
  local new ref=refs/heads/feature/over-cap
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$ZERO:$new:$ref" --pack-repo "$WORK" --pack-revs "$new ^$MAIN" \
    --chunked --junk-bytes 3000000 >"$T/out" || true
  assert_audit_agrees "$ref" "$new"
}

# The checked path overlaps: commands that may be allowed go upstream with
# the pack at once, all but the pack's trailing checksum.
test_checked_push_with_junk_after_the_pack_lands_as_an_update() {
  local ref=refs/heads/feature/overlap-junk base new
  base=$(new_commit)
  git --git-dir="$UP" update-ref "$ref" "$MAIN"
  git -C "$WORK" push -q "$UP" "$base:$ref" 2>/dev/null
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$base:$new:$ref" --pack-repo "$WORK" --pack-revs "$new ^$base" \
    --junk "0000trailing junk that is no pack" >"$T/out"
  assert_contains "$T/out" "ok $ref"
  [ "$(upstream_ref app "$ref")" = "$new" ] || fail "the fast-forward did not land"
  [ "$(audit_field "$ref" action)" = update ] || fail "not decided as an update"
  assert_audit_agrees "$ref" "$new"
}

test_overlapped_force_lands_nothing_and_leaves_no_quarantine_upstream() {
  local ref=refs/heads/feature/overlap-force new
  git --git-dir="$UP" update-ref "$ref" "$MAIN"
  # Not a descendant of main: a force, which no rule allows.
  git -C "$WORK" checkout -q --orphan "orphan-$RANDOM"
  new=$(new_commit)
  $RAW "$URL" "$TOKEN" "$MAIN:$new:$ref" --pack-repo "$WORK" --pack-revs "$new" >"$T/out"
  git -C "$WORK" checkout -q -B "back-$RANDOM" "$MAIN"
  assert_contains "$T/out" "ng $ref"
  [ "$(upstream_ref app "$ref")" = "$MAIN" ] || fail "the force landed"
  [ "$(audit_field "$ref" action)" = force ] || fail "not decided as a force"
  [ -z "$(find "$UP/objects" -maxdepth 1 -name '*incoming*')" ] || fail "a quarantine was left upstream"
  [ -z "$(git --git-dir="$UP" cat-file -t "$new" 2>/dev/null)" ] || fail "the denied commit reached upstream"
}

test_every_decision_in_the_log_is_complete_and_the_chain_verifies() {
  local pending
  pending=$(jq -rs '. as $all | [.[] | select(.type == "decision" and .outcome == null)
    | select(.seq as $s | [$all[] | select(.type == "outcome" and .decision_seq == $s)] | length == 0)]
    | length' "$T/state/audit.jsonl")
  [ "$pending" = 0 ] || fail "$pending decisions were never completed"
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/v" || { cat "$T/v"; fail "chain broken"; }
}

run_tests
