# deploy/refgate.service confines the gateway with SystemCallFilter= and
# RestrictAddressFamilies=; a call outside them fails with EPERM in
# production only. No systemd runs as PID 1 here to apply the unit, so this
# traces the real gateway and every git child it forks (strace -f) through
# what a deployed gateway does: pushes allowed and denied to a local
# upstream, to a smart-HTTP upstream over HTTP and HTTPS (mirror fetch,
# streamed forwarding, static credentials), a fetch through it, a control
# socket mint, and a SIGTERM stop; then checks every call made is in the
# set the unit's SystemCallFilter= lines allow (expanded by
# systemd-analyze syscall-filter) and every socket family is one the unit
# allows.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/lib_http.sh"

UNIT=$REFGATE_SRC/deploy/refgate.service
command -v strace >/dev/null || { echo "SKIP: no strace (scripts/lib.sh installs it)"; exit 77; }
command -v systemd-analyze >/dev/null ||
  { echo "SKIP: no systemd-analyze (scripts/lib.sh installs systemd)"; exit 77; }
strace -f -qq -o /dev/null true 2>"$T/strace.err" ||
  { echo "SKIP: strace cannot trace here: $(cat "$T/strace.err")"; exit 77; }

# expand GROUP-OR-CALL: the system calls it stands for, one per line.
expand() {
  case $1 in
    @*) systemd-analyze syscall-filter "$1" | sed -n '2,$p' | grep -v '^ *#' |
          while read -r name; do [ -n "$name" ] && expand "$name"; done ;;
    *) echo "$1" ;;
  esac
}

# The unit's filter: the union of its allow lines minus the union of its
# "~" lines, as systemd combines them.
grep '^SystemCallFilter=[^~]' "$UNIT" | cut -d= -f2- | tr ' ' '\n' |
  while read -r g; do [ -n "$g" ] && expand "$g"; done | sort -u >"$T/allowed"
grep '^SystemCallFilter=~' "$UNIT" | cut -d~ -f2- | tr ' ' '\n' |
  while read -r g; do [ -n "$g" ] && expand "$g"; done | sort -u >"$T/denied"
comm -23 "$T/allowed" "$T/denied" >"$T/effective"
read -r -a FAMILIES <<<"$(sed -n 's/^RestrictAddressFamilies=//p' "$UNIT")"

# The gateway runs under strace; every other refgate command does not.
TRACE=$T/trace
REAL_REFGATE=$REFGATE
cat >"$T/refgate-traced" <<SH
#!/bin/sh
[ "\$1" = serve ] && exec strace -f -qq -s 0 -o "$TRACE" "$REAL_REFGATE" "\$@"
exec "$REAL_REFGATE" "\$@"
SH
chmod +x "$T/refgate-traced"
REFGATE=$T/refgate-traced

make_upstream app
make_remote app
start_http_upstream basic
write_remote_config "$STANDARD_RULES" "$(remote_upstream_json gitsrv "$HTTP_URL"),
  $(remote_upstream_json gitsrvs "$HTTPS_URL" "\"ca_file\": \"$T/ca-test.pem\"")"
start_gateway

test_a_local_push_lands_and_a_denied_one_does_not() {
  use_token "$(mint local/acme/app)"
  clone app "$T/w1"
  git -C "$T/w1" switch -q -c feature/one
  commit "$T/w1" one.c
  git -C "$T/w1" push -q origin feature/one
  [ -n "$(upstream_ref app refs/heads/feature/one)" ] || fail "feature/one did not land"
  commit "$T/w1" two.c
  ! git -C "$T/w1" push -q origin HEAD:main 2>/dev/null || fail "a push to main landed"
}

test_remote_pushes_and_a_fetch_go_through_over_http_and_https() {
  local url host
  for host in gitsrv gitsrvs; do
    url=$HTTP_URL
    [ "$host" = gitsrvs ] && url=$HTTPS_URL
    use_remote_token "$(mint "$host/acme/app")" "$host" "$url"
    remote_work app "$T/r-$host" "$url"
    git -C "$T/r-$host" -c http.sslCAInfo="$T/ca-test.pem" fetch -q origin
    git -C "$T/r-$host" switch -q -c "feature/$host"
    commit "$T/r-$host" "$host.c"
    git -C "$T/r-$host" -c http.sslCAInfo="$T/ca-test.pem" push -q origin "feature/$host"
    [ -n "$(remote_ref app "refs/heads/feature/$host")" ] || fail "feature/$host did not land"
  done
}

test_a_control_socket_mint_answers() {
  python3 "$REFGATE_SRC/tests/support/control_client.py" "$T/state/control.sock" \
    '{"op": "mint", "repos": ["local/acme/app"], "ttl": "1h"}' >"$T/ctl.out"
  assert_contains "$T/ctl.out" '"ok":true'
}

# Runs last: stops the gateway (SIGTERM to the gateway, not to strace) so
# the trace holds its shutdown too, then compares.
test_every_call_the_gateway_and_its_children_made_is_in_the_units_filter() {
  local gw
  gw=$(pgrep -P "$GW_PID" -x refgate || true)
  [ -n "$gw" ] || gw=$(pgrep -P "$GW_PID" | head -n1)
  kill -TERM "$gw"
  # Not our child here (run_tests runs each test in a subshell): poll.
  for _ in $(seq 1 600); do kill -0 "$GW_PID" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$GW_PID" 2>/dev/null || fail "the gateway did not stop on SIGTERM"
  sed -nE 's/^[0-9]+ +([a-z0-9_]+)\(.*/\1/p' "$TRACE" | sort -u >"$T/used"
  echo "system calls made: $(wc -l <"$T/used") of the $(wc -l <"$T/effective") the unit allows:" \
    "$(tr '\n' ' ' <"$T/used")" >&3
  comm -23 "$T/used" "$T/effective" >"$T/outside"
  [ ! -s "$T/outside" ] || fail "outside the unit's SystemCallFilter: $(tr '\n' ' ' <"$T/outside")"
  grep -oE 'socket\(AF_[A-Z0-9]+' "$TRACE" | cut -d'(' -f2 | sort -u >"$T/families"
  echo "socket families: $(tr '\n' ' ' <"$T/families")" >&3
  local fam ok f
  while read -r fam; do
    ok=
    for f in "${FAMILIES[@]}"; do [ "$f" = "$fam" ] && ok=1; done
    [ -n "$ok" ] || fail "$fam is not in the unit's RestrictAddressFamilies"
  done <"$T/families"
}

# The figures go to fd 3, the script's stdout (run_tests keeps a passing
# test's own output to itself).
exec 3>&1
run_tests
