# Who may use the control socket: SO_PEERCRED against control.users and
# control.groups. Needs root to create throwaway users (useradd) and to run
# the client as them; skips otherwise.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
  echo "skipped: needs root, useradd and runuser to connect as other users"
  exit 77
fi

# Unique per run: other engineers' tests may run at the same time.
U_LISTED=rgc$$l U_GROUP=rgc$$g U_OTHER=rgc$$o G_ALLOWED=rgc$$team
USERS_MADE=()
cleanup_users() {
  local u
  for u in "${USERS_MADE[@]}"; do userdel "$u" 2>/dev/null || true; done
  groupdel "$G_ALLOWED" 2>/dev/null || true
}
trap 'cleanup_users; cleanup' EXIT
groupadd "$G_ALLOWED"
for u in "$U_LISTED" "$U_GROUP" "$U_OTHER"; do
  useradd -M -N -s /usr/sbin/nologin "$u"; USERS_MADE+=("$u")
done
usermod -a -G "$G_ALLOWED" "$U_GROUP"

# The socket where the users can reach it (state_dir stays 0700); the
# client script copied where they can read it.
chmod 711 "$T"
mkdir -m 755 "$T/ctl"
cp "$REFGATE_SRC/tests/support/control_client.py" "$T/ctl/client.py"
chmod 644 "$T/ctl/client.py"
SOCK=$T/ctl/control.sock
make_upstream app
write_config "$STANDARD_RULES" \
  "\"control\": {\"socket\": \"$SOCK\", \"users\": [\"$U_LISTED\", \"4000000001\"], \"groups\": [\"$G_ALLOWED\"]}"
start_gateway

# as USER LINE: the answer to LINE sent as USER.
as() { runuser -u "$1" -- python3 "$T/ctl/client.py" "$SOCK" "$2"; }
MINT='{"op": "mint", "repos": ["local/acme/app"], "run": "peer"}'

test_a_user_named_in_control_users_may_mint() {
  as "$U_LISTED" "$MINT" >"$T/o1"
  assert_contains "$T/o1" '"ok":true'
}

test_a_member_of_a_group_in_control_groups_may_mint() {
  as "$U_GROUP" "$MINT" >"$T/o2"
  assert_contains "$T/o2" '"ok":true'
}

test_anyone_else_is_refused_with_a_clear_message_and_logged() {
  as "$U_OTHER" "$MINT" >"$T/o3"
  assert_contains "$T/o3" '"ok":false'
  assert_contains "$T/o3" "refused: user $U_OTHER (uid $(id -u "$U_OTHER")) may not use this gateway's control socket"
  assert_not_contains "$T/o3" '"token"'
  assert_contains "$T/gateway.log" "control_refused uid=$(id -u "$U_OTHER") user=$U_OTHER"
  # The gateway's own user still is served.
  python3 "$T/ctl/client.py" "$SOCK" "$MINT" >"$T/o4"
  assert_contains "$T/o4" '"ok":true'
}

test_the_audit_events_name_the_peers_uid() {
  jq -r 'select(.event == "token-mint") | .detail' "$T/state/audit.jsonl" >"$T/ev"
  assert_contains "$T/ev" "peer uid $(id -u "$U_LISTED") ($U_LISTED)"
  assert_contains "$T/ev" "peer uid $(id -u "$U_GROUP") ($U_GROUP)"
  assert_not_contains "$T/ev" "($U_OTHER)"
}

run_tests
