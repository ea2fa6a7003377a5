# deploy/postgres-roles.sql is a working least-privilege set: as
# refgate_gateway a gateway starts, publishes its token key, decides,
# forwards and audits a push, asks for an approval and consumes it, revokes
# a token, and `refgate audit verify` reads the chain;
# that role cannot publish a policy, delete or rewrite a record, or move the
# head by hand beyond what an append does; refgate_publisher can publish and
# nothing else.
. "$REFGATE_SRC/tests/db/lib_audit.sh"

make_upstream app
write_db_config "${STANDARD_RULES%]},
  {\"name\": \"ask-release\", \"refs\": [\"refs/tags/r*\"], \"actions\": [\"create\"], \"effect\": \"ask\"}]"
"$REFGATE" db migrate --config "$T/refgate.json" >/dev/null
psql "$PG_URL" -X -q -v ON_ERROR_STOP=1 -f "$REFGATE_SRC/deploy/postgres-roles.sql" >/dev/null

# as ROLE: the config, on that role.
for role in refgate_gateway refgate_publisher; do
  sed "s|user=refgate|user=$role|" "$T/refgate.json" >"$T/$role.json"
done
GWCFG=$T/refgate_gateway.json

# Published as refgate_publisher; the gateway runs as refgate_gateway (the
# tests run in subshells: what they share is set up here).
"$REFGATE" policy publish --config "$T/refgate_publisher.json" >"$T/published" 2>&1 ||
  { cat "$T/published"; exit 1; }
cp "$GWCFG" "$T/refgate.json"
start_gateway
use_token "$(mint local/acme/app)"
clone app "$T/w"

test_the_gateway_role_cannot_publish_a_policy() {
  echo '{"default": "allow"}' >"$T/open.json"
  ! "$REFGATE" policy publish --config "$GWCFG" --policy "$T/open.json" >"$T/out" 2>&1 ||
    fail "the gateway role published"
  assert_contains "$T/out" "permission denied for table policies"
}

test_the_publisher_role_published() {
  assert_contains "$T/published" "version 1"
  [ "$(pg_psql "SELECT count(*) FROM policies")" = 1 ] || fail "no policy row"
}

test_a_gateway_on_the_gateway_role_decides_forwards_and_audits() {
  git -C "$T/w" switch -q -c feature/roles
  commit "$T/w" roles.txt
  git -C "$T/w" push -q origin feature/roles 2>"$T/err" || { cat "$T/err" "$T/gateway.log"; fail "push"; }
  git -C "$T/w" switch -q main
  commit "$T/w" main.txt
  ! git -C "$T/w" push -q origin main 2>"$T/err" || fail "main was pushed"
  assert_contains "$T/err" "main is protected"
  [ -n "$(upstream_ref app refs/heads/feature/roles)" ] || fail "feature/roles did not land"
  "$REFGATE" audit verify --config "$GWCFG" >"$T/out" 2>&1 || { cat "$T/out"; fail "verify as the gateway role"; }
  assert_contains "$T/out" "intact"
  ! grep -q "permission denied" "$T/gateway.log" || { cat "$T/gateway.log"; fail "a permission was missing"; }
}

test_on_the_gateway_role_an_approval_is_asked_granted_and_used_and_a_token_revoked() {
  local id tok
  git -C "$T/w" tag r1
  ! git -C "$T/w" push origin r1 >"$T/out" 2>&1 || { cat "$T/out"; fail "r1 landed without an approval"; }
  id=$(grep -o 'refgate approve [a-z2-7]\{10\}' "$T/out" | head -1 | cut -d' ' -f3)
  [ -n "$id" ] || { cat "$T/out"; fail "no approval asked"; }
  "$REFGATE" approve --config "$GWCFG" "$id" >"$T/ap" 2>&1 || { cat "$T/ap"; fail "approve"; }
  git -C "$T/w" push origin r1 >"$T/out" 2>&1 || { cat "$T/out"; fail "r1 with its approval"; }
  [ "$(pg_psql "SELECT state FROM approvals WHERE id = '$id'")" = consumed ] || fail "not consumed"
  tok=$(mint local/acme/app)
  printf '%s\n' "$tok" | "$REFGATE" token revoke --config "$GWCFG" - >"$T/rev" 2>&1 ||
    { cat "$T/rev"; fail "revoke"; }
  [ "$(pg_psql "SELECT count(*) FROM token_revocations")" = 1 ] || fail "no revocation row"
  ! grep -q "permission denied" "$T/gateway.log" || { cat "$T/gateway.log"; fail "a permission was missing"; }
}

test_the_gateway_role_cannot_rewrite_the_chain() {
  local as="psql postgresql:///refgate?host=$PG_DIR&user=refgate_gateway -X -q -t -A"
  ! $as -c "DELETE FROM audit_records WHERE seq = 1" 2>"$T/err" || fail "deleted a record"
  assert_contains "$T/err" "permission denied"
  ! $as -c "UPDATE audit_records SET line = 'x' WHERE seq = 1" 2>"$T/err" || fail "rewrote a record"
  assert_contains "$T/err" "permission denied"
  ! $as -c "UPDATE policies SET body = 'x'" 2>"$T/err" || fail "rewrote a policy"
  assert_contains "$T/err" "permission denied"
}

run_tests
