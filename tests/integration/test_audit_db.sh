# Reading the audit log out of a real PostgreSQL (config "state.postgres"):
# a log the file store wrote (a gateway's real pushes, one of 150 refs so
# the records span several pages) is copied byte for byte into
# audit_records/audit_head, and `refgate audit` (table, --json, --events,
# filters), `audit head` and `audit verify [--head]` print on the database
# exactly what they print on the file, while the state_dir holds a decoy
# log that is never read. Tampering in the database is found and named: a
# row's bytes changed, a middle row deleted, a row renumbered, the last row
# deleted with the head left alone, the head moved back or given another
# hash, a row too long to be a record. Lines near AUDIT_LINE_MAX fill pages
# by bytes. The console's pages (listings, one push, integrity) show the
# database's pushes and its tampering. A database that was never migrated,
# or that cannot be reached, is a clear error (exit 1, an error on the
# page), never an empty listing.
source "$(dirname "$0")/lib_console.sh"
. "$REFGATE_SRC/tests/support/pg.sh"
trap 'cleanup; pg_stop' EXIT
rc=0; pg_start || rc=$?
[ $rc -eq 0 ] || exit $rc

FILE_CFG=$T/file.json
DB_CFG=$T/refgate.json
ZERO=0000000000000000000000000000000000000000000000000000000000000000
# SQL that changes one byte of a row without breaking its JSON: the year's first digit.
TAMPER="line = overlay(line PLACING '3'::bytea FROM position('\"time\":\"'::bytea IN line) + 8 FOR 1)"

# load_db FILE: audit_records holds FILE's lines (their exact bytes) and
# audit_head names the last one, as the database store would have them.
load_db() {
  psql "$PG_URL" -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
TRUNCATE audit_records;
UPDATE audit_head SET seq = 0, hash = repeat('0', 64);
CREATE TEMP TABLE raw (l text);
\copy raw (l) FROM '$1' WITH (FORMAT csv, DELIMITER E'\x01', QUOTE E'\x02')
INSERT INTO audit_records (seq, line, kind, decision_seq)
  SELECT (l::json->>'seq')::bigint, convert_to(l, 'UTF8'), coalesce(l::json->>'type', 'decision'),
         (l::json->>'decision_seq')::bigint FROM raw;
UPDATE audit_head SET seq = r.seq, hash = encode(sha256(r.line), 'hex')
  FROM (SELECT seq, line FROM audit_records ORDER BY seq DESC LIMIT 1) AS r;
SQL
}

# same ARGS...: `refgate audit ARGS` prints the same and exits the same on
# the file and on the database.
same() {
  local a=0 b=0
  "$REFGATE" audit "$@" --config "$FILE_CFG" >"$T/on_file" 2>&1 || a=$?
  "$REFGATE" audit "$@" --config "$DB_CFG" >"$T/on_db" 2>&1 || b=$?
  [ "$a" = "$b" ] || { cat "$T/on_file" "$T/on_db"; fail "audit $*: exit $a on the file, $b on the database"; }
  cmp -s "$T/on_file" "$T/on_db" || { diff "$T/on_file" "$T/on_db" | head -20; fail "audit $*: output differs"; }
  [ -s "$T/on_db" ] || fail "audit $*: no output"
}

# verify_db_fails [ARGS]: `refgate audit verify` on the database into $T/v; fails the test when it passes.
verify_db_fails() {
  ! "$REFGATE" audit verify --config "$DB_CFG" "$@" >"$T/v" 2>&1 || { cat "$T/v"; fail "verify passed"; }
}

test_a_gateway_writes_a_file_log_with_many_refs() {
  make_upstream app
  write_config "$CONSOLE_RULES"
  start_gateway
  use_token "$("$REFGATE" token mint --config "$T/refgate.json" --repo local/acme/app --run run-one)"
  clone app "$T/w"
  commit "$T/w" a.txt
  git -C "$T/w" push -q origin HEAD:feature/one 2>"$T/p" || { cat "$T/p"; fail "feature push"; }
  ! git -C "$T/w" push origin HEAD:main 2>"$T/p" || fail "main moved"
  use_token "$("$REFGATE" token mint --config "$T/refgate.json" --repo local/acme/app --run run-many)"
  for i in $(seq 1 150); do git -C "$T/w" branch "feature/many/$i"; done
  git -C "$T/w" push -q origin 'refs/heads/feature/many/*:refs/heads/feature/many/*' 2>"$T/p" ||
    { cat "$T/p"; fail "the push of 150 refs"; }
  stop_gateway
  [ "$(wc -l <"$T/state/audit.jsonl")" -gt 300 ] || fail "too few records to span pages"
  # The file config reads that log; the database config gets a decoy file.
  mkdir -p "$T/filestate"
  cp "$T/state/audit.jsonl" "$T/log.jsonl"
  cp "$T/log.jsonl" "$T/filestate/audit.jsonl"
  jq '.state_dir = "filestate"' "$T/refgate.json" >"$FILE_CFG"
  printf '{"v":2,"seq":1,"prev":"%s","time":"2026-12-01T00:00:00.000Z","type":"decision","push_id":"decoy","run":"decoy-run","token":null,"remote":null,"repo":"local/acme/app","ref":"refs/heads/decoy","old":null,"new":null,"action":"create","decision":"deny","rule":null,"reason":"decoy","outcome":"rejected"}\n' \
    "$ZERO" >"$T/state/audit.jsonl"
  write_config "$CONSOLE_RULES" '"console": {"listen": "127.0.0.1:0"}, "state": {"postgres": "'"$PG_URL"'"}'
  "$REFGATE" db migrate --config "$DB_CFG" >/dev/null
  load_db "$T/log.jsonl"
}

test_the_database_lists_what_the_file_lists() {
  same
  same --json
  same --events
  same --events --json
  same --decision deny
  same --ref main --json
  same --run run-many --json
  same --repo 'local/acme/*' --since 2026-01-01
  assert_not_contains "$T/on_db" decoy
  "$REFGATE" audit --config "$DB_CFG" --json >"$T/all"
  [ "$(wc -l <"$T/all")" -eq 152 ] || fail "$(wc -l <"$T/all") rows, not 152"
}

test_the_database_head_and_verify_are_the_files() {
  same head
  local head; head=$(cat "$T/on_db")
  [ "${head%%:*}" = "$(wc -l <"$T/log.jsonl")" ] || fail "head $head"
  [ "${head#*:}" = "$(tail -1 "$T/log.jsonl" | tr -d '\n' | sha256sum | cut -d' ' -f1)" ] ||
    fail "the head's hash is not the last line's"
  same verify
  assert_contains "$T/on_db" "audit log intact: $(wc -l <"$T/log.jsonl") records"
  same verify --head "$head"
  assert_contains "$T/on_db" "reaching head"
  same verify --head "$((${head%%:*} + 1)):${head#*:}"
  assert_contains "$T/on_db" "records were cut from its end"
}

test_the_console_shows_the_databases_pushes() {
  start_gateway
  trap stop_gateway EXIT
  for _ in $(seq 1 100); do [ -s "$T/state/console.url" ] && break; sleep 0.05; done
  load_console
  add_reviewer >/dev/null
  login "$T/jar" >"$T/csrf"
  ccurl -b "$T/jar" "$CONSOLE/pushes" >"$T/c1"
  assert_contains "$T/c1" "run-many"
  assert_contains "$T/c1" "run-one"
  assert_not_contains "$T/c1" "decoy"
  ccurl -b "$T/jar" "$CONSOLE/runs" >"$T/c2"
  assert_contains "$T/c2" "run-many"
  assert_not_contains "$T/c2" "decoy"
  local id
  id=$(jq -r 'select(.run == "run-many") | .push_id' "$T/log.jsonl" | head -1)
  ccurl -b "$T/jar" "$CONSOLE/push?id=$id" >"$T/c3"
  assert_contains "$T/c3" "refs/heads/feature/many/150"
  assert_contains "$T/c3" "$(jq -r 'select(.decision_seq != null and .ref == "refs/heads/feature/many/1") | .outcome' "$T/log.jsonl")"
  ccurl -b "$T/jar" "$CONSOLE/integrity" >"$T/c4"
  assert_contains "$T/c4" "The chain is intact"
  local seq; seq=$(grep -o 'class="head-seq">[0-9]*' "$T/c4" | cut -d'>' -f2)
  [ "$seq:" = "$("$REFGATE" audit head --config "$DB_CFG" | cut -d: -f1):" ] || fail "head seq $seq"
  # A row's bytes changed in the database: the integrity page names it.
  pg_psql "CREATE TABLE saved AS SELECT * FROM audit_records WHERE seq = 3; UPDATE audit_records SET $TAMPER WHERE seq = 3"
  ccurl -b "$T/jar" "$CONSOLE/integrity" >"$T/c5"
  assert_contains "$T/c5" "The chain is broken at line 4: prev does not match line 3"
  pg_psql "UPDATE audit_records SET line = (SELECT line FROM saved) WHERE seq = 3; DROP TABLE saved"
  ccurl -b "$T/jar" "$CONSOLE/integrity" >"$T/c6"
  assert_contains "$T/c6" "The chain is intact"
}

test_verify_names_a_row_whose_bytes_changed() {
  load_db "$T/log.jsonl"
  pg_psql "UPDATE audit_records SET $TAMPER WHERE seq = 7"
  verify_db_fails
  assert_contains "$T/v" "audit log broken at line 8: prev does not match line 7"
}

test_verify_names_a_deleted_middle_row() {
  load_db "$T/log.jsonl"
  pg_psql "DELETE FROM audit_records WHERE seq = 100"
  verify_db_fails
  assert_contains "$T/v" "audit log broken at line 100: seq 101 does not follow seq 99"
}

test_verify_names_a_renumbered_row() {
  load_db "$T/log.jsonl"
  local last; last=$(wc -l <"$T/log.jsonl")
  pg_psql "UPDATE audit_records SET seq = seq + 1 WHERE seq = $last;
           UPDATE audit_head SET seq = seq + 1"
  verify_db_fails
  assert_contains "$T/v" "the row with seq $((last + 1)) holds the record with seq $last"
}

test_verify_names_a_last_row_deleted_under_the_head() {
  load_db "$T/log.jsonl"
  local last; last=$(wc -l <"$T/log.jsonl")
  pg_psql "DELETE FROM audit_records WHERE seq = $last"
  verify_db_fails
  assert_contains "$T/v" "audit log does not match the database's head: the records end at seq $((last - 1)), before the database's head at seq $last: records were cut from the end"
  ! "$REFGATE" audit head --config "$DB_CFG" >"$T/h" 2>&1 || { cat "$T/h"; fail "head printed a head it cannot trust"; }
  assert_contains "$T/h" "does not name its last record"
}

test_verify_names_a_head_moved_back_or_rehashed() {
  load_db "$T/log.jsonl"
  local last; last=$(wc -l <"$T/log.jsonl")
  pg_psql "UPDATE audit_head SET seq = seq - 1, hash = (SELECT encode(sha256(line), 'hex') FROM audit_records WHERE seq = $((last - 1)))"
  verify_db_fails
  assert_contains "$T/v" "the database's head names seq $((last - 1)), but the records go on to seq $last: the head was moved back"
  load_db "$T/log.jsonl"
  pg_psql "UPDATE audit_head SET hash = repeat('a', 64)"
  verify_db_fails
  assert_contains "$T/v" "the record with seq $last does not hash to the database's head hash"
  # Its last record changed (JSON intact): no later prev sees it, the head does.
  load_db "$T/log.jsonl"
  pg_psql "UPDATE audit_records SET $TAMPER WHERE seq = $last"
  verify_db_fails
  assert_contains "$T/v" "the record with seq $last does not hash to the database's head hash"
}

test_verify_names_a_row_too_long_to_be_a_record() {
  load_db "$T/log.jsonl"
  pg_psql "UPDATE audit_records SET line = convert_to(repeat('x', 2000000), 'UTF8') WHERE seq = 5"
  verify_db_fails
  assert_contains "$T/v" "audit log broken at line 5: longer than 1048576 bytes"
  "$REFGATE" audit --config "$DB_CFG" --json >"$T/l" 2>"$T/e" || { cat "$T/e"; fail "listing"; }
  assert_contains "$T/e" "line 5 is not a record"
}

test_lines_near_the_cap_fill_pages_by_bytes() {
  # Twelve chained events of 900 KB each: several pages by bytes, each line whole.
  psql "$PG_URL" -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
TRUNCATE audit_records;
DO $$
DECLARE prev text := repeat('0', 64); l bytea;
BEGIN
  FOR i IN 1..12 LOOP
    l := convert_to(format('{"v":2,"seq":%s,"prev":"%s","time":"2026-12-01T00:00:00.000Z",'
                           '"type":"event","event":"start","detail":"%s"}', i, prev,
                           repeat(chr(97 + i), 900000)), 'UTF8');
    INSERT INTO audit_records (seq, line, kind) VALUES (i, l, 'event');
    prev := encode(sha256(l), 'hex');
  END LOOP;
  UPDATE audit_head SET seq = 12, hash = prev;
END $$;
SQL
  psql "$PG_URL" -X -q -v ON_ERROR_STOP=1 -c "\\copy (SELECT convert_from(line, 'UTF8') FROM audit_records ORDER BY seq) TO '$T/filestate/audit.jsonl' WITH (FORMAT csv, DELIMITER E'\\x01', QUOTE E'\\x02')"
  same --events --json
  [ "$(wc -c <"$T/on_db")" -gt 10800000 ] || fail "lines were cut"
  same verify
  assert_contains "$T/on_db" "audit log intact: 12 records"
  same head
  cp "$T/log.jsonl" "$T/filestate/audit.jsonl"
}

test_a_database_never_migrated_says_to_migrate() {
  pg_as_owner "$PG_BIN/createdb" -h "$PG_DIR" -U refgate bare
  jq --arg u "postgresql:///bare?host=$PG_DIR&user=refgate" '.state.postgres = $u' "$DB_CFG" >"$T/bare.json"
  ! "$REFGATE" audit --config "$T/bare.json" >"$T/o" 2>"$T/e" || fail "listing on a bare database"
  assert_contains "$T/e" "refgate db migrate"
  assert_not_contains "$T/o" "no matching audit records"
}

test_an_unreachable_database_is_an_error_never_an_empty_log() {
  load_db "$T/log.jsonl"
  start_gateway
  trap stop_gateway EXIT
  load_console
  login "$T/jar" >/dev/null
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null
  for sub in "" "--events" "--json" "verify" "head"; do
    # shellcheck disable=SC2086
    ! "$REFGATE" audit $sub --config "$DB_CFG" >"$T/o" 2>"$T/e" || fail "audit $sub without a database"
    assert_contains "$T/e" "cannot connect to the database"
    assert_not_contains "$T/o" "no audit log yet"
    assert_not_contains "$T/o" "no matching audit records"
    assert_not_contains "$T/o" "intact"
  done
  # Each pooled connection that died with the server says so once; then
  # the pool finds it cannot connect again.
  for _ in 1 2 3 4 5; do
    ccurl -b "$T/jar" "$CONSOLE/pushes" >"$T/c7"
    assert_contains "$T/c7" "The audit log cannot be read: "
    assert_not_contains "$T/c7" "No push"
    grep -q "cannot connect to the database" "$T/c7" && break
  done
  assert_contains "$T/c7" "cannot connect to the database"
  ccurl -b "$T/jar" "$CONSOLE/runs" >"$T/c7"
  assert_contains "$T/c7" "The audit log cannot be read: "
  ccurl -b "$T/jar" "$CONSOLE/integrity" >"$T/c8"
  assert_contains "$T/c8" "The audit log cannot be verified: "
  ccurl -b "$T/jar" "$CONSOLE/push?id=decoy" >"$T/c9"
  assert_contains "$T/c9" "cannot connect to the database"
}

run_tests
