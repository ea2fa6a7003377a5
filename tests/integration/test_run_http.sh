# `refgate run` against a real smart-HTTP upstream (nginx + git
# http-backend, static credential): a clone whose origin is the upstream's
# http URL fetches and pushes through the gateway from inside the run, with
# only the gateway's credential ever reaching upstream, and the token
# revoked afterwards.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_http.sh"

: "${REFGATE_RUN:?set REFGATE_RUN to the refgate-run binary}"
mkdir "$T/probe"
if ! "$REFGATE_RUN" -q -d "$T/probe" -- true >"$T/check" 2>&1; then
  echo "skipped: refgate-run cannot confine on this kernel: $(cat "$T/check")"
  exit 77
fi
make_remote app
start_http_upstream basic
write_remote_config "$STANDARD_RULES" "$(remote_upstream_json gitsrv "$HTTP_URL")"
start_gateway
STATIC_B64=$(printf '%s:%s' "$REMOTE_USER" "$REMOTE_SECRET" | base64 -w0)

remote_work app "$T/w"
git -C "$T/w" switch -q -c feature/x
commit "$T/w" x.c
git -C "$T/w" switch -q main
commit "$T/w" main.c

test_a_run_on_an_http_remote_fetches_and_pushes_through_the_gateway() {
  set +e
  (cd "$T/w" && "$REFGATE" run --config "$T/refgate.json" -- sh -c \
    'echo "$REFGATE_RUN_TOKEN" >.token; git fetch origin && git push origin feature/x && ! git push origin main') \
    >"$T/run.out" 2>&1
  local rc=$?
  set -e
  [ "$rc" -eq 0 ] || { cat "$T/run.out"; fail "status $rc"; }
  ! grep -q 'Sanitizer' "$T/run.out" || { cat "$T/run.out"; fail "sanitizer report"; }
  assert_contains "$T/run.out" 'token for gitsrv/acme/app through'
  assert_contains "$T/run.out" "To $GW/gitsrv/acme/app.git"
  assert_contains "$T/run.out" ' * [new branch]      feature/x -> feature/x'
  assert_contains "$T/run.out" ' ! [remote rejected] main -> main (policy: main is protected)'
  [ "$(remote_ref app refs/heads/feature/x)" = "$(git -C "$T/w" rev-parse feature/x)" ] ||
    fail "feature/x did not land"
  # Upstream only ever saw the gateway's credential, never the run's token.
  grep -v "Basic $STATIC_B64" "$NGINX_DIR/auth.log" | grep -q Basic &&
    { cat "$NGINX_DIR/auth.log"; fail "another credential reached upstream"; }
  local fork; fork=$(sed -n 's/^refgate run: the fork: //p' "$T/run.out")
  cp "$fork/.token" "$T/token"
}

test_after_the_run_its_token_is_refused() {
  assert_contains "$T/run.out" 'the run token is revoked'
  use_remote_token "$(cat "$T/token")" gitsrv
  git -C "$T/w" switch -q feature/x
  commit "$T/w" y.c
  ! git -C "$T/w" push origin feature/x >"$T/out" 2>&1 || fail "the run's token still pushes"
  assert_contains "$T/out" 'revoked'
}

run_tests
