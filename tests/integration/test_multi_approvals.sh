# Approvals across three gateways on one database: an update asked on
# gateway A is approved through gateway B's CLI (`refgate approve --config
# B ID`, B's control socket) and lands through gateway C, once; a push held
# on A is released by an approval made through B; the same approved update
# pushed through two gateways at once lands once and consumes the approval
# once; every step is one event in the one chain, which verifies.
source "$(dirname "$0")/lib_multi.sh"

RULES='[
  {"name": "features", "refs": ["refs/heads/feature/**"], "actions": ["create", "update"],
   "effect": "allow"},
  {"name": "releases", "refs": ["refs/heads/release/*"], "actions": ["create"], "effect": "ask",
   "reason": "a release needs a maintainer"},
  {"name": "held", "refs": ["refs/heads/held/*"], "actions": ["create"], "effect": "ask",
   "reason": "held for a maintainer", "hold": 60}
]'
make_upstream app
multi_setup 3 "$RULES"
TOKEN=$(gw_mint 1 local/acme/app)
clone app "$T/w"
git -C "$T/w" switch -q -c work
commit "$T/w" release.txt

# push_via I OUT REFSPEC...: git push through gateway I; output in OUT; never fails.
push_via() {
  local i=$1 out=$2; shift 2
  (gw_use "$i" "$TOKEN"; git -C "$T/w" push origin "$@" >"$out" 2>&1) || true
}
id_in() { grep -o 'refgate approve [a-z2-7]\{10\}' "$1" | head -1 | cut -d' ' -f3; }
# events NAME: the details of the chain's events called NAME, from the database.
events() { db_lines | jq -r --arg e "$1" 'select(.type == "event" and .event == $e) | .detail'; }

test_an_update_asked_on_a_is_approved_through_b_and_lands_through_c() {
  local id
  push_via 1 "$T/a.out" HEAD:refs/heads/release/1
  assert_contains "$T/a.out" "(policy: a release needs a maintainer (approval needed: refgate approve "
  id=$(id_in "$T/a.out")
  [ -n "$id" ] || fail "no approval id"
  [ -z "$(upstream_ref app release/1)" ] || fail "it landed before the approval"
  # Gateway C lists it as pending: the approval is the team's, not A's.
  "$REFGATE" approvals --config "$(gw_cfg 3)" --json >"$T/list3" 2>&1 || { cat "$T/list3"; fail "approvals on C"; }
  jq -e -s --arg id "$id" '[.[] | select(.id == $id and .state == "pending" and .ref == "refs/heads/release/1")]
    | length == 1' "$T/list3" >/dev/null || { cat "$T/list3"; fail "gateway C does not list $id as pending"; }
  "$REFGATE" approve --config "$(gw_cfg 2)" "$id" >"$T/approve.out" 2>&1 || { cat "$T/approve.out"; fail "approve through B"; }
  push_via 3 "$T/c.out" HEAD:refs/heads/release/1
  assert_contains "$T/c.out" "* [new branch]      HEAD -> release/1"
  [ "$(upstream_ref app release/1)" = "$(git -C "$T/w" rev-parse HEAD)" ] || fail "release/1 did not land"
  echo "$id" >"$T/id1"
}

test_the_approval_was_used_once_and_each_step_is_in_the_chain() {
  local id; id=$(cat "$T/id1")
  [ "$(events approval-request | grep -c "$id")" = 1 ] || fail "approval-request of $id not once"
  [ "$(events approval-grant | grep -c "$id")" = 1 ] || fail "approval-grant of $id not once"
  [ "$(events approval-consume | grep -c "$id")" = 1 ] || fail "approval-consume of $id not once"
  db_rows >"$T/rows"
  jq -e -s '[.[] | select(.ref == "refs/heads/release/1" and .decision == "allow")] | length == 1' "$T/rows" >/dev/null ||
    { cat "$T/rows"; fail "not one allow decision for release/1"; }
  local i
  for i in 1 2 3; do
    "$REFGATE" approvals --config "$(gw_cfg "$i")" --all --json >"$T/all$i" 2>&1 || { cat "$T/all$i"; fail "approvals on $i"; }
    ! grep -q "$id" "$T/all$i" || { cat "$T/all$i"; fail "gateway $i still lists the used approval"; }
  done
}

test_a_push_held_on_a_is_released_by_an_approval_through_b() {
  local pid id t0
  git -C "$T/w" switch -q -c held
  commit "$T/w" held.txt
  (gw_use 1 "$TOKEN"; exec git -C "$T/w" push origin HEAD:refs/heads/held/1 >"$T/held.out" 2>&1) &
  pid=$!
  wait_until 20 '"$REFGATE" approvals --config "$(gw_cfg 2)" --json 2>/dev/null >"$T/l" && grep -q refs/heads/held/1 "$T/l"'
  id=$(jq -r 'select(.ref == "refs/heads/held/1") | .id' "$T/l")
  kill -0 "$pid" 2>/dev/null || { cat "$T/held.out"; fail "the push was not held"; }
  "$REFGATE" approve --config "$(gw_cfg 2)" "$id" >"$T/approve.out" 2>&1 || { cat "$T/approve.out"; fail "approve through B"; }
  t0=$SECONDS
  wait "$pid" || { cat "$T/held.out"; fail "the held push failed after the approval"; }
  note "the push held on gateway 1 landed $((SECONDS - t0)) s after the approval through gateway 2"
  assert_contains "$T/held.out" "* [new branch]      HEAD -> held/1"
  [ "$(upstream_ref app held/1)" = "$(git -C "$T/w" rev-parse HEAD)" ] || fail "held/1 did not land"
  [ "$(events approval-consume | grep -c "$id")" = 1 ] || fail "approval-consume of $id not once"
}

test_one_approved_update_pushed_through_two_gateways_at_once_lands_once() {
  local id a b
  git -C "$T/w" switch -q -c race
  commit "$T/w" race.txt
  push_via 1 "$T/r0.out" HEAD:refs/heads/release/2
  id=$(id_in "$T/r0.out")
  [ -n "$id" ] || { cat "$T/r0.out"; fail "no approval id"; }
  "$REFGATE" approve --config "$(gw_cfg 2)" "$id" >"$T/approve.out" 2>&1 || { cat "$T/approve.out"; fail "approve"; }
  push_via 1 "$T/ra.out" HEAD:refs/heads/release/2 & a=$!
  push_via 3 "$T/rb.out" HEAD:refs/heads/release/2 & b=$!
  wait "$a" "$b"
  [ "$(upstream_ref app release/2)" = "$(git -C "$T/w" rev-parse HEAD)" ] || { cat "$T/ra.out" "$T/rb.out"; fail "release/2 did not land"; }
  [ "$(cat "$T/ra.out" "$T/rb.out" | grep -c '\* \[new branch\]')" = 1 ] || { cat "$T/ra.out" "$T/rb.out"; fail "not exactly one push landed it"; }
  [ "$(events approval-consume | grep -c "$id")" = 1 ] || fail "approval-consume of $id not once"
}

test_the_chain_verifies() {
  multi_verify
}

run_tests
