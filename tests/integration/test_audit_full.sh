# Fail closed on the audit log: when it cannot take the records (here: its
# filesystem is full), nothing is forwarded and git says why; once there is
# room again, pushes land. Needs root to mount a small tmpfs.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v mount >/dev/null; then
  echo "skipped: mounting a small tmpfs for state_dir needs root"
  exit 77
fi

make_upstream app
mkdir -p "$T/small"
mount -t tmpfs -o size=4m tmpfs "$T/small" || { echo "skipped: cannot mount tmpfs"; exit 77; }
cleanup_mount() { stop_gateway; umount "$T/small" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup_mount EXIT
write_config "$STANDARD_RULES"
sed -i "s|\"state_dir\": \"state\"|\"state_dir\": \"$T/small/state\"|" "$T/refgate.json"
start() {
  rm -f "$T/small/state/url"
  "$REFGATE" serve --config "$T/refgate.json" 2>>"$T/gateway.log" &
  GW_PID=$!
  for _ in $(seq 100); do [ -s "$T/small/state/url" ] && break; sleep 0.05; done
  GW=$(cat "$T/small/state/url")
}
start
TOKEN=$(mint local/acme/app)

test_a_full_audit_filesystem_refuses_pushes_and_forwards_nothing() {
  use_token "$TOKEN"
  clone app "$T/w"
  git -C "$T/w" switch -q -c feature/full
  commit "$T/w" f.txt
  dd if=/dev/zero of="$T/small/filler" bs=64k 2>/dev/null || true
  ! git -C "$T/w" push origin feature/full >"$T/out" 2>&1 || fail "push succeeded"
  assert_contains "$T/out" "feature/full -> feature/full (refgate: the audit log cannot be written"
  [ -z "$(upstream_ref app refs/heads/feature/full)" ] || fail "the push was forwarded"
  assert_contains "$T/gateway.log" "push_refused_audit_unwritable"
  rm -f "$T/small/filler"
  git -C "$T/w" push origin feature/full >"$T/out" 2>&1 || { cat "$T/out"; fail "push after"; }
  [ -n "$(upstream_ref app refs/heads/feature/full)" ] || fail "did not land after"
  "$REFGATE" audit verify --config "$T/refgate.json" >"$T/verify" || { cat "$T/verify"; fail "chain"; }
}

run_tests
