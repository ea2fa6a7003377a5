# SIGHUP reloads the configuration: a push in flight during the reload is
# decided under the rules it began with, the next push under the new ones;
# a file that does not load (or names a credential that cannot be read)
# keeps the old rules and the log says why; keys only a restart applies
# are named in the log; a state_dir change is refused.
source "$(dirname "$0")/lib.sh"

make_upstream app
write_config "$STANDARD_RULES"
cp "$T/refgate.json" "$T/open.json"
start_gateway
TOKEN=$(mint local/acme/app)
use_token "$TOKEN"
clone app "$T/w"
CT='Content-Type: application/x-git-receive-pack-request'

DENY_FEATURES='[{"name": "freeze", "refs": ["refs/heads/feature/**"], "effect": "deny",
                 "reason": "features are frozen"}]'

# reload: SIGHUP, then wait until the log has one more line matching $1.
reload() {
  local before; before=$(grep -c -- "$1" "$T/gateway.log" || true)
  kill -HUP "$GW_PID"
  for _ in $(seq 200); do
    [ "$(grep -c -- "$1" "$T/gateway.log" || true)" -gt "$before" ] && return 0
    sleep 0.05
  done
  cat "$T/gateway.log"; fail "no '$1' after SIGHUP"
}

test_a_push_in_flight_during_a_reload_finishes_under_the_old_rules() {
  git -C "$T/w" switch -q -c feature/r
  commit "$T/w" a.txt
  git -C "$T/w" push -q origin feature/r 2>"$T/err" || { cat "$T/err"; fail "first push"; }
  local old new; old=$(git -C "$T/w" rev-parse HEAD)
  # Big enough that the pack arrives in parts, and random, so it does not shrink.
  head -c 300000 /dev/urandom | base64 >"$T/w/big.txt"
  git -C "$T/w" add big.txt && git -C "$T/w" commit -q -m big
  new=$(git -C "$T/w" rev-parse HEAD)
  local line="$old $new refs/heads/feature/r" caps="report-status"
  { printf '%04x%s\0%s\n' $((4 + ${#line} + 1 + ${#caps} + 1)) "$line" "$caps"; printf '0000'; } >"$T/body"
  git -C "$T/w" rev-list --objects "$new" "^$old" | git -C "$T/w" pack-objects -q --stdout >>"$T/body"
  local size half; size=$(stat -c %s "$T/body"); half=$((size / 2))
  local host=${GW#http://}
  exec 3<>"/dev/tcp/${host%:*}/${host##*:}"
  printf 'POST /local/acme/app.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n%s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' \
    "$(printf 'run:%s' "$TOKEN" | base64 -w0)" "$CT" "$size" >&3
  head -c "$half" "$T/body" >&3
  # The update is a fast-forward: its decision needs the whole pack, so it
  # is made after this reload, under the rules the push began with.
  write_config "$DENY_FEATURES"
  reload "reloaded config="
  tail -c +$((half + 1)) "$T/body" >&3
  timeout 30 cat <&3 >"$T/answer" || true
  exec 3>&-
  assert_contains "$T/answer" "200 OK"
  assert_contains "$T/answer" "ok refs/heads/feature/r"
  [ "$(upstream_ref app refs/heads/feature/r)" = "$new" ] || fail "the in-flight push did not land"
  # Its decision record came after the reload and names the old rule.
  local row; row=$(audit_rows | jq -c --arg n "$new" 'select(.new == $n)')
  [ "$(jq -r '.decision + " " + .rule' <<<"$row")" = "allow features" ] || fail "decision: $row"
}

test_the_next_push_uses_the_new_rules() {
  git -C "$T/w" fetch -q origin
  git -C "$T/w" reset -q --hard origin/feature/r
  commit "$T/w" b.txt
  ! git -C "$T/w" push -q origin feature/r 2>"$T/err" || fail "the new rules did not apply"
  assert_contains "$T/err" "features are frozen"
}

test_a_bad_file_keeps_the_old_rules_and_says_why() {
  echo '{"state_dir": "state", "rules": [{"effect": "maybe"}]}' >"$T/refgate.json"
  reload "reload_failed"
  assert_contains "$T/gateway.log" 'reload_failed kept=old error="'
  assert_contains "$T/gateway.log" 'rules[0].effect'
  ! git -C "$T/w" push -q origin feature/r 2>"$T/err" || fail "pushed past the kept rules"
  assert_contains "$T/err" "features are frozen"
}

test_a_credential_that_cannot_be_read_keeps_the_old_rules() {
  write_config "$STANDARD_RULES"
  jq --arg f "$T/no-such-token" '.upstreams += [{"host": "gh", "url": "https://git.invalid",
      "credentials": {"type": "static", "token_file": $f}}]' "$T/refgate.json" >"$T/cred.json"
  cp "$T/cred.json" "$T/refgate.json"
  reload "reload_failed"
  assert_contains "$T/gateway.log" "upstream gh: token_file $T/no-such-token"
  ! git -C "$T/w" push -q origin feature/r 2>"$T/err" || fail "pushed past the kept rules"
  assert_contains "$T/err" "features are frozen"
}

test_keys_only_a_restart_applies_are_named_and_the_rest_applies() {
  write_config "$STANDARD_RULES" '"limits": {"per_token": 3}, "approvals": {"expire": "1h"}'
  reload "reloaded config="
  assert_contains "$T/gateway.log" "reload_needs_restart keys=limits,approvals"
  git -C "$T/w" push -q origin feature/r 2>"$T/err" || { cat "$T/err"; fail "the open rules did not apply"; }
}

test_a_state_dir_change_is_refused() {
  write_config "$STANDARD_RULES"
  sed -i 's/"state_dir": "state"/"state_dir": "elsewhere"/' "$T/refgate.json"
  reload "reload_failed"
  assert_contains "$T/gateway.log" "state_dir cannot change without a restart"
  [ ! -e "$T/elsewhere" ] || fail "the other state_dir was created"
}

test_pushes_keep_working_while_reloads_come_every_20_ms() {
  write_config "$STANDARD_RULES"
  git -C "$T/w" switch -q -c feature/many
  local before; before=$(grep -c 'reloaded config=' "$T/gateway.log")
  # Under ASan a snapshot freed while a request still used it fails here.
  ( while kill -HUP "$GW_PID" 2>/dev/null; do sleep 0.02; done ) &
  local hup=$!
  for i in 1 2 3 4 5; do
    commit "$T/w" "m$i.txt"
    git -C "$T/w" push -q origin feature/many 2>"$T/err" || { kill "$hup"; cat "$T/err"; fail "push $i"; }
    git -C "$T/w" ls-remote origin >/dev/null 2>"$T/err" || { kill "$hup"; cat "$T/err"; fail "ls-remote $i"; }
  done
  kill "$hup"
  [ "$(grep -c 'reloaded config=' "$T/gateway.log")" -gt $((before + 5)) ] || fail "too few reloads to matter"
  kill -0 "$GW_PID" || fail "the gateway died"
}

test_under_journald_every_line_has_a_priority_and_no_token() {
  stop_gateway
  for _ in $(seq 200); do kill -0 "$GW_PID" 2>/dev/null || break; sleep 0.05; done
  mv "$T/gateway.log" "$T/before.log"
  write_config "$STANDARD_RULES"
  JOURNAL_STREAM=8:1 start_gateway
  use_token "$TOKEN"
  git -C "$T/w" switch -q -c feature/journal
  commit "$T/w" j.txt
  git -C "$T/w" push -q origin feature/journal 2>"$T/err" || { cat "$T/err"; fail "push"; }
  reload "reloaded config="
  echo '{' >"$T/refgate.json"
  reload "reload_failed"
  kill -TERM "$GW_PID"
  for _ in $(seq 200); do kill -0 "$GW_PID" 2>/dev/null || break; sleep 0.05; done
  grep -q "stopping signal=SIGTERM" "$T/gateway.log" || { cat "$T/gateway.log"; fail "no stop line"; }
  # <N>event key=value...: the journal reads N as the line's priority.
  ! grep -vE '^<[0-7]>[a-z_]+( |$)' "$T/gateway.log" || fail "lines without a priority prefix"
  grep -q '^<3>reload_failed ' "$T/gateway.log" || fail "a failed reload is not an error"
  assert_not_contains "$T/gateway.log" "$TOKEN"
}

run_tests
