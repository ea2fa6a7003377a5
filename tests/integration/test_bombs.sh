# Bodies built to cost the gateway disk: a gzip bomb pushed and fetched
# gets 413 with nothing spooled past the first MiB or so, and requests
# spooling past limits.spool_bytes together get 503; after each, a real
# push lands. Raw HTTP from tests/support/conn_flood.py, plus the real git.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }

ZERO=0000000000000000000000000000000000000000
MIB=1048576
make_upstream app
source "$(dirname "$0")/lib_limits.sh"

# push_branch NAME [BYTES]: push feature/NAME with a new commit (a file of
# BYTES random bytes, default a line) through the gateway; git's output in
# $T/push.out, its status returned.
push_branch() {
  local dir=$T/push-$1
  use_token "$TOKEN"
  [ -d "$dir" ] || { clone app "$dir"; git -C "$dir" switch -q -c "feature/$1"; }
  if [ -n "${2:-}" ]; then
    head -c "$2" /dev/urandom >"$dir/blob-$RANDOM"
    git -C "$dir" add -A
    git -C "$dir" commit -q -m "blob"
  else
    commit "$dir" "$1-$RANDOM.txt"
  fi
  timeout 60 git -C "$dir" push origin HEAD >"$T/push.out" 2>&1
}

push_lands() {
  push_branch "$1" || { cat "$T/push.out"; fail "push of feature/$1 failed"; }
  [ "$(upstream_ref app "refs/heads/feature/$1")" = "$(git -C "$T/push-$1" rev-parse HEAD)" ] ||
    fail "feature/$1 did not land"
}

# watch_spool: record the most the gateway holds under its tmp dir until
# watch_spool_end, which leaves it in $T/spool.max (not in a $(...): the
# watcher is this shell's child).
watch_spool() {
  rm -f "$T/spool.max" "$T/spool.max.ready"
  "${FLOOD[@]}" watch-spool --pid "$GW_PID" --dir "$T/state/tmp" --out "$T/spool.max" \
    --seconds 120 &
  WATCH=$!
  for _ in $(seq 1 200); do [ -e "$T/spool.max.ready" ] && return 0; sleep 0.05; done
  fail "the spool watcher did not start"
}
watch_spool_end() {
  kill "$WATCH"
  wait "$WATCH" || true
}

# A bomb: 256 MiB of zeros behind PREFIX, about 256 KiB once gzipped.
BOMB=$((256 * MIB))

test_a_gzip_bomb_push_is_413_and_spools_almost_nothing() {
  restart_with '{}'
  # An update of a feature branch: the rules tell update from force, so the
  # gateway spools the pack to compute ancestry.
  push_lands bomb
  local old cmd most
  old=$(upstream_ref app refs/heads/feature/bomb)
  cmd="$old 1111111111111111111111111111111111111111 refs/heads/feature/bomb"
  watch_spool
  "${FLOOD[@]}" post --port "$PORT" --token "$TOKEN" --path /local/acme/app.git/git-receive-pack \
    --prefix "$(printf '%04x' $((4 + ${#cmd} + 1 + 13 + 1)))$cmd\\0report-status\\n0000PACK" \
    --gzip-zeros "$BOMB" >"$T/bomb.out"
  watch_spool_end
  most=$(cat "$T/spool.max")
  head -c 300 "$T/bomb.out"; echo
  echo "push bomb ($BOMB bytes of zeros gzipped): most spooled $most bytes" | tee -a "$T/figures"
  assert_contains "$T/bomb.out" "status=413"
  assert_contains "$T/bomb.out" "refgate: gzip body expands more than 100:1"
  [ "$most" -le $((2 * MIB)) ] || fail "spooled $most bytes for a bomb"
  [ "$(upstream_ref app refs/heads/feature/bomb)" = "$old" ] || fail "the bomb moved the branch"
  push_lands bomb
}

test_a_gzip_bomb_fetch_is_413_and_spools_almost_nothing() {
  restart_with '{}'
  local most
  watch_spool
  "${FLOOD[@]}" post --port "$PORT" --token "$TOKEN" --path /local/acme/app.git/git-upload-pack \
    --ctype application/x-git-upload-pack-request --gzip-zeros "$BOMB" >"$T/fbomb.out"
  watch_spool_end
  most=$(cat "$T/spool.max")
  head -c 300 "$T/fbomb.out"; echo
  echo "fetch bomb ($BOMB bytes of zeros gzipped): most spooled $most bytes" | tee -a "$T/figures"
  assert_contains "$T/fbomb.out" "status=413"
  assert_contains "$T/fbomb.out" "refgate: gzip body expands more than 100:1"
  [ "$most" -le $((2 * MIB)) ] || fail "spooled $most bytes for a bomb"
  push_lands after-fetch-bomb
}

test_spools_past_the_budget_get_503_and_the_budget_comes_back() {
  restart_with "{\"spool_bytes\": $((4 * MIB))}"
  # An existing branch whose next push must be spooled (update vs force).
  push_lands budget
  # A fetch that has spooled 3 MiB and holds on to it.
  "${FLOOD[@]}" post --port "$PORT" --token "$TOKEN" --path /local/acme/app.git/git-upload-pack \
    --ctype application/x-git-upload-pack-request --body-bytes $((3 * MIB)) \
    --hold-ready "$T/held" --seconds 60 >"$T/held.out" &
  HOLDERS+=($!)
  "${FLOOD[@]}" spooled --pid "$GW_PID" --dir "$T/state/tmp" --at-least $((3 * MIB)) --seconds 20
  # A second fetch needing 2 MiB more: 503, with the reason.
  "${FLOOD[@]}" post --port "$PORT" --token "$TOKEN" --path /local/acme/app.git/git-upload-pack \
    --ctype application/x-git-upload-pack-request --body-bytes $((2 * MIB)) >"$T/second.out"
  head -c 300 "$T/second.out"; echo
  assert_contains "$T/second.out" "status=503"
  assert_contains "$T/second.out" "refgate: the gateway's spool space (limits.spool_bytes)"
  # A real push of a 2 MiB pack that must be spooled: refused, nothing moves.
  local old
  old=$(upstream_ref app refs/heads/feature/budget)
  if push_branch budget $((2 * MIB)); then
    cat "$T/push.out"
    fail "a push past the spool budget was accepted"
  fi
  cat "$T/push.out"
  assert_contains "$T/push.out" "503"
  [ "$(upstream_ref app refs/heads/feature/budget)" = "$old" ] || fail "the branch moved"
  # The held fetch ends: its spool goes back to the budget and the push lands.
  extra_stop
  push_lands budget
}

run_tests
