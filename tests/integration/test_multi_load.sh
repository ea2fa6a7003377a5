# Three gateways on one database under concurrent load: 32 real git
# clients per gateway (96 at once; a quarter through haproxy round-robin
# when it is installed, so a push's advertisement and its POST usually
# reach different gateways), each token minted on another gateway than the
# one it pushes through, three pushes each mixing allowed and denied refs
# (create, fast-forward, force, delete). Then: zero wrong decisions (every
# ref's upstream state is what the rules allow), exactly one decision
# record per ref update sent, each allowed one forwarded, each naming the
# digest of the one published policy, the balancer passed advertisements
# and pushes to every gateway, seq contiguous, the chain recomputed from
# the database and `refgate audit verify` pass.
#
#   MULTI_CLIENTS=N (per gateway, default 32)
source "$(dirname "$0")/lib_multi.sh"

PER_GW=${MULTI_CLIENTS:-32}
N=$((3 * PER_GW))
make_upstream app
multi_setup 3 "$STANDARD_RULES"
BASE=$(upstream_ref app main)
LB=0
if lb_start >"$T/lb.why"; then LB=1; else note "$(cat "$T/lb.why")"; fi

# client K: clone, then three pushes through its gateway with a token of
# another gateway's; writes the ref updates it sent and the decision each
# should get to $T/c$K/expect ("ref old new decision"), and the upstream
# state it should leave to $T/c$K/state ("ref id", "-" for none).
client() {
  local k=$1 gw tok d=$T/c$1 c1 c2 c3 z=0000000000000000000000000000000000000000
  gw=$((k % 3 + 1))
  [ "$LB" = 1 ] && [ $((k % 4)) = 3 ] && gw=lb
  tok=$(cat "$T/tok$k")
  clone app "$d/w"
  gw_use "$gw" "$tok"
  git -C "$d/w" switch -q -c "feature/c$k"
  commit "$d/w" "c$k.txt"
  c1=$(git -C "$d/w" rev-parse HEAD)
  # Mixed: a new branch and a tag (allowed), main moved and a branch no
  # rule allows (denied).
  timeout 300 git -C "$d/w" push origin "feature/c$k" "HEAD:refs/tags/v$k" HEAD:main \
    "HEAD:refs/heads/other/c$k" >"$d/out1" 2>&1 || true
  commit "$d/w" "c$k.txt"
  c2=$(git -C "$d/w" rev-parse HEAD)
  # A fast-forward (allowed) and a branch no rule allows.
  timeout 300 git -C "$d/w" push origin "feature/c$k" "HEAD:refs/heads/nope/c$k" >"$d/out2" 2>&1 || true
  git -C "$d/w" reset -q --hard "$c1"
  commit "$d/w" "diverged-$k.txt"
  c3=$(git -C "$d/w" rev-parse HEAD)
  # A force (features allow no force) and a tag deleted (no rule allows it).
  timeout 300 git -C "$d/w" push --force origin "feature/c$k" ":refs/tags/v$k" >"$d/out3" 2>&1 || true
  cat >"$d/expect" <<EOF
refs/heads/feature/c$k $z $c1 allow
refs/tags/v$k $z $c1 allow
refs/heads/main $BASE $c1 deny
refs/heads/other/c$k $z $c1 deny
refs/heads/feature/c$k $c1 $c2 allow
refs/heads/nope/c$k $z $c2 deny
refs/heads/feature/c$k $c2 $c3 deny
refs/tags/v$k $c1 $z deny
EOF
  cat >"$d/state" <<EOF
refs/heads/feature/c$k $c2
refs/tags/v$k $c1
refs/heads/other/c$k -
refs/heads/nope/c$k -
EOF
}

test_concurrent_clients_through_three_gateways_get_every_decision_right() {
  local k t0 pids=()
  for ((k = 0; k < N; k++)); do
    mkdir -p "$T/c$k"
    gw_mint $(((k + 1) % 3 + 1)) local/acme/app -- --run "c$k" >"$T/tok$k"
  done
  t0=${EPOCHREALTIME/./}
  for ((k = 0; k < N; k++)); do
    client "$k" >"$T/c$k/log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  note "$N clients x 3 pushes through 3 gateways$([ "$LB" = 1 ] && echo " (and haproxy)") in $(( (${EPOCHREALTIME/./} - t0) / 1000 )) ms"
  cat "$T"/c*/expect >"$T/expect"
  [ "$(wc -l <"$T/expect")" = $((8 * N)) ] || { cat "$T"/c*/log | head -40; fail "a client did not finish"; }
  # Upstream holds exactly what the rules allow.
  local ref want got wrong=0
  [ "$(upstream_ref app main)" = "$BASE" ] || { fail "main moved"; wrong=1; }
  while read -r ref want; do
    got=$(upstream_ref app "$ref"); got=${got:--}
    [ "$got" = "$want" ] || { echo "wrong: $ref is $got, the rules leave it at $want"; wrong=$((wrong + 1)); }
  done < <(cat "$T"/c*/state)
  [ "$wrong" = 0 ] || { head -30 "$T/c0/out1" "$T/c0/out2" "$T/c0/out3"; fail "$wrong refs upstream are not what the rules allow"; }
}

test_one_decision_record_per_ref_update_each_allowed_one_forwarded_under_the_published_policy() {
  db_rows >"$T/rows"
  "$REFGATE" policy current --config "$(gw_cfg 2)" >"$T/current" 2>&1 || { cat "$T/current"; fail "policy current"; }
  python3 - "$T/expect" "$T/rows" "$(grep -o 'sha256:[0-9a-f]\{64\}' "$T/current")" <<'PY'
import collections, json, sys
expect = collections.Counter(tuple(l.split()) for l in open(sys.argv[1]))
rows = [json.loads(l) for l in open(sys.argv[2])]
digest = sys.argv[3]
got = collections.Counter((r["ref"], r["old"], r["new"], r["decision"]) for r in rows)
bad = 0
for key in expect.keys() | got.keys():
    if expect[key] != got[key]:
        bad += 1
        if bad <= 20:
            print(f"{' '.join(key)}: {got[key]} decision records, {expect[key]} expected")
for r in rows:
    if r.get("policy") != digest:
        bad += 1
        if bad <= 20:
            print(f"seq {r['seq']} was decided by policy {r.get('policy')}, not the published {digest}")
    want = "forwarded: ok" if r["decision"] == "allow" else "rejected"
    if r.get("outcome") != want:
        bad += 1
        if bad <= 20:
            print(f"seq {r['seq']} {r['ref']} {r['decision']}: outcome {r.get('outcome')!r}, expected {want!r}")
print(f"{len(rows)} decision records for {sum(expect.values())} ref updates sent")
sys.exit(1 if bad else 0)
PY
}

test_the_balancer_spread_advertisements_and_pushes_over_the_gateways() {
  [ "$LB" = 1 ] || { note "no haproxy: nothing to check"; return 0; }
  local i kind posts=0
  # Round robin per request: which gateway gets which kind depends on how
  # the clients' requests interleave, so every gateway must have served
  # some, and the pushes (POSTs) must have gone to more than one.
  for i in 1 2 3; do
    grep -qF "gateways/gw$i " "$T/haproxy.log" ||
      { tail -5 "$T/haproxy.log"; fail "haproxy sent nothing to gateway $i"; }
    # (grep >/dev/null, not -q: under pipefail the first grep must not die of SIGPIPE.)
    if grep -F "gateways/gw$i " "$T/haproxy.log" |
      grep -F "POST /local/acme/app.git/git-receive-pack" >/dev/null; then
      posts=$((posts + 1))
    fi
  done
  [ "$posts" -ge 2 ] || { tail -5 "$T/haproxy.log"; fail "the pushes through haproxy went to $posts gateway(s)"; }
  note "haproxy passed on $(grep -c 'gateways/gw' "$T/haproxy.log") requests; pushes reached $posts gateways"
}

test_the_chain_is_contiguous_and_verifies() {
  multi_verify
  note "$(cat "$T/chain.out")"
}

run_tests
