# Approvals shared through PostgreSQL, with three real gateways (A, B, C)
# on one database and one local upstream, and the real git client: an
# update asked for through A is approved through B's control socket
# (`refgate approve --config B`) and lands through C, once; a push held on
# A is released by a decision made on B, and its record says who decided;
# an approved update pushed through two gateways at once lands once (one
# claims the approval, the other is told it is in use); a claim given back
# when upstream refuses lets the next push use the approval; `refgate db
# import` moves a file store's live approvals into the database and
# refuses duplicates; without the database a push that asks is refused,
# saying why, and the gateways recover when it returns.
source "$(dirname "$0")/lib.sh"
. "$REFGATE_SRC/tests/support/pg.sh"

GWS="a b c"
declare -A PIDS URLS
# Every gateway started (tests run in subshells: their pids are in files).
stop_all() {
  local f pid
  for f in "$T"/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -f "$f"
  done
}
trap 'stop_all; pg_stop; rm -rf "$T"' EXIT
rc=0; pg_start || rc=$?
[ $rc -eq 0 ] || exit $rc

RULES='[
  {"name": "release-tags", "refs": ["refs/tags/v*"], "actions": ["create"], "effect": "ask",
   "reason": "release tags need a maintainer"},
  {"name": "held-tags", "refs": ["refs/tags/h*"], "actions": ["create"], "effect": "ask",
   "reason": "held for a maintainer", "hold": 30}
]'

# config G: gateway G's own state_dir, the shared database.
config() {
  mkdir -p "$T/$1/state"
  cat >"$T/$1/refgate.json" <<JSON
{
  "listen": "127.0.0.1:0",
  "state_dir": "state",
  "state": {"postgres": "$PG_URL"},
  "upstreams": [{"host": "local", "url": "file://$T/upstream"}],
  "rules": $RULES
}
JSON
}

start() {
  local g=$1
  rm -f "$T/$g/state/url"
  "$REFGATE" serve --config "$T/$g/refgate.json" 2>>"$T/$g.log" &
  PIDS[$g]=$!
  echo "${PIDS[$g]}" >"$T/$g.pid"
  for _ in $(seq 1 200); do
    [ -s "$T/$g/state/url" ] && break
    kill -0 "${PIDS[$g]}" 2>/dev/null || { cat "$T/$g.log"; fail "gateway $g exited"; return 1; }
    sleep 0.05
  done
  URLS[$g]=$(cat "$T/$g/state/url")
}

make_upstream app
for g in $GWS; do config $g; done
"$REFGATE" db migrate --config "$T/a/refgate.json" >/dev/null
"$REFGATE" policy publish --config "$T/a/refgate.json" >/dev/null
TOKEN=$("$REFGATE" token mint --config "$T/a/refgate.json" --repo local/acme/app)
# One run token for all three: A's key is in the database they share.
for g in $GWS; do start $g; done
GW=${URLS[a]}
use_token "$TOKEN"
clone app "$T/w"

# push G OUT ARGS...: git push through gateway G; its output in OUT. Never fails.
push() {
  local g=$1 out=$2; shift 2
  GIT_CONFIG_KEY_0="url.${URLS[$g]}/local/.pushInsteadOf" git -C "$T/w" push origin "$@" \
    >"$out" 2>&1 || true
}
id_in() { grep -o 'refgate approve [a-z2-7]\{10\}' "$1" | head -1 | cut -d' ' -f3; }
# db_records [WHERE]: the shared audit chain's records as stored.
db_records() { pg_psql "SELECT convert_from(line, 'UTF8') FROM audit_records ${1:-} ORDER BY seq"; }
# events G EVENT: the details of the audit events EVENT gateway G appended.
events() {
  local id
  id=$(pg_psql "SELECT id FROM gateways WHERE pid = ${PIDS[$1]} ORDER BY started DESC LIMIT 1")
  db_records "WHERE gateway = '$id'" | jq -r "select(.event == \"$2\") | .detail"
}
all_events() { db_records | jq -r "select(.event == \"$1\") | .detail"; }
row_state() { pg_psql "SELECT state FROM approvals WHERE id = '$1'"; }

test_asked_on_a_approved_on_b_landed_through_c_once() {
  local id
  commit "$T/w" release.txt
  git -C "$T/w" tag v1
  push a "$T/p1" v1
  id=$(id_in "$T/p1")
  [ -n "$id" ] || { cat "$T/p1"; fail "no approval asked on A"; }
  # B and C see it: the approvals are the database's.
  "$REFGATE" approvals --config "$T/b/refgate.json" --json >"$T/l1"
  jq -e --arg id "$id" 'select(.id == $id) | .state == "pending"' "$T/l1" >/dev/null ||
    { cat "$T/l1"; fail "B does not list A's approval"; }
  # B shows what A's push kept: the pack is in the database.
  "$REFGATE" approvals show --config "$T/b/refgate.json" --json "$id" >"$T/s1"
  jq -e '[.commits[].subject] == ["change release.txt"]' "$T/s1" >/dev/null || { cat "$T/s1"; fail "show on B"; }
  "$REFGATE" approve --config "$T/b/refgate.json" "$id" >"$T/a1" 2>&1 || { cat "$T/a1"; fail "approve on B"; }
  events b approval-grant | grep -q "approval $id granted by peer uid" || fail "B did not audit the grant"
  push c "$T/p2" v1
  assert_contains "$T/p2" '* [new tag]         v1 -> v1'
  [ "$(upstream_ref app refs/tags/v1)" = "$(git -C "$T/w" rev-parse v1)" ] || fail "v1 did not land"
  events c approval-consume | grep -q "approval $id used by push" || fail "C did not audit the consume"
  [ "$(all_events approval-consume | grep -c "approval $id ")" = 1 ] || fail "consumed more than once"
  [ "$(row_state "$id")" = consumed ] || fail "the row is $(row_state "$id"), not consumed"
  # The same update again (the tag removed behind the gateways' backs) asks again, anywhere.
  git --git-dir="$T/upstream/acme/app.git" update-ref -d refs/tags/v1
  push a "$T/p3" v1
  [ -n "$(id_in "$T/p3")" ] && [ "$(id_in "$T/p3")" != "$id" ] || { cat "$T/p3"; fail "the used approval passed again"; }
  [ -z "$(upstream_ref app refs/tags/v1)" ] || fail "v1 landed twice on one approval"
}

test_a_push_held_on_a_is_released_by_a_decision_on_b() {
  local id= pid start
  commit "$T/w" held.txt
  git -C "$T/w" tag h1
  start=$(date +%s)
  push a "$T/h1" h1 &
  pid=$!
  for _ in $(seq 1 200); do
    id=$("$REFGATE" approvals --config "$T/b/refgate.json" --json | jq -r 'select(.ref == "refs/tags/h1") | .id')
    [ -n "$id" ] && break
    sleep 0.1
  done
  [ -n "$id" ] || { kill $pid; fail "B never saw the held push's approval"; }
  "$REFGATE" approve --config "$T/b/refgate.json" "$id" >/dev/null
  wait $pid
  [ $(($(date +%s) - start)) -lt 25 ] || fail "the push waited out its hold"
  assert_contains "$T/h1" "remote: refgate: waiting up to 30 s for approval $id"
  assert_contains "$T/h1" '* [new tag]         h1 -> h1'
  # A's decision record names who decided, on which gateway.
  db_records | jq -c 'select(.ref == "refs/tags/h1" and .decision == "allow")' >"$T/rows"
  assert_contains "$T/rows" "approved by uid $(id -u) ($(id -un)) via control socket of gateway "
  assert_contains "$T/rows" "(approval $id)"
}

# ask_and_approve TAG: the approval id of TAG's creation, asked on A and approved on B.
ask_and_approve() {
  local id
  git -C "$T/w" tag "$1"
  push a "$T/ask-$1" "$1"
  id=$(id_in "$T/ask-$1")
  [ -n "$id" ] || { cat "$T/ask-$1"; fail "no approval for $1"; }
  "$REFGATE" approve --config "$T/b/refgate.json" "$id" >/dev/null
  echo "$id"
}

test_the_same_approved_update_pushed_through_two_gateways_at_once_lands_once() {
  local id hook=$T/upstream/acme/app.git/hooks/pre-receive pa pc
  commit "$T/w" race.txt
  id=$(ask_and_approve v2)
  # A slow upstream keeps the first push's claim held while the second arrives.
  printf '#!/bin/sh\nsleep 2\n' >"$hook"; chmod +x "$hook"
  push a "$T/ra" v2 & pa=$!
  push c "$T/rc" v2 & pc=$!
  wait $pa; wait $pc
  rm -f "$hook"
  [ "$(upstream_ref app refs/tags/v2)" = "$(git -C "$T/w" rev-parse v2)" ] || fail "v2 did not land"
  [ "$(grep -l '\* \[new tag\] *v2 -> v2' "$T/ra" "$T/rc" | wc -l)" = 1 ] ||
    { cat "$T/ra" "$T/rc"; fail "not exactly one push landed"; }
  cat "$T/ra" "$T/rc" >"$T/both"
  assert_contains "$T/both" "approval $id cannot be used now: approval $id is being used by another push"
  [ "$(all_events approval-consume | grep -c "approval $id ")" = 1 ] || fail "not consumed exactly once"
  [ "$(row_state "$id")" = consumed ] || fail "the row is $(row_state "$id")"
}

test_a_claim_is_given_back_when_upstream_refuses_the_ref() {
  local id hook=$T/upstream/acme/app.git/hooks/pre-receive
  commit "$T/w" refused.txt
  id=$(ask_and_approve v3)
  printf '#!/bin/sh\necho no >&2\nexit 1\n' >"$hook"; chmod +x "$hook"
  push a "$T/f1" v3
  rm -f "$hook"
  [ -z "$(upstream_ref app refs/tags/v3)" ] || fail "v3 landed past a refusing upstream"
  [ "$(pg_psql "SELECT state || '/' || claim FROM approvals WHERE id = '$id'")" = "approved/" ] ||
    fail "the claim was not given back: $(pg_psql "SELECT state, claim FROM approvals WHERE id = '$id'")"
  push c "$T/f2" v3
  assert_contains "$T/f2" '* [new tag]         v3 -> v3'
}

# Over the wire (tests/support/rawpush.py): what git never sends.
RAW="python3 $REFGATE_SRC/tests/support/rawpush.py"
ZERO=0000000000000000000000000000000000000000

test_over_the_wire_a_cut_pack_through_a_gives_the_claim_back_and_c_lands_it() {
  local new id
  commit "$T/w" wire.txt
  new=$(git -C "$T/w" rev-parse HEAD)
  $RAW "${URLS[a]}/local/acme/app.git" "$TOKEN" "$ZERO:$new:refs/tags/v-wire" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" >"$T/w1"
  id=$(id_in "$T/w1")
  [ -n "$id" ] || { cat "$T/w1"; fail "no approval asked over the wire"; }
  "$REFGATE" approve --config "$T/b/refgate.json" "$id" >/dev/null
  # Forwarded on the approval's claim, the pack never completes: nothing
  # lands and the claim goes back when the request ends.
  $RAW "${URLS[a]}/local/acme/app.git" "$TOKEN" "$ZERO:$new:refs/tags/v-wire" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" --cut 30 >"$T/w2" || true
  [ -z "$(upstream_ref app refs/tags/v-wire)" ] || fail "a cut pack landed"
  for _ in $(seq 1 100); do
    [ "$(pg_psql "SELECT state || '/' || claim FROM approvals WHERE id = '$id'")" = "approved/" ] && break
    sleep 0.05
  done
  [ "$(pg_psql "SELECT state || '/' || claim FROM approvals WHERE id = '$id'")" = "approved/" ] ||
    fail "the claim of a push that did not land was kept: $(pg_psql "SELECT state, claim FROM approvals WHERE id = '$id'")"
  $RAW "${URLS[c]}/local/acme/app.git" "$TOKEN" "$ZERO:$new:refs/tags/v-wire" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" >"$T/w3"
  assert_contains "$T/w3" "ok refs/tags/v-wire"
  [ "$(upstream_ref app refs/tags/v-wire)" = "$new" ] || fail "the approved update did not land"
  [ "$(row_state "$id")" = consumed ] || fail "the row is $(row_state "$id")"
}

test_without_the_database_an_asked_push_is_refused_and_it_recovers() {
  local id
  commit "$T/w" down.txt
  git -C "$T/w" tag v4
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
  push a "$T/d1" v4
  # The run token's revocation check meets the missing database first.
  assert_contains "$T/d1" "remote: refgate: the run token cannot be checked: the gateway cannot reach its shared state database"
  ! "$REFGATE" approvals --config "$T/b/refgate.json" >"$T/d2" 2>&1 || fail "listed without a database"
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-k $PG_DIR -c listen_addresses= -c max_connections=300" start >/dev/null
  [ -z "$(upstream_ref app refs/tags/v4)" ] || fail "v4 landed without the database"
  push a "$T/d3" v4
  id=$(id_in "$T/d3")
  [ -n "$id" ] || { cat "$T/d3"; fail "the gateway did not recover"; }
}

test_db_import_moves_a_file_stores_live_approvals_and_refuses_duplicates() {
  local id1 id2 out=$T/imp
  # A gateway without the database makes two approvals in its files.
  mkdir -p "$T/f/state"
  jq 'del(.state)' "$T/a/refgate.json" >"$T/f/refgate.json"
  # A's signing key, which f publishes to its own file store, so A's token verifies.
  cp -p "$T/a/state/token-ed25519.key" "$T/f/state/token-ed25519.key"
  start f
  commit "$T/w" file1.txt; git -C "$T/w" tag v10
  commit "$T/w" file2.txt; git -C "$T/w" tag v11
  push f "$T/i1" v10; id1=$(id_in "$T/i1")
  push f "$T/i2" v11; id2=$(id_in "$T/i2")
  "$REFGATE" approve --config "$T/f/refgate.json" "$id1" >/dev/null
  [ -s "$T/f/state/approvals/$id2.pack" ] || fail "no kept pack in the file store"
  # Refused while that gateway holds its store.
  jq --arg u "$PG_URL" '.state = {postgres: $u}' "$T/f/refgate.json" >"$T/f/db.json"
  ! "$REFGATE" db import --config "$T/f/db.json" >"$out" 2>&1 || fail "imported under a running gateway"
  grep -qE "stop (it|the gateway) first" "$out" || { cat "$out"; fail "no reason for the refusal"; }
  kill -TERM "${PIDS[f]}"; wait "${PIDS[f]}" || true; rm -f "$T/f.pid"
  # The database's chain is in use: only the approvals are imported.
  ! "$REFGATE" db import --config "$T/f/db.json" >"$out" 2>&1 || fail "a file log went onto a chain in use"
  assert_contains "$out" "the database's audit chain is not empty"
  ! "$REFGATE" db import --config "$T/f/db.json" --only nothing >"$out" 2>&1 || fail "an unknown step"
  assert_contains "$out" "no step 'nothing'"
  "$REFGATE" db import --config "$T/f/db.json" --only approvals >"$out" 2>&1 || { cat "$out"; fail "import"; }
  assert_contains "$out" "approvals: 2 imported, 0 refused"
  [ "$(row_state "$id1")" = approved ] && [ "$(row_state "$id2")" = pending ] || fail "states"
  [ "$(pg_psql "SELECT octet_length(pack) FROM approval_packs WHERE id = '$id2'")" = \
    "$(stat -c %s "$T/f/state/approvals/$id2.pack")" ] || fail "the kept pack did not come along"
  # Again: everything is there already, so everything is refused and said.
  ! "$REFGATE" db import --config "$T/f/db.json" --only approvals >"$out" 2>&1 || fail "a second import succeeded"
  assert_contains "$out" "refused: approval $id1"
  assert_contains "$out" "approvals: 0 imported, 2 refused"
  # The imported approval lets its update land through the shared gateways.
  push c "$T/i3" v10
  assert_contains "$T/i3" '* [new tag]         v10 -> v10'
}

run_tests
