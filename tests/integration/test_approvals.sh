# Approvals end to end, with the real git client and a real gateway: a
# push to a ref an `ask` rule covers is refused with an approval id;
# `refgate approve` (over the control socket) lets exactly that update
# through once; a new commit asks again; a denial sticks; an approval is
# used up only when upstream takes the ref (not by an atomic push refused
# elsewhere, not by an upstream that refuses, not by a cut pack); the
# pending approval keeps the pack and `approvals show` lists what would
# land; a rule's "hold" keeps the push open with keepalives until it is
# decided, runs out, or the gateway stops; approvals expire; every step is
# in the audit chain, which still verifies; a user the control socket does
# not allow cannot approve.
source "$(dirname "$0")/lib.sh"

CFG=$T/refgate.json
RULES='[
  {"name": "protect-main", "refs": ["refs/heads/main"], "actions": ["update", "force", "delete"],
   "effect": "deny", "reason": "main is protected"},
  {"name": "features", "refs": ["refs/heads/feature/**"], "actions": ["create", "update"],
   "effect": "allow"},
  {"name": "release-tags", "refs": ["refs/tags/v*"], "actions": ["create"], "effect": "ask",
   "reason": "release tags need a maintainer"},
  {"name": "hotfix", "refs": ["refs/heads/hotfix/*"], "effect": "ask"},
  {"name": "hotfix-no-force", "refs": ["refs/heads/hotfix/*"], "actions": ["force"],
   "effect": "deny", "reason": "hotfix branches only move forward"},
  {"name": "held-tags", "refs": ["refs/tags/h*"], "actions": ["create"], "effect": "ask",
   "reason": "held for a maintainer", "hold": 30},
  {"name": "short-hold", "refs": ["refs/tags/s*"], "actions": ["create"], "effect": "ask",
   "hold": 2}
]'
make_upstream app
write_config "$RULES"
start_gateway
use_token "$(mint local/acme/app)"
clone app "$T/w"

# push OUT ARGS...: git push through the gateway; its output in OUT. Never fails.
push() { local out=$1; shift; git -C "$T/w" push origin "$@" >"$out" 2>&1 || true; }
# id_in FILE: the approval id the refusal names.
id_in() { grep -o 'refgate approve [a-z2-7]\{10\}' "$1" | head -1 | cut -d' ' -f3; }
events() { jq -r "select(.event == \"$1\") | .detail" "$T/state/audit.jsonl"; }

test_an_ask_rule_refuses_the_push_and_names_an_approval() {
  commit "$T/w" release.txt
  git -C "$T/w" tag v1
  push "$T/p1" v1
  assert_contains "$T/p1" '[remote rejected] v1 -> v1 (policy: release tags need a maintainer (approval needed: refgate approve '
  [ -z "$(upstream_ref app refs/tags/v1)" ] || fail "v1 landed without approval"
  id_in "$T/p1" >"$T/id1"
  [ -s "$T/id1" ] || fail "no approval id"
  events approval-request >"$T/ev"
  assert_contains "$T/ev" "approval $(cat "$T/id1") requested by push"
  assert_contains "$T/ev" "create refs/tags/v1 in local/acme/app (0000000000000000000000000000000000000000..$(git -C "$T/w" rev-parse v1))"
}

test_a_repeated_push_finds_the_same_pending_approval() {
  push "$T/p2" v1
  [ "$(id_in "$T/p2")" = "$(cat "$T/id1")" ] || { cat "$T/p2"; fail "a second approval was made"; }
  [ "$(events approval-request | wc -l)" = 1 ] || fail "the repeat was audited as a new request"
}

test_approvals_lists_the_pending_one_as_json() {
  "$REFGATE" approvals --config "$CFG" --json >"$T/l1"
  [ "$(wc -l <"$T/l1")" = 1 ] || { cat "$T/l1"; fail "expected one line"; }
  jq -e --arg id "$(cat "$T/id1")" --arg new "$(git -C "$T/w" rev-parse v1)" '
    .id == $id and .state == "pending" and .repo == "local/acme/app" and .ref == "refs/tags/v1"
    and .old == "0000000000000000000000000000000000000000" and .new == $new
    and .reason == "release tags need a maintainer" and .rule == "release-tags"
    and (.created | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$"))' "$T/l1" >/dev/null ||
    { cat "$T/l1"; fail "fields"; }
  "$REFGATE" approvals --config "$CFG" >"$T/l2"
  assert_contains "$T/l2" "$(cat "$T/id1")  pending   local/acme/app  refs/tags/v1"
  assert_contains "$T/l2" "release tags need a maintainer"
}

test_the_pending_approval_keeps_the_pack_and_show_lists_what_would_land() {
  local id; id=$(cat "$T/id1")
  [ -s "$T/state/approvals/$id.pack" ] || fail "no kept pack"
  "$REFGATE" approvals show --config "$CFG" "$id" >"$T/s0" 2>&1 || { cat "$T/s0"; fail "show failed"; }
  assert_contains "$T/s0" "would land 1 commit:"
  assert_contains "$T/s0" "$(git -C "$T/w" rev-parse --short=12 v1)"
  "$REFGATE" approvals show --config "$CFG" --json "$id" >"$T/s0j"
  jq -e --arg new "$(git -C "$T/w" rev-parse v1)" \
    '.commits | length == 1 and .[0].id == $new and .[0].author == "Tester" and .[0].subject == "change release.txt"' \
    "$T/s0j" >/dev/null || { cat "$T/s0j"; fail "commits"; }
}

test_show_lists_an_updates_commits_from_old_to_new() {
  local id
  # The branch exists upstream (made behind the gateway's back): this push updates it.
  git -C "$T/w" switch -q -c hotfix/show origin/main
  git --git-dir="$T/upstream/acme/app.git" update-ref refs/heads/hotfix/show "$(git -C "$T/w" rev-parse HEAD)"
  commit "$T/w" a.txt
  commit "$T/w" b.txt
  push "$T/ps" hotfix/show
  id=$(id_in "$T/ps")
  [ -n "$id" ] || { cat "$T/ps"; fail "no approval for the update"; }
  "$REFGATE" approvals show --config "$CFG" --json "$id" >"$T/ss"
  jq -e '[.commits[].subject] == ["change b.txt", "change a.txt"]' "$T/ss" >/dev/null ||
    { cat "$T/ss"; fail "expected the two new commits, newest first"; }
  "$REFGATE" deny --config "$CFG" "$id" >/dev/null
  [ ! -e "$T/state/approvals/$id.pack" ] || fail "the denied approval's pack was kept"
  git -C "$T/w" switch -q main
}

test_approve_lets_exactly_that_push_through() {
  local id; id=$(cat "$T/id1")
  "$REFGATE" approve --config "$CFG" "$id" >"$T/a1" 2>&1 || { cat "$T/a1"; fail "approve failed"; }
  assert_contains "$T/a1" "approved $id: refs/tags/v1 in local/acme/app"
  push "$T/p3" v1
  assert_contains "$T/p3" '* [new tag]         v1 -> v1'
  [ "$(upstream_ref app refs/tags/v1)" = "$(git -C "$T/w" rev-parse v1)" ] || fail "v1 did not land"
  events approval-grant >"$T/ev"
  assert_contains "$T/ev" "approval $id granted by peer uid $(id -u) ($(id -un)) pid"
  assert_contains "$T/ev" "via control socket: refs/tags/v1 in local/acme/app"
  events approval-consume >"$T/ev"
  assert_contains "$T/ev" "approval $id used by push"
  audit_rows | jq -c 'select(.ref == "refs/tags/v1" and .decision == "allow")' >"$T/rows"
  assert_contains "$T/rows" "approved by uid $(id -u) ($(id -un)) via control socket (approval $id)"
  assert_contains "$T/rows" '"rule":"release-tags"'
  assert_contains "$T/rows" '"outcome":"forwarded: ok"'
  [ ! -e "$T/state/approvals/$id.pack" ] || fail "the used approval's pack was kept"
}

test_an_approval_is_used_once() {
  "$REFGATE" approvals --config "$CFG" --all --json >"$T/l3"
  [ -z "$(jq -c --arg id "$(cat "$T/id1")" 'select(.id == $id)' "$T/l3")" ] ||
    { cat "$T/l3"; fail "the used approval is still listed"; }
  # The same update again (the tag removed upstream behind the gateway's back) asks again.
  git --git-dir="$T/upstream/acme/app.git" update-ref -d refs/tags/v1
  push "$T/p4" v1
  assert_contains "$T/p4" '(approval needed: refgate approve '
  [ "$(id_in "$T/p4")" != "$(cat "$T/id1")" ] || fail "the used approval was found again"
  [ -z "$(upstream_ref app refs/tags/v1)" ] || fail "v1 landed twice on one approval"
}

test_a_new_commit_needs_a_new_approval() {
  local id_a id_b
  git -C "$T/w" tag v2
  push "$T/p5" v2
  id_a=$(id_in "$T/p5")
  "$REFGATE" approve --config "$CFG" "$id_a" >/dev/null
  commit "$T/w" other.txt
  git -C "$T/w" tag -f v2 >/dev/null
  push "$T/p6" v2
  id_b=$(id_in "$T/p6")
  [ -n "$id_b" ] && [ "$id_b" != "$id_a" ] || { cat "$T/p6"; fail "the other commit passed on $id_a"; }
  [ -z "$(upstream_ref app refs/tags/v2)" ] || fail "v2 landed on another commit's approval"
}

test_deny_refuses_the_same_push_with_the_reason() {
  git -C "$T/w" tag v3
  push "$T/p7" v3
  local id; id=$(id_in "$T/p7")
  "$REFGATE" deny --config "$CFG" --reason "not before the freeze ends" "$id" >"$T/d1"
  assert_contains "$T/d1" "denied $id"
  push "$T/p8" v3
  assert_contains "$T/p8" "approval $id was denied by uid $(id -u) ($(id -un)) via control socket: not before the freeze ends"
  [ -z "$(upstream_ref app refs/tags/v3)" ] || fail "denied v3 landed"
  events approval-deny >"$T/ev"
  assert_contains "$T/ev" "approval $id denied by peer uid $(id -u)"
  assert_contains "$T/ev" "reason: not before the freeze ends"
  ! "$REFGATE" approve --config "$CFG" "$id" >"$T/d2" 2>&1 || fail "approved after a denial"
  assert_contains "$T/d2" "refgate approve: approval $id is already denied by uid $(id -u)"
}

test_bad_ids_and_second_decisions_get_clear_errors() {
  local rc=0
  "$REFGATE" approve --config "$CFG" abcdefghij >"$T/e1" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "unknown id: exit $rc"
  assert_contains "$T/e1" "refgate approve: no approval abcdefghij: unknown, already used, or expired"
  rc=0; "$REFGATE" approve --config "$CFG" '../../x' >"$T/e2" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "malformed id: exit $rc"
  assert_contains "$T/e2" "not an approval id"
  rc=0; "$REFGATE" approve --config "$CFG" >"$T/e3" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "no id: exit $rc"
  git -C "$T/w" tag v4
  push "$T/p9" v4
  local id; id=$(id_in "$T/p9")
  "$REFGATE" approve --config "$CFG" "$id" >/dev/null
  rc=0; "$REFGATE" approve --config "$CFG" "$id" >"$T/e4" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "second approve: exit $rc"
  assert_contains "$T/e4" "approval $id is already approved by uid"
}

test_an_atomic_push_refused_elsewhere_does_not_use_the_approval() {
  # v4 is approved (above); main cannot move, so --atomic refuses both.
  git -C "$T/w" switch -q main
  commit "$T/w" main.txt
  push "$T/p10" --atomic main v4
  assert_contains "$T/p10" 'atomic push rejected because refs/heads/main is denied'
  [ -z "$(upstream_ref app refs/tags/v4)" ] || fail "v4 landed in a refused atomic push"
  "$REFGATE" approvals --config "$CFG" --all --json >"$T/l4"
  jq -e --arg t refs/tags/v4 'select(.ref == $t) | .state == "approved"' "$T/l4" >/dev/null ||
    { cat "$T/l4"; fail "the approval of v4 was used by a push that did not land"; }
  push "$T/p11" v4
  [ -n "$(upstream_ref app refs/tags/v4)" ] || { cat "$T/p11"; fail "v4 did not land on its own"; }
}

test_an_approval_is_kept_when_upstream_refuses_the_ref() {
  local hook=$T/upstream/acme/app.git/hooks/pre-receive
  git -C "$T/w" switch -q -c hotfix/x
  commit "$T/w" fix.txt
  push "$T/p12" hotfix/x
  local id; id=$(id_in "$T/p12")
  [ -n "$id" ] || { cat "$T/p12"; fail "a default ask without a reason gave no id"; }
  assert_contains "$T/p12" 'rule "hotfix" requires approval for create on refs/heads/hotfix/x (approval needed'
  "$REFGATE" approve --config "$CFG" "$id" >/dev/null
  printf '#!/bin/sh\necho "upstream says no" >&2\nexit 1\n' >"$hook"
  chmod +x "$hook"
  push "$T/p13" hotfix/x
  rm -f "$hook"
  [ -z "$(upstream_ref app refs/heads/hotfix/x)" ] || fail "landed through a refusing hook"
  "$REFGATE" approvals show --config "$CFG" --json "$id" >"$T/s1"
  jq -e '.state == "approved"' "$T/s1" >/dev/null || { cat "$T/p13" "$T/s1"; fail "used by a refused push"; }
  push "$T/p14" hotfix/x
  [ -n "$(upstream_ref app refs/heads/hotfix/x)" ] || { cat "$T/p14"; fail "did not land after the hook went"; }
}

# hotfix/* tells an update (ask) from a force (deny): the pack is spooled
# and indexed, and the approved update takes the spooled path.
test_an_update_decided_from_the_pack_is_approved_and_passes() {
  local id
  git -C "$T/w" switch -q hotfix/x
  commit "$T/w" fix2.txt
  push "$T/p20" hotfix/x
  id=$(id_in "$T/p20")
  [ -n "$id" ] || { cat "$T/p20"; fail "no approval for the update"; }
  [ -s "$T/state/approvals/$id.pack" ] || fail "the spooled pack was not kept"
  "$REFGATE" approvals show --config "$CFG" --json "$id" >"$T/s20"
  jq -e '[.commits[].subject] == ["change fix2.txt"]' "$T/s20" >/dev/null || { cat "$T/s20"; fail "commits"; }
  "$REFGATE" approve --config "$CFG" "$id" >/dev/null
  push "$T/p21" hotfix/x
  [ "$(upstream_ref app refs/heads/hotfix/x)" = "$(git -C "$T/w" rev-parse HEAD)" ] ||
    { cat "$T/p21"; fail "the approved update did not land"; }
  audit_rows | jq -c 'select(.ref == "refs/heads/hotfix/x" and .decision == "allow")' | tail -1 >"$T/r21"
  assert_contains "$T/r21" '"action":"update"'
  assert_contains "$T/r21" "(approval $id)"
  # A force over it is denied whatever was approved.
  git -C "$T/w" reset -q --hard HEAD~2
  commit "$T/w" other-fix.txt
  push "$T/p22" --force hotfix/x
  assert_contains "$T/p22" 'hotfix branches only move forward'
  assert_not_contains "$T/p22" 'refgate approve'
  git -C "$T/w" switch -q main
}

# Over the wire (tests/support/rawpush.py), not git: what git never sends.
RAW="python3 $REFGATE_SRC/tests/support/rawpush.py"
ZERO=0000000000000000000000000000000000000000

test_over_the_wire_an_approval_is_for_its_exact_ref_and_a_cut_pack_does_not_use_it() {
  local url="$GW/local/acme/app.git" new id other
  commit "$T/w" wire.txt
  new=$(git -C "$T/w" rev-parse HEAD)
  $RAW "$url" "$REFGATE_TOKEN" "$ZERO:$new:refs/tags/v-wire" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" >"$T/r1"
  assert_contains "$T/r1" "ng refs/tags/v-wire policy: release tags need a maintainer (approval needed"
  id=$(id_in "$T/r1")
  "$REFGATE" approve --config "$CFG" "$id" >/dev/null
  # Another ref with the same commit is another update.
  $RAW "$url" "$REFGATE_TOKEN" "$ZERO:$new:refs/tags/v-wire2" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" >"$T/r2"
  other=$(id_in "$T/r2")
  [ -n "$other" ] && [ "$other" != "$id" ] || { cat "$T/r2"; fail "v-wire's approval let v-wire2 through"; }
  # The approved update with its pack cut short: forwarded, nothing lands,
  # and the approval is still there.
  $RAW "$url" "$REFGATE_TOKEN" "$ZERO:$new:refs/tags/v-wire" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" --cut 30 >"$T/r3" || true
  [ -z "$(upstream_ref app refs/tags/v-wire)" ] || fail "a cut pack landed"
  "$REFGATE" approvals show --config "$CFG" --json "$id" >"$T/r3s"
  jq -e '.state == "approved"' "$T/r3s" >/dev/null || { cat "$T/r3" "$T/r3s"; fail "used by a push that did not land"; }
  # Whole, from a client that hangs up once it landed: landed, and used.
  $RAW "$url" "$REFGATE_TOKEN" "$ZERO:$new:refs/tags/v-wire" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" \
    --hangup-when "git --git-dir='$T/upstream/acme/app.git' rev-parse -q --verify refs/tags/v-wire" >"$T/r4" || true
  [ "$(upstream_ref app refs/tags/v-wire)" = "$new" ] || fail "the approved update did not land"
  for _ in $(seq 1 100); do
    events approval-consume | grep -q "approval $id used" && break
    sleep 0.05
  done
  events approval-consume | grep -q "approval $id used" || fail "the approval was not used up"
}

# pending_id REF: the id of the pending approval of REF, waiting up to 20 s for it.
pending_id() {
  local id=
  for _ in $(seq 1 200); do
    id=$("$REFGATE" approvals --config "$CFG" --json | jq -r --arg r "$1" 'select(.ref == $r) | .id')
    [ -n "$id" ] && break
    sleep 0.1
  done
  echo "$id"
}

test_a_held_push_waits_for_its_approval_and_lands() {
  local id pid start
  commit "$T/w" held.txt
  git -C "$T/w" tag h1
  start=$(date +%s)
  git -C "$T/w" push origin h1 >"$T/h1" 2>&1 &
  pid=$!
  id=$(pending_id refs/tags/h1)
  [ -n "$id" ] || { kill "$pid"; fail "no pending approval while the push waits"; }
  kill -0 "$pid" 2>/dev/null || { cat "$T/h1"; fail "the push did not wait"; }
  # The reviewer sees what would land while it waits.
  "$REFGATE" approvals show --config "$CFG" --json "$id" >"$T/h1s"
  jq -e '[.commits[].subject] == ["change held.txt"]' "$T/h1s" >/dev/null || { cat "$T/h1s"; fail "show"; }
  "$REFGATE" approve --config "$CFG" "$id" >/dev/null
  wait "$pid" || { cat "$T/h1"; fail "the held push failed after its approval"; }
  [ $(($(date +%s) - start)) -lt 25 ] || fail "the push waited out its hold"
  assert_contains "$T/h1" "remote: refgate: waiting up to 30 s for approval $id of refs/tags/h1 (refgate approve $id)"
  assert_contains "$T/h1" '* [new tag]         h1 -> h1'
  [ "$(upstream_ref app refs/tags/h1)" = "$(git -C "$T/w" rev-parse h1)" ] || fail "h1 did not land"
  events approval-consume | grep -q "approval $id used" || fail "not used up"
}

test_a_held_push_denied_meanwhile_is_refused_with_the_denial() {
  local id pid
  git -C "$T/w" tag h2
  git -C "$T/w" push origin h2 >"$T/h2" 2>&1 &
  pid=$!
  id=$(pending_id refs/tags/h2)
  "$REFGATE" deny --config "$CFG" --reason "not this one" "$id" >/dev/null
  ! wait "$pid" || { cat "$T/h2"; fail "a denied held push succeeded"; }
  assert_contains "$T/h2" "(policy: held for a maintainer; approval $id was denied by uid $(id -u) ($(id -un)) via control socket: not this one)"
  [ -z "$(upstream_ref app refs/tags/h2)" ] || fail "h2 landed"
}

test_a_hold_that_runs_out_refuses_with_the_approval_id() {
  local start
  git -C "$T/w" tag s1
  start=$(date +%s)
  push "$T/s1" s1
  [ $(($(date +%s) - start)) -ge 2 ] || fail "it did not hold"
  assert_contains "$T/s1" 'remote: refgate: waiting up to 2 s for approval'
  assert_contains "$T/s1" '(approval needed: refgate approve '
  [ -z "$(upstream_ref app refs/tags/s1)" ] || fail "s1 landed"
  # Approved afterwards, the same push passes at once.
  "$REFGATE" approve --config "$CFG" "$(id_in "$T/s1")" >/dev/null
  push "$T/s1b" s1
  [ -n "$(upstream_ref app refs/tags/s1)" ] || { cat "$T/s1b"; fail "s1 did not land once approved"; }
}

test_over_the_wire_a_held_push_sends_keepalives_and_without_side_band_is_not_held() {
  local url="$GW/local/acme/app.git" new rpid id start
  commit "$T/w" keep.txt
  new=$(git -C "$T/w" rev-parse HEAD)
  # Without side-band nothing could keep the connection alive: refused at
  # once, not after the rule's 30 s hold (20 s leaves room for a busy machine).
  start=$(date +%s)
  $RAW "$url" "$REFGATE_TOKEN" "$ZERO:$new:refs/tags/h-plain" --caps "report-status" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" >"$T/k0"
  [ $(($(date +%s) - start)) -lt 20 ] || fail "held without side-band ($(($(date +%s) - start)) s)"
  assert_contains "$T/k0" "ng refs/tags/h-plain policy: held for a maintainer (approval needed"
  # With side-band-64k: keepalives every 5 s while it waits, then the report.
  $RAW "$url" "$REFGATE_TOKEN" "$ZERO:$new:refs/tags/h-keep" \
    --pack-repo "$T/w" --pack-revs "$new ^origin/main" >"$T/k1" &
  rpid=$!
  id=$(pending_id refs/tags/h-keep)
  sleep 6
  "$REFGATE" approve --config "$CFG" "$id" >/dev/null
  wait "$rpid" || { cat "$T/k1"; fail "rawpush failed"; }
  assert_contains "$T/k1" "remote: refgate: waiting up to 30 s for approval $id"
  assert_contains "$T/k1" "keepalive"
  assert_contains "$T/k1" "ok refs/tags/h-keep"
}

test_a_user_the_control_socket_refuses_cannot_approve() {
  if [ "$(id -u)" -ne 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
    echo "skipped: needs root, useradd and runuser"; return 0
  fi
  local u=rga$$o id
  useradd -M -N -s /usr/sbin/nologin "$u"
  git -C "$T/w" tag v5
  push "$T/p15" v5
  id=$(id_in "$T/p15")
  chmod 711 "$T" "$T/state"
  cp "$REFGATE_SRC/tests/support/control_client.py" "$T/client.py"
  chmod 644 "$T/client.py"
  runuser -u "$u" -- python3 "$T/client.py" "$T/state/control.sock" \
    "{\"op\": \"approve\", \"id\": \"$id\"}" >"$T/o1" 2>&1 || true
  chmod 700 "$T/state"
  userdel "$u" 2>/dev/null || true
  assert_contains "$T/o1" "refused: user $u"
  "$REFGATE" approvals show --config "$CFG" --json "$id" >"$T/s2"
  jq -e '.state == "pending"' "$T/s2" >/dev/null || { cat "$T/s2"; fail "changed by a refused peer"; }
  [ -z "$(events approval-grant | grep "approval $id")" ] || fail "a refused peer's grant was audited"
}

# stop_gateway_here: stop_gateway from a test's subshell, which cannot wait
# for the gateway (the main shell's child): wait until it has exited (a
# zombie counts), at most 60 s.
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

test_a_stopping_gateway_answers_a_held_push_at_once() {
  local pid start
  git -C "$T/w" tag h3
  git -C "$T/w" push origin h3 >"$T/h3" 2>&1 &
  pid=$!
  [ -n "$(pending_id refs/tags/h3)" ] || fail "no pending approval"
  start=$(date +%s)
  stop_gateway_here
  [ $(($(date +%s) - start)) -lt 15 ] || fail "the gateway waited out the hold before stopping"
  ! wait "$pid" || { cat "$T/h3"; fail "the held push succeeded"; }
  assert_contains "$T/h3" '(approval needed: refgate approve '
  [ -z "$(upstream_ref app refs/tags/h3)" ] || fail "h3 landed"
}

test_approvals_expire() {
  # Tests run in subshells: this gateway is stopped when this one ends, and
  # the ones after it run without a gateway.
  stop_gateway_here
  write_config "$RULES" '"approvals": {"expire": 2}, "limits": {"spool_bytes": 1048576}'
  start_gateway
  trap stop_gateway_here EXIT
  use_token "$(mint local/acme/app)"
  # A pack over the spool budget is not kept: the approval works without it.
  head -c 1200000 /dev/urandom >"$T/w/big.bin"
  git -C "$T/w" add big.bin
  git -C "$T/w" commit -q -m big
  git -C "$T/w" tag v6
  push "$T/p16" v6
  local id; id=$(id_in "$T/p16")
  [ ! -e "$T/state/approvals/$id.pack" ] || fail "a pack over the budget was kept"
  assert_contains "$T/gateway.log" "approval_pack_not_kept id=$id"
  "$REFGATE" approvals show --config "$CFG" "$id" >"$T/s3"
  assert_contains "$T/s3" "what would land cannot be shown: no pack was kept"
  "$REFGATE" approve --config "$CFG" "$id" >/dev/null
  sleep 3
  push "$T/p17" v6
  [ -z "$(upstream_ref app refs/tags/v6)" ] || fail "v6 landed on an expired approval"
  local id2; id2=$(id_in "$T/p17")
  [ -n "$id2" ] && [ "$id2" != "$id" ] || { cat "$T/p17"; fail "expected a new approval"; }
  sleep 3
  local rc=0
  "$REFGATE" approve --config "$CFG" "$id2" >"$T/x1" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "approved an expired approval"
  assert_contains "$T/x1" "expired"
}

test_the_audit_chain_verifies_after_all_of_it() {
  "$REFGATE" audit verify --config "$CFG" >"$T/v1" 2>&1 || { cat "$T/v1"; fail "verify failed"; }
}

test_without_a_running_gateway_the_cli_says_so() {
  local rc=0
  "$REFGATE" approvals --config "$CFG" >"$T/n1" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "exit $rc"
  assert_contains "$T/n1" "refgate approvals: no gateway is running for $CFG"
}

test_the_gateways_said_nothing_of_a_sanitizer() {
  assert_not_contains "$T/gateway.log" "Sanitizer"
  assert_not_contains "$T/gateway.log" "runtime error:"
}

run_tests
