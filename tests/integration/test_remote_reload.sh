# SIGHUP rebuilds the upstream credentials with the rules: a gateway
# started with a wrong static token for a real smart-HTTP upstream (nginx +
# git http-backend, HTTP Basic) cannot push; after the config names the
# right token file and is reloaded, pushes land carrying the new credential.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_http.sh"

make_remote app
start_http_upstream basic
printf 'not-the-secret' >"$T/wrong.secret"
chmod 600 "$T/wrong.secret"
write_remote_config "$STANDARD_RULES" \
  "$(remote_upstream_json gitsrv "$HTTP_URL" | sed "s#$T/remote.secret#$T/wrong.secret#")"
start_gateway
TOKEN=$(mint gitsrv/acme/app)
STATIC_B64=$(printf '%s:%s' "$REMOTE_USER" "$REMOTE_SECRET" | base64 -w0)

test_with_the_wrong_token_upstream_refuses_the_gateway() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w"
  git -C "$T/w" switch -q -c feature/cred
  commit "$T/w" c.txt
  ! git -C "$T/w" push origin feature/cred >"$T/out" 2>&1 || fail "pushed with the wrong token"
  assert_contains "$T/out" "upstream refused the credential (HTTP 401)"
  [ -z "$(remote_ref app refs/heads/feature/cred)" ] || fail "landed"
}

test_after_a_reload_the_new_token_is_used() {
  write_remote_config "$STANDARD_RULES" "$(remote_upstream_json gitsrv "$HTTP_URL")"
  local before; before=$(grep -c "reloaded config=" "$T/gateway.log" || true)
  kill -HUP "$GW_PID"
  for _ in $(seq 200); do
    [ "$(grep -c "reloaded config=" "$T/gateway.log" || true)" -gt "$before" ] && break
    sleep 0.05
  done
  use_remote_token "$TOKEN" gitsrv
  git -C "$T/w" push origin feature/cred >"$T/out" 2>&1 || { cat "$T/out" "$T/gateway.log"; fail "push after reload"; }
  [ "$(remote_ref app refs/heads/feature/cred)" = "$(git -C "$T/w" rev-parse HEAD)" ] || fail "not landed"
  grep "^POST /acme/app.git/git-receive-pack" "$NGINX_DIR/auth.log" >"$T/posted"
  assert_contains "$T/posted" "Basic $STATIC_B64"
}

run_tests
