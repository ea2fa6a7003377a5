# Pushes through the gateway to a real smart-HTTP upstream (nginx +
# git http-backend, HTTP Basic with a static credential): what lands, what
# reaches upstream at all, and which credential it carries.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_http.sh"

make_remote app
start_http_upstream basic
write_remote_config "$STANDARD_RULES" "$(remote_upstream_json gitsrv "$HTTP_URL")"
start_gateway
TOKEN=$(mint gitsrv/acme/app)
# What nginx logs for the static credential and for the run's token.
STATIC_B64=$(printf '%s:%s' "$REMOTE_USER" "$REMOTE_SECRET" | base64 -w0)
RUN_B64=$(printf 'run:%s' "$TOKEN" | base64 -w0)

posts() { grep -c "^POST /acme/app.git/git-receive-pack" "$NGINX_DIR/access.log" || true; }

test_allowed_push_lands_upstream_with_the_static_credential() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w1"
  git -C "$T/w1" switch -q -c feature/login
  commit "$T/w1" login.c
  git -C "$T/w1" push origin feature/login >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
  [ "$(remote_ref app refs/heads/feature/login)" = "$(git -C "$T/w1" rev-parse HEAD)" ] ||
    fail "feature/login did not land upstream"
  grep "^POST /acme/app.git/git-receive-pack" "$NGINX_DIR/auth.log" >"$T/posted"
  assert_contains "$T/posted" "Basic $STATIC_B64"
}

test_denied_push_sends_nothing_upstream() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w2"
  local before posts_before
  before=$(remote_ref app refs/heads/main)
  posts_before=$(posts)
  commit "$T/w2" main.txt
  ! git -C "$T/w2" push origin main >"$T/out" 2>&1 || fail "push to main succeeded"
  assert_contains "$T/out" ' ! [remote rejected] main -> main (policy: main is protected)'
  [ "$(remote_ref app refs/heads/main)" = "$before" ] || fail "upstream main changed"
  [ "$(posts)" = "$posts_before" ] || fail "a denied push reached upstream"
}

test_large_chunked_push_lands() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w3"
  git -C "$T/w3" switch -q -c feature/big
  head -c $((20 * 1024 * 1024)) /dev/urandom >"$T/w3/big.bin"
  git -C "$T/w3" add big.bin
  git -C "$T/w3" commit -q -m big
  GIT_TRACE_CURL=$T/curl.trace GIT_TRACE_CURL_NO_DATA=1 \
    git -C "$T/w3" push origin feature/big >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
  assert_contains "$T/curl.trace" "Transfer-Encoding: chunked"
  [ "$(remote_ref app refs/heads/feature/big)" = "$(git -C "$T/w3" rev-parse HEAD)" ] ||
    fail "feature/big did not land"
}

test_mixed_push_lands_only_the_allowed_ref() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w4"
  local before; before=$(remote_ref app refs/heads/main)
  commit "$T/w4" on-main.txt
  git -C "$T/w4" switch -q -c feature/mixed
  commit "$T/w4" on-feature.txt
  ! git -C "$T/w4" push origin main feature/mixed >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" '[remote rejected] main -> main (policy: main is protected)'
  assert_contains "$T/out" '* [new branch]      feature/mixed -> feature/mixed'
  [ "$(remote_ref app refs/heads/main)" = "$before" ] || fail "main changed"
  [ "$(remote_ref app refs/heads/feature/mixed)" = "$(git -C "$T/w4" rev-parse feature/mixed)" ] ||
    fail "feature/mixed did not land"
}

test_atomic_mixed_push_lands_nothing_and_sends_nothing() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w5"
  local posts_before; posts_before=$(posts)
  commit "$T/w5" atomic-main.txt
  git -C "$T/w5" switch -q -c feature/atomic
  commit "$T/w5" atomic.txt
  ! git -C "$T/w5" push --atomic origin main feature/atomic >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" 'feature/atomic -> feature/atomic (policy: atomic push rejected because refs/heads/main is denied)'
  [ -z "$(remote_ref app refs/heads/feature/atomic)" ] || fail "feature/atomic landed"
  [ "$(posts)" = "$posts_before" ] || fail "an all-denied push reached upstream"
}

test_update_through_a_remote_symbolic_ref_is_decided_on_the_ref_it_moves() {
  # feature/alias is open to fast-forwards, but upstream it is a symbolic
  # ref to main: the gateway asks upstream (ls-refs) and decides on main.
  git --git-dir="$T/remote/acme/app.git" symbolic-ref refs/heads/feature/alias refs/heads/main
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w-alias"
  local before posts_before
  before=$(remote_ref app refs/heads/main)
  posts_before=$(posts)
  commit "$T/w-alias" alias.txt
  ! git -C "$T/w-alias" push origin HEAD:feature/alias >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" "feature/alias (policy: main is protected"
  assert_contains "$T/out" "feature/alias is a symbolic ref to refs/heads/main"
  [ "$(remote_ref app refs/heads/main)" = "$before" ] || fail "main moved through feature/alias"
  [ "$(posts)" = "$posts_before" ] || fail "the denied push reached upstream"
  git --git-dir="$T/remote/acme/app.git" symbolic-ref --delete refs/heads/feature/alias
}

test_upstream_progress_is_shown_as_remote_lines() {
  printf '#!/bin/sh\necho "upstream hook says hello"\n' >"$T/remote/acme/app.git/hooks/post-receive"
  chmod +x "$T/remote/acme/app.git/hooks/post-receive"
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w6"
  git -C "$T/w6" switch -q -c feature/progress
  commit "$T/w6" p.txt
  git -C "$T/w6" push origin feature/progress >"$T/out" 2>&1 || { cat "$T/out"; fail "push failed"; }
  rm "$T/remote/acme/app.git/hooks/post-receive"
  assert_contains "$T/out" "remote: upstream hook says hello"
}

test_upstream_rejection_is_relayed() {
  printf '#!/bin/sh\necho "upstream says no" >&2\nexit 1\n' >"$T/remote/acme/app.git/hooks/pre-receive"
  chmod +x "$T/remote/acme/app.git/hooks/pre-receive"
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w7"
  git -C "$T/w7" switch -q -c feature/hooked
  commit "$T/w7" h.txt
  ! git -C "$T/w7" push origin feature/hooked >"$T/out" 2>&1 || fail "push succeeded"
  rm "$T/remote/acme/app.git/hooks/pre-receive"
  assert_contains "$T/out" "remote: upstream says no"
  assert_contains "$T/out" "[remote rejected] feature/hooked -> feature/hooked (pre-receive hook declined)"
}

test_fast_forward_and_force_are_told_apart_against_the_remote() {
  use_remote_token "$TOKEN" gitsrv
  remote_work app "$T/w8"
  git -C "$T/w8" switch -q -c feature/ff
  commit "$T/w8" ff1.txt
  git -C "$T/w8" push -q origin feature/ff 2>"$T/out" || { cat "$T/out"; fail "create"; }
  commit "$T/w8" ff2.txt
  git -C "$T/w8" push origin feature/ff >"$T/out" 2>&1 || { cat "$T/out"; fail "fast-forward refused"; }
  [ "$(remote_ref app refs/heads/feature/ff)" = "$(git -C "$T/w8" rev-parse HEAD)" ] ||
    fail "the fast-forward did not land"
  git -C "$T/w8" reset -q --hard HEAD~1
  commit "$T/w8" rewritten.txt
  ! git -C "$T/w8" push --force origin feature/ff >"$T/out" 2>&1 || fail "force push landed"
  assert_contains "$T/out" "[remote rejected] feature/ff -> feature/ff (policy: "
}

test_no_secret_reaches_upstream_logs_or_output() {
  # The run's token never reaches upstream, in any form.
  ! grep -qF -- "$TOKEN" "$NGINX_DIR/auth.log" "$NGINX_DIR/access.log" || fail "run token upstream"
  ! grep -qF -- "$RUN_B64" "$NGINX_DIR/auth.log" || fail "run credential upstream"
  # Upstream saw only the static credential on what it was sent.
  grep -v "Basic $STATIC_B64\$" "$NGINX_DIR/auth.log" >"$T/other" || true
  [ ! -s "$T/other" ] || { cat "$T/other"; fail "a request without the static credential"; }
  # The static secret is in no gateway log, audit record or git output.
  ! grep -rqF -- "$REMOTE_SECRET" "$T/state" "$T/gateway.log" "$T"/test_*.out ||
    fail "static secret leaked"
  ! grep -rqF -- "$TOKEN" "$T/state" "$T/gateway.log" || fail "run token in state or logs"
}

test_audit_records_the_forwarded_outcome_and_verifies() {
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/out" || { cat "$T/out"; fail "verify"; }
  "$REFGATE" audit --config "$T/refgate.json" --decision allow --json >"$T/allowed"
  assert_contains "$T/allowed" '"repo":"gitsrv/acme/app"'
  assert_contains "$T/allowed" '"outcome":"forwarded: ok"'
}

run_tests
