# The real Claude Code binary under `refgate run`: its API (a stand-in on a
# test address, over TLS) reached through refgate-run's allow-list proxy,
# and its Bash tool pushing through the gateway: the feature branch lands,
# main is rejected in git's own output, the outside world is refused, and
# afterwards the run's token is refused and the audit log shows the run.
# The API stand-in (tests/support/anthropic_standin.py) listens on
# 192.0.2.10 (documentation range) of a network namespace this test makes
# for itself, named through ANTHROPIC_BASE_URL; nothing leaves it.
# Claude Code comes from npm (`scripts/test` installs a pinned version when
# the registry answers); without it, or without root for the namespace, the
# test says so and skips.
if [ -z "${RG_TEST_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
  command -v ip >/dev/null; then
  RG_TEST_NETNS=1 exec unshare --net -- bash -c 'ip link set lo up &&
    ip addr add 192.0.2.10/32 dev lo && exec bash "$0"' "$0"
fi
source "$(dirname "$0")/lib.sh"

: "${REFGATE_RUN:?set REFGATE_RUN to the refgate-run binary}"
CLAUDE=$(command -v claude || true)
if [ -z "$CLAUDE" ]; then
  echo "skipped: no claude on PATH (npm install -g @anthropic-ai/claude-code; scripts/test does)"
  exit 77
fi
if [ -z "${RG_TEST_NETNS:-}" ]; then
  echo "skipped: needs root for a network namespace of the test's own (the API stand-in's address)"
  exit 77
fi
mkdir "$T/probe"
if ! "$REFGATE_RUN" -q -d "$T/probe" -- true >"$T/check" 2>&1; then
  echo "skipped: refgate-run cannot confine on this kernel: $(cat "$T/check")"
  exit 77
fi
make_upstream app
write_config "$STANDARD_RULES"
start_gateway
clone app "$T/w"
git -C "$T/w" switch -q -c feature/agent
commit "$T/w" agent.c
git -C "$T/w" switch -q main
commit "$T/w" agent-main.c
MAIN_BEFORE=$(upstream_ref app refs/heads/main)

# The stand-in's certificate; its CA goes into the work tree, so the fork
# (what the run sees) holds it, named relative to the run's directory.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/w/standin-ca.pem" \
  -days 1 -subj "/CN=192.0.2.10" -addext "subjectAltName=IP:192.0.2.10" 2>/dev/null
echo standin-ca.pem >>"$T/w/.git/info/exclude"
KEY=sk-ant-test-$RANDOM$RANDOM
BASH_CMD='git push origin feature/agent 2>&1; git push origin main 2>&1; curl -sS -m 10 -o /dev/null -w "curl %{http_code}\n" https://example.com/ 2>&1; echo bash-done'
python3 "$(dirname "$0")/../support/anthropic_standin.py" --addr 192.0.2.10 \
  --port-file "$T/standin.port" --cert "$T/w/standin-ca.pem" --key "$T/key.pem" \
  --api-key "$KEY" --bash "$BASH_CMD" --log "$T/standin.log" 2>"$T/standin.err" &
STANDIN=$!
trap 'kill $STANDIN 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 1 200); do [ -s "$T/standin.port" ] && break; sleep 0.05; done
[ -s "$T/standin.port" ] || { cat "$T/standin.err"; fail "the API stand-in did not start"; }
BASE=https://192.0.2.10:$(cat "$T/standin.port")

test_claude_pushes_through_the_gateway_with_its_bash_tool() {
  set +e
  (cd "$T/w" && env ANTHROPIC_API_KEY="$KEY" ANTHROPIC_BASE_URL="$BASE" \
    NODE_EXTRA_CA_CERTS=standin-ca.pem CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    DISABLE_AUTOUPDATER=1 timeout 180 "$REFGATE" run --config "$T/refgate.json" -- \
    claude -p "push the feature branch" --allowedTools Bash) >"$T/run.out" 2>&1
  local rc=$?
  set -e
  ! grep -q 'Sanitizer' "$T/run.out" || { cat "$T/run.out"; fail "sanitizer report"; }
  [ "$rc" -eq 0 ] || { cat "$T/run.out" "$T/standin.log"; fail "status $rc"; }
  # The API was reached through the proxy, with the key the run holds.
  assert_contains "$T/standin.log" 'POST /v1/messages?beta=true key=ok'
  grep -q '^refgate run: profile claude: the run holds .*ANTHROPIC_API_KEY' "$T/run.out" ||
    fail "the run did not say it holds ANTHROPIC_API_KEY"
  assert_not_contains "$T/run.out" "refgate run: .*$KEY"
  # What its Bash tool printed inside the sandbox, quoted back by the API.
  assert_contains "$T/run.out" 'TOOL-RESULT-BEGIN'
  assert_contains "$T/run.out" ' * [new branch]      feature/agent -> feature/agent'
  assert_contains "$T/run.out" ' ! [remote rejected] main -> main (policy: main is protected)'
  assert_contains "$T/run.out" 'CONNECT tunnel failed, response 403'
  assert_contains "$T/run.out" 'connection refused by the network allow-list (example.com:443)'
  assert_contains "$T/run.out" 'bash-done'
  [ "$(upstream_ref app refs/heads/feature/agent)" = "$(git -C "$T/w" rev-parse feature/agent)" ] ||
    fail "feature/agent did not land"
  [ "$(upstream_ref app refs/heads/main)" = "$MAIN_BEFORE" ] || fail "main moved"
  assert_contains "$T/run.out" 'the run token is revoked'
}

test_afterwards_the_audit_log_shows_the_run_and_its_token_is_refused() {
  local run; run=$(sed -n 's/^refgate run: run \([^,]*\),.*/\1/p' "$T/run.out")
  [ -n "$run" ] || { cat "$T/run.out"; fail "no run name printed"; }
  audit_rows | jq -r --arg run "$run" 'select(.run == $run) | "\(.ref) \(.decision)"' >"$T/rows"
  assert_contains "$T/rows" 'refs/heads/feature/agent allow'
  assert_contains "$T/rows" 'refs/heads/main deny'
  jq -r --arg run "$run" 'select(.type == "event" and (.detail | contains($run))) | .event' \
    "$T/state/audit.jsonl" | tr '\n' ' ' >"$T/events"
  assert_contains "$T/events" 'token-mint token-revoke'
  "$REFGATE" audit verify --config "$T/refgate.json" >/dev/null 2>&1 || fail "audit verify"
}

run_tests
