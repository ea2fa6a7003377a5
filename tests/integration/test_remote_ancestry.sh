# Pack inspection against a real smart-HTTP upstream (nginx + git
# http-backend): the gateway keeps a mirror of the remote repository under
# its state directory, fetched with the read credential before a push is
# inspected, so a fast-forward is told from a force exactly as for a local
# upstream, also after someone else pushed to the remote directly. The
# same remote is also reached as a github-app upstream (GitHub's API played
# by tests/support/github_standin.py), whose write token may get the
# "workflows" permission only when an allowed push changes
# .github/workflows/.
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

# The App's key pair and the API stand-in, which also answers nginx's
# auth_request for both the App's tokens and the static credential.
openssl genrsa -out "$T/app.key" 2048 2>/dev/null
chmod 600 "$T/app.key"
openssl rsa -in "$T/app.key" -pubout -out "$T/app.pub" 2>/dev/null
python3 "$REFGATE_SRC/tests/support/github_standin.py" --port-file "$T/standin.port" \
  --app-id 4242 --public-key "$T/app.pub" --installation "77=acme/app" \
  --static "$REMOTE_USER:$REMOTE_SECRET:acme/app:write" 2>>"$T/standin.log" &
STANDIN_PID=$!
for _ in $(seq 1 200); do [ -s "$T/standin.port" ] && break; sleep 0.05; done
[ -s "$T/standin.port" ] || { cat "$T/standin.log"; fail "the API stand-in did not start"; }
API=http://127.0.0.1:$(cat "$T/standin.port")

make_remote app
start_http_upstream auth_request "$API/_auth"
# Reads (advertisements, the mirror) use the static credential: the
# stand-in, like GitHub, refuses a receive-pack advertisement to a
# contents:read token.
APP_UPSTREAM=$(printf '{"host": "ghapp", "url": "%s", "credentials": {"type": "github-app", "app_id": 4242, "private_key_file": "%s", "api_url": "%s", "installation_id": 77}, "read_credentials": {"type": "static", "username": "%s", "token_file": "%s"}, "connect_timeout": 5, "idle_timeout": 10}' \
  "$HTTP_URL" "$T/app.key" "$API" "$REMOTE_USER" "$T/remote.secret")
write_remote_config "$STANDARD_RULES" "$(remote_upstream_json gitsrv "$HTTP_URL"), $APP_UPSTREAM"
start_gateway
TOKEN=$(mint gitsrv/acme/app)
APP_TOKEN=$(mint ghapp/acme/app)
MIRROR=$T/state/mirrors/gitsrv/acme/app.git
STATIC_B64=$(printf '%s:%s' "$REMOTE_USER" "$REMOTE_SECRET" | base64 -w0)

fetches() { grep -c "^GET /acme/app.git/info/refs?service=git-upload-pack" "$NGINX_DIR/access.log" || true; }

test_fast_forward_to_a_remote_upstream_is_allowed() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w1"
  git -C "$T/w1" switch -q -c feature/ff
  commit "$T/w1" one.txt
  git -C "$T/w1" push -q origin feature/ff >"$T/out" 2>&1 || { cat "$T/out"; fail "create failed"; }
  commit "$T/w1" two.txt
  git -C "$T/w1" push origin feature/ff >"$T/out" 2>&1 || { cat "$T/out"; fail "fast-forward failed"; }
  [ "$(remote_ref app refs/heads/feature/ff)" = "$(git -C "$T/w1" rev-parse HEAD)" ] ||
    fail "the fast-forward did not land upstream"
}

test_mirror_exists_under_state_and_is_private() {
  [ -d "$MIRROR" ] || fail "no mirror at $MIRROR"
  [ "$(stat -c %a "$MIRROR")" = 700 ] || fail "mirror mode $(stat -c %a "$MIRROR")"
  [ "$(git --git-dir="$MIRROR" rev-parse --is-bare-repository)" = true ] || fail "not bare"
  # Fetched before the last push was inspected: it holds what upstream held then.
  [ "$(git --git-dir="$MIRROR" rev-parse refs/heads/main)" = "$(remote_ref app refs/heads/main)" ] ||
    fail "the mirror does not hold main"
  [ "$(git --git-dir="$MIRROR" rev-parse refs/heads/feature/ff)" = "$(git -C "$T/w1" rev-parse HEAD~1)" ] ||
    fail "the mirror does not hold feature/ff as it was before the fast-forward"
}

test_mirror_fetch_carries_the_read_credential_and_stores_none() {
  grep "^GET /acme/app.git/info/refs?service=git-upload-pack" "$NGINX_DIR/auth.log" >"$T/fetched"
  assert_contains "$T/fetched" "Basic $STATIC_B64"
  ! grep -rqF -e "$REMOTE_SECRET" -e "$STATIC_B64" "$T/state/mirrors" ||
    fail "the credential was written under the mirror"
  ! grep -qF -e "$REMOTE_SECRET" -e "$STATIC_B64" "$T/gateway.log" ||
    fail "the credential reached the gateway's log"
}

test_force_push_to_a_remote_upstream_is_denied() {
  use_remote_token "$TOKEN" gitsrv
  local before; before=$(remote_ref app refs/heads/feature/ff)
  git -C "$T/w1" reset -q --hard HEAD~1
  commit "$T/w1" rewritten.txt
  ! git -C "$T/w1" push -f origin feature/ff >"$T/out" 2>&1 || fail "force push succeeded"
  assert_contains "$T/out" ' ! [remote rejected] feature/ff -> feature/ff (policy: '
  [ "$(remote_ref app refs/heads/feature/ff)" = "$before" ] || fail "upstream feature/ff changed"
}

test_mirror_catches_up_after_a_direct_push_to_the_remote() {
  use_remote_token "$TOKEN" gitsrv
  # Someone else moves feature/ff on the remote itself, past the gateway.
  git clone -q "file://$T/remote/acme/app.git" "$T/direct"
  git -C "$T/direct" switch -q feature/ff
  commit "$T/direct" direct.txt
  git -C "$T/direct" push -q origin feature/ff
  local fetches_before; fetches_before=$(fetches)
  # A run that builds on the new tip: its old id exists only after the mirror fetched.
  remote_work app "$T/w2"
  git -C "$T/w2" switch -q feature/ff
  commit "$T/w2" on-top.txt
  git -C "$T/w2" push origin feature/ff >"$T/out" 2>&1 || { cat "$T/out"; fail "fast-forward failed"; }
  [ "$(remote_ref app refs/heads/feature/ff)" = "$(git -C "$T/w2" rev-parse HEAD)" ] ||
    fail "the fast-forward did not land upstream"
  [ "$(fetches)" -gt "$fetches_before" ] || fail "the mirror was not updated"
  # And rewriting what the other person pushed is still a force.
  git -C "$T/w2" reset -q --hard HEAD~2
  commit "$T/w2" again.txt
  ! git -C "$T/w2" push -f origin feature/ff >"$T/out" 2>&1 || fail "force push succeeded"
  assert_contains "$T/out" ' ! [remote rejected] feature/ff -> feature/ff (policy: '
}

test_local_and_remote_decisions_are_audited_alike() {
  local log=$T/state/audit.jsonl
  [ -f "$log" ] || log=$(ls "$T"/state/*.jsonl 2>/dev/null | head -n1)
  [ -n "$log" ] && [ -f "$log" ] || { ls -la "$T/state"; fail "no audit log"; }
  grep '"ref":"refs/heads/feature/ff"' "$log" >"$T/audited" || { cat "$log"; fail "nothing audited"; }
  assert_contains "$T/audited" '"action":"update"'
  assert_contains "$T/audited" '"action":"force"'
  assert_not_contains "$T/audited" 'undecidable'
}

# The permissions of the last write token the stand-in issued.
last_write_token_permissions() {
  python3 - "$API/_state" <<'PY'
import json, sys, urllib.request
state = json.load(urllib.request.urlopen(sys.argv[1]))
writes = [t for t in state["tokens"] if t["permissions"].get("contents") == "write"]
print(json.dumps(writes[-1]["permissions"], sort_keys=True) if writes else "none")
PY
}

test_github_app_push_that_changes_workflows_gets_the_workflows_permission() {
  use_remote_token "$APP_TOKEN" ghapp
  remote_work app "$T/w3"
  git -C "$T/w3" switch -q -c feature/ci
  mkdir -p "$T/w3/.github/workflows"
  commit "$T/w3" .github/workflows/ci.yml "on: push"
  git -C "$T/w3" push origin feature/ci >"$T/out" 2>&1 || { cat "$T/out"; fail "create failed"; }
  last_write_token_permissions >"$T/perms"
  assert_contains "$T/perms" '"workflows": "write"'
  # An update that edits the workflow again needs it again.
  commit "$T/w3" .github/workflows/ci.yml "on: pull_request"
  git -C "$T/w3" push origin feature/ci >"$T/out" 2>&1 || { cat "$T/out"; fail "update failed"; }
  last_write_token_permissions >"$T/perms"
  assert_contains "$T/perms" '"workflows": "write"'
  [ "$(remote_ref app refs/heads/feature/ci)" = "$(git -C "$T/w3" rev-parse HEAD)" ] ||
    fail "feature/ci did not land"
  [ -d "$T/state/mirrors/ghapp/acme/app.git" ] || fail "no mirror for the github-app upstream"
}

test_github_app_push_that_leaves_workflows_alone_gets_no_workflows_permission() {
  use_remote_token "$APP_TOKEN" ghapp
  remote_work app "$T/w4"
  git -C "$T/w4" switch -q feature/ci
  commit "$T/w4" notes.txt
  git -C "$T/w4" push origin feature/ci >"$T/out" 2>&1 || { cat "$T/out"; fail "update failed"; }
  last_write_token_permissions >"$T/perms"
  assert_contains "$T/perms" '"contents": "write"'
  assert_not_contains "$T/perms" 'workflows'
  # A new branch whose workflows match upstream's HEAD (main) changes none.
  git -C "$T/w4" switch -q -c feature/plain origin/main
  commit "$T/w4" plain.txt
  git -C "$T/w4" push origin feature/plain >"$T/out" 2>&1 || { cat "$T/out"; fail "create failed"; }
  last_write_token_permissions >"$T/perms"
  assert_not_contains "$T/perms" 'workflows'
}

tokens_issued() {
  python3 -c 'import json, sys, urllib.request; print(len(json.load(urllib.request.urlopen(sys.argv[1]))["tokens"]))' "$API/_state"
}

test_github_app_denied_workflow_change_mints_no_write_token() {
  use_remote_token "$APP_TOKEN" ghapp
  local before; before=$(tokens_issued)
  git -C "$T/w4" switch -q main
  mkdir -p "$T/w4/.github/workflows"
  commit "$T/w4" .github/workflows/evil.yml "on: push"
  ! git -C "$T/w4" push origin main >"$T/out" 2>&1 || fail "push to main succeeded"
  assert_contains "$T/out" ' ! [remote rejected] main -> main (policy: main is protected'
  [ "$(tokens_issued)" = "$before" ] || fail "a denied push minted a token"
}

run_tests
