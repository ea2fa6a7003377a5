# Pushes with the real git client through a running gateway to local bare
# upstreams: what lands, what is rejected and how git shows it.
source "$(dirname "$0")/lib.sh"

make_upstream app
make_upstream other
write_config "$STANDARD_RULES"
start_gateway
TOKEN=$(mint local/acme/app)

test_feature_push_lands() {
  use_token "$TOKEN"
  clone app "$T/w1"
  git -C "$T/w1" switch -q -c feature/login
  commit "$T/w1" login.c
  git -C "$T/w1" push origin feature/login >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
  [ "$(upstream_ref app refs/heads/feature/login)" = "$(git -C "$T/w1" rev-parse HEAD)" ] ||
    fail "feature/login did not land upstream"
}

test_push_to_main_is_rejected_in_gits_output() {
  use_token "$TOKEN"
  clone app "$T/w2"
  local before; before=$(upstream_ref app refs/heads/main)
  commit "$T/w2" main.txt
  ! git -C "$T/w2" push origin main >"$T/out" 2>&1 || fail "push to main succeeded"
  assert_contains "$T/out" ' ! [remote rejected] main -> main (policy: main is protected)'
  assert_not_contains "$T/out" "hung up"
  [ "$(upstream_ref app refs/heads/main)" = "$before" ] || fail "upstream main changed"
}

test_large_push_uses_probe_and_chunked_body_and_lands() {
  use_token "$TOKEN"
  clone app "$T/w3"
  git -C "$T/w3" switch -q -c feature/big
  head -c $((20 * 1024 * 1024)) /dev/urandom >"$T/w3/big.bin"
  git -C "$T/w3" add big.bin
  git -C "$T/w3" commit -q -m big
  GIT_TRACE_CURL=$T/curl.trace GIT_TRACE_CURL_NO_DATA=1 \
    git -C "$T/w3" push origin feature/big >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
  assert_contains "$T/curl.trace" "Transfer-Encoding: chunked"
  # The probe: a 4-byte POST before the chunked one.
  assert_contains "$T/curl.trace" "Content-Length: 4"
  [ "$(upstream_ref app refs/heads/feature/big)" = "$(git -C "$T/w3" rev-parse HEAD)" ] ||
    fail "feature/big did not land"
}

test_mixed_push_lands_only_the_allowed_ref() {
  use_token "$TOKEN"
  clone app "$T/w4"
  local before; before=$(upstream_ref app refs/heads/main)
  commit "$T/w4" on-main.txt
  git -C "$T/w4" switch -q -c feature/mixed
  commit "$T/w4" on-feature.txt
  ! git -C "$T/w4" push origin main feature/mixed >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" '[remote rejected] main -> main (policy: main is protected)'
  assert_contains "$T/out" '* [new branch]      feature/mixed -> feature/mixed'
  [ "$(upstream_ref app refs/heads/main)" = "$before" ] || fail "main changed"
  [ "$(upstream_ref app refs/heads/feature/mixed)" = "$(git -C "$T/w4" rev-parse feature/mixed)" ] ||
    fail "feature/mixed did not land"
}

test_atomic_mixed_push_lands_nothing() {
  use_token "$TOKEN"
  clone app "$T/w5"
  commit "$T/w5" atomic-main.txt
  git -C "$T/w5" switch -q -c feature/atomic
  commit "$T/w5" atomic.txt
  ! git -C "$T/w5" push --atomic origin main feature/atomic >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" 'main -> main (policy: main is protected)'
  assert_contains "$T/out" 'feature/atomic -> feature/atomic (policy: atomic push rejected because refs/heads/main is denied)'
  [ -z "$(upstream_ref app refs/heads/feature/atomic)" ] || fail "feature/atomic landed"
}

test_delete_is_denied() {
  use_token "$TOKEN"
  clone app "$T/w6"
  git -C "$T/w6" push -q origin HEAD:refs/heads/feature/doomed 2>/dev/null
  ! git -C "$T/w6" push origin --delete feature/doomed >"$T/out" 2>&1 || fail "delete succeeded"
  assert_contains "$T/out" '[remote rejected] feature/doomed (policy: '
  [ -n "$(upstream_ref app refs/heads/feature/doomed)" ] || fail "the branch was deleted"
}

test_force_push_is_denied_where_fast_forward_is_allowed() {
  use_token "$TOKEN"
  clone app "$T/w7"
  git -C "$T/w7" switch -q -c feature/ff
  commit "$T/w7" a.txt
  git -C "$T/w7" push -q origin feature/ff 2>/dev/null
  commit "$T/w7" b.txt
  git -C "$T/w7" push origin feature/ff >"$T/out" 2>&1 || { cat "$T/out"; fail "fast-forward refused"; }
  local landed; landed=$(git -C "$T/w7" rev-parse HEAD)
  git -C "$T/w7" commit -q --amend -m rewritten
  ! git -C "$T/w7" push --force origin feature/ff >"$T/out" 2>&1 || fail "force push succeeded"
  assert_contains "$T/out" '[remote rejected] feature/ff -> feature/ff (policy: no rule allows force'
  [ "$(upstream_ref app refs/heads/feature/ff)" = "$landed" ] || fail "force push landed"
  audit_rows | grep '"ref":"refs/heads/feature/ff"' | tail -1 >"$T/rec"
  assert_contains "$T/rec" '"action":"force"'
}

test_sha256_repository_pushes_and_ancestry_work() {
  make_upstream app256 --object-format=sha256
  use_token "$(mint local/acme/app256)"
  clone app256 "$T/w256"
  git -C "$T/w256" switch -q -c feature/s
  commit "$T/w256" s1.txt
  git -C "$T/w256" push origin feature/s >"$T/out" 2>&1 || { cat "$T/out"; fail "create refused"; }
  commit "$T/w256" s2.txt
  git -C "$T/w256" push origin feature/s >"$T/out" 2>&1 || { cat "$T/out"; fail "fast-forward refused"; }
  local landed; landed=$(git -C "$T/w256" rev-parse HEAD)
  [ ${#landed} -eq 64 ] || fail "not a sha256 id: $landed"
  [ "$(upstream_ref app256 refs/heads/feature/s)" = "$landed" ] || fail "fast-forward did not land"
  git -C "$T/w256" commit -q --amend -m rewritten
  ! git -C "$T/w256" push --force origin feature/s >"$T/out" 2>&1 || fail "force push succeeded"
  assert_contains "$T/out" 'feature/s -> feature/s (policy: no rule allows force'
  git -C "$T/w256" switch -q main
  commit "$T/w256" m.txt
  ! git -C "$T/w256" push origin main >"$T/out" 2>&1 || fail "push to main succeeded"
  assert_contains "$T/out" ' ! [remote rejected] main -> main (policy: main is protected)'
}

test_upstream_hook_rejection_is_relayed() {
  make_upstream hooked
  printf '#!/bin/sh\necho "upstream says no" >&2\nexit 1\n' >"$T/upstream/acme/hooked.git/hooks/pre-receive"
  chmod +x "$T/upstream/acme/hooked.git/hooks/pre-receive"
  use_token "$(mint local/acme/hooked)"
  clone hooked "$T/wh"
  git -C "$T/wh" switch -q -c feature/h
  commit "$T/wh" h.txt
  ! git -C "$T/wh" push origin feature/h >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" "remote: upstream says no"
  assert_contains "$T/out" "feature/h -> feature/h (pre-receive hook declined)"
  audit_rows | grep '"ref":"refs/heads/feature/h"' >"$T/rec"
  assert_contains "$T/rec" '"outcome":"forwarded: ng pre-receive hook declined"'
}

test_upstream_dying_mid_push_is_a_clean_error() {
  make_upstream dying
  # The hook kills receive-pack itself: upstream vanishes without a report.
  printf '#!/bin/sh\nkill -9 $PPID\n' >"$T/upstream/acme/dying.git/hooks/pre-receive"
  chmod +x "$T/upstream/acme/dying.git/hooks/pre-receive"
  use_token "$(mint local/acme/dying)"
  clone dying "$T/wd"
  git -C "$T/wd" switch -q -c feature/d
  commit "$T/wd" d.txt
  ! git -C "$T/wd" push origin feature/d >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" "feature/d -> feature/d (upstream: "
  [ -z "$(upstream_ref dying refs/heads/feature/d)" ] || fail "the ref landed"
  audit_rows | grep '"ref":"refs/heads/feature/d"' >"$T/rec"
  assert_contains "$T/rec" '"outcome":"upstream error: '
  # The gateway keeps serving.
  use_token "$TOKEN"
  clone app "$T/wd2"
  git -C "$T/wd2" switch -q -c feature/after-death
  commit "$T/wd2" a.txt
  git -C "$T/wd2" push -q origin feature/after-death 2>"$T/out" || { cat "$T/out"; fail "next push"; }
}

test_tags_follow_their_rules() {
  use_token "$TOKEN"
  clone app "$T/w8"
  git -C "$T/w8" tag -a v1.0 -m "release 1.0"
  git -C "$T/w8" push origin v1.0 >"$T/out" 2>&1 || { cat "$T/out"; fail "tag create refused"; }
  [ -n "$(upstream_ref app refs/tags/v1.0)" ] || fail "tag did not land"
  commit "$T/w8" moved.txt
  git -C "$T/w8" tag -f -a v1.0 -m "moved" >/dev/null
  ! git -C "$T/w8" push --force origin v1.0 >"$T/out" 2>&1 || fail "moving a tag succeeded"
  assert_contains "$T/out" '[remote rejected] v1.0 -> v1.0'
  git -C "$T/w8" tag other-tag
  ! git -C "$T/w8" push origin other-tag >"$T/out" 2>&1 || fail "an unlisted tag landed"
  assert_contains "$T/out" 'other-tag -> other-tag (policy: '
}

test_push_without_a_token_is_refused() {
  use_token ""
  clone app "$T/w9"
  git -C "$T/w9" switch -q -c feature/anon
  commit "$T/w9" anon.txt
  ! git -C "$T/w9" push origin feature/anon >"$T/out" 2>&1 || fail "anonymous push succeeded"
  [ -z "$(upstream_ref app refs/heads/feature/anon)" ] || fail "anonymous push landed"
  curl -s -o /dev/null -D "$T/hdr" "$GW/local/acme/app.git/info/refs?service=git-receive-pack"
  assert_contains "$T/hdr" "HTTP/1.1 401"
  assert_contains "$T/hdr" 'WWW-Authenticate: Basic realm="refgate"'
}

test_token_for_another_repo_is_refused_with_reason() {
  use_token "$(mint local/acme/other)"
  clone app "$T/w10"
  git -C "$T/w10" switch -q -c feature/x
  commit "$T/w10" x.txt
  ! git -C "$T/w10" push origin feature/x >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" "does not cover local/acme/app"
}

test_expired_token_is_refused_with_reason() {
  local tok exp payload
  tok=$("$REFGATE" token mint --config "$T/refgate.json" --repo local/acme/app --ttl 1)
  use_token "$tok"
  # Wait for the condition itself: the token's own exp (its claims are
  # base64url JSON) has come, on the clock the gateway reads. A token is
  # valid while now < exp; the boundary is tested in tests/tokens with an
  # injected clock. Bounded: ttl is 1 s, give up after 5.
  payload=$(printf '%s' "$tok" | cut -d. -f3 | tr '_-' '/+')
  while [ $((${#payload} % 4)) -ne 0 ]; do payload="$payload="; done
  exp=$(printf '%s' "$payload" | base64 -d | sed 's/.*"exp":\([0-9]*\).*/\1/')
  [ -n "$exp" ] || fail "no exp in the token's claims"
  for _ in $(seq 100); do [ "$(date +%s)" -ge "$exp" ] && break; sleep 0.05; done
  [ "$(date +%s)" -ge "$exp" ] || fail "the clock did not reach exp=$exp"
  clone app "$T/w11"
  git -C "$T/w11" switch -q -c feature/late
  commit "$T/w11" late.txt
  ! git -C "$T/w11" push origin feature/late >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" "expired"
}

test_token_never_reaches_logs_or_audit() {
  ! grep -rqF -- "$TOKEN" "$T/state" "$T/gateway.log" || fail "token found in state or logs"
}

test_audit_log_records_each_decision_and_verifies() {
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/out" || { cat "$T/out"; fail "verify"; }
  "$REFGATE" audit --config "$T/refgate.json" --decision deny --json >"$T/denied"
  assert_contains "$T/denied" '"ref":"refs/heads/main"'
  assert_contains "$T/denied" '"rule":"protect-main"'
  "$REFGATE" audit --config "$T/refgate.json" --decision allow --json >"$T/allowed"
  assert_contains "$T/allowed" '"outcome":"forwarded: ok"'
}

# Last: it restarts the gateway.
test_revoked_token_is_refused_with_reason_even_after_restart() {
  local tok; tok=$(mint local/acme/app)
  "$REFGATE" token revoke --config "$T/refgate.json" "$tok" >/dev/null
  stop_gateway
  start_gateway
  use_token "$tok"
  clone app "$T/w12"
  git -C "$T/w12" switch -q -c feature/revoked
  commit "$T/w12" r.txt
  ! git -C "$T/w12" push origin feature/revoked >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" "revoked"
  stop_gateway  # this subshell started it
}

run_tests
