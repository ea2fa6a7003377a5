# A gateway whose audit log is in PostgreSQL: pushes land and are in the
# database's chain; while PostgreSQL is down a push is refused with a
# reason the pusher sees, nothing lands, and the gateway keeps serving; once
# it is back pushes land again without a restart; a second gateway on the
# same state_dir is refused; a gateway that dies with a forwarded push open
# has it completed by the next one; a gateway started while PostgreSQL is
# down serves, refuses pushes, and recovers by itself; a live gateway's
# open decision is left alone by another gateway's sweeps until it stops;
# and an outcome the database refused is kept and written once it is
# taken, by the lease thread or at a clean stop (before the stop event),
# once.
. "$REFGATE_SRC/tests/db/lib_audit.sh"

make_upstream app
write_db_config "$STANDARD_RULES"
"$REFGATE" db migrate --config "$T/refgate.json" >/dev/null
"$REFGATE" policy publish --config "$T/refgate.json" >/dev/null
start_gateway
TOKEN=$(mint local/acme/app)
use_token "$TOKEN"
clone app "$T/w"

# push BRANCH: a new commit on a new feature branch, pushed; git's output in $T/out.
push() {
  git -C "$T/w" switch -q -c "feature/$1" main
  commit "$T/w" "$1.c"
  git -C "$T/w" push origin "feature/$1" >"$T/out" 2>&1
}

test_a_push_lands_and_its_records_are_in_the_database() {
  push one || { cat "$T/out"; fail "push failed"; }
  [ -n "$(upstream_ref app refs/heads/feature/one)" ] || fail "feature/one did not land"
  db_dump "$T/db.jsonl"
  chain_ok "$T/db.jsonl"
  grep -q '"ref":"refs/heads/feature/one",.*"decision":"allow"' "$T/db.jsonl" || fail "no decision"
  grep -q '"ref":"refs/heads/feature/one","decision_seq":[0-9]*,"outcome":"forwarded: ok"' "$T/db.jsonl" ||
    { cat "$T/db.jsonl"; fail "no outcome"; }
  [ ! -e "$T/state/audit.jsonl" ] || fail "the gateway wrote a file log too"
}

test_while_postgres_is_down_a_push_is_refused_with_the_reason() {
  pg_kill
  ! push two || fail "a push landed while the audit log's database was down"
  # The run token's revocation is asked of the database first: 503, said in git's output.
  assert_contains "$T/out" "remote: refgate: the run token cannot be checked: the gateway cannot reach its shared state database"
  assert_not_contains "$T/out" "hung up"
  [ -z "$(upstream_ref app refs/heads/feature/two)" ] || fail "feature/two landed"
  kill -0 "$GW_PID" || fail "the gateway died"
  # It keeps serving: the advertisement is refused the same way, not cut.
  curl -s -o "$T/body" -w '%{http_code}' -u "run:$TOKEN" \
    "$GW/local/acme/app.git/info/refs?service=git-receive-pack" >"$T/code"
  [ "$(cat "$T/code")" = 503 ] || fail "info/refs answered $(cat "$T/code")"
  assert_contains "$T/body" "cannot reach its shared state database"
}

test_once_postgres_is_back_pushes_land_again_without_a_restart() {
  pg_back
  git -C "$T/w" push origin feature/two >"$T/out" 2>&1 || { cat "$T/out"; fail "push after the database came back failed"; }
  [ "$(upstream_ref app refs/heads/feature/two)" = "$(git -C "$T/w" rev-parse feature/two)" ] ||
    fail "feature/two did not land"
  db_dump "$T/db.jsonl"
  chain_ok "$T/db.jsonl"
}

test_a_second_gateway_on_the_same_state_dir_is_refused() {
  ! "$REFGATE" serve --config "$T/refgate.json" >"$T/out2" 2>&1 || fail "a second gateway started"
  assert_contains "$T/out2" "in use by another gateway process"
}

test_a_gateway_killed_mid_push_has_its_open_decision_completed_by_the_next() {
  local dead new main ref=refs/heads/feature/killed raw
  dead=$(pg_psql "SELECT id FROM gateways WHERE stopped IS NULL ORDER BY started DESC LIMIT 1")
  main=$(upstream_ref app main)
  git -C "$T/w" switch -q -c feature/killed main
  head -c $((8 * 1024 * 1024)) /dev/urandom >"$T/w/big.bin"
  git -C "$T/w" add big.bin && git -C "$T/w" commit -q -m big
  new=$(git -C "$T/w" rev-parse HEAD)
  # Half the pack: the decision is durable and the push forwarded, then
  # the gateway dies before upstream can answer.
  python3 "$REFGATE_SRC/tests/support/rawpush.py" "$GW/local/acme/app.git" "$TOKEN" \
    "0000000000000000000000000000000000000000:$new:$ref" --pack-repo "$T/w" \
    --pack-revs "$new ^$main" --send-first 4000000 \
    --hangup-when "! kill -0 $GW_PID 2>/dev/null" >"$T/raw" 2>&1 &
  raw=$!
  for _ in $(seq 1 400); do
    [ "$(pg_psql "SELECT count(*) FROM audit_records WHERE pending")" = 1 ] && break
    sleep 0.05
  done
  [ "$(pg_psql "SELECT gateway FROM audit_records WHERE pending")" = "$dead" ] || fail "no open decision"
  kill -KILL "$GW_PID"
  wait "$raw" || true
  [ -z "$(upstream_ref app "$ref")" ] || fail "a half-sent pack landed"
  # The next gateway starts while the dead one's lease is still fresh: its
  # lease thread completes the decision once the lease is old (10 s).
  start_gateway_here
  for _ in $(seq 1 600); do
    [ "$(pg_psql "SELECT count(*) FROM audit_records WHERE pending")" = 0 ] && break
    sleep 0.05
  done
  db_dump "$T/db.jsonl"
  chain_ok "$T/db.jsonl"
  grep -q "\"event\":\"recovered\",\"detail\":\"gateway $dead died with 1 forwarded ref update without an outcome; completed as unknown by gateway " "$T/db.jsonl" ||
    { tail -n 3 "$T/db.jsonl"; fail "no recovered event"; }
  grep -q "\"ref\":\"$ref\",\"decision_seq\":[0-9]*,\"outcome\":\"unknown: gateway $dead stopped before upstream answered (completed by gateway " "$T/db.jsonl" ||
    fail "no outcome for the open decision"
  assert_contains "$T/gateway.log" "audit_recovered"
  # And it serves: a push lands.
  use_token "$TOKEN"
  push after || { cat "$T/out"; fail "push after the recovery failed"; }
}

test_a_gateway_started_while_postgres_is_down_serves_and_recovers_by_itself() {
  pg_kill
  start_gateway_here
  use_token "$TOKEN"
  ! push down-at-start || fail "a push landed while the audit log's database was down"
  grep -qE "$DB_DOWN" "$T/out" || { cat "$T/out"; fail "no reason naming the database"; }
  assert_contains "$T/gateway.log" "db_unreachable"
  pg_back
  # The audit answers at once; the published policy is read at the next poll (1 s).
  for _ in $(seq 1 50); do
    git -C "$T/w" push origin feature/down-at-start >"$T/out" 2>&1 && break
    grep -qE "$DB_DOWN" "$T/out" || break
    sleep 0.1
  done
  [ -n "$(upstream_ref app refs/heads/feature/down-at-start)" ] || { cat "$T/out"; fail "push after the database came back failed"; }
  [ -n "$(upstream_ref app refs/heads/feature/down-at-start)" ] || fail "it did not land"
  # Its lease is registered by its lease thread once the database answers.
  for _ in $(seq 1 100); do
    [ "$(pg_psql "SELECT count(*) FROM gateways WHERE stopped IS NULL AND seen > now() - interval '5 seconds'")" = 1 ] && break
    sleep 0.1
  done
  [ "$(pg_psql "SELECT count(*) FROM gateways WHERE stopped IS NULL AND seen > now() - interval '5 seconds'")" = 1 ] ||
    fail "no live lease"
  db_dump "$T/db.jsonl"
  chain_ok "$T/db.jsonl"
}

test_a_live_gateways_open_decision_is_left_alone_and_completed_once_it_stops() {
  local a b seq
  start_gateway_here
  use_token "$TOKEN"
  push live-a || { cat "$T/out"; fail "push failed"; }
  a=$(pg_psql "SELECT id FROM gateways WHERE stopped IS NULL ORDER BY started DESC LIMIT 1")
  # Its last decision, made open again: as if its push were still in flight.
  seq=$(pg_psql "SELECT max(seq) FROM audit_records WHERE kind = 'decision' AND gateway = '$a'")
  pg_psql "UPDATE audit_records SET pending = true WHERE seq = $seq"
  # A second gateway on the same database (its own state_dir) sweeps all along.
  sed 's|"state_dir": "state"|"state_dir": "state-b"|' "$T/refgate.json" >"$T/b.json"
  "$REFGATE" serve --config "$T/b.json" 2>>"$T/b.log" &
  b=$!
  sleep $((10 + 4 + 2))
  kill -0 "$b" || { cat "$T/b.log"; fail "the second gateway exited"; }
  [ "$(pg_psql "SELECT pending FROM audit_records WHERE seq = $seq")" = t ] ||
    fail "a live gateway's open decision was completed"
  stop_gateway_here
  trap - EXIT
  for _ in $(seq 1 200); do
    [ "$(pg_psql "SELECT pending FROM audit_records WHERE seq = $seq")" = f ] && break
    sleep 0.05
  done
  kill -TERM "$b"; wait "$b" || true
  [ "$(pg_psql "SELECT pending FROM audit_records WHERE seq = $seq")" = f ] ||
    fail "the stopped gateway's open decision was not completed"
  [ "$(pg_psql "SELECT count(*) FROM audit_records WHERE kind = 'outcome' AND decision_seq = $seq AND
        convert_from(line, 'UTF8') LIKE '%unknown: gateway $a stopped%'")" = 1 ] || fail "not completed once"
  db_dump "$T/db.jsonl"
  chain_ok "$T/db.jsonl"
}

# refuse_outcomes on|off: the database refuses (a trigger) or takes
# outcome records, while decisions still go in: as if it went away
# between a push's decision and its outcome.
refuse_outcomes() {
  if [ "$1" = on ]; then
    pg_psql "CREATE OR REPLACE FUNCTION rg_test_refuse() RETURNS trigger LANGUAGE plpgsql AS
               \$\$ BEGIN IF NEW.kind = 'outcome' THEN RAISE EXCEPTION 'test: outcomes refused';
               END IF; RETURN NEW; END \$\$;
             CREATE TRIGGER rg_test_refuse BEFORE INSERT ON audit_records
               FOR EACH ROW EXECUTE FUNCTION rg_test_refuse()" >/dev/null
  else
    pg_psql "DROP TRIGGER rg_test_refuse ON audit_records" >/dev/null
  fi
}

# one_outcome SEQ: decision SEQ is complete with exactly one outcome, "forwarded: ok".
one_outcome() {
  [ "$(pg_psql "SELECT pending FROM audit_records WHERE seq = $1")" = f ] || fail "decision $1 is pending"
  [ "$(pg_psql "SELECT count(*) FROM audit_records WHERE kind = 'outcome' AND decision_seq = $1")" = 1 ] ||
    fail "decision $1 has not one outcome"
  pg_psql "SELECT convert_from(line, 'UTF8') FROM audit_records WHERE kind = 'outcome' AND decision_seq = $1" |
    grep -qF '"outcome":"forwarded: ok"' || fail "decision $1's outcome is not forwarded: ok"
}

test_an_outcome_the_database_refused_is_written_once_it_is_taken_and_at_a_clean_stop() {
  local a seq stop
  start_gateway_here
  use_token "$TOKEN"
  a=$(pg_psql "SELECT id FROM gateways WHERE stopped IS NULL ORDER BY started DESC LIMIT 1")
  refuse_outcomes on
  push kept-a || { cat "$T/out"; fail "push failed"; }
  [ -n "$(upstream_ref app refs/heads/feature/kept-a)" ] || fail "feature/kept-a did not land"
  seq=$(pg_psql "SELECT max(seq) FROM audit_records WHERE kind = 'decision' AND gateway = '$a'")
  [ "$(pg_psql "SELECT pending FROM audit_records WHERE seq = $seq")" = t ] || fail "the outcome went in"
  grep -q "audit_append_failed push=.* kept_for_retry=yes" "$T/gateway.log" ||
    { tail "$T/gateway.log"; fail "the outcome was not kept"; }
  # The lease thread writes it once the database takes it (a tick is 2 s).
  refuse_outcomes off
  for _ in $(seq 1 200); do
    [ "$(pg_psql "SELECT pending FROM audit_records WHERE seq = $seq")" = f ] && break
    sleep 0.05
  done
  one_outcome "$seq"
  grep -q "audit_outbox_retried appended=1 skipped=0" "$T/gateway.log" || fail "no retry said so"
  # Refused again; taken again just before a clean stop: the outcome is
  # in before the stop event, whoever wrote it.
  refuse_outcomes on
  push kept-b || { cat "$T/out"; fail "push failed"; }
  seq=$(pg_psql "SELECT max(seq) FROM audit_records WHERE kind = 'decision' AND gateway = '$a'")
  [ "$(pg_psql "SELECT pending FROM audit_records WHERE seq = $seq")" = t ] || fail "the outcome went in"
  refuse_outcomes off
  stop_gateway_here
  trap - EXIT
  one_outcome "$seq"
  stop=$(pg_psql "SELECT max(seq) FROM audit_records WHERE kind = 'event' AND gateway = '$a'
                  AND convert_from(line, 'UTF8') LIKE '%\"event\":\"stop\"%'")
  [ -n "$stop" ] || fail "no stop event"
  [ "$(pg_psql "SELECT seq FROM audit_records WHERE kind = 'outcome' AND decision_seq = $seq")" -lt "$stop" ] ||
    fail "the outcome came after the stop event"
  db_dump "$T/db.jsonl"
  chain_ok "$T/db.jsonl"
}

run_tests
