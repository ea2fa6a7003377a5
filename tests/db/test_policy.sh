# The published policy, against a real PostgreSQL and a real gateway:
# `refgate policy publish` stores versions with their digest and canonical
# bytes, refuses what would not load and does nothing for the current
# digest; concurrent publishers get distinct versions. A gateway on the
# database refuses every push until a policy is published, then enforces
# it, follows a new one within about a second without a restart, keeps
# its policy when a new one does not load on its host or the database goes
# away, keeps the published policy over its file's rules across SIGHUP
# (and retries a version that did not load), refuses while it could never
# read one, and every decision record names the digest of the policy that
# decided it; a file-store gateway's records name its own config's.
: "${REFGATE:?}" "${REFGATE_SRC:?}"
source "$REFGATE_SRC/tests/integration/lib.sh"
source "$REFGATE_SRC/tests/support/pg.sh"
trap 'cleanup; pg_stop' EXIT
rc=0; pg_start || rc=$?
[ $rc -eq 0 ] || exit $rc

STATE="\"state\": {\"postgres\": \"$PG_URL\"}"
make_upstream app
write_config "$STANDARD_RULES" "$STATE"
"$REFGATE" db migrate --config "$T/refgate.json" >/dev/null
start_gateway
TOKEN=$(mint local/acme/app)
use_token "$TOKEN"
clone app "$T/w"

# digest_of JSON: sha256 of the canonical form (compact, sorted keys), as
# an independent check of the definition in config/policy.h.
digest_of() { printf 'sha256:%s' "$(jq -cjS . <<<"$1" | sha256sum | cut -d' ' -f1)"; }

# wait_log TEXT [SECONDS]: until the gateway's log has TEXT (polled).
wait_log() {
  local deadline=$((SECONDS + ${2:-10}))
  until grep -qF -- "$1" "$T/gateway.log"; do
    [ $SECONDS -lt $deadline ] || { cat "$T/gateway.log"; fail "no '$1' in the gateway's log"; return 1; }
    sleep 0.05
  done
}

# audit_lines: the audit log's records as stored: the database's rows when
# the config names one, else the file.
audit_lines() {
  if grep -q '"postgres"' "$T/refgate.json"; then
    pg_psql "SELECT convert_from(line, 'UTF8') FROM audit_records ORDER BY seq"
  else
    cat "$T/state/audit.jsonl"
  fi
}

# last_decision REF: the newest decision record for REF.
last_decision() { audit_lines | jq -c --arg r "$1" 'select(.type == "decision" and .ref == $r)' | tail -n 1; }

test_before_any_publish_every_push_is_refused_and_says_why() {
  git -C "$T/w" switch -q -c feature/a
  commit "$T/w" a.txt
  ! git -C "$T/w" push -q origin feature/a 2>"$T/err" || fail "a push landed with no policy"
  assert_contains "$T/err" "no policy has been published: run refgate policy publish"
  [ -z "$(upstream_ref app refs/heads/feature/a)" ] || fail "feature/a reached upstream"
  local rec; rec=$(last_decision refs/heads/feature/a)
  [ "$(jq -r '.decision + " " + .rule' <<<"$rec")" = "deny no-policy" ] || fail "record: $rec"
  [ "$(jq -r 'has("policy")' <<<"$rec")" = false ] || fail "a refusal without a policy names one: $rec"
  # Over the wire: a create and a delete in one raw push, each its own ng in a 200.
  local main; main=$(upstream_ref app refs/heads/main) zero=0000000000000000000000000000000000000000
  local l1="$zero $main refs/heads/feature/raw" l2="$main $zero refs/heads/main" caps="report-status"
  { printf '%04x%s\0%s\n' $((4 + ${#l1} + 1 + ${#caps} + 1)) "$l1" "$caps"
    printf '%04x%s\n' $((4 + ${#l2} + 1)) "$l2"; printf '0000'
    git -C "$T/w" pack-objects -q --stdout </dev/null; } >"$T/body"
  curl -sS -u "run:$TOKEN" -H 'Content-Type: application/x-git-receive-pack-request' \
    --data-binary @"$T/body" -o "$T/answer" -w '%{http_code}\n' \
    "$GW/local/acme/app.git/git-receive-pack" >"$T/code"
  [ "$(cat "$T/code")" = 200 ] || fail "HTTP $(cat "$T/code")"
  assert_contains "$T/answer" "ng refs/heads/feature/raw policy: no policy has been published: run refgate policy publish"
  assert_contains "$T/answer" "ng refs/heads/main policy: no policy has been published"
  [ -n "$(upstream_ref app refs/heads/main)" ] || fail "main was deleted"
  ! "$REFGATE" policy current --config "$T/refgate.json" >"$T/out" 2>&1 || fail "current without a policy"
  assert_contains "$T/out" "no policy has been published"
  ! "$REFGATE" policy lint --config "$T/refgate.json" >"$T/out" 2>&1 || fail "lint without a policy"
  assert_contains "$T/out" "no policy has been published"
}

test_publish_stores_version_1_with_its_digest_and_canonical_bytes() {
  "$REFGATE" policy publish --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "publish"; }
  local want; want=$(digest_of "$(jq '{rules}' "$T/refgate.json")")
  assert_contains "$T/out" "published policy version 1 $want"
  [ "$(pg_psql "SELECT version || ' ' || digest FROM policies")" = "1 $want" ] || fail "row"
  [ "sha256:$(pg_psql "SELECT encode(sha256(body), 'hex') FROM policies")" = "$want" ] ||
    fail "the body is not the bytes the digest names"
  "$REFGATE" policy current --config "$T/refgate.json" >"$T/out"
  assert_contains "$T/out" "version 1 $want published "
  echo "$want" >"$T/digest1"
}

test_publishing_the_current_digest_again_is_a_no_op_that_says_so() {
  "$REFGATE" policy publish --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "publish"; }
  assert_contains "$T/out" "is already the current one (version 1): nothing published"
  [ "$(pg_psql 'SELECT count(*) FROM policies')" = 1 ] || fail "a row was added"
}

test_a_policy_that_would_not_load_is_refused_and_nothing_is_stored() {
  echo '{"rules": [{"repos": ["elsewhere/x"], "effect": "deny"}]}' >"$T/bad.json"
  ! "$REFGATE" policy publish --config "$T/refgate.json" --policy "$T/bad.json" >"$T/out" 2>&1 ||
    fail "a rule naming no upstream was published"
  assert_contains "$T/out" 'not published: '
  assert_contains "$T/out" 'rules[0].repos[0]'
  echo '{"rules": [], "listen": "127.0.0.1:1"}' >"$T/bad.json"
  ! "$REFGATE" policy publish --config "$T/refgate.json" --policy "$T/bad.json" >"$T/out" 2>&1 ||
    fail "a host key was published"
  assert_contains "$T/out" 'unknown key "listen"'
  echo '{"rules": [{"effect": "deny"}], "rules": []}' >"$T/bad.json"
  ! "$REFGATE" policy publish --config "$T/refgate.json" --policy "$T/bad.json" >"$T/out" 2>&1 ||
    fail "a repeated key was published"
  [ "$(pg_psql 'SELECT count(*) FROM policies')" = 1 ] || fail "a bad policy was stored"
}

test_the_gateway_enforces_the_published_policy_and_records_its_digest() {
  local d1; d1=$(cat "$T/digest1")
  wait_log "policy_loaded version=1 digest=$d1"
  git -C "$T/w" push -q origin feature/a 2>"$T/err" || { cat "$T/err"; fail "push under v1"; }
  [ -n "$(upstream_ref app refs/heads/feature/a)" ] || fail "feature/a did not land"
  local rec; rec=$(last_decision refs/heads/feature/a)
  [ "$(jq -r '.decision + " " + .rule + " " + .policy' <<<"$rec")" = "allow features $d1" ] ||
    fail "record: $rec"
  # (jq 1.6's -e looks at the last input's output only: any() over inputs.)
  jq -n -e --arg d "$d1" 'any(inputs; .type == "event" and .event == "policy"
    and .detail == "version 1 \($d) (was none)")' <(audit_lines) >/dev/null ||
    fail "no policy event for version 1"
  "$REFGATE" audit --config "$T/refgate.json" --json | jq -n -e --arg d "$d1" \
    'any(inputs; .ref == "refs/heads/feature/a" and .decision == "allow" and .policy == $d)' >/dev/null ||
    fail "refgate audit --json does not show the digest"
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "verify"; }
}

test_a_stricter_policy_is_followed_within_two_seconds_without_a_restart() {
  local strict='{"rules": [{"name": "freeze", "refs": ["refs/heads/feature/**"], "effect": "deny",
                 "reason": "features are frozen"}]}'
  echo "$strict" >"$T/strict.json"
  local d2; d2=$(digest_of "$strict") pid=$GW_PID
  local t0; t0=$(date +%s%N)
  "$REFGATE" policy publish --config "$T/refgate.json" --policy "$T/strict.json" >"$T/out" 2>&1 ||
    { cat "$T/out"; fail "publish v2"; }
  assert_contains "$T/out" "published policy version 2 $d2"
  # Polled: the gateway's log says when it swapped.
  wait_log "policy_loaded version=2 digest=$d2" 5
  local ms=$((($(date +%s%N) - t0) / 1000000))
  echo "$ms" >"$T/follow_ms"
  [ "$ms" -le 2500 ] || fail "the gateway took ${ms} ms to follow the new policy"
  kill -0 "$pid" || fail "the gateway is gone"
  commit "$T/w" b.txt
  ! git -C "$T/w" push -q origin feature/a 2>"$T/err" || fail "pushed past the stricter policy"
  assert_contains "$T/err" "features are frozen"
  local rec; rec=$(last_decision refs/heads/feature/a)
  [ "$(jq -r '.decision + " " + .rule + " " + .policy' <<<"$rec")" = "deny freeze $d2" ] ||
    fail "record: $rec"
  echo "$d2" >"$T/digest2"
  # `policy check` explains the published policy, not the file's own rules.
  "$REFGATE" policy check --config "$T/refgate.json" --repo local/acme/app \
    --ref refs/heads/feature/a --action update >"$T/out" && fail "check allowed" || true
  assert_contains "$T/out" "rule:     freeze (rules[0])"
  assert_contains "$T/out" "policy:   version 2 $d2 (published)"
}

test_a_policy_that_does_not_load_on_this_host_keeps_the_current_one() {
  # Another host's config has an upstream this one lacks: valid there.
  jq --arg u "file://$T/upstream" '.upstreams += [{"host": "other", "url": $u}]' "$T/refgate.json" >"$T/other.json"
  echo '{"rules": [{"repos": ["other/**"], "effect": "allow"}]}' >"$T/other-policy.json"
  "$REFGATE" policy publish --config "$T/other.json" --policy "$T/other-policy.json" >"$T/out" 2>&1 ||
    { cat "$T/out"; fail "publish v3 on the other host"; }
  wait_log "policy_load_failed version=3"
  assert_contains "$T/gateway.log" "kept=$(cat "$T/digest2")"
  assert_contains "$T/gateway.log" 'no upstream has host \"other\"'
  ! git -C "$T/w" push -q origin feature/a 2>"$T/err" || fail "the kept policy did not hold"
  assert_contains "$T/err" "features are frozen"
  [ "$(last_decision refs/heads/feature/a | jq -r .policy)" = "$(cat "$T/digest2")" ] || fail "digest"
}

test_while_the_database_is_away_the_last_policy_stays_in_force() {
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
  wait_log "policy_poll_failed kept=current"
  ! git -C "$T/w" push -q origin feature/a 2>"$T/err" || fail "pushed while the database was away"
  assert_contains "$T/err" "features are frozen"
  [ "$(grep -c policy_poll_failed "$T/gateway.log")" -eq 1 ] || fail "the failure is logged every poll"
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-k $PG_DIR -c listen_addresses= -c max_connections=300" start >/dev/null
  wait_log "policy_poll_recovered"
}

test_a_reload_keeps_the_published_policy_and_retries_one_that_did_not_load() {
  # The host's file now allows everything and has the upstream v3 names.
  jq '.rules = [{"effect": "allow"}]' "$T/other.json" >"$T/refgate.json"
  kill -HUP "$GW_PID"
  wait_log "reloaded config="
  wait_log "policy_loaded version=3"
  local d3; d3=$(digest_of "$(cat "$T/other-policy.json")")
  ! git -C "$T/w" push -q origin feature/a 2>"$T/err" || fail "the host's own rules decided"
  assert_contains "$T/err" "no rule allows update on refs/heads/feature/a"
  local rec; rec=$(last_decision refs/heads/feature/a)
  [ "$(jq -r '.rule + " " + .policy' <<<"$rec")" = "default $d3" ] || fail "record: $rec"
}

test_concurrent_publishers_get_distinct_versions() {
  local pids=() i
  for i in 1 2 3 4; do
    echo "{\"rules\": [{\"name\": \"p$i\", \"refs\": [\"refs/heads/p$i\"], \"effect\": \"allow\"}]}" >"$T/p$i.json"
    "$REFGATE" policy publish --config "$T/refgate.json" --policy "$T/p$i.json" >"$T/pub$i" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2 3; do wait "${pids[$i]}" || { cat "$T/pub$((i + 1))"; fail "publisher $((i + 1))"; }; done
  cat "$T"/pub[1-4] | grep -o 'version [0-9]*' | sort | tr '\n' ' ' >"$T/versions"
  [ "$(cat "$T/versions")" = "version 4 version 5 version 6 version 7 " ] ||
    { cat "$T"/pub[1-4]; fail "versions: $(cat "$T/versions")"; }
  [ "$(pg_psql 'SELECT count(DISTINCT digest) FROM policies WHERE version >= 4')" = 4 ] || fail "rows"
  wait_log "policy_loaded version=7"
}

test_a_gateway_started_while_the_database_is_away_refuses_until_it_reads_the_policy() {
  local d7; d7=$(pg_psql 'SELECT digest FROM policies WHERE version = 7')
  stop_gateway
  mv "$T/gateway.log" "$T/gateway.log.1" # wait_log reads this gateway's lines only
  # Minted while the database is there: a mint publishes its key first.
  local tok; tok=$(mint local/acme/app)
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
  start_gateway
  use_token "$tok"
  ! git -C "$T/w" push -q origin feature/a 2>"$T/err" || fail "pushed with no policy read"
  # The token's revocation check meets the missing database first.
  grep -qE "the published policy could not be read from the database yet|the run token cannot be checked" "$T/err" ||
    { cat "$T/err"; fail "no reason naming the database"; }
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-k $PG_DIR -c listen_addresses= -c max_connections=300" start >/dev/null
  wait_log "policy_loaded version=7 digest=$d7"
  ! git -C "$T/w" push -q origin feature/a 2>"$T/err" || fail "version 7 allows no feature branch"
  assert_contains "$T/err" "no rule allows update on refs/heads/feature/a"
  [ "$(last_decision refs/heads/feature/a | jq -r .policy)" = "$d7" ] || fail "digest"
}

test_a_version_whose_body_is_not_its_digest_is_never_enforced() {
  # Written behind refgate's back: an allow-all body under version 7's digest.
  local d7; d7=$(pg_psql 'SELECT digest FROM policies WHERE version = 7')
  pg_psql "INSERT INTO policies (version, digest, body) VALUES (8, '$d7',
    convert_to('{\"default\":\"allow\"}', 'UTF8'))" >/dev/null
  wait_log "policy_poll_failed kept=current error=\"published policy v8: its body hashes to"
  ! git -C "$T/w" push -q origin feature/a 2>"$T/err" || fail "the forged policy was enforced"
  assert_contains "$T/err" "no rule allows update on refs/heads/feature/a"
  ! "$REFGATE" policy check --config "$T/refgate.json" --repo local/acme/app \
    --ref refs/heads/feature/a --action update >"$T/out" 2>&1 || fail "check used the forged policy"
  assert_contains "$T/out" "its body hashes to"
}

test_a_file_store_gateway_records_the_digest_of_its_config_policy() {
  stop_gateway
  write_config "$STANDARD_RULES"
  start_gateway
  use_token "$(mint local/acme/app)"
  local want; want=$(digest_of "$(jq '{rules}' "$T/refgate.json")")
  "$REFGATE" policy current --config "$T/refgate.json" >"$T/out"
  assert_contains "$T/out" "$want (the policy of "
  git -C "$T/w" switch -q -c feature/f
  commit "$T/w" f.txt
  git -C "$T/w" push -q origin feature/f 2>"$T/err" || { cat "$T/err"; fail "file-store push"; }
  [ "$(last_decision refs/heads/feature/f | jq -r .policy)" = "$want" ] || fail "digest"
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "verify"; }
}

rc=0; run_tests || rc=$?
[ ! -f "$T/follow_ms" ] || echo "a running gateway followed a publish in $(cat "$T/follow_ms") ms"
exit $rc
