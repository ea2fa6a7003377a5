# The gateway's control socket (gateway/control.c) driven by a client as
# `refgate run` is: mint and revoke over a unix socket, clear errors for bad
# requests while the gateway keeps serving, the audit chain (no token in
# it), idle and concurrency bounds, and a stale socket left by a crash.
source "$(dirname "$0")/lib.sh"

CLIENT=$REFGATE_SRC/tests/support/control_client.py
SOCK=$T/state/control.sock
make_upstream app
write_config "$STANDARD_RULES"
start_gateway

# ctl LINE...: one connection, one answer line per request line.
ctl() { python3 "$CLIENT" "$SOCK" "$@"; }
# token_of ANSWER: the token field.
token_of() { jq -r .token <<<"$1"; }

test_the_socket_is_a_0666_socket_in_state_dir() {
  [ -S "$SOCK" ] || fail "no socket at $SOCK"
  [ "$(stat -c %a "$SOCK")" = 666 ] || fail "mode $(stat -c %a "$SOCK")"
}

test_mint_by_the_gateways_own_uid_gives_a_token_that_pushes() {
  local ans tok
  ans=$(ctl '{"op": "mint", "repos": ["local/acme/app.git"], "ttl": "1h", "run": "ctl-1"}')
  [ "$(jq -r .ok <<<"$ans")" = true ] || fail "mint refused: $ans"
  [ "$(jq -r .run <<<"$ans")" = ctl-1 ] || fail "run: $ans"
  [ "$(jq -r .url <<<"$ans")" = "$GW" ] || fail "url: $ans"
  local exp now; exp=$(jq -r .expires <<<"$ans"); now=$(date +%s)
  [ "$exp" -gt $((now + 3500)) ] && [ "$exp" -le $((now + 3601)) ] || fail "expires $exp, now $now"
  tok=$(token_of "$ans")
  echo "$tok" >"$T/token1"
  use_token "$tok"
  clone app "$T/w1"
  git -C "$T/w1" switch -q -c feature/ctl
  commit "$T/w1" ctl.c
  git -C "$T/w1" push origin feature/ctl >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
  [ -n "$(upstream_ref app refs/heads/feature/ctl)" ] || fail "feature/ctl did not land"
}

test_bad_requests_get_clear_errors_and_the_gateway_keeps_serving() {
  ctl 'not json' >"$T/a1"
  assert_contains "$T/a1" '"ok":false'
  assert_contains "$T/a1" 'expected one JSON object per line'
  ctl '{"op": "launch"}' >"$T/a2"
  assert_contains "$T/a2" 'op: expected \"mint\", \"revoke\", \"approvals\"'
  ctl '{"op": "mint", "repos": ["elsewhere/acme/app"]}' >"$T/a3"
  assert_contains "$T/a3" "'elsewhere' is not an upstream host"
  ctl '{"op": "mint", "repos": ["local/acme/app"], "ttl": "13h"}' >"$T/a4"
  assert_contains "$T/a4" "over this gateway's control.max_ttl (43200 s)"
  ctl '{"op": "mint", "repos": []}' >"$T/a5"
  assert_contains "$T/a5" 'repos: expected an array of 1 to'
  # Several requests on one connection, the bad one in the middle.
  ctl '{"op": "mint", "repos": ["local/acme/app"]}' '{' '{"op": "mint", "repos": ["local/acme/app"]}' >"$T/a6"
  [ "$(jq -sc 'map(.ok)' "$T/a6")" = '[true,false,true]' ] ||
    { cat "$T/a6"; fail "expected ok, error, ok on one connection"; }
  # Over 64 KiB without a newline: refused, connection closed.
  python3 -c 'import sys; sys.stdout.write("{\"op\": \"mint\", \"pad\": \"" + "x" * 70000)' |
    python3 "$CLIENT" "$SOCK" >"$T/a7"
  assert_contains "$T/a7" 'request over 65536 bytes'
  ctl '{"op": "mint", "repos": ["local/acme/app"]}' >"$T/a8"
  assert_contains "$T/a8" '"ok":true'
  kill -0 "$GW_PID" || fail "the gateway died"
}

test_revoke_over_the_socket_makes_the_token_refused_at_the_next_push() {
  local tok; tok=$(cat "$T/token1")
  ctl "{\"op\": \"revoke\", \"token\": \"$tok\"}" >"$T/r1"
  assert_contains "$T/r1" '{"ok":true}'
  use_token "$tok"
  commit "$T/w1" after-revoke.c
  ! git -C "$T/w1" push origin feature/ctl >"$T/out" 2>&1 || fail "a revoked token pushed"
  assert_contains "$T/out" 'revoked'
  ctl '{"op": "revoke", "token": "rg1.bogus"}' >"$T/r2"
  assert_contains "$T/r2" '"ok":false'
}

test_mint_and_revoke_are_audit_events_without_the_token() {
  local tok; tok=$(cat "$T/token1")
  ! grep -qF "$tok" "$T/state/audit.jsonl" || fail "the token is in the audit log"
  ! grep -qF "$tok" "$T/gateway.log" || fail "the token is in the gateway's log"
  jq -c 'select(.type == "event" and (.event == "token-mint" or .event == "token-revoke"))' \
    "$T/state/audit.jsonl" >"$T/events"
  assert_contains "$T/events" '"event":"token-mint","detail":"peer uid '"$(id -u)"
  assert_contains "$T/events" 'run ctl-1, ttl 3600s, token '
  assert_contains "$T/events" 'repos local/acme/app"'
  assert_contains "$T/events" '"event":"token-revoke","detail":"peer uid '"$(id -u)"
  assert_contains "$T/events" 'run ctl-1, token '
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/verify" 2>&1 || { cat "$T/verify"; fail "verify"; }
}

test_an_idle_connection_is_closed_after_10_seconds() {
  local start end
  start=$(date +%s)
  python3 - "$SOCK" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])
assert s.recv(1) == b"", "expected the gateway to close an idle connection"
PY
  end=$(date +%s)
  [ $((end - start)) -ge 9 ] && [ $((end - start)) -le 14 ] || fail "closed after $((end - start)) s"
}

test_past_16_connections_a_newcomer_is_told_busy_and_the_rest_served() {
  python3 - "$SOCK" <<'PY'
import socket, sys
held = []
for _ in range(16):
    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]); held.append(s)
    s.sendall(b'{"op": "x"}\n'); assert b'"ok":false' in s.recv(4096)
extra = socket.socket(socket.AF_UNIX); extra.settimeout(10); extra.connect(sys.argv[1])
answer = extra.recv(4096)
assert b"busy" in answer, answer
held[0].close()
import time
for _ in range(100):
    again = socket.socket(socket.AF_UNIX); again.settimeout(10); again.connect(sys.argv[1])
    again.sendall(b'{"op": "x"}\n'); answer = again.recv(4096)
    if b"busy" not in answer:
        break
    time.sleep(0.05)
assert b"op: expected" in answer, answer
PY
}

test_a_stale_socket_is_replaced_and_a_live_one_is_never_taken_over() {
  # A second gateway (its own state_dir) told to use the live socket refuses to start.
  sed "s|\"state_dir\": \"state\",|\"state_dir\": \"state2\", \"control\": {\"socket\": \"$SOCK\"},|" \
    "$T/refgate.json" >"$T/second.json"
  ! "$REFGATE" serve --config "$T/second.json" >"$T/second.log" 2>&1 || fail "second gateway started"
  assert_contains "$T/second.log" 'another gateway answers on it'
  [ -S "$SOCK" ] || fail "the live socket was removed"
  ctl '{"op": "x"}' >"$T/s1"
  assert_contains "$T/s1" 'op: expected'
  # A crash leaves the socket file; the next gateway replaces it.
  kill -KILL "$GW_PID"; wait "$GW_PID" 2>/dev/null || true; GW_PID=
  [ -S "$SOCK" ] || fail "expected the crashed gateway's socket to stay"
  start_gateway
  ctl '{"op": "mint", "repos": ["local/acme/app"]}' >"$T/s2"
  assert_contains "$T/s2" '"ok":true'
  stop_gateway
  [ ! -e "$SOCK" ] || fail "the socket stayed after a clean stop"
  # The gateway's stderr is in its log, not in ctest's output.
  ! grep -aq 'Sanitizer' "$T/gateway.log" || { cat "$T/gateway.log"; fail "sanitizer report"; }
}

run_tests
