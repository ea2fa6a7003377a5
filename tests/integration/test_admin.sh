# The admin listener: its own address (never the push port), /healthz with
# readiness checks, and /metrics in Prometheus' text format whose counters
# move with real pushes (allowed, denied), a push held in flight, and a
# request refused at the per-token limit; the exposition passes
# `promtool check metrics` (Debian's prometheus package) where installed.
source "$(dirname "$0")/lib.sh"

command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
make_upstream app
write_config "$STANDARD_RULES" '"admin": {"listen": "127.0.0.1:0"}, "limits": {"per_token": 1}'
start_gateway
ADMIN=$(cat "$T/state/admin.url")
TOKEN=$(mint local/acme/app)
CT='Content-Type: application/x-git-receive-pack-request'

# metric SAMPLE: the value of one sample line (name and labels as exposed).
metric() { curl -fsS "$ADMIN/metrics" | awk -v s="$1 " 'index($0, s) == 1 { print $2 }'; }

# expect_metric SAMPLE VALUE
expect_metric() {
  local v; v=$(metric "$1")
  [ "$v" = "$2" ] || { curl -sS "$ADMIN/metrics" | grep -F "${1%%\{*}" || true; fail "$1 is '$v', expected $2"; }
}

test_the_admin_url_is_written_and_is_not_the_push_url() {
  grep -qE '^http://127\.0\.0\.1:[0-9]+$' "$T/state/admin.url" || fail "admin.url: $(cat "$T/state/admin.url")"
  [ "$ADMIN" != "$GW" ] || fail "the admin listener is the push listener"
  assert_contains "$T/gateway.log" "admin_listening url=$ADMIN"
}

test_healthz_is_ready_with_every_check_ok() {
  curl -sS -o "$T/h" -w '%{http_code} %{content_type}' "$ADMIN/healthz" >"$T/status"
  [ "$(cat "$T/status")" = "200 application/json" ] || fail "status $(cat "$T/status")"
  jq -e '.live == true and .ready == true and
         .checks == {"config": "ok", "state_dir": "ok", "audit_log": "ok", "serving": "ok"}' "$T/h" >/dev/null ||
    { cat "$T/h"; fail "healthz body"; }
}

test_the_push_port_serves_neither_metrics_nor_healthz() {
  for p in metrics healthz; do
    code=$(curl -sS -o "$T/b" -w '%{http_code}' "$GW/$p")
    [ "$code" != 200 ] || fail "the push port answered /$p"
    assert_not_contains "$T/b" "refgate_"
  done
}

test_the_admin_listener_refuses_other_paths_and_methods() {
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "$ADMIN/nope")" = 404 ] || fail "unknown path"
  [ "$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$ADMIN/metrics")" = 405 ] || fail "POST"
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "$ADMIN/metrics/../healthz")" != 500 ] || fail "dots"
}

test_metrics_start_at_zero() {
  expect_metric 'refgate_pushes_total{decision="allow",outcome="ok"}' 0
  expect_metric 'refgate_pushes_total{decision="deny",outcome="refused"}' 0
  expect_metric 'refgate_pushes_in_flight' 0
  expect_metric 'refgate_forwarded_bytes_total' 0
  curl -fsS -D "$T/hdr" -o /dev/null "$ADMIN/metrics"
  grep -qi '^content-type: text/plain; version=0.0.4' "$T/hdr" || { cat "$T/hdr"; fail "content type"; }
}

test_an_allowed_and_a_denied_push_move_the_counters() {
  use_token "$TOKEN"
  clone app "$T/w"
  git -C "$T/w" switch -q -c feature/m
  commit "$T/w" f.txt
  git -C "$T/w" push -q origin feature/m 2>"$T/err" || { cat "$T/err"; fail "allowed push"; }
  git -C "$T/w" switch -q main
  commit "$T/w" g.txt
  ! git -C "$T/w" push -q origin main 2>"$T/err" || fail "main was pushed"
  assert_contains "$T/err" "main is protected"
  expect_metric 'refgate_pushes_total{decision="allow",outcome="ok"}' 1
  expect_metric 'refgate_pushes_total{decision="deny",outcome="refused"}' 1
  expect_metric 'refgate_refs_total{decision="allow",outcome="ok"}' 1
  expect_metric 'refgate_refs_total{decision="deny",outcome="refused"}' 1
  expect_metric 'refgate_upstream_push_seconds_count' 1
  expect_metric 'refgate_upstream_push_seconds_bucket{le="+Inf"}' 1
  expect_metric 'refgate_pushes_in_flight' 0
  [ "$(metric refgate_forwarded_bytes_total)" -gt 100 ] || fail "forwarded bytes $(metric refgate_forwarded_bytes_total)"
  # The start event, and each push's decision batch (plus the allowed one's outcome).
  [ "$(metric refgate_audit_append_seconds_count)" -ge 4 ] ||
    fail "audit appends $(metric refgate_audit_append_seconds_count)"
  expect_metric 'refgate_audit_append_failures_total' 0
}

test_the_exposition_passes_promtool() {
  curl -fsS "$ADMIN/metrics" >"$T/m"
  if ! command -v promtool >/dev/null; then
    echo "promtool not installed (Debian: apt-get install prometheus): checked by the unit tests only"
    return 0
  fi
  promtool check metrics <"$T/m" >"$T/lint" 2>&1 || { cat "$T/lint"; fail "promtool check metrics"; }
  [ ! -s "$T/lint" ] || { cat "$T/lint"; fail "promtool has remarks"; }
}

# hold_push: a push request whose headers are in and whose body never
# completes, on fd 3.
hold_push() {
  local host=${GW#http://} basic
  basic=$(printf 'run:%s' "$TOKEN" | base64 -w0)
  exec 3<>"/dev/tcp/${host%:*}/${host##*:}"
  printf 'POST /local/acme/app.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n%s\r\nContent-Length: 100000\r\n\r\n00' \
    "$basic" "$CT" >&3
  for _ in $(seq 100); do [ "$(metric refgate_pushes_in_flight)" = 1 ] && return 0; sleep 0.05; done
  fail "the held push is not in flight"
}

test_a_held_push_is_in_flight_and_a_second_request_of_its_token_is_refused() {
  hold_push
  expect_metric 'refgate_pushes_in_flight' 1
  [ "$(metric refgate_connections_open)" -ge 1 ] || fail "no open connection"
  code=$(curl -sS -o /dev/null -w '%{http_code}' -u "run:$TOKEN" \
    "$GW/local/acme/app.git/info/refs?service=git-receive-pack")
  [ "$code" = 429 ] || fail "second request: $code"
  expect_metric 'refgate_connections_refused_total{reason="per_token"}' 1
  exec 3>&-
  for _ in $(seq 100); do [ "$(metric refgate_pushes_in_flight)" = 0 ] && break; sleep 0.05; done
  expect_metric 'refgate_pushes_in_flight' 0
  expect_metric 'refgate_pushes_total{decision="none",outcome="invalid"}' 1
}

test_healthz_says_not_ready_while_the_gateway_drains() {
  hold_push
  kill -TERM "$GW_PID"
  for _ in $(seq 100); do
    code=$(curl -sS -o "$T/h" -w '%{http_code}' "$ADMIN/healthz" || true)
    [ "$code" = 503 ] && break
    sleep 0.05
  done
  [ "$code" = 503 ] || fail "healthz while draining: $code"
  jq -e '.live == true and .ready == false and (.checks.serving | startswith("fail: "))' "$T/h" >/dev/null ||
    { cat "$T/h"; fail "healthz body"; }
  exec 3>&-
  # Each test runs in a subshell: the gateway is not its child to wait for.
  for _ in $(seq 200); do kill -0 "$GW_PID" 2>/dev/null || break; sleep 0.05; done
  ! kill -0 "$GW_PID" 2>/dev/null || fail "the gateway did not stop"
  [ ! -e "$T/state/admin.url" ] || fail "admin.url outlived the gateway"
}

test_healthz_fails_when_the_state_dir_cannot_take_a_file() {
  if [ "$(id -u)" = 0 ]; then
    echo "running as root, which writes to any directory: not checked"
    return 0
  fi
  start_gateway
  ADMIN=$(cat "$T/state/admin.url")
  chmod 500 "$T/state"
  code=$(curl -sS -o "$T/h" -w '%{http_code}' "$ADMIN/healthz")
  chmod 700 "$T/state"
  stop_gateway
  [ "$code" = 503 ] || fail "healthz with a read-only state dir: $code"
  jq -e '.checks.state_dir | startswith("fail: ")' "$T/h" >/dev/null || { cat "$T/h"; fail "body"; }
}

test_check_config_passes_a_good_file_without_touching_state() {
  sed 's/"state_dir": "state"/"state_dir": "fresh"/' "$T/refgate.json" >"$T/fresh.json"
  "$REFGATE" serve --config "$T/fresh.json" --check-config >"$T/out" 2>&1 || { cat "$T/out"; fail "check"; }
  assert_contains "$T/out" "fresh.json: ok (1 upstreams, 3 rules)"
  [ ! -e "$T/fresh" ] || fail "--check-config created the state directory"
}

test_check_config_fails_naming_the_key_or_the_credential() {
  echo '{"state_dir": "s", "admin": {"listen": "localhost:1"}}' >"$T/bad.json"
  ! "$REFGATE" serve --check-config --config "$T/bad.json" >"$T/out" 2>&1 || fail "bad admin passed"
  assert_contains "$T/out" "admin.listen"
  cat >"$T/cred.json" <<JSON
{"state_dir": "s", "upstreams": [{"host": "gh", "url": "https://git.invalid",
  "credentials": {"type": "static", "token_file": "$T/missing-token"}}]}
JSON
  ! "$REFGATE" serve --check-config --config "$T/cred.json" >"$T/out" 2>&1 || fail "missing token passed"
  assert_contains "$T/out" "upstream gh: token_file $T/missing-token"
}

run_tests
