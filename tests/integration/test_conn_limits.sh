# Strangers' connections against a running gateway (raw sockets from
# tests/support/conn_flood.py): thousands of idle sockets, a header
# trickler, a flood past the unauthenticated cap, a silent body and one run
# token's pile of requests must each leave a real git push able to land.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
# 2000 sockets on each side, plus the gateway's own descriptors.
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 4500 ] ||
  { echo "SKIP: the hard descriptor limit ($(ulimit -Hn)) is below 4500"; exit 77; }

make_upstream app
source "$(dirname "$0")/lib_limits.sh"

# push_lands NAME [TOKEN]: a real push of a new branch lands within 60 s;
# its duration in seconds goes to $T/push.seconds.
push_lands() {
  local dir=$T/push-$1 start end
  use_token "${2:-$TOKEN}"
  rm -rf "$dir"
  clone app "$dir"
  git -C "$dir" switch -q -c "feature/$1"
  commit "$dir" "$1.txt"
  start=$(date +%s.%N)
  timeout 60 git -C "$dir" push -q origin HEAD >"$T/push.out" 2>&1 ||
    { cat "$T/push.out"; fail "push of feature/$1 failed"; }
  end=$(date +%s.%N)
  [ -n "$(upstream_ref app "refs/heads/feature/$1")" ] || fail "feature/$1 did not land"
  echo "$end - $start" | bc >"$T/push.seconds"
}

# wait_file FILE SECONDS
wait_file() {
  for _ in $(seq 1 $(($2 * 20))); do
    [ -s "$1" ] && return 0
    sleep 0.05
  done
  fail "$1 did not appear within $2 s"
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$GW_PID/status"; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$GW_PID/status"; }

test_a_push_lands_while_2000_idle_connections_are_held() {
  # A long header deadline: the idle sockets stay for the whole push.
  restart_with '{"header_seconds": 300}'
  push_lands idle-before
  local before rss0 rss1
  before=$(cat "$T/push.seconds")
  rss0=$(rss_kib)
  "${FLOOD[@]}" hold --port "$PORT" --count 2000 --ready "$T/held" --seconds 120 \
    >"$T/hold.out" 2>&1 &
  HOLDERS+=($!)
  wait_file "$T/held" 60
  # Every one accepted and tracked before the push starts.
  for _ in $(seq 1 200); do [ "$(threads)" -ge 2000 ] && break; sleep 0.05; done
  rss1=$(rss_kib)
  push_lands idle-during
  {
    echo "push without idle connections: ${before}s; with 2000 held: $(cat "$T/push.seconds")s"
    echo "gateway VmRSS: ${rss0} KiB idle, ${rss1} KiB with 2000 held ($(threads) threads):" \
      "$(((rss1 - rss0) / 2000)) KiB per connection"
  } | tee -a "$T/figures"
  extra_stop
  cat "$T/hold.out"
  assert_contains "$T/hold.out" "open=2000 closed=0"
  [ "$(echo "$(cat "$T/push.seconds") < 20" | bc)" = 1 ] || fail "the push took too long"
}

test_a_header_trickler_is_cut_at_the_deadline() {
  restart_with '{"header_seconds": 3}'
  "${FLOOD[@]}" trickle --port "$PORT" --interval 1 --seconds 15 >"$T/trickle.out"
  cat "$T/trickle.out"
  assert_contains "$T/trickle.out" "cut="
  local at
  at=$(sed -n 's/^cut=//p' "$T/trickle.out")
  # Not before the deadline, and not much after (the reaper looks 4 times a second).
  [ "$(echo "$at >= 2.5 && $at <= 5" | bc)" = 1 ] || fail "cut after ${at}s, deadline 3 s"
  push_lands after-trickle
}

test_past_the_unauthenticated_cap_the_oldest_are_evicted() {
  restart_with '{"connections": 16, "unauthenticated": 4}'
  "${FLOOD[@]}" evict --port "$PORT" --count 7 --expect 3 --settle 3 >"$T/evict.out"
  cat "$T/evict.out"
  # Seven waiting, four allowed: the three oldest go, the newest stay.
  [ "$(cat "$T/evict.out")" = "closed=0,1,2" ] || fail "expected the three oldest evicted"
  # A pusher still gets in while strangers hold every waiting slot.
  "${FLOOD[@]}" hold --port "$PORT" --count 4 --ready "$T/held4" --seconds 60 >"$T/hold4.out" &
  HOLDERS+=($!)
  wait_file "$T/held4" 10
  push_lands after-evict
  extra_stop
}

test_a_silent_body_is_cut_after_idle_seconds() {
  restart_with '{"idle_seconds": 2}'
  "${FLOOD[@]}" post --port "$PORT" --token "$TOKEN" --path /local/acme/app.git/git-receive-pack \
    --body-bytes 10 --hold-ready "$T/silent" --seconds 10 >"$T/silent.out"
  cat "$T/silent.out"
  assert_contains "$T/silent.out" "hung up"
  push_lands after-silent
}

test_a_slow_upstream_is_not_idle_time_of_the_client() {
  # The client is silent while upstream works: that is not its idleness.
  restart_with '{"idle_seconds": 2}'
  local hook=$T/upstream/acme/app.git/hooks/pre-receive
  printf '#!/bin/sh\ncat >/dev/null\nsleep 4\n' >"$hook"
  chmod +x "$hook"
  push_lands slow-upstream || { rm -f "$hook"; return 1; }
  rm -f "$hook"
}

test_past_per_token_requests_get_429_while_another_token_works() {
  restart_with '{"per_token": 2}'
  local other i
  other=$(mint local/acme/app)
  for i in 1 2; do
    "${FLOOD[@]}" post --port "$PORT" --token "$TOKEN" \
      --path /local/acme/app.git/git-receive-pack --body-bytes 10 \
      --hold-ready "$T/req$i" --seconds 60 >"$T/req$i.out" &
    HOLDERS+=($!)
  done
  wait_file "$T/req1" 10
  wait_file "$T/req2" 10
  local code=
  for _ in $(seq 1 40); do
    code=$(curl -s -u "run:$TOKEN" -o "$T/429.body" -w '%{http_code}' \
      "$GW/local/acme/app.git/info/refs?service=git-receive-pack")
    [ "$code" = 429 ] && break
    sleep 0.05 # until both held requests have been read
  done
  [ "$code" = 429 ] || fail "third request with one token: $code"
  assert_contains "$T/429.body" "refgate: too many concurrent requests for this run token"
  push_lands other-token "$other"
  extra_stop
  # The held requests are gone: their token works again.
  push_lands same-token-after
}

run_tests
