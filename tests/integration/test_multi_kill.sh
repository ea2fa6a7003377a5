# A gateway killed (SIGKILL) in the middle of a push, on one database with
# another gateway: upstream is slowed by a pre-receive hook that waits, so
# the push's allow decision is durable and pending and its pack is in
# upstream's hands when the gateway dies. Then: the interrupted push has
# its decision record, completed with an "unknown" outcome by the other
# gateway (its lease expired) or by the killed one's restart, which says
# so in a "recovered" event naming the dead gateway; exactly one outcome
# per decision; whatever landed has its allow record; the chain verifies
# and both gateways serve.
source "$(dirname "$0")/lib_multi.sh"

make_upstream app
multi_setup 2 "$STANDARD_RULES"
UP=$T/upstream/acme/app.git
HOLD=$T/hold
# Upstream waits in pre-receive (for at most 2 min) while $HOLD exists, for
# refs named */slow*, after marking that it got there.
cat >"$UP/hooks/pre-receive" <<HOOK
#!/bin/sh
grep -q '/slow' || exit 0
touch "$T/in-hook"
i=0
while [ -e "$HOLD" ] && [ \$i -lt 1200 ]; do sleep 0.1; i=\$((i + 1)); done
exit 0
HOOK
chmod +x "$UP/hooks/pre-receive"
TOKEN=$(gw_mint 2 local/acme/app)
clone app "$T/w"

# gw_id I: gateway I's id in the database (its lease row).
gw_id() { pg_psql "SELECT id FROM gateways WHERE pid = $(gw_pid "$1") AND stopped IS NULL ORDER BY started DESC LIMIT 1"; }
# outcome_of REF: the outcome of REF's last decision in the database
# ("none" without a decision, "pending" without an outcome).
outcome_of() {
  db_rows | jq -r -s --arg ref "$1" '[.[] | select(.ref == $ref)] | last
    | if . == null then "none" else (.outcome // "pending") end'
}

# slow_push_killed I BRANCH: push BRANCH through gateway I, held in
# upstream's pre-receive, and SIGKILL gateway I there. Prints the dead
# gateway's id. Called as $(...): the trap is this subshell's.
slow_push_killed() {
  local pid id f=${2//\//-}
  trap 'rm -f "$HOLD"' EXIT
  touch "$HOLD"
  rm -f "$T/in-hook"
  git -C "$T/w" switch -q -C "$2" main
  commit "$T/w" "$f.txt"
  (gw_use "$1" "$TOKEN"; exec git -C "$T/w" push origin "$2" >"$T/$f.out" 2>&1) &
  pid=$!
  wait_until 60 '[ -e "$T/in-hook" ]' >&2
  [ "$(outcome_of "refs/heads/$2")" = pending ] || { fail "no pending decision for $2 while upstream holds it" >&2; return 1; }
  id=$(gw_id "$1")
  [ -n "$id" ] || { fail "gateway $1 has no lease row in the database" >&2; return 1; }
  gw_kill "$1"
  rm -f "$HOLD"
  wait "$pid" || true
  echo "$id"
}

# completed REF DEAD_ID [BY_ID]: wait (bounded) until REF's decision has an
# outcome; it must be "unknown" (completed by BY_ID, if given) and a
# recovered event must name DEAD_ID.
completed() {
  local t0=$SECONDS ref=$1
  wait_until 90 '[ "$(outcome_of "$ref")" != pending ]'
  note "$1: completed $((SECONDS - t0)) s after the kill: $(outcome_of "$1")"
  case "$(outcome_of "$1")" in
    unknown*) ;;
    *) fail "$1's outcome is '$(outcome_of "$1")', not unknown" ;;
  esac
  [ -z "${3:-}" ] || [[ "$(outcome_of "$1")" == *"completed by gateway $3"* ]] ||
    fail "$1 was not completed by gateway $3"
  db_lines | jq -r 'select(.type == "event" and .event == "recovered") | .detail' >"$T/recovered"
  assert_contains "$T/recovered" "$2"
}

test_a_gateway_killed_mid_push_is_completed_by_the_other_gateway() {
  local id
  id=$(slow_push_killed 1 feature/slow-1)
  completed refs/heads/feature/slow-1 "$id" "$(gw_id 2)"
  note "feature/slow-1 $([ -n "$(upstream_ref app feature/slow-1)" ] && echo landed || echo did not land) upstream"
  gw_start 1
}

test_a_gateway_killed_mid_push_and_restarted_gets_it_completed() {
  local id
  [ -n "$(gw_pid 1)" ] || gw_start 1
  id=$(slow_push_killed 1 feature/slow-2)
  gw_start 1
  completed refs/heads/feature/slow-2 "$id"
}

test_both_gateways_serve_after_the_kills() {
  local i
  [ -n "$(gw_pid 1)" ] || gw_start 1
  for i in 1 2; do
    git -C "$T/w" switch -q -C "feature/after-$i" main
    commit "$T/w" "after-$i.txt"
    (gw_use "$i" "$TOKEN"; git -C "$T/w" push origin "feature/after-$i" >"$T/after.out" 2>&1) ||
      { cat "$T/after.out"; fail "push through gateway $i"; }
  done
}

test_one_outcome_per_decision_whatever_landed_has_its_record_and_the_chain_verifies() {
  db_lines >"$T/lines"
  jq -e -s '[.[] | select(.type == "outcome") | .decision_seq] | group_by(.) | all(length == 1)' "$T/lines" >/dev/null ||
    fail "a decision has more than one outcome record"
  db_rows >"$T/rows"
  local ref id
  while read -r ref id; do
    jq -e -s --arg ref "$ref" --arg id "$id" \
      '[.[] | select(.ref == $ref and .new == $id and .decision == "allow")] | length == 1' "$T/rows" >/dev/null ||
      fail "$ref ($id) is upstream without one allow decision record"
  done < <(git --git-dir="$UP" for-each-ref --format='%(refname) %(objectname)' refs/heads/feature)
  multi_verify
}

run_tests
