# `refgate run`'s agent profiles with the real gateway and refgate-run: a
# fake `claude` (and `codex`) in the work tree dumps its environment, writes
# to its config and tries the network through $HTTPS_PROXY. The allowed
# host is a server on a test address (192.0.2.10, documentation range) of a
# network namespace this test makes for itself, listed through
# ANTHROPIC_BASE_URL (the real API hosts' names cannot lead here, and
# refgate-run's proxy refuses a name that leads to loopback); the refusal is
# a host off the list (example.com: refused before any DNS). Nothing of it
# leaves that namespace; without root only the refusal is tested.
if [ -z "${RG_TEST_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
  command -v ip >/dev/null; then
  # The address goes on the namespace's own loopback device: no module
  # (dummy, veth) is needed, and it is still not a loopback-range address.
  RG_TEST_NETNS=1 exec unshare --net -- bash -c 'ip link set lo up &&
    ip addr add 192.0.2.10/32 dev lo && exec bash "$0"' "$0"
fi
source "$(dirname "$0")/lib.sh"

: "${REFGATE_RUN:?set REFGATE_RUN to the refgate-run binary}"
mkdir "$T/probe"
if ! "$REFGATE_RUN" -q -d "$T/probe" -- true >"$T/check" 2>&1; then
  echo "skipped: refgate-run cannot confine on this kernel: $(cat "$T/check")"
  exit 77
fi
make_upstream app
write_config "$STANDARD_RULES"
start_gateway
clone app "$T/w"

# A server on the test namespace's own address, when the test made one.
ADDR=
[ -n "${RG_TEST_NETNS:-}" ] && ADDR=192.0.2.10
HTTP_PID=
if [ -n "$ADDR" ] && command -v python3 >/dev/null; then
  python3 -c '
import http.server, sys
s = http.server.HTTPServer((sys.argv[1], 0), http.server.SimpleHTTPRequestHandler)
open(sys.argv[2] + ".tmp", "w").write(str(s.server_port)); __import__("os").rename(sys.argv[2] + ".tmp", sys.argv[2])
s.serve_forever()' "$ADDR" "$T/http.port" 2>"$T/http.log" &
  HTTP_PID=$!
  for _ in $(seq 1 200); do [ -s "$T/http.port" ] && break; sleep 0.05; done
  HTTP_PORT=$(cat "$T/http.port")
else
  echo "# no network namespace of the test's own (not root) or no python3: only the proxy's refusal is tested"
fi
trap 'kill $HTTP_PID 2>/dev/null || true; cleanup' EXIT

# The real agent's config, which the run must see a copy of and never change.
mkdir -p "$HOME/.claude/projects/other" "$HOME/.codex/sessions"
echo '{"theme": "dark"}' >"$HOME/.claude/settings.json"
echo 'TRANSCRIPT-OF-ANOTHER-PROJECT' >"$HOME/.claude/projects/other/t.jsonl"
echo '{"userID": "u"}' >"$HOME/.claude.json"
echo 'model = "o3"' >"$HOME/.codex/config.toml"
echo 'OLD-CODEX-SESSION' >"$HOME/.codex/sessions/s.jsonl"

# The fake agents live in the work tree: the fork is what the run sees.
mkdir -p "$T/w/bin"
cat >"$T/w/bin/claude" <<SH
#!/bin/sh
env | sort >env.dump
ls -A "\$HOME/.claude" >config.ls
cat "\$HOME/.claude/settings.json" "\$HOME/.claude.json" >config.cat
echo '{"theme": "light"}' >"\$HOME/.claude/settings.json" && echo wrote >>config.cat
echo '{"userID": "changed"}' >"\$HOME/.claude.json" && echo wrote-json >>config.cat
ls "$HOME/.local/state/refgate/runs" >real.ls 2>&1 || echo "the copy's own place unreadable" >real.ls
if [ -n "$ADDR" ]; then
  curl -sS -o /dev/null -w '%{http_code}\n' --proxytunnel -x "\$HTTPS_PROXY" http://$ADDR:${HTTP_PORT:-0}/ >allowed.out 2>&1
fi
curl -sS -o /dev/null -w '%{http_code}\n' https://example.com/ >denied.out 2>&1
curl -sS -o /dev/null -w '%{http_code}\n' --proxytunnel -x "\$HTTPS_PROXY" http://$ADDR:1/ >otherport.out 2>&1
exit 0
SH
cp "$T/w/bin/claude" "$T/w/bin/codex"
sed -i 's|/\.claude\.json|/.codex.json|g; s|/\.claude|/.codex|g; s/settings.json/config.toml/' "$T/w/bin/codex"
cp "$T/w/bin/claude" "$T/w/bin/agent"
chmod +x "$T/w/bin/"*
git -C "$T/w" add bin && git -C "$T/w" commit -q -m agents

rg_run() {
  set +e
  (cd "$T/w" && env -u NODE_EXTRA_CA_CERTS "$@") >"$T/run.out" 2>&1
  RUN_RC=$?
  set -e
  ! grep -q 'Sanitizer' "$T/run.out" || { cat "$T/run.out"; fail "sanitizer report"; }
  FORK=$(sed -n 's/^refgate run: the fork: //p' "$T/run.out")
}

KEY=sk-ant-test-SECRETVALUE
BASE=https://${ADDR:-192.0.2.1}:${HTTP_PORT:-9}

test_claude_by_name_holds_its_key_reaches_its_hosts_and_a_config_copy() {
  rg_run ANTHROPIC_API_KEY=$KEY ANTHROPIC_BASE_URL=$BASE CLAUDE_CODE_X=1 OPENAI_API_KEY=sk-other \
    "$REFGATE" run --config "$T/refgate.json" -- ./bin/claude
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  # Said at start, by name; the value is never printed.
  assert_contains "$T/run.out" 'refgate run: profile claude: the run holds ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_X (from your environment)'
  assert_contains "$T/run.out" "reaches api.anthropic.com:443,console.anthropic.com:443,${BASE#https://} besides the gateway"
  assert_not_contains "$T/run.out" "$KEY"
  # Inside: its variables, the copy, the proxy; not another agent's key.
  assert_contains "$FORK/env.dump" "ANTHROPIC_API_KEY=$KEY"
  assert_contains "$FORK/env.dump" "CLAUDE_CODE_X=1"
  assert_contains "$FORK/env.dump" "HTTPS_PROXY=http://127.0.0.1:"
  assert_not_contains "$FORK/env.dump" "OPENAI_API_KEY"
  # The copy is at the real paths: no variable points elsewhere.
  assert_not_contains "$FORK/env.dump" 'CLAUDE_CONFIG_DIR'
  assert_contains "$T/run.out" "its config is a copy of $HOME/.claude and $HOME/.claude.json, shown at the same paths"
  assert_contains "$FORK/config.cat" '{"theme": "dark"}'
  assert_contains "$FORK/config.cat" '{"userID": "u"}'
  assert_contains "$FORK/config.cat" 'wrote'
  assert_contains "$FORK/config.cat" 'wrote-json'
  assert_not_contains "$FORK/config.ls" 'projects'
  assert_contains "$FORK/real.ls" 'unreadable'
  # The real config is unchanged, and the copy is gone with the run.
  assert_contains "$HOME/.claude/settings.json" '{"theme": "dark"}'
  assert_contains "$HOME/.claude.json" '{"userID": "u"}'
  [ -z "$(ls -A "$HOME/.local/state/refgate/runs")" ] || fail "the copy outlived the run"
  # The network: off-list hosts refused by the proxy, the listed one reached.
  assert_contains "$FORK/denied.out" '403'
  assert_contains "$FORK/otherport.out" '403'
  if [ -n "$HTTP_PID" ]; then
    assert_contains "$FORK/allowed.out" '200'
  fi
}

test_codex_by_option_gets_codex_home_and_its_key_only() {
  rg_run OPENAI_API_KEY=sk-openai-SECRET ANTHROPIC_API_KEY=$KEY \
    "$REFGATE" run --config "$T/refgate.json" --profile codex -- ./bin/agent
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$T/run.out" 'refgate run: profile codex: the run holds OPENAI_API_KEY (from your environment)'
  assert_contains "$T/run.out" 'reaches api.openai.com:443,chatgpt.com:443,auth.openai.com:443 besides the gateway'
  assert_contains "$FORK/env.dump" 'OPENAI_API_KEY=sk-openai-SECRET'
  assert_not_contains "$FORK/env.dump" 'ANTHROPIC_API_KEY'
  assert_not_contains "$FORK/env.dump" "CODEX_HOME"
}

test_codex_by_name_copies_its_config_without_sessions() {
  rg_run "$REFGATE" run --config "$T/refgate.json" -- ./bin/codex
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$T/run.out" 'refgate run: profile codex: the run holds none of its variables'
  assert_contains "$FORK/config.cat" 'model = "o3"'
  assert_contains "$FORK/config.cat" 'wrote'
  assert_not_contains "$FORK/config.ls" 'sessions'
  assert_contains "$HOME/.codex/config.toml" 'model = "o3"'
}

test_a_config_dir_named_by_its_variable_is_copied_and_shown_there() {
  mkdir -p "$HOME/alt-claude"
  echo '{"theme": "alt"}' >"$HOME/alt-claude/settings.json"
  echo '{"userID": "alt"}' >"$HOME/alt-claude/.claude.json"
  cat >"$T/w/bin/altclaude" <<'SH'
#!/bin/sh
env | sort >env.dump
cat "$CLAUDE_CONFIG_DIR/settings.json" "$CLAUDE_CONFIG_DIR/.claude.json" >config.cat
echo changed >"$CLAUDE_CONFIG_DIR/settings.json" && echo wrote >>config.cat
SH
  chmod +x "$T/w/bin/altclaude"
  rg_run CLAUDE_CONFIG_DIR="$HOME/alt-claude" "$REFGATE" run --config "$T/refgate.json" \
    --profile claude -- ./bin/altclaude
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_contains "$FORK/env.dump" "CLAUDE_CONFIG_DIR=$HOME/alt-claude"
  assert_contains "$FORK/config.cat" '{"theme": "alt"}'
  assert_contains "$FORK/config.cat" '{"userID": "alt"}'
  assert_contains "$FORK/config.cat" 'wrote'
  assert_contains "$HOME/alt-claude/settings.json" '{"theme": "alt"}'
}

test_profile_none_passes_no_key_and_no_proxy() {
  rg_run ANTHROPIC_API_KEY=$KEY "$REFGATE" run --config "$T/refgate.json" --profile none -- ./bin/claude
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "status $RUN_RC"; }
  assert_not_contains "$T/run.out" 'profile'
  assert_not_contains "$FORK/env.dump" 'ANTHROPIC_API_KEY'
  assert_not_contains "$FORK/env.dump" 'HTTPS_PROXY'
  assert_not_contains "$FORK/env.dump" 'CLAUDE_CONFIG_DIR'
}

test_an_unknown_profile_is_a_usage_error() {
  rg_run "$REFGATE" run --config "$T/refgate.json" --profile gemini -- ./bin/claude
  [ "$RUN_RC" -eq 2 ] || { cat "$T/run.out"; fail "status $RUN_RC, expected 2"; }
  assert_contains "$T/run.out" 'refgate run: --profile gemini: no such profile (claude, codex, none)'
}

run_tests
