# Shared by the tests that flood a gateway with raw connections or bodies
# (test_conn_limits.sh, test_bombs.sh), after lib.sh: the raw client, the
# background holders a test starts, and a gateway restarted with limits.
FLOOD=(python3 "${REFGATE_SRC:-$(dirname "${BASH_SOURCE[0]}")/../..}/tests/support/conn_flood.py")
HOLDERS=()

extra_stop() {
  local p
  for p in "${HOLDERS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${HOLDERS[@]}"; do wait "$p" 2>/dev/null || true; done
  HOLDERS=()
}
# The figures a test measured are shown whatever the outcome.
trap 'extra_stop; cat "$T/figures" 2>/dev/null || true; cleanup' EXIT

# restart_with LIMITS_JSON: a gateway with these limits; sets GW, PORT, TOKEN.
# Each test runs in a subshell of its own: its gateway and holders go with it.
restart_with() {
  trap 'extra_stop; stop_gateway' EXIT
  stop_gateway
  write_config "$STANDARD_RULES" "\"limits\": $1"
  start_gateway
  PORT=${GW##*:}
  TOKEN=$(mint local/acme/app)
}
