# The gateway killed with SIGKILL in the middle of a push, on the streamed
# and on the spooled path: nothing half-applied upstream, and after a
# restart the chain verifies, the interrupted push has its record (its
# outcome "unknown" when the gateway died after forwarding) and the next
# push lands.
source "$(dirname "$0")/lib.sh"

RAW="python3 $REFGATE_SRC/tests/support/rawpush.py"
ZERO=0000000000000000000000000000000000000000

make_upstream app
write_config "$STANDARD_RULES"
TOKEN=$(mint local/acme/app)
UP=$T/upstream/acme/app.git
MAIN=$(upstream_ref app main)
WORK=$T/work
clone app "$WORK"

# big_commit: a commit of 8 MB of random bytes on top of main; prints its id.
big_commit() {
  git -C "$WORK" checkout -q -B "w$RANDOM" "$MAIN"
  head -c $((8 * 1024 * 1024)) /dev/urandom >"$WORK/big-$RANDOM.bin"
  git -C "$WORK" add . && git -C "$WORK" commit -q -m big
  git -C "$WORK" rev-parse HEAD
}

decision_of() {
  jq -rs --arg ref "$1" '[.[] | select(.type == "decision" and .ref == $ref)] | last' \
    "$T/state/audit.jsonl"
}
outcome_of() {
  jq -rs --arg ref "$1" '. as $all | [.[] | select(.type == "decision" and .ref == $ref)] | last
    | if . == null then "none" elif .outcome != null then .outcome
      else (.seq as $s | [$all[] | select(.type == "outcome" and .decision_seq == $s)] | last
            | .outcome // "pending") end' "$T/state/audit.jsonl"
}

# kill_gateway_when CMD: SIGKILL the gateway once CMD holds (bounded).
kill_gateway_when() {
  for _ in $(seq 1 400); do
    eval "$1" && break
    sleep 0.05
  done
  kill -KILL "$GW_PID"
  wait "$GW_PID" 2>/dev/null || true
  GW_PID=
}

# Each test runs in a subshell: it starts its own gateway and stops the one
# it restarted, so the next test finds the audit log unlocked.
restart_and_check() {
  start_gateway
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/verify" || { cat "$T/verify"; fail "chain"; }
  local dir=$T/after-$RANDOM
  use_token "$TOKEN"
  clone app "$dir"
  git -C "$dir" switch -q -c "feature/after-$RANDOM"
  commit "$dir" after.txt
  git -C "$dir" push -q origin HEAD 2>"$T/push.err" || { cat "$T/push.err"; fail "next push"; }
  stop_gateway
}

test_killed_mid_pack_on_the_streamed_path() {
  start_gateway
  local new ref=refs/heads/feature/killed-stream
  new=$(big_commit)
  # Half the pack, then the connection stays open until the gateway is gone.
  $RAW "$GW/local/acme/app.git" "$TOKEN" "$ZERO:$new:$ref" --pack-repo "$WORK" \
    --pack-revs "$new ^$MAIN" --send-first 4000000 \
    --hangup-when "! kill -0 $GW_PID 2>/dev/null" >"$T/raw" 2>&1 &
  local raw=$!
  kill_gateway_when '[ "$(decision_of '"$ref"')" != null ]'
  wait "$raw" || true
  [ -z "$(upstream_ref app "$ref")" ] || fail "a half-sent pack landed"
  restart_and_check
  case "$(outcome_of "$ref")" in
    unknown*) ;;
    *) fail "the interrupted push's outcome is '$(outcome_of "$ref")'" ;;
  esac
  assert_contains "$T/gateway.log" "recovered"
}

test_killed_while_upstream_decides_on_the_spooled_path() {
  start_gateway
  local new ref=refs/heads/feature/killed-spool
  # A fast-forward (checked for ancestry: spooled) of a branch that exists.
  git --git-dir="$UP" update-ref "$ref" "$MAIN"
  new=$(big_commit)
  # Upstream's pre-receive waits until told, so the gateway dies after it
  # forwarded the pack and before upstream answered.
  printf '#!/bin/sh\ntouch %s\nwhile [ ! -e %s ]; do sleep 0.05; done\nexit 1\n' \
    "$T/in-hook" "$T/go" >"$UP/hooks/pre-receive"
  chmod +x "$UP/hooks/pre-receive"
  $RAW "$GW/local/acme/app.git" "$TOKEN" "$MAIN:$new:$ref" --pack-repo "$WORK" \
    --pack-revs "$new ^$MAIN" >"$T/raw" 2>&1 &
  local raw=$!
  kill_gateway_when '[ -e "$T/in-hook" ]'
  wait "$raw" || true
  touch "$T/go"
  # Upstream's receive-pack outlives the gateway: let it finish first.
  for _ in $(seq 1 200); do pgrep -f "receive-pack.*$UP" >/dev/null || break; sleep 0.05; done
  rm -f "$UP/hooks/pre-receive" "$T/go" "$T/in-hook"
  [ "$(upstream_ref app "$ref")" = "$MAIN" ] || fail "the refused update landed"
  restart_and_check
  [ "$(jq -r .action <<<"$(decision_of "$ref")")" = update ] || fail "not decided as an update"
  case "$(outcome_of "$ref")" in
    unknown*) ;;
    *) fail "the interrupted push's outcome is '$(outcome_of "$ref")'" ;;
  esac
}

test_killed_mid_spool_before_the_decision_leaves_nothing_behind() {
  start_gateway
  local new ref=refs/heads/feature/killed-early
  git --git-dir="$UP" update-ref "$ref" "$MAIN"
  new=$(big_commit)
  $RAW "$GW/local/acme/app.git" "$TOKEN" "$MAIN:$new:$ref" --pack-repo "$WORK" \
    --pack-revs "$new ^$MAIN" --send-first 4000000 \
    --hangup-when "! kill -0 $GW_PID 2>/dev/null" >"$T/raw" 2>&1 &
  local raw=$!
  kill_gateway_when '[ -n "$(ls "$T/state/tmp" 2>/dev/null)" ]'
  wait "$raw" || true
  [ "$(upstream_ref app "$ref")" = "$MAIN" ] || fail "upstream changed"
  restart_and_check
  [ "$(decision_of "$ref")" = null ] || fail "a push never decided has a decision record"
  [ -z "$(ls "$T/state/tmp")" ] || fail "the quarantine was left behind: $(ls "$T/state/tmp")"
}

run_tests
