# `refgate db import`: a gateway on files makes an audit log with real
# pushes; the import copies it into the database byte for byte (the chain,
# recomputed from the stored rows, verifies and reaches the head), leaves a
# pending decision pending, refuses a second import and a log that does
# not verify; and a gateway on the database then chains onto it.
. "$REFGATE_SRC/tests/db/lib_audit.sh"

make_upstream app
write_config "$STANDARD_RULES"
start_gateway
TOKEN=$(mint local/acme/app)

# A gateway on files makes a log with real pushes, one allowed and one
# denied, and stops; then a forwarded decision whose outcome the gateway
# never wrote (it died) is added, as record.c lays one out.
use_token "$TOKEN"
clone app "$T/w"
git -C "$T/w" switch -q -c feature/one
commit "$T/w" one.c
git -C "$T/w" push -q origin feature/one
git -C "$T/w" switch -q main
commit "$T/w" main.c
! git -C "$T/w" push -q origin main 2>/dev/null
stop_gateway
python3 - "$T/state/audit.jsonl" <<'PY'
import hashlib, json, sys
path = sys.argv[1]
last = open(path, 'rb').read().split(b'\n')[-2]
rec = {"v": 2, "seq": json.loads(last)["seq"] + 1, "prev": hashlib.sha256(last).hexdigest(),
       "time": "2026-12-02T00:00:00.000Z", "type": "decision", "push_id": "deadbeef",
       "run": None, "token": None, "remote": "127.0.0.1", "repo": "local/acme/app",
       "ref": "refs/heads/feature/lost", "old": "0" * 40, "new": "1" * 40, "action": "create",
       "decision": "allow", "rule": "features", "reason": "", "outcome": None}
open(path, 'ab').write(json.dumps(rec, separators=(',', ':')).encode() + b'\n')
PY

test_the_file_log_verifies() {
  [ "$(wc -l <"$T/state/audit.jsonl")" -ge 6 ] || { cat "$T/state/audit.jsonl"; fail "short log"; }
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "the file log does not verify"; }
}

test_import_copies_the_log_byte_for_byte() {
  write_db_config "$STANDARD_RULES"
  "$REFGATE" db migrate --config "$T/refgate.json" >/dev/null
  "$REFGATE" policy publish --config "$T/refgate.json" >/dev/null
  local n; n=$(wc -l <"$T/state/audit.jsonl")
  "$REFGATE" db import --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "import failed"; }
  assert_contains "$T/out" "audit: imported $n records from $T/state/audit.jsonl (1 forwarded without an outcome, left pending)"
  db_dump "$T/db.jsonl"
  cmp "$T/db.jsonl" "$T/state/audit.jsonl" || fail "the database holds other bytes than the file"
  chain_ok "$T/db.jsonl" || fail "the imported chain does not verify"
  assert_contains "$T/out" "head $n:$(tail -n 1 "$T/state/audit.jsonl" | tr -d '\n' | sha256sum | cut -c1-64)"
  [ "$(pg_psql "SELECT count(*) FROM audit_records WHERE pending")" = 1 ] || fail "pending not kept"
}

test_a_second_import_is_refused() {
  ! "$REFGATE" db import --config "$T/refgate.json" >"$T/out" 2>&1 || fail "a second import succeeded"
  assert_contains "$T/out" "the database's audit chain is not empty"
  db_dump "$T/db.jsonl"
  cmp "$T/db.jsonl" "$T/state/audit.jsonl" || fail "the refused import changed the database"
}

test_a_log_that_does_not_verify_is_refused() {
  pg_psql "DELETE FROM audit_records; UPDATE audit_head SET seq = 0, hash = repeat('0', 64)"
  cp "$T/state/audit.jsonl" "$T/good.jsonl"
  sed -i '2s/"remote":"127.0.0.1"/"remote":"127.0.0.2"/' "$T/state/audit.jsonl"
  ! "$REFGATE" db import --config "$T/refgate.json" >"$T/out" 2>&1 || fail "a tampered log was imported"
  assert_contains "$T/out" "does not verify (line 3"
  [ "$(pg_psql "SELECT count(*) FROM audit_records")" = 0 ] || fail "part of it was imported"
  cp "$T/good.jsonl" "$T/state/audit.jsonl"
  "$REFGATE" db import --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "import failed"; }
}

test_a_gateway_on_the_database_chains_onto_the_import_and_completes_it() {
  local n; n=$(wc -l <"$T/state/audit.jsonl")
  start_gateway_here
  use_token "$TOKEN"
  git -C "$T/w" switch -q -c feature/two
  commit "$T/w" two.c
  git -C "$T/w" push origin feature/two >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
  db_dump "$T/db.jsonl"
  head -n "$n" "$T/db.jsonl" | cmp - "$T/state/audit.jsonl" || fail "the imported records changed"
  chain_ok "$T/db.jsonl" || fail "the chain does not verify"
  # The imported pending decision belonged to no live gateway: completed at start.
  grep -q '"event":"recovered","detail":"the imported file log had 1 forwarded ref update without an outcome; completed as unknown by gateway ' "$T/db.jsonl" ||
    { cat "$T/db.jsonl"; fail "no recovered event"; }
  grep -q '"ref":"refs/heads/feature/lost","decision_seq":'"$n"',"outcome":"unknown: the gateway of the imported file log stopped before upstream answered (completed by gateway ' "$T/db.jsonl" ||
    fail "the pending decision was not completed"
  [ "$(pg_psql "SELECT count(*) FROM audit_records WHERE pending")" = 0 ] || fail "still pending"
  # The file is left alone.
  [ "$(wc -l <"$T/state/audit.jsonl")" = "$n" ] || fail "the gateway wrote to the file log"
}

run_tests
