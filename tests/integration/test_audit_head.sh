# The audit log's head and its tail: the gateway logs the head (seq and
# hash of the last line) at start and stop and records start/stop events;
# `refgate audit head` prints it; `refgate audit verify --head` finds a
# tail cut after that head was taken, which the chain alone cannot; and a
# decision left pending by a gateway that died is completed as "unknown"
# when the next one starts.
source "$(dirname "$0")/lib.sh"

make_upstream app
write_config "$STANDARD_RULES"
start_gateway
TOKEN=$(mint local/acme/app)

# logged_head WHEN: the SEQ:HASH of the last audit_head line the gateway logged.
logged_head() {
  grep -o 'audit_head seq=[0-9]* hash=[0-9a-f]*' "$T/gateway.log" | tail -1 |
    sed 's/audit_head seq=\([0-9]*\) hash=\([0-9a-f]*\)/\1:\2/'
}

test_the_gateway_logs_the_head_at_start() {
  assert_contains "$T/gateway.log" "audit_head seq=1 hash="
  local head; head=$("$REFGATE" audit head --config "$T/refgate.json")
  [ "$head" = "$(logged_head)" ] || fail "audit head '$head' is not the logged '$(logged_head)'"
}

test_a_push_moves_the_head_and_verify_reaches_it() {
  use_token "$TOKEN"
  clone app "$T/w"
  git -C "$T/w" switch -q -c feature/head
  commit "$T/w" f.txt
  git -C "$T/w" push -q origin feature/head 2>"$T/err" || { cat "$T/err"; fail "push"; }
  "$REFGATE" audit head --config "$T/refgate.json" >"$T/head"
  grep -qE '^[0-9]+:[0-9a-f]{64}$' "$T/head" || { cat "$T/head"; fail "head is not SEQ:HASH"; }
  [ "$(cut -d: -f1 "$T/head")" -ge 2 ] || fail "the push did not move the head"
  "$REFGATE" audit verify --config "$T/refgate.json" --head "$(cat "$T/head")" >"$T/out" ||
    { cat "$T/out"; fail "verify --head on an intact log"; }
  assert_contains "$T/out" "reaching head"
}

test_stop_logs_the_head_and_records_start_and_stop_events() {
  stop_gateway
  "$REFGATE" audit head --config "$T/refgate.json" >"$T/stop_head"
  [ "$(cat "$T/stop_head")" = "$(logged_head)" ] || fail "stop head differs from the logged one"
  "$REFGATE" audit --config "$T/refgate.json" --events --json >"$T/events"
  assert_contains "$T/events" '"type":"event","event":"start"'
  assert_contains "$T/events" '"type":"event","event":"stop"'
  tail -1 "$T/state/audit.jsonl" | grep -qF '"event":"stop"' || fail "stop is not the last record"
}

test_verify_head_names_a_cut_tail() {
  local head seq; head=$(cat "$T/stop_head"); seq=${head%%:*}
  # The chain alone is still intact after the cut.
  sed -i '$d' "$T/state/audit.jsonl"
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/out" || { cat "$T/out"; fail "chain"; }
  ! "$REFGATE" audit verify --config "$T/refgate.json" --head "$head" >"$T/out" ||
    { cat "$T/out"; fail "verify --head passed on a cut log"; }
  assert_contains "$T/out" "audit log does not match head $seq"
  assert_contains "$T/out" "ends at seq $((seq - 1))"
  assert_contains "$T/out" "records were cut from its end"
}

test_a_pending_decision_is_completed_at_the_next_start() {
  local head seq hash line
  head=$("$REFGATE" audit head --config "$T/refgate.json"); seq=${head%%:*}; hash=${head#*:}
  # What a gateway killed between forwarding and upstream's answer leaves.
  line='{"v":2,"seq":'$((seq + 1))',"prev":"'$hash'","time":"2026-12-01T00:00:00.000Z","type":"decision","push_id":"killed","run":"r","token":"0123456789ab","remote":"127.0.0.1","repo":"local/acme/app","ref":"refs/heads/feature/killed","old":"0000000000000000000000000000000000000000","new":"1111111111111111111111111111111111111111","action":"create","decision":"allow","rule":"features","reason":"ok","outcome":null}'
  printf '%s\n' "$line" >>"$T/state/audit.jsonl"
  "$REFGATE" audit --config "$T/refgate.json" --ref feature/killed >"$T/before"
  assert_contains "$T/before" "pending"
  start_gateway
  assert_contains "$T/gateway.log" "audit_recovered completed=1"
  "$REFGATE" audit --config "$T/refgate.json" --ref feature/killed --json >"$T/after"
  assert_contains "$T/after" '"outcome":"unknown: the gateway stopped before upstream answered'
  assert_contains "$T/after" '"outcome_record":{"v":2,'
  [ "$(wc -l <"$T/after")" -eq 1 ] || fail "one row for the ref"
  "$REFGATE" audit --config "$T/refgate.json" --events --json >"$T/events"
  assert_contains "$T/events" '"event":"recovered"'
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/out" || { cat "$T/out"; fail "chain"; }
}

run_tests
