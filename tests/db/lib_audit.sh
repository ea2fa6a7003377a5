# For the script tests of the audit chain in PostgreSQL: the gateway test
# environment (tests/integration/lib.sh) with a real PostgreSQL, a config
# whose "state" names it, and the chain read back as its stored bytes and
# recomputed here, independently of refgate's own code.
. "$REFGATE_SRC/tests/integration/lib.sh"
. "$REFGATE_SRC/tests/support/pg.sh"
trap 'pg_stop; cleanup' EXIT
rc=0; pg_start || rc=$?
[ $rc -eq 0 ] || exit $rc

# What a pusher is told while the database is away, whichever check meets it
# first: the run token's revocation, the audit log, the published policy.
DB_DOWN="the run token cannot be checked: the gateway cannot reach its shared state database|the audit log.s database cannot be reached|the published policy could not be read from the database yet"

# write_db_config RULES_JSON: write_config with "state" naming the database.
write_db_config() {
  write_config "$1" "\"state\": {\"postgres\": \"$PG_URL\"}"
}

# pg_kill / pg_back: the database goes away at once (no shutdown) and returns.
pg_kill() { pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null; }
# (pg_restart's stop fails on a stopped server: errexit must not stop there.)
pg_back() { pg_restart 2>/dev/null || true; pg_psql "SELECT 1" >/dev/null; }

# db_dump FILE: the database's chain as lines, each row's exact bytes and a
# newline, in seq order (each row's seq checked to be its place).
db_dump() {
  pg_psql "SELECT seq || ' ' || encode(line, 'hex') FROM audit_records ORDER BY seq" |
    python3 -c '
import sys
out = sys.stdout.buffer
for n, row in enumerate(sys.stdin, 1):
    seq, hexline = row.split()
    if int(seq) != n:
        sys.exit(f"row {n} has seq {seq}")
    out.write(bytes.fromhex(hexline) + b"\n")' >"$1"
}

# chain_ok FILE: FILE's lines chain (seq 1..n, each prev the SHA-256 of the
# line before) up to the head the database holds.
chain_ok() {
  python3 - "$1" $(pg_psql "SELECT seq || ' ' || hash FROM audit_head") <<'PY'
import hashlib, json, sys
path, head_seq, head_hash = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = open(path, 'rb').read().split(b'\n')[:-1]
prev = '0' * 64
for i, line in enumerate(lines, 1):
    rec = json.loads(line)
    if rec['seq'] != i or rec['prev'] != prev:
        sys.exit(f'line {i}: seq {rec["seq"]}, prev does not chain' if rec['seq'] == i else f'line {i}: seq {rec["seq"]}')
    prev = hashlib.sha256(line).hexdigest()
if len(lines) != head_seq or prev != head_hash:
    sys.exit(f'{len(lines)} lines ending in {prev}; the head is {head_seq}:{head_hash}')
print(f'chain ok: {len(lines)} records')
PY
}

# start_gateway_here: start_gateway from a test's subshell, the gateway
# stopped when the subshell exits (it cannot wait for the main shell's
# child: the gateway is gone once it has exited, a zombie counts).
start_gateway_here() {
  start_gateway
  trap 'stop_gateway_here' EXIT
}
stop_gateway_here() {
  local pid=$GW_PID
  stop_gateway
  for _ in $(seq 1 1200); do
    [ -r "/proc/$pid/stat" ] || return 0
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && return 0
    sleep 0.05
  done
  fail "the gateway $pid did not exit"
}
