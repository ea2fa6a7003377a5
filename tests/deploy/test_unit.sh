#!/bin/bash
# deploy/refgate.service passes `systemd-analyze verify` (with ExecStart and
# ExecReload pointed at the built refgate through a temporary copy: verify checks the
# binary exists), its `systemd-analyze security --offline` exposure stays at
# or under 2.0 (printed), and deploy/refgate.sysusers creates the user and
# group the unit runs as. Each tool is first tried on a trivial unit: when
# it does not work on this machine the test says why and skips that part.
set -euo pipefail

UNIT=$REFGATE_SRC/deploy/refgate.service
SYSUSERS=$REFGATE_SRC/deploy/refgate.sysusers
T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-unit.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

command -v systemd-analyze >/dev/null ||
  { echo "SKIP: no systemd-analyze (scripts/lib.sh installs systemd)"; exit 77; }
systemd-analyze --version | head -n1

mkdir -p "$T/probe" "$T/unit"
printf '[Service]\nExecStart=/bin/true\n' >"$T/probe/probe.service"
sed -E "s#^(ExecStart|ExecReload)=/usr/local/bin/refgate #\1=$REFGATE #" "$UNIT" >"$T/unit/refgate.service"
grep -q "^ExecStart=$REFGATE serve" "$T/unit/refgate.service" ||
  fail "the unit's ExecStart is not /usr/local/bin/refgate serve ..."
grep -q "^ExecReload=$REFGATE serve .* --check-config" "$T/unit/refgate.service" ||
  fail "the unit's reload does not first check the config"

# verify: the pages named by Documentation= are checked where they are
# installed (tests/deploy/test_install.sh), so not here (--man=no).
if ! systemd-analyze verify --man=no "$T/probe/probe.service" >"$T/probe.out" 2>&1; then
  echo "skipped verify: systemd-analyze verify does not work here: $(cat "$T/probe.out")"
else
  systemd-analyze verify --man=no "$T/unit/refgate.service" >"$T/verify.out" 2>&1 ||
    { cat "$T/verify.out"; fail "systemd-analyze verify refused the unit"; }
  # verify exits 0 on unknown keys and bad values; it only warns.
  ! grep -q 'refgate.service' "$T/verify.out" ||
    { cat "$T/verify.out"; fail "systemd-analyze verify warned about the unit"; }
  echo "ok: systemd-analyze verify"
fi

if ! systemd-analyze security --offline=yes "$T/probe/probe.service" >"$T/probe.out" 2>&1; then
  echo "skipped security: systemd-analyze security --offline does not work here: $(tail -n2 "$T/probe.out")"
else
  # --threshold is on a 0-100 scale: 20 is an exposure of 2.0.
  if ! systemd-analyze security --offline=yes --threshold=20 "$T/unit/refgate.service" >"$T/security.out" 2>&1; then
    grep '✗' "$T/security.out" || true
    tail -n1 "$T/security.out"
    fail "the unit's exposure is over 2.0"
  fi
  echo "not hardened (each with its exposure):"
  grep '✗' "$T/security.out" | sed -E 's/ {2,}/  /g' || true
  tail -n1 "$T/security.out"
fi

if ! command -v systemd-sysusers >/dev/null; then
  echo "skipped sysusers: no systemd-sysusers"
else
  mkdir -p "$T/root/etc"
  systemd-sysusers --root="$T/root" "$SYSUSERS" >"$T/sysusers.out" 2>&1 ||
    { cat "$T/sysusers.out"; fail "systemd-sysusers refused deploy/refgate.sysusers"; }
  user=$(sed -n 's/^User=//p' "$UNIT")
  group=$(sed -n 's/^Group=//p' "$UNIT")
  state=/var/lib/$(sed -n 's/^StateDirectory=//p' "$UNIT")
  grep -q "^$user:x:[0-9]*:[0-9]*:[^:]*:$state:/usr/sbin/nologin$" "$T/root/etc/passwd" ||
    { cat "$T/root/etc/passwd"; fail "no user $user with home $state and no shell"; }
  grep -q "^$group:x:" "$T/root/etc/group" || fail "no group $group"
  echo "ok: systemd-sysusers creates $user:$group, home $state"
fi
