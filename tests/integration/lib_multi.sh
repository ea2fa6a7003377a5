# Shared by the multi-gateway tests (test_multi_*.sh): one real PostgreSQL
# (tests/support/pg.sh), migrated, and N gateways on loopback, each with its
# own state_dir, port and control socket, all with "state": {"postgres":
# PG_URL} and the same local upstreams (lib.sh's file:// bare repos), the
# policy published once from gateway 1's config; optionally Debian's
# haproxy in front of them as a round-robin load balancer. Git environments
# push through a chosen gateway (or the balancer) with a token minted on a
# chosen gateway.
#
#   source "$(dirname "$0")/lib_multi.sh"
#   make_upstream app
#   multi_setup 3 "$RULES"     exits 77 (printed why) without PostgreSQL
#   TOKEN=$(gw_mint 2 local/acme/app)
#   gw_use 1 "$TOKEN"          this shell now pushes through gateway 1
#
# The audit chain is read from the database itself (db_lines, db_chain_ok),
# not only through `refgate audit`, so a reader bug cannot hide a writer bug.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${REFGATE_SRC:?set REFGATE_SRC to the source tree}"
# shellcheck source=tests/support/pg.sh
. "$REFGATE_SRC/tests/support/pg.sh"

GW_N=0
# note TEXT: a figure for the log even from a test that passes (run_tests
# keeps a passing test's own output to itself).
exec 3>&1
note() { echo "# $*" >&3; }

multi_cleanup() {
  local i
  for ((i = 1; i <= GW_N; i++)); do gw_stop "$i"; done
  [ ! -s "$T/lb.pid" ] || { kill -TERM "$(cat "$T/lb.pid")" 2>/dev/null; wait 2>/dev/null || true; }
  pg_stop
  rm -rf "$T"
}
trap multi_cleanup EXIT

gw_dir() { echo "$T/gw$1"; }
gw_cfg() { echo "$T/gw$1/refgate.json"; }

# gw_write_config I RULES_JSON: gateway I's config (MULTI_CONNECTIONS:
# state.connections, default 8, so 32 concurrent pushes seldom wait).
gw_write_config() {
  mkdir -p "$(gw_dir "$1")"
  cat >"$(gw_cfg "$1")" <<JSON
{
  "listen": "127.0.0.1:0",
  "state_dir": "state",
  "state": {"postgres": "$PG_URL", "connections": ${MULTI_CONNECTIONS:-8}},
  "upstreams": [{"host": "local", "url": "file://$T/upstream"}],
  "rules": $2
}
JSON
}

# Gateways are named by number; each one's pid and URL live in files in its
# directory, so a test (run_tests runs each in a subshell) may kill and
# restart one and the next test and the cleanup still find it.
gw_pid() { cat "$(gw_dir "$1")/pid" 2>/dev/null || true; }
gw_url() { cat "$(gw_dir "$1")/state/url"; }

# gw_start I: start gateway I and wait until it listens.
gw_start() {
  local d pid; d=$(gw_dir "$1")
  rm -f "$d/state/url"
  "$REFGATE" serve --config "$(gw_cfg "$1")" 2>>"$d/gateway.log" &
  pid=$!
  # Not this shell's job: a kill prints no "Killed" line, wherever it is.
  disown "$pid"
  echo "$pid" >"$d/pid"
  for _ in $(seq 1 400); do
    [ -s "$d/state/url" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$d/gateway.log"; fail "gateway $1 exited"; return 1; }
    sleep 0.05
  done
  cat "$d/gateway.log"; fail "gateway $1 did not listen"
}

# gw_stop I [SIGNAL]: stop gateway I (SIGTERM: a clean stop; SIGKILL: its
# lease is left to expire) and wait until it is gone.
gw_stop() {
  local pid; pid=$(gw_pid "$1")
  [ -n "$pid" ] || return 0
  kill "-${2:-TERM}" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  rm -f "$(gw_dir "$1")/pid"
}
gw_kill() { gw_stop "$1" KILL; }

# multi_setup N RULES_JSON: PostgreSQL, the schema, N configs, the
# policy published from gateway 1's, N gateways serving. Exits 77 with the
# reason when PostgreSQL cannot run here.
multi_setup() {
  local n=$1 i rc=0
  pg_start || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
  GW_N=$n
  for ((i = 1; i <= n; i++)); do gw_write_config "$i" "$2"; done
  "$REFGATE" db migrate --config "$(gw_cfg 1)" >"$T/migrate.out" 2>&1 ||
    { cat "$T/migrate.out"; fail "db migrate"; exit 1; }
  multi_publish 1
  for ((i = 1; i <= n; i++)); do gw_start "$i" || exit 1; done
}

# multi_publish I: publish gateway I's rules as the team's policy (gateways
# on a database enforce only a published one).
multi_publish() {
  "$REFGATE" policy publish --config "$(gw_cfg "$1")" >"$T/publish.out" 2>&1 ||
    { cat "$T/publish.out"; fail "policy publish"; exit 1; }
}

# gw_mint I REPO... [-- TOKEN_MINT_OPTIONS]: a run token minted on gateway I.
gw_mint() {
  local i=$1 args=(); shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=(--repo "$1"); shift; done
  [ $# -eq 0 ] || shift
  "$REFGATE" token mint --config "$(gw_cfg "$i")" "${args[@]}" "$@"
}

# gw_use I|lb TOKEN: this shell's pushes go through gateway I (or the
# balancer) with TOKEN, as lib.sh's use_token does for one gateway.
gw_use() {
  if [ "$1" = lb ]; then GW=$(cat "$T/lb.url"); else GW=$(gw_url "$1"); fi
  use_token "$2"
}

# lb_start: haproxy (its URL in $T/lb.url) round-robin over every gateway,
# per request, so a push's advertisement and its POST usually reach
# different gateways; each request it passed on is a line of
# $T/haproxy.log naming the gateway (gateways/gwI). Returns 1 after
# printing why when haproxy is not installed.
lb_start() {
  command -v haproxy >/dev/null || { echo "haproxy is not installed (Debian package haproxy): no load balancer"; return 1; }
  local port i servers=
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for ((i = 1; i <= GW_N; i++)); do
    servers+="  server gw$i $(gw_url "$i" | sed 's|^http://||')"$'\n'
  done
  cat >"$T/haproxy.cfg" <<CFG
global
  maxconn 512
  log stdout format raw local0 info
defaults
  mode http
  log global
  option httplog
  option http-server-close
  timeout connect 5s
  timeout client 120s
  timeout server 120s
frontend push
  bind 127.0.0.1:$port
  default_backend gateways
backend gateways
  balance roundrobin
$servers
CFG
  haproxy -db -f "$T/haproxy.cfg" >"$T/haproxy.log" 2>&1 &
  echo $! >"$T/lb.pid"
  echo "http://127.0.0.1:$port" >"$T/lb.url"
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && return 0
    sleep 0.05
  done
  cat "$T/haproxy.log"; fail "haproxy did not listen"
}

# wait_until SECONDS CMD: poll CMD (eval'd here, so it sees the caller's
# locals but not its positional parameters) every 50 ms until it holds;
# fails after SECONDS.
wait_until() {
  local end=$((SECONDS + $1))
  while ! eval "$2"; do
    [ "$SECONDS" -lt "$end" ] || { fail "timed out after $1 s waiting for: $2"; return 1; }
    sleep 0.05
  done
}

# ---- PostgreSQL outages ----------------------------------------------------

# pg_down / pg_up: stop PostgreSQL (fast shutdown: sessions are cut) and
# start the same cluster again (nothing when it runs).
pg_down() { pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null; }
pg_up() {
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" status >/dev/null 2>&1 && return 0
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-k $PG_DIR -c listen_addresses= -c max_connections=300" start >/dev/null
}

# ---- the audit chain, read from the database -------------------------------

# db_lines: every stored record line, by seq, one a line (the JSON the
# chain hashes).
db_lines() { pg_psql "SELECT convert_from(line, 'UTF8') FROM audit_records ORDER BY seq"; }

# db_rows: as lib.sh's audit_rows, from the database: one JSON object per
# ref decision with its outcome filled in from its outcome record.
db_rows() {
  db_lines | jq -c -s '([.[] | select(.type == "outcome") | {key: (.decision_seq | tostring), value: .outcome}]
             | from_entries) as $out
    | .[] | select(.type == "decision")
    | if .outcome == null and $out[.seq | tostring] != null then .outcome = $out[.seq | tostring]
      else . end'
}

# db_chain_ok: recompute the chain from the stored bytes: seq 1..N without
# a gap, each prev the SHA-256 of the previous line's bytes, the seq column
# equal to the line's, and the head row naming the last line.
db_chain_ok() {
  pg_psql "SELECT seq || ' ' || encode(line, 'hex') FROM audit_records ORDER BY seq" >"$T/chain.hex"
  pg_psql "SELECT seq || ' ' || hash FROM audit_head" >"$T/chain.head"
  python3 - "$T/chain.hex" "$T/chain.head" <<'PY'
import hashlib, json, sys
prev, n = "0" * 64, 0
for row in open(sys.argv[1]):
    seq, hexline = row.split()
    line = bytes.fromhex(hexline)
    rec = json.loads(line)
    n += 1
    if int(seq) != n or rec["seq"] != n:
        sys.exit(f"chain: row {seq} (line seq {rec['seq']}) where seq {n} was due")
    if rec["prev"] != prev:
        sys.exit(f"chain: seq {n}: prev {rec['prev']} is not the hash of seq {n - 1}")
    prev = hashlib.sha256(line).hexdigest()
if n == 0:
    sys.exit("chain: the database holds no record (the gateways did not write their audit there)")
head_seq, head_hash = open(sys.argv[2]).read().split()
if int(head_seq) != n or head_hash != prev:
    sys.exit(f"chain: head row {head_seq}:{head_hash} but the last line is {n}:{prev}")
print(f"chain: {n} records, contiguous, head {n}:{prev[:12]}")
PY
}

# multi_verify: the chain recomputed from the database and `refgate audit
# verify` through gateway I's config (default 1) both pass.
multi_verify() {
  db_chain_ok >"$T/chain.out" 2>&1 || { cat "$T/chain.out"; fail "the chain in the database"; return 1; }
  "$REFGATE" audit verify --config "$(gw_cfg "${1:-1}")" >"$T/verify.out" 2>&1 ||
    { cat "$T/verify.out"; fail "refgate audit verify"; return 1; }
}
