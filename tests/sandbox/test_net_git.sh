#!/usr/bin/env bash
# The real git client pushes through a real gateway from inside
# `refgate-run --net gateway=...`: the run reaches the gateway at the same
# URL git uses outside, the policy still decides (a feature branch lands,
# main is refused), and the same push under `--net none` cannot connect.
# Not under /tmp: the sandbox's /tmp is a private tmpfs.
export TMPDIR=/var/tmp
. "$(dirname "$0")/../integration/lib.sh"

if [ -z "${REFGATE_RUN:-}" ] || [ ! -x "$REFGATE_RUN" ]; then
  echo "SKIP: REFGATE_RUN does not point at the refgate-run binary"
  exit 77
fi
# Searchable by others: run as root, the sandboxed command is nobody.
chmod 755 "$T"

make_upstream app
write_config "$STANDARD_RULES"
start_gateway
TOKEN=$(mint local/acme/app)

# run_push WORKDIR NETMODE REFSPEC...: git push from inside refgate-run, the
# push routed to the gateway the way refgate run routes it (GIT_CONFIG_*
# and the token passed by name: refgate-run drops them otherwise).
run_push() {
  local dir=$1 net=$2
  shift 2
  (cd "$dir" && "$REFGATE_RUN" -q --rm --net "$net" -e REFGATE_TOKEN -e GIT_CONFIG_COUNT \
    -e GIT_CONFIG_KEY_0 -e GIT_CONFIG_VALUE_0 -e GIT_CONFIG_KEY_1 -e GIT_CONFIG_VALUE_1 \
    -e GIT_TERMINAL_PROMPT -e GIT_CONFIG_NOSYSTEM -- git push origin "$@")
}

test_push_from_inside_lands_through_the_gateway() {
  clone app "$T/w1"
  chmod -R a+rX "$T/w1"
  git -C "$T/w1" checkout -q -b feature/net
  commit "$T/w1" net.txt "from the sandbox"
  use_token "$TOKEN"
  run_push "$T/w1" "gateway=${GW#http://}" feature/net >"$T/out" 2>&1 ||
    { cat "$T/out"; fail "push from inside failed"; }
  [ "$(upstream_ref app refs/heads/feature/net)" = "$(git -C "$T/w1" rev-parse HEAD)" ] ||
    fail "the branch did not land upstream"
}

test_push_to_main_from_inside_is_refused_by_policy() {
  clone app "$T/w2"
  chmod -R a+rX "$T/w2"
  commit "$T/w2" main.txt
  use_token "$TOKEN"
  ! run_push "$T/w2" "gateway=${GW#http://}" main >"$T/out" 2>&1 || fail "push to main succeeded"
  assert_contains "$T/out" "main is protected"
}

test_push_under_net_none_cannot_connect() {
  clone app "$T/w3"
  chmod -R a+rX "$T/w3"
  git -C "$T/w3" checkout -q -b feature/none
  commit "$T/w3" none.txt
  use_token "$TOKEN"
  ! run_push "$T/w3" none feature/none >"$T/out" 2>&1 || fail "push under --net none succeeded"
  assert_contains "$T/out" "Failed to connect"
  [ -z "$(upstream_ref app refs/heads/feature/none)" ] || fail "the branch landed"
}

run_tests
