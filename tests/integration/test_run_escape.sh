# Escape tests for `refgate run` with the real git client, the real gateway
# and refgate-run: an agent in a run first pushes a feature branch normally
# (it lands), then tries to get a push or a byte out around the gateway.
# Each attempt must fail with the upstream unchanged:
#   an explicit pushurl to the upstream's file:// URL, a `-c url...`
#   override mapping a name to the upstream, a direct file:// push with the
#   run's git settings dropped (the root is hidden), an ssh:// push, curl to
#   the outside and to another local port (only the gateway is reachable),
#   reading the gateway's token-ed25519.key, its config and an upstream credential
#   file (hidden); and the run's environment never holds the upstream's
#   write credential.
# Run as root, then as the unprivileged rgtest-sandbox user when possible.
#
# Not under /tmp: a run has a private /tmp, where the upstream, the state
# and the config would be missing whatever refgate run hides. Under the
# build tree they are on the host tree the run sees, so only --hide keeps
# them out.
TMPDIR=${REFGATE_BUILD:-/var/tmp}/tests/escape-tmp
mkdir -p "$TMPDIR"
chmod 755 "$TMPDIR"
export TMPDIR
source "$(dirname "$0")/lib.sh"
# Run as root, the command is nobody: the directories above the fork must be searchable.
chmod 755 "$T"

: "${REFGATE_RUN:?set REFGATE_RUN to the refgate-run binary}"
mkdir "$T/probe"
if ! "$REFGATE_RUN" -q -d "$T/probe" -- true >"$T/check" 2>&1; then
  echo "skipped: refgate-run cannot confine on this kernel: $(cat "$T/check")"
  exit 77
fi
RG_USER=rgtest-sandbox
make_upstream app

# A second upstream with a static write credential: the run must never see
# it (the config names the file; the file is hidden; nothing copies it).
STATIC=static-UPSTREAM-WRITE-CREDENTIAL-$RANDOM$RANDOM
printf '%s\n' "$STATIC" >"$T/upstream.token"
chmod 600 "$T/upstream.token"
cat >"$T/refgate.json" <<JSON
{
  "listen": "127.0.0.1:0",
  "state_dir": "state",
  "control": {"socket": "$T/control.sock", "users": ["$RG_USER"]},
  "upstreams": [{"host": "local", "url": "file://$T/upstream"},
                {"host": "git.example.invalid", "url": "https://git.example.invalid",
                 "credentials": {"type": "static", "username": "x",
                                 "token_file": "$T/upstream.token"}}],
  "rules": $STANDARD_RULES
}
JSON
start_gateway
cp "$REFGATE_SRC/tests/support/control_client.py" "$T/client.py"
chmod 644 "$T/client.py"

# Another service on this host's loopback, which the run must not reach.
# The log exists before the loop reads it: the background job opens it
# whenever it is scheduled.
: >"$T/other.log"
python3 -m http.server --bind 127.0.0.1 0 >>"$T/other.log" 2>&1 &
OTHER_PID=$!
trap 'kill $OTHER_PID 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 1 200); do
  OTHER=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$T/other.log")
  [ -n "$OTHER" ] && break
  sleep 0.05
done
[ -n "$OTHER" ] || { cat "$T/other.log"; fail "no local service"; exit 1; }
curl -s -o /dev/null "http://127.0.0.1:$OTHER/" || fail "the local service is not reachable outside"

# The agent: commit, push a feature branch normally, dump the environment,
# then run the escape attempt; results land in the fork.
AGENT='#!/bin/sh
name=$1; shift
git -c user.name=A -c user.email=a@example.invalid commit -q --allow-empty -m "$name" &&
  git push origin "HEAD:refs/heads/feature/$name" >push.out 2>&1 && echo PUSHED >normal.out
env | sort >env.dump
sh -c "$*" >escape.out 2>&1
echo "rc=$?" >>escape.out
exit 0
'

# setup_tree DIR: a clone of the upstream with the agent committed.
setup_tree() {
  clone app "$1"
  printf '%s' "$AGENT" >"$1/agent.sh"
  chmod +x "$1/agent.sh"
  git -C "$1" add agent.sh
  git -C "$1" commit -q -m agent
}
setup_tree "$T/w"
W=$T/w
AS=()
RUN_ARGS=(--profile none)

# escape NAME COMMAND: refgate run the agent in $W; FORK is its fork.
escape() {
  local name=$1; shift
  MAIN_BEFORE=$(upstream_ref app refs/heads/main)
  set +e
  (cd "$W" && "${AS[@]}" "$REFGATE" run --config "$T/refgate.json" "${RUN_ARGS[@]}" -- ./agent.sh "$name-$RUNNER" "$@") \
    >"$T/run.out" 2>&1
  RUN_RC=$?
  set -e
  ! grep -q 'Sanitizer' "$T/run.out" || { cat "$T/run.out"; fail "sanitizer report"; }
  [ "$RUN_RC" -eq 0 ] || { cat "$T/run.out"; fail "refgate run: status $RUN_RC"; }
  FORK=$(sed -n 's/^refgate run: the fork: //p' "$T/run.out")
  [ -d "$FORK" ] || { cat "$T/run.out"; fail "no fork"; }
  # Normal work first: the feature branch landed through the gateway.
  [ -f "$FORK/normal.out" ] || { cat "$T/run.out" "$FORK/push.out"; fail "the normal push failed"; }
  [ -n "$(upstream_ref app "refs/heads/feature/$name-$RUNNER")" ] || fail "the feature branch did not land"
  assert_contains "$FORK/push.out" "$GW/local/acme/app.git"
  # Never an upstream write credential in the run.
  assert_not_contains "$FORK/env.dump" "$STATIC"
}

# The escape failed and main upstream is what it was.
escaped_nothing() {
  assert_not_contains "$FORK/escape.out" 'rc=0'
  [ "$(upstream_ref app refs/heads/main)" = "$MAIN_BEFORE" ] || fail "main changed upstream"
}

test_an_explicit_pushurl_to_the_upstream_goes_through_the_gateway_and_is_denied() {
  escape pushurl "git -c remote.origin.pushurl=file://$T/upstream/acme/app.git push origin main"
  escaped_nothing
  assert_contains "$FORK/escape.out" '[remote rejected] main -> main (policy: main is protected)'
}

test_a_url_override_to_the_upstream_fails() {
  escape insteadof "git -c url.file://$T/upstream/acme/.insteadOf=up: -c url.file://$T/upstream/acme/.pushInsteadOf=up: push up:app.git main"
  escaped_nothing
}

test_a_direct_file_push_without_the_runs_git_settings_fails_the_root_is_hidden() {
  escape direct "ls $T/upstream/acme >ls.out 2>&1; env -u GIT_CONFIG_COUNT git push file://$T/upstream/acme/app.git main"
  escaped_nothing
  assert_not_contains "$FORK/escape.out" 'Writing objects'
  assert_not_contains "$FORK/ls.out" 'app.git'
  assert_contains "$FORK/ls.out" 'ls: '
}

test_a_direct_file_push_with_the_runs_git_settings_is_rewritten_and_denied() {
  escape direct2 "git push file://$T/upstream/acme/app.git main"
  escaped_nothing
  assert_contains "$FORK/escape.out" '(policy: main is protected)'
}

test_an_ssh_push_fails() {
  escape ssh "env -u GIT_CONFIG_COUNT GIT_SSH_COMMAND='ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o ConnectTimeout=5' git push ssh://git@127.0.0.1:22/acme/app.git main"
  escaped_nothing
}

test_curl_reaches_neither_the_outside_nor_another_local_port() {
  escape curl "curl -fsS -m 10 -o /dev/null https://example.com/ && echo OUTSIDE-REACHED; curl -fsS -m 10 -o /dev/null http://127.0.0.1:$OTHER/ && echo LOCAL-REACHED; exit 1"
  escaped_nothing
  assert_not_contains "$FORK/escape.out" 'OUTSIDE-REACHED'
  assert_not_contains "$FORK/escape.out" 'LOCAL-REACHED'
}

test_with_an_agent_profile_its_proxy_refuses_everything_off_its_list() {
  RUN_ARGS=(--profile claude)
  # -f: the proxy's refusals are HTTP answers; --noproxy '': through the
  # proxy even for loopback, which NO_PROXY would send straight (and fail).
  escape proxy "curl -fsS -m 10 -o /dev/null https://example.com/ && echo OUTSIDE-REACHED; curl -fsS -m 10 -o /dev/null --noproxy '' --proxytunnel -x \"\$HTTPS_PROXY\" http://127.0.0.1:$OTHER/ && echo LOCAL-REACHED; curl -fsS -m 10 -o /dev/null -x \"\$HTTPS_PROXY\" http://example.com/ && echo PLAIN-REACHED; exit 1"
  RUN_ARGS=(--profile none)
  escaped_nothing
  assert_contains "$T/run.out" 'profile claude'
  assert_contains "$FORK/env.dump" 'HTTPS_PROXY='
  assert_not_contains "$FORK/escape.out" 'REACHED'
  [ "$(grep -c 'returned error: 403' "$FORK/escape.out")" -eq 2 ] ||
    { cat "$FORK/escape.out"; fail "expected two 403s from the proxy"; }
  assert_contains "$FORK/escape.out" 'error: 405'
}

test_the_token_key_the_config_and_the_upstream_credential_are_unreadable() {
  escape read "cat $T/state/token-ed25519.key && echo KEY-READ; cat $T/refgate.json && echo CONFIG-READ; cat $T/upstream.token && echo CRED-READ; exit 1"
  escaped_nothing
  assert_not_contains "$FORK/escape.out" 'KEY-READ'
  assert_not_contains "$FORK/escape.out" 'CONFIG-READ'
  assert_not_contains "$FORK/escape.out" 'CRED-READ'
  assert_not_contains "$FORK/escape.out" "$STATIC"
}

# The control socket mints tokens and approves pushes for its users, the
# run's user among them: a run that reached it could approve its own push.
# Here it is outside state_dir (control.socket), so only --hide keeps it out.
test_the_control_socket_is_out_of_reach_so_a_run_cannot_approve_its_own_push() {
  escape control "python3 $T/client.py $T/control.sock '{\"op\": \"approve\", \"id\": \"abcdefghij\"}' '{\"op\": \"mint\", \"repos\": [\"local/acme/app\"]}'"
  escaped_nothing
  assert_not_contains "$FORK/escape.out" '"ok"'
}

RUNNER=root
# Not behind `||`: bash would ignore errexit inside every test.
set +e
run_tests
rc=$?
set -e

# The same as an unprivileged user, who may use the control socket.
user_ok() {
  [ "$(id -u)" = 0 ] || { echo "# not root: the run above was the unprivileged one"; return 1; }
  command -v setpriv >/dev/null || { echo "# no setpriv: unprivileged variant skipped"; return 1; }
  if ! id "$RG_USER" >/dev/null 2>&1 && ! useradd -m -s /bin/sh "$RG_USER" >/dev/null 2>&1; then
    echo "# cannot create $RG_USER: unprivileged variant skipped"
    return 1
  fi
  return 0
}
if user_ok; then
  chmod 644 "$T/refgate.json"
  mkdir -p "$T/uhome"
  chown "$RG_USER:" "$T/uhome"
  AS=(setpriv --reuid="$RG_USER" --regid="$RG_USER" --init-groups env HOME="$T/uhome")
  if ! "${AS[@]}" test -x "$REFGATE"; then
    echo "# $RG_USER cannot run $REFGATE: unprivileged variant skipped"
  else
    # The fork is made beside the work tree: its parent is the user's.
    mkdir "$T/u"
    W=$T/u/w
    setup_tree "$W"
    chown -R "$RG_USER:" "$T/u"
    RUNNER=user
    echo "# as $RG_USER:"
    set +e
    run_tests
    [ $? -eq 0 ] || rc=1
    set -e
  fi
fi
exit $rc
