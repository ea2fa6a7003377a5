# Bad input against a running gateway (curl and raw sockets): each gets a
# clear 4xx or protocol error, nothing lands, and the next good push works.
source "$(dirname "$0")/lib.sh"

make_upstream app
write_config "$STANDARD_RULES" '"max_body_bytes": 2097152'
start_gateway
TOKEN=$(mint local/acme/app)
AUTH="run:$TOKEN"
RP="$GW/local/acme/app.git/git-receive-pack"
CT="Content-Type: application/x-git-receive-pack-request"
ZERO=0000000000000000000000000000000000000000

# post FILE [curl args...]: POST FILE as a push body; status to $T/status,
# body to $T/body.
post() {
  local f=$1; shift
  curl -s -u "$AUTH" -H "$CT" --data-binary "@$f" -o "$T/body" -w '%{http_code}' "$@" "$RP" \
    >"$T/status" || true
}

# command_list OLD NEW REF CAPS: the first pkt-line of a push, then a flush.
command_list() {
  local line="$1 $2 $3"
  printf '%04x%s\0%s\n' $((4 + ${#line} + 1 + ${#4} + 1)) "$line" "$4"
  printf '0000'
}

good_push_still_works() {
  local dir=$T/good-$RANDOM
  use_token "$TOKEN"
  clone app "$dir"
  git -C "$dir" switch -q -c "feature/after-$RANDOM"
  commit "$dir" ok.txt
  git -C "$dir" push -q origin HEAD 2>"$T/push.err" || { cat "$T/push.err"; fail "good push failed"; }
}

test_garbage_body_is_a_400_with_a_message() {
  head -c 5000 /dev/urandom >"$T/garbage"
  post "$T/garbage"
  [ "$(cat "$T/status")" = 400 ] || fail "status $(cat "$T/status")"
  assert_contains "$T/body" "refgate: "
  good_push_still_works
}

test_truncated_pkt_line_is_a_400() {
  printf '00a0refs/heads/truncated' >"$T/trunc"
  post "$T/trunc"
  [ "$(cat "$T/status")" = 400 ] || fail "status $(cat "$T/status")"
  assert_contains "$T/body" "ended before its command list"
  good_push_still_works
}

test_huge_and_bad_pkt_lengths_are_400s() {
  printf 'ffffxxxxxxxx' >"$T/huge"
  post "$T/huge"
  [ "$(cat "$T/status")" = 400 ] || fail "ffff: status $(cat "$T/status")"
  printf '00zzbad hex' >"$T/badhex"
  post "$T/badhex"
  [ "$(cat "$T/status")" = 400 ] || fail "bad hex: status $(cat "$T/status")"
  printf '0003' >"$T/three"
  post "$T/three"
  [ "$(cat "$T/status")" = 400 ] || fail "0003: status $(cat "$T/status")"
  good_push_still_works
}

test_wrong_content_type_is_a_415() {
  printf '0000' >"$T/probe"
  curl -s -u "$AUTH" -H "Content-Type: text/plain" --data-binary "@$T/probe" -o "$T/body" \
    -w '%{http_code}' "$RP" >"$T/status"
  [ "$(cat "$T/status")" = 415 ] || fail "status $(cat "$T/status")"
  curl -s -u "$AUTH" -H "$CT" -H "Content-Encoding: br" --data-binary "@$T/probe" -o "$T/body" \
    -w '%{http_code}' "$RP" >"$T/status"
  [ "$(cat "$T/status")" = 415 ] || fail "brotli: status $(cat "$T/status")"
}

test_probe_gets_an_empty_200() {
  printf '0000' >"$T/probe"
  post "$T/probe"
  [ "$(cat "$T/status")" = 200 ] || fail "status $(cat "$T/status")"
  [ ! -s "$T/body" ] || fail "probe answer not empty"
}

test_path_traversal_and_odd_paths_reach_nothing() {
  local p code
  for p in "/local/../../../etc/info/refs" "/local/acme/..%2f..%2fetc/info/refs" \
    "/local/%2e%2e/%2e%2e/etc/info/refs" "/local/acme/app.git%00/info/refs" \
    "/local//etc/info/refs" "/local/acme/.git/info/refs" "/%2e%2e/acme/app.git/info/refs"; do
    code=$(curl -s --path-as-is -u "$AUTH" -o "$T/body" -w '%{http_code}' \
      "$GW$p?service=git-receive-pack")
    case $code in 400 | 403 | 404) ;; *) fail "$p: status $code" ;; esac
  done
}

test_unknown_host_and_endpoints_are_404() {
  local code
  code=$(curl -s -u "$AUTH" -o "$T/body" -w '%{http_code}' \
    "$GW/nowhere/acme/app.git/info/refs?service=git-receive-pack")
  [ "$code" = 404 ] || fail "unknown host: $code"
  assert_contains "$T/body" "unknown upstream host"
  code=$(curl -s -u "$AUTH" -o "$T/body" -w '%{http_code}' "$GW/local/acme/app.git/HEAD")
  [ "$code" = 404 ] || fail "HEAD: $code"
  code=$(curl -s -u "$AUTH" -o "$T/body" -w '%{http_code}' \
    "$GW/local/acme/missing.git/info/refs?service=git-receive-pack")
  [ "$code" = 403 ] || [ "$code" = 404 ] || fail "missing repo: $code"
  code=$(curl -s -u "$AUTH" -o "$T/body" -w '%{http_code}' -X DELETE "$RP")
  [ "$code" = 405 ] || fail "DELETE: $code"
}

test_upload_pack_needs_the_run_token() {
  local code
  code=$(curl -s -o "$T/body" -w '%{http_code}' \
    "$GW/local/acme/app.git/info/refs?service=git-upload-pack")
  [ "$code" = 401 ] || fail "without a token: status $code"
  code=$(curl -s -u "$AUTH" -o "$T/body" -w '%{http_code}' \
    "$GW/local/acme/app.git/info/refs?service=git-upload-pack")
  [ "$code" = 200 ] || fail "with the token: status $code"
  assert_contains "$T/body" "# service=git-upload-pack"
  code=$(curl -s -u "$AUTH" -o "$T/body" -w '%{http_code}' \
    -H "Content-Type: text/plain" --data-binary 0000 "$GW/local/acme/app.git/git-upload-pack")
  [ "$code" = 415 ] || fail "wrong content type: status $code"
}

test_body_over_the_cap_is_a_413_and_lands_nothing() {
  head -c $((3 * 1024 * 1024)) /dev/urandom >"$T/big"
  post "$T/big"
  [ "$(cat "$T/status")" = 413 ] || fail "status $(cat "$T/status")"
  # The same through git: chunked, so the cap is found while streaming.
  use_token "$TOKEN"
  clone app "$T/wbig"
  git -C "$T/wbig" switch -q -c feature/too-big
  head -c $((3 * 1024 * 1024)) /dev/urandom >"$T/wbig/big.bin"
  git -C "$T/wbig" add big.bin
  git -C "$T/wbig" commit -q -m big
  ! git -C "$T/wbig" push origin feature/too-big >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" "413"
  [ -z "$(upstream_ref app refs/heads/feature/too-big)" ] || fail "it landed"
  good_push_still_works
}

test_gzip_body_is_decoded() {
  local main; main=$(upstream_ref app refs/heads/main)
  { command_list "$ZERO" "$main" refs/heads/feature/gz "report-status"
    git --git-dir="$T/upstream/acme/app.git" pack-objects -q --stdout </dev/null; } | gzip -c >"$T/gz"
  post "$T/gz" -H "Content-Encoding: gzip"
  [ "$(cat "$T/status")" = 200 ] || fail "status $(cat "$T/status")"
  assert_contains "$T/body" "ok refs/heads/feature/gz"
  [ "$(upstream_ref app refs/heads/feature/gz)" = "$main" ] || fail "the ref did not land"
  # A corrupt gzip stream is a 400.
  head -c 200 "$T/gz" >"$T/gz-cut"
  printf 'garbage' >>"$T/gz-cut"
  post "$T/gz-cut" -H "Content-Encoding: gzip"
  [ "$(cat "$T/status")" = 400 ] || fail "corrupt gzip: status $(cat "$T/status")"
}

test_policy_denial_by_hand_is_an_ng_line_in_a_200() {
  local main; main=$(upstream_ref app refs/heads/main)
  command_list "$main" "$ZERO" refs/heads/main "report-status side-band-64k" >"$T/del"
  post "$T/del"
  [ "$(cat "$T/status")" = 200 ] || fail "status $(cat "$T/status")"
  assert_contains "$T/body" "ng refs/heads/main policy: main is protected"
  [ "$(upstream_ref app refs/heads/main)" = "$main" ] || fail "main was deleted"
}

test_malformed_http_on_a_raw_socket_is_refused() {
  local host=${GW#http://}
  exec 3<>"/dev/tcp/${host%:*}/${host##*:}"
  printf 'THIS IS NOT HTTP\r\n\r\n' >&3
  timeout 5 cat <&3 >"$T/raw" || true
  exec 3>&-
  assert_contains "$T/raw" "400"
  # A request that stops half-way, then the connection closes.
  exec 3<>"/dev/tcp/${host%:*}/${host##*:}"
  printf 'POST /local/acme/app.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n' >&3
  exec 3>&-
  good_push_still_works
}

test_a_client_vanishing_mid_pack_lands_nothing() {
  local main; main=$(upstream_ref app refs/heads/main)
  local host=${GW#http://} basic
  basic=$(printf '%s' "$AUTH" | base64 -w0)
  { command_list "$ZERO" "$main" refs/heads/feature/vanish "report-status"
    printf 'PACK\0\0\0\2\0\0\0\5'; } >"$T/partial"
  exec 3<>"/dev/tcp/${host%:*}/${host##*:}"
  printf 'POST /local/acme/app.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n%s\r\nContent-Length: 100000\r\n\r\n' \
    "$basic" "$CT" >&3
  cat "$T/partial" >&3
  # Wait until the push is in flight upstream (the gateway runs
  # receive-pack for it), then vanish, then until the gateway has ended
  # every child it ran for the request. Bounded: 10 s each.
  for _ in $(seq 200); do pgrep -P "$GW_PID" -f receive-pack >/dev/null && break; sleep 0.05; done
  pgrep -P "$GW_PID" -f receive-pack >/dev/null || fail "upstream receive-pack never started"
  exec 3>&-
  for _ in $(seq 200); do pgrep -P "$GW_PID" >/dev/null || break; sleep 0.05; done
  ! pgrep -P "$GW_PID" >/dev/null || fail "the gateway still runs $(pgrep -a -P "$GW_PID")"
  [ -z "$(upstream_ref app refs/heads/feature/vanish)" ] || fail "the ref landed"
  good_push_still_works
}

run_tests
