# A github-app upstream configured with nothing but its App: no static
# read_credentials. GitHub (played by tests/support/github_standin.py behind
# nginx's auth_request) refuses the receive-pack advertisement to a
# contents:read token, so the gateway builds it from upload-pack's, fetched
# with a contents:read token; a contents:write token is minted only for a
# push policy allowed, for that one repository, and every token is revoked
# once its request is answered. No token may reach a log or git's output.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_http.sh"

STANDIN_PID=
extra_cleanup() {
  if [ -n "$STANDIN_PID" ]; then
    kill "$STANDIN_PID" 2>/dev/null || true
    wait "$STANDIN_PID" 2>/dev/null || true
    STANDIN_PID=
  fi
}

openssl genrsa -out "$T/app.key" 2048 2>/dev/null
chmod 600 "$T/app.key"
openssl rsa -in "$T/app.key" -pubout -out "$T/app.pub" 2>/dev/null
python3 "$REFGATE_SRC/tests/support/github_standin.py" --port-file "$T/standin.port" \
  --app-id 4242 --public-key "$T/app.pub" --installation "77=acme/app,acme/empty" \
  --tokens-file "$T/tokens" 2>>"$T/standin.log" &
STANDIN_PID=$!
for _ in $(seq 1 200); do [ -s "$T/standin.port" ] && break; sleep 0.05; done
[ -s "$T/standin.port" ] || { cat "$T/standin.log"; fail "the API stand-in did not start"; }
API=http://127.0.0.1:$(cat "$T/standin.port")

make_remote app
# A repository without a single ref: its advertisement is a flush alone.
git init -q --bare "$T/remote/acme/empty.git"
git -C "$T/remote/acme/empty.git" config http.receivepack true
start_http_upstream auth_request "$API/_auth"
APP_UPSTREAM=$(printf '{"host": "ghapp", "url": "%s", "credentials": {"type": "github-app", "app_id": 4242, "private_key_file": "%s", "api_url": "%s", "installation_id": 77}, "connect_timeout": 5, "idle_timeout": 10}' \
  "$HTTP_URL" "$T/app.key" "$API")
write_remote_config "$STANDARD_RULES" "$APP_UPSTREAM"
start_gateway
TOKEN=$(mint ghapp/acme/app ghapp/acme/empty)

# state QUERY: run a Python expression over the stand-in's /_state, where
# `s` is the state, `new` the tokens issued since the mark (see mark), and
# `by_hash` maps a token's 12-hex prefix (as /_auth logs it) to its record.
mark() { python3 -c 'import json, sys, urllib.request; print(len(json.load(urllib.request.urlopen(sys.argv[1]))["tokens"]))' "$API/_state" >"$T/mark"; }
state() {
  python3 - "$API/_state" "$(cat "$T/mark" 2>/dev/null || echo 0)" "$1" <<'PY'
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1]))
new = s["tokens"][int(sys.argv[2]):]
by_hash = {t["sha256"][:12]: t for t in s["tokens"]}
auths = [e for e in s["log"] if e["path"] == "/_auth"]
print(eval(sys.argv[3]))
PY
}
writes() { state 'len([t for t in s["tokens"] if t["permissions"].get("contents") == "write"])'; }

test_allowed_push_lands_with_a_write_token_for_that_repository_alone() {
  use_remote_token "$TOKEN" ghapp
  remote_work app "$T/w1"
  git -C "$T/w1" switch -q -c feature/app
  commit "$T/w1" app.txt
  mark
  git -C "$T/w1" push origin feature/app >"$T/out-push" 2>&1 || { cat "$T/out-push"; fail "push failed"; }
  [ "$(remote_ref app refs/heads/feature/app)" = "$(git -C "$T/w1" rev-parse HEAD)" ] ||
    fail "feature/app did not land upstream"
  state 'json.dumps([t for t in new if t["permissions"].get("contents") == "write"], sort_keys=True)' >"$T/written"
  [ "$(state 'len([t for t in new if t["permissions"].get("contents") == "write"])')" = 1 ] ||
    { cat "$T/written"; fail "not exactly one write token for the push"; }
  assert_contains "$T/written" '"repos": ["acme/app"]'
  assert_contains "$T/written" '"revoked": true'
  assert_not_contains "$T/written" 'workflows'
  # The token nginx saw on the push itself is that write token.
  [ "$(state '[by_hash[e["token"]]["permissions"]["contents"] for e in auths if e["uri"] == "/acme/app.git/git-receive-pack" and e["status"] == 204][-1]')" = write ] ||
    fail "the push did not carry the write token"
}

test_advertisement_used_a_revoked_read_token_and_never_asked_for_receive_pack() {
  # Every /_auth check of upload-pack's advertisement carried a contents:read
  # token for acme/app alone, since revoked.
  state '"\n".join(sorted({json.dumps(by_hash[e["token"]], sort_keys=True) for e in auths if e["uri"].startswith("/acme/app.git/info/refs?service=git-upload-pack")}))' >"$T/read-tokens"
  assert_contains "$T/read-tokens" '"contents": "read"'
  assert_not_contains "$T/read-tokens" '"contents": "write"'
  assert_not_contains "$T/read-tokens" '"revoked": false'
  assert_not_contains "$T/read-tokens" '"acme/empty"'
  # Nothing asked upstream for a receive-pack advertisement.
  [ "$(state 'len([e for e in auths if "service=git-receive-pack" in e["uri"]])')" = 0 ] ||
    fail "the gateway asked for upstream's receive-pack advertisement"
  # And no token issued so far is left unrevoked.
  [ "$(state 'len([t for t in s["tokens"] if not t["revoked"]])')" = 0 ] ||
    fail "a token was left unrevoked"
}

test_denied_push_mints_no_write_token() {
  use_remote_token "$TOKEN" ghapp
  remote_work app "$T/w2"
  local before main_before
  before=$(writes)
  main_before=$(remote_ref app refs/heads/main)
  commit "$T/w2" main.txt
  ! git -C "$T/w2" push origin main >"$T/out-denied" 2>&1 || fail "push to main succeeded"
  assert_contains "$T/out-denied" ' ! [remote rejected] main -> main (policy: main is protected)'
  [ "$(remote_ref app refs/heads/main)" = "$main_before" ] || fail "upstream main changed"
  [ "$(writes)" = "$before" ] || fail "a denied push minted a write token"
}

test_push_to_an_empty_repository_lands() {
  use_remote_token "$TOKEN" ghapp
  git init -q "$T/w3"
  git -C "$T/w3" switch -q -c feature/first
  commit "$T/w3" first.txt
  git -C "$T/w3" remote add origin "$HTTP_URL/acme/empty.git"
  git -C "$T/w3" push origin feature/first >"$T/out-empty" 2>&1 || { cat "$T/out-empty"; fail "push failed"; }
  [ "$(remote_ref empty refs/heads/feature/first)" = "$(git -C "$T/w3" rev-parse HEAD)" ] ||
    fail "feature/first did not land in the empty repository"
}

test_clone_through_the_gateway_works_with_a_read_token() {
  use_remote_token "$TOKEN" ghapp
  mark
  git clone "$HTTP_URL/acme/app.git" "$T/c1" >"$T/out-clone" 2>&1 || { cat "$T/out-clone"; fail "clone failed"; }
  [ "$(git -C "$T/c1" rev-parse HEAD)" = "$(remote_ref app refs/heads/main)" ] ||
    fail "the clone does not hold main"
  [ "$(git -C "$T/c1" rev-parse origin/feature/app)" = "$(remote_ref app refs/heads/feature/app)" ] ||
    fail "the clone does not hold feature/app"
  [ "$(state 'sorted({t["permissions"]["contents"] for t in new})')" = "['read']" ] ||
    fail "the clone minted something other than read tokens"
  [ "$(state 'all(t["revoked"] for t in new) and len(new) > 0')" = True ] ||
    fail "the clone's read tokens were not revoked"
}

test_no_issued_token_appears_in_logs_or_git_output() {
  [ -s "$T/tokens" ] || fail "the stand-in recorded no tokens"
  [ -s "$T/state/audit.jsonl" ] || fail "no audit log"
  local files=() f rc
  for f in "$T/gateway.log" "$T/state/audit.jsonl" "$NGINX_DIR"/*.log "$T"/out-* "$T"/test_*.out; do
    [ -f "$f" ] && files+=("$f")
  done
  # Exit 1 is the only good answer: 0 is a leak, 2 an unreadable file.
  rc=0
  grep -lF -f "$T/tokens" "${files[@]}" || rc=$?
  [ "$rc" = 1 ] || fail "an issued token is in the files above (grep exit $rc)"
  # Nor does any line of the App's private key reach the gateway's log.
  ! grep -qF -f <(grep -v -- '-----' "$T/app.key") "$T/gateway.log" || fail "the App's key reached the log"
}

run_tests