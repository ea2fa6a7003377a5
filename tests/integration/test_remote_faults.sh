# Upstream failures during forwarding: an upstream that is down, answers
# 500, resets the connection mid-body, goes silent, redirects elsewhere, or
# presents a certificate from the wrong CA. Each must end in a clear git
# error naming the upstream problem (never a false success), an audit
# outcome that says what upstream did, and a gateway that keeps serving.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_http.sh"

FAULT_SERVER=$(cd "$(dirname "$0")/../support" && pwd)/fault_server.py
FAULT_PIDS=()
extra_cleanup() {
  for p in "${FAULT_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}

# start_fault MODE: prints the port of a fault server in MODE.
start_fault() {
  python3 "$FAULT_SERVER" --mode "$1" --root "$T/remote" --port-file "$T/fault-$1.port" \
    --log "$T/fault.log" &
  FAULT_PIDS+=($!)
  for _ in $(seq 1 100); do [ -s "$T/fault-$1.port" ] && break; sleep 0.05; done
}

# none_upstream HOST URL [EXTRA]: an upstream without credentials, with
# short timeouts so the slow cases end quickly.
none_upstream() {
  printf '{"host": "%s", "url": "%s", "credentials": {"type": "none"}, "connect_timeout": 3, "idle_timeout": 3%s}' \
    "$1" "$2" "${3:+, $3}"
}

make_remote app
start_http_upstream basic
make_ca wrong
for m in 500 reset slow redirect down; do start_fault $m; done
port() { cat "$T/fault-$1.port"; }
UPSTREAMS="$(remote_upstream_json gitsrv "$HTTP_URL"),
  $(remote_upstream_json tls "$HTTPS_URL" "\"ca_file\": \"$T/ca-test.pem\""),
  $(remote_upstream_json wrongca "$HTTPS_URL" "\"ca_file\": \"$T/ca-wrong.pem\""),
  $(remote_upstream_json sysca "$HTTPS_URL"),
  $(none_upstream refused "http://127.0.0.1:$(free_port)"),
  $(none_upstream f500 "http://127.0.0.1:$(port 500)"),
  $(none_upstream freset "http://127.0.0.1:$(port reset)"),
  $(none_upstream fslow "http://127.0.0.1:$(port slow)"),
  $(none_upstream fredirect "http://127.0.0.1:$(port redirect)"),
  $(none_upstream fdown "http://127.0.0.1:$(port down)")"
write_remote_config "$STANDARD_RULES" "$UPSTREAMS"
start_gateway
REPOS=()
for h in gitsrv tls wrongca sysca refused f500 freset fslow fredirect fdown; do REPOS+=("$h/acme/app"); done
TOKEN=$(mint "${REPOS[@]}")

# push_to HOST BRANCH [SIZE_MB]: a new feature branch pushed through the
# gateway to HOST; git's output in $T/out, its status returned.
push_to() {
  local dir=$T/w-$1-$RANDOM
  use_remote_token "$TOKEN" "$1"
  remote_work app "$dir"
  git -C "$dir" switch -q -c "$2"
  if [ -n "${3:-}" ]; then
    head -c $(($3 * 1024 * 1024)) /dev/urandom >"$dir/big.bin"
    git -C "$dir" add big.bin
    git -C "$dir" commit -q -m big
  else
    commit "$dir" "f-$RANDOM.txt"
  fi
  git -C "$dir" push origin "$2" >"$T/out" 2>&1
}

# The gateway is alive and still forwards a good push.
gateway_still_serves() {
  kill -0 "$GW_PID" || fail "the gateway died"
  push_to gitsrv "feature/alive-$RANDOM" || { cat "$T/out"; fail "a good push failed afterwards"; }
}

# audited HOST TEXT: the audit record of HOST's push has TEXT in its outcome.
audited() {
  grep -F "\"repo\":\"$1/acme/app\"" "$T/state/audit.jsonl" >"$T/audit.lines" ||
    fail "no audit record for $1"
  grep -o '"outcome":"[^"]*"' "$T/audit.lines" >"$T/outcomes"
  assert_contains "$T/outcomes" "$2"
}

test_upstream_down_at_advertisement_is_a_clear_error() {
  ! push_to refused feature/refused || fail "push succeeded"
  assert_contains "$T/out" "connection to upstream refused"
  assert_not_contains "$T/out" "Everything up-to-date"
  gateway_still_serves
}

test_upstream_down_at_push_is_an_ng_line_and_audited() {
  ! push_to fdown feature/down || fail "push succeeded"
  assert_contains "$T/out" "[remote rejected] feature/down -> feature/down (upstream: connection to upstream refused"
  audited fdown "upstream error: connection to upstream refused"
  gateway_still_serves
}

test_upstream_500_is_an_ng_line_and_audited() {
  ! push_to f500 feature/five-hundred || fail "push succeeded"
  assert_contains "$T/out" "feature/five-hundred (upstream: upstream answered HTTP 500)"
  audited f500 "upstream error: upstream answered HTTP 500"
  gateway_still_serves
}

test_upstream_reset_mid_body_is_an_ng_line_and_audited() {
  ! push_to freset feature/reset 4 || fail "push succeeded"
  assert_contains "$T/out" "feature/reset -> feature/reset (upstream: "
  assert_contains "$T/out" "upstream connection broke"
  audited freset "upstream error: upstream connection broke"
  gateway_still_serves
}

test_silent_upstream_times_out_and_is_audited() {
  ! push_to fslow feature/slow || fail "push succeeded"
  assert_contains "$T/out" "feature/slow -> feature/slow (upstream: upstream timed out"
  audited fslow "upstream error: upstream timed out"
  gateway_still_serves
}

test_redirect_is_refused_not_followed() {
  ! push_to fredirect feature/redirect || fail "push succeeded"
  assert_contains "$T/out" "upstream redirected to elsewhere.invalid (HTTP 302); redirects are not followed"
  use_remote_token "$TOKEN" fredirect
  ! git clone "$HTTP_URL/acme/app.git" "$T/redir-clone" >"$T/out" 2>&1 || fail "clone succeeded"
  assert_contains "$T/out" "redirects are not followed"
  gateway_still_serves
}

test_https_with_the_test_ca_verifies_and_lands() {
  push_to tls feature/tls || { cat "$T/out"; fail "push over HTTPS failed"; }
  [ -n "$(remote_ref app refs/heads/feature/tls)" ] || fail "feature/tls did not land"
  use_remote_token "$TOKEN" tls "$HTTPS_URL"
  git clone -q "$HTTPS_URL/acme/app.git" "$T/tls-clone" 2>"$T/out" || { cat "$T/out"; fail "clone"; }
}

test_https_with_the_wrong_ca_fails_closed() {
  ! push_to wrongca feature/wrongca || fail "push succeeded"
  assert_contains "$T/out" "upstream TLS: "
  [ -z "$(remote_ref app refs/heads/feature/wrongca)" ] || fail "feature/wrongca landed"
  ! push_to sysca feature/sysca || fail "push with the system CAs succeeded"
  assert_contains "$T/out" "upstream TLS: "
  gateway_still_serves
}

test_no_secret_in_logs_or_audit() {
  ! grep -rqF -- "$REMOTE_SECRET" "$T/state" "$T/gateway.log" "$T"/test_*.out ||
    fail "static secret leaked"
  ! grep -rqF -- "$TOKEN" "$T/state" "$T/gateway.log" "$NGINX_DIR" || fail "run token leaked"
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/out" || { cat "$T/out"; fail "verify"; }
}

run_tests
