# Run tokens across two real gateways on one real PostgreSQL: a token
# minted by A pushes through B; revoked through B's control socket it is
# refused by A at the next request (no restart, no wait); a token signed by
# a key that is not in the database is refused, and a flood of made-up
# key ids is rate-limited while real tokens pass; after `refgate token key
# rotate` on A old tokens still push and new ones carry the new kid; with
# PostgreSQL stopped pushes are refused with a reason naming the database,
# and they work again once it is back, with no gateway restarted.
source "$(dirname "$0")/lib.sh"
. "$REFGATE_SRC/tests/support/pg.sh"
PID_B=
cleanup_all() {
  if [ -n "$PID_B" ]; then
    kill -TERM "$PID_B" 2>/dev/null || true
    wait "$PID_B" 2>/dev/null || true
  fi
  stop_gateway
  pg_stop
  rm -rf "$T"
}
trap cleanup_all EXIT
rc=0; pg_start || rc=$?
[ $rc -eq 0 ] || exit $rc

make_upstream app
# gw_config NAME [STATE_JSON]: $T/NAME.json with state_dir $T/NAME.
gw_config() {
  local state=
  [ -n "${2:-}" ] && state="\"state\": $2,"
  cat >"$T/$1.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "$1", $state
 "upstreams": [{"host": "local", "url": "file://$T/upstream"}],
 "rules": [{"name": "open", "refs": ["refs/heads/**"], "actions": ["create", "update"], "effect": "allow"}]}
JSON
}
gw_config a "{\"postgres\": \"$PG_URL\"}"
gw_config b "{\"postgres\": \"$PG_URL\"}"
gw_config lone # files only: its key is in no database
"$REFGATE" db migrate --config "$T/a.json" >"$T/migrate" 2>&1 || { cat "$T/migrate"; exit 1; }
"$REFGATE" policy publish --config "$T/a.json" >"$T/publish" 2>&1 || { cat "$T/publish"; exit 1; }

# start NAME: serve $T/NAME.json in the background (a child of this shell,
# so that cleanup can wait for it); its pid in $STARTED.
start() {
  rm -f "$T/$1/url"
  "$REFGATE" serve --config "$T/$1.json" 2>>"$T/$1.log" &
  STARTED=$!
  for _ in $(seq 1 200); do
    [ -s "$T/$1/url" ] && return 0
    kill -0 "$STARTED" 2>/dev/null || { cat "$T/$1.log" >&2; return 1; }
    sleep 0.05
  done
  fail "gateway $1 did not start"
}
start a; GW_PID=$STARTED
start b; PID_B=$STARTED
URL_A=$(cat "$T/a/url") URL_B=$(cat "$T/b/url")
clone app "$T/w"

# push_via URL TOKEN BRANCH: a new commit pushed through that gateway; output in $T/out.
# db_events EVENT: the shared chain's EVENT records.
db_events() {
  pg_psql "SELECT convert_from(line, 'UTF8') FROM audit_records ORDER BY seq" |
    jq -c --arg e "$1" 'select(.event == $e)'
}
push_via() {
  GW=$1 use_token "$2"
  git -C "$T/w" switch -q -C "$3"
  commit "$T/w" "${3//\//-}.txt"
  git -C "$T/w" push origin "$3" >"$T/out" 2>&1
}
# http_status URL TOKEN: the status of a raw discovery request, body in $T/body.
http_status() {
  curl -s -o "$T/body" -w '%{http_code}' -u "run:$2" \
    "$1/local/acme/app.git/info/refs?service=git-receive-pack"
}

test_a_token_minted_by_a_pushes_through_b() {
  "$REFGATE" token mint --config "$T/a.json" --repo local/acme/app --run shared >"$T/tok1"
  push_via "$URL_B" "$(cat "$T/tok1")" feature/via-b || { cat "$T/out"; fail "push through B"; }
  [ -n "$(upstream_ref app refs/heads/feature/via-b)" ] || fail "nothing landed"
  [ "$(pg_psql "SELECT count(*) FROM token_keys WHERE retired IS NULL")" = 2 ] ||
    fail "both gateways publish one key: $(pg_psql 'SELECT kid, gateway FROM token_keys')"
}

test_revoked_through_b_it_is_refused_by_a_at_the_next_request() {
  local tok; tok=$(cat "$T/tok1")
  push_via "$URL_A" "$tok" feature/via-a || { cat "$T/out"; fail "push through A before"; }
  printf '%s\n' "$tok" | "$REFGATE" token revoke --config "$T/b.json" - >"$T/rev" 2>&1 ||
    { cat "$T/rev"; fail "revoke through B"; }
  # Through B's control socket, so it is audited (in the chain all gateways share).
  db_events token-revoke | grep -q . ||
    fail "B did not record the revocation: it did not go through its control socket"
  [ "$(http_status "$URL_A" "$tok")" = 403 ] || { cat "$T/body"; fail "A still accepts it"; }
  assert_contains "$T/body" "revoked"
  ! push_via "$URL_A" "$tok" feature/via-a || fail "a revoked token pushed through A"
  assert_contains "$T/out" "revoked"
}

test_a_token_signed_by_a_key_not_in_the_database_is_refused() {
  local tok
  tok=$("$REFGATE" token mint --config "$T/lone.json" --repo local/acme/app)
  [ "$(http_status "$URL_A" "$tok")" = 401 ] || { cat "$T/body"; fail "A accepted a foreign key"; }
  assert_contains "$T/body" "signed by a key no gateway of this team published"
  ! push_via "$URL_B" "$tok" feature/foreign || fail "a token of an unpublished key pushed"
  [ -z "$(upstream_ref app refs/heads/feature/foreign)" ] || fail "it landed"
}

test_a_flood_of_made_up_kids_is_rate_limited_and_real_tokens_still_pass() {
  local tok; tok=$("$REFGATE" token mint --config "$T/a.json" --repo local/acme/app)
  # 60 well-formed tokens with random kids on one keep-alive connection:
  # about the first 10 are looked up (401), the rest are refused unlooked (503).
  python3 - "$URL_A" "$tok" >"$T/flood" <<'PY'
import base64, http.client, os, sys, urllib.parse
url = urllib.parse.urlsplit(sys.argv[1]); tok = sys.argv[2]
c = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
codes = {}
for _ in range(60):
    fake = "rg2." + os.urandom(8).hex() + tok[20:]
    auth = base64.b64encode(("run:" + fake).encode()).decode()
    c.request("GET", "/local/acme/app.git/info/refs?service=git-receive-pack",
              headers={"Authorization": "Basic " + auth})
    r = c.getresponse(); body = r.read().decode()
    codes.setdefault(r.status, body)
    codes[str(r.status)] = codes.get(str(r.status), 0) + 1
print(codes)
PY
  grep -q "'401': " "$T/flood" || { cat "$T/flood"; fail "no unknown kid was looked up"; }
  grep -q "'503': " "$T/flood" || { cat "$T/flood"; fail "the flood was not rate-limited"; }
  assert_contains "$T/flood" "too many tokens signed by unknown keys"
  [ "$(http_status "$URL_A" "$tok")" = 200 ] || { cat "$T/body"; fail "a real token was refused"; }
}

test_after_a_rotation_on_a_old_and_new_tokens_push_through_b() {
  local old new old_kid new_kid
  old=$("$REFGATE" token mint --config "$T/a.json" --repo local/acme/app)
  "$REFGATE" token key rotate --config "$T/a.json" >"$T/rot" 2>&1 || { cat "$T/rot"; fail "rotate"; }
  new=$("$REFGATE" token mint --config "$T/a.json" --repo local/acme/app)
  old_kid=$(cut -d. -f2 <<<"$old") new_kid=$(cut -d. -f2 <<<"$new")
  [ "$old_kid" != "$new_kid" ] || fail "the CLI still signs with the old key"
  assert_contains "$T/rot" "key $new_kid signs new tokens; key $old_kid is retired"
  [ "$(pg_psql "SELECT retired IS NOT NULL FROM token_keys WHERE kid = '$old_kid'")" = t ] ||
    fail "the old key is not marked retired"
  push_via "$URL_B" "$old" feature/old-key || { cat "$T/out"; fail "a token of the retired key"; }
  push_via "$URL_B" "$new" feature/new-key || { cat "$T/out"; fail "a token of the new key"; }
  db_events token-key-rotate | grep -q . ||
    fail "the rotation is not in A's audit log"
  echo "$new" >"$T/tok2"
}

test_without_the_database_pushes_are_refused_naming_it_then_work_again() {
  local tok; tok=$(cat "$T/tok2")
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
  [ "$(http_status "$URL_A" "$tok")" = 503 ] || { cat "$T/body"; fail "not a 503 without the database"; }
  assert_contains "$T/body" "shared state database"
  ! push_via "$URL_B" "$tok" feature/db-down || fail "a push went through without the database"
  assert_contains "$T/out" "database"
  [ -z "$(upstream_ref app refs/heads/feature/db-down)" ] || fail "it landed"
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-k $PG_DIR -c listen_addresses= -c max_connections=300" start >/dev/null
  push_via "$URL_B" "$tok" feature/db-back || { cat "$T/out"; fail "no push after the database returned"; }
  push_via "$URL_A" "$tok" feature/db-back-a || { cat "$T/out"; fail "A did not recover"; }
  kill -0 "$GW_PID" && kill -0 "$PID_B" || fail "a gateway died"
}

run_tests
