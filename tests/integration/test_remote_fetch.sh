# Clones and fetches through the gateway, protocol v0 and v2, from a local
# upstream and from a real smart-HTTP one (nginx + git http-backend): a run
# whose only network is the gateway gets its repositories, and only those
# its token names.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_http.sh"

make_upstream app
make_upstream other
make_remote app
make_remote other
start_http_upstream basic
write_remote_config "$STANDARD_RULES" "$(remote_upstream_json gitsrv "$HTTP_URL")"
start_gateway
TOKEN=$(mint local/acme/app gitsrv/acme/app)

# clone_via URL DIR VERSION: clone through the gateway with a packet trace.
clone_via() {
  GIT_TRACE_PACKET=$T/packets GIT_TRACE_CURL=$T/curl.trace GIT_TRACE_CURL_NO_DATA=1 \
    git -c protocol.version="$3" clone "$1" "$2" >"$T/out" 2>&1 ||
    { cat "$T/out"; fail "clone of $1 (v$3) failed"; }
}

local_main() { upstream_ref app refs/heads/main; }

test_clone_from_a_remote_upstream_with_protocol_v2() {
  use_remote_token "$TOKEN" gitsrv
  rm -f "$T/packets"
  clone_via "$HTTP_URL/acme/app.git" "$T/c1" 2
  [ "$(git -C "$T/c1" rev-parse HEAD)" = "$(remote_ref app refs/heads/main)" ] || fail "wrong HEAD"
  assert_contains "$T/packets" "version 2"
  assert_contains "$T/curl.trace" "Git-Protocol: version=2"
  # It went through the gateway, as the upstream's log shows the gateway's
  # credential on the upload-pack POST.
  assert_contains "$NGINX_DIR/access.log" "POST /acme/app.git/git-upload-pack 200"
}

test_clone_from_a_remote_upstream_with_protocol_v0() {
  use_remote_token "$TOKEN" gitsrv
  rm -f "$T/packets"
  clone_via "$HTTP_URL/acme/app.git" "$T/c2" 0
  [ "$(git -C "$T/c2" rev-parse HEAD)" = "$(remote_ref app refs/heads/main)" ] || fail "wrong HEAD"
  assert_contains "$T/packets" "# service=git-upload-pack"
  assert_not_contains "$T/packets" "version 2"
}

test_fetch_from_a_remote_upstream_gets_new_commits_with_a_gzip_request() {
  use_remote_token "$TOKEN" gitsrv
  clone_via "$HTTP_URL/acme/app.git" "$T/c3" 2
  # Many local commits make many "have" lines: git gzips a request over 1 KiB.
  for i in $(seq 1 150); do commit "$T/c3" "local-$i.txt"; done
  remote_work app "$T/direct" "file://$T/remote"
  commit "$T/direct" upstream-new.txt
  git -C "$T/direct" push -q origin main
  for v in 0 2; do
    GIT_TRACE_CURL=$T/fetch.trace GIT_TRACE_CURL_NO_DATA=1 git -C "$T/c3" -c protocol.version=$v \
      fetch origin >"$T/out" 2>&1 || { cat "$T/out"; fail "fetch v$v failed"; }
    [ "$(git -C "$T/c3" rev-parse origin/main)" = "$(remote_ref app refs/heads/main)" ] ||
      fail "v$v fetch missed the new commit"
    assert_contains "$T/fetch.trace" "Content-Encoding: gzip"
    git -C "$T/c3" update-ref refs/remotes/origin/main HEAD~150
  done
}

test_clone_and_fetch_from_a_local_upstream_v0_and_v2() {
  use_token "$TOKEN"
  for v in 0 2; do
    rm -f "$T/packets"
    clone_via "$GW/local/acme/app.git" "$T/l$v" $v
    [ "$(git -C "$T/l$v" rev-parse HEAD)" = "$(local_main)" ] || fail "v$v: wrong HEAD"
    if [ $v = 2 ]; then assert_contains "$T/packets" "version 2"; fi
  done
  for i in $(seq 1 150); do commit "$T/l2" "local-$i.txt"; done
  clone "app" "$T/ldirect"
  commit "$T/ldirect" upstream-new.txt
  # A plain path: the pushInsteadOf for file:// URLs does not apply.
  git -C "$T/ldirect" push -q "$T/upstream/acme/app.git" main
  for v in 0 2; do
    GIT_TRACE_CURL=$T/fetch.trace GIT_TRACE_CURL_NO_DATA=1 git -C "$T/l2" -c protocol.version=$v \
      fetch origin >"$T/out" 2>&1 || { cat "$T/out"; fail "fetch v$v failed"; }
    [ "$(git -C "$T/l2" rev-parse origin/main)" = "$(local_main)" ] || fail "v$v fetch missed it"
    assert_contains "$T/fetch.trace" "Content-Encoding: gzip"
    git -C "$T/l2" update-ref refs/remotes/origin/main HEAD~150
  done
}

test_a_large_clone_streams_through() {
  remote_work app "$T/big" "file://$T/remote"
  git -C "$T/big" switch -q -c big
  head -c $((30 * 1024 * 1024)) /dev/urandom >"$T/big/big.bin"
  git -C "$T/big" add big.bin
  git -C "$T/big" commit -q -m big
  git -C "$T/big" push -q origin big
  use_remote_token "$TOKEN" gitsrv
  clone_via "$HTTP_URL/acme/app.git" "$T/c5" 2
  git -C "$T/c5" fetch -q origin big
  [ "$(git -C "$T/c5" rev-parse FETCH_HEAD)" = "$(remote_ref app refs/heads/big)" ] ||
    fail "big branch not fetched"
}

test_a_token_for_another_repo_cannot_clone() {
  use_remote_token "$(mint gitsrv/acme/other)" gitsrv
  ! git clone "$HTTP_URL/acme/app.git" "$T/c6" >"$T/out" 2>&1 || fail "clone succeeded"
  assert_contains "$T/out" "does not cover gitsrv/acme/app"
  use_token "$(mint local/acme/other)"
  ! git clone "$GW/local/acme/app.git" "$T/c7" >"$T/out" 2>&1 || fail "local clone succeeded"
  assert_contains "$T/out" "does not cover local/acme/app"
}

test_fetching_without_a_token_is_refused() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' \
    "$GW/gitsrv/acme/app.git/info/refs?service=git-upload-pack")
  [ "$code" = 401 ] || fail "status $code"
}

test_no_secret_reaches_upstream_or_logs() {
  ! grep -qF -- "$TOKEN" "$NGINX_DIR/auth.log" || fail "run token upstream"
  ! grep -rqF -- "$REMOTE_SECRET" "$T/state" "$T/gateway.log" "$T"/test_*.out ||
    fail "static secret leaked"
}

run_tests
