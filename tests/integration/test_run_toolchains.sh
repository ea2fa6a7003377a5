# The toolchain matrix (tests/sandbox/test_toolchains.sh) through
# `refgate run` with its defaults, as a user meets it: a gateway serving,
# the run's token minted over the control socket (the unprivileged test
# user is allowed on it), the network the gateway only, every case run as
# `refgate run --repo local/acme/app -q --rm -- ...` and compared with the
# same work outside.
REAL_HOME=$HOME
source "$(dirname "$0")/lib.sh"

: "${REFGATE_RUN:?set REFGATE_RUN to the refgate-run binary}"
mkdir "$T/probe"
if ! "$REFGATE_RUN" -q -d "$T/probe" -- true >"$T/check" 2>&1; then
  echo "skipped: refgate-run cannot confine on this kernel: $(cat "$T/check")"
  exit 77
fi
make_upstream app
cat >"$T/refgate.json" <<JSON
{
  "listen": "127.0.0.1:0",
  "state_dir": "state",
  "control": {"socket": "$T/control.sock", "users": ["rgtest-sandbox"]},
  "upstreams": [{"host": "local", "url": "file://$T/upstream"}],
  "rules": $STANDARD_RULES
}
JSON
start_gateway
# The test user reads the config and reaches the socket; the state stays 0700.
chmod 755 "$T"
chmod 644 "$T/refgate.json"

cat >"$T/via-refgate-run" <<SH
#!/bin/sh
# refgate-run's arguments, run through refgate run.
REFGATE_RUN='$REFGATE_RUN' exec '$REFGATE' run --config '$T/refgate.json' --repo local/acme/app "\$@"
SH
chmod 755 "$T/via-refgate-run"

set +e
HOME=$REAL_HOME RG_TOOLCHAINS_RUNNER=$T/via-refgate-run \
  bash "$(dirname "$0")/../sandbox/test_toolchains.sh"
rc=$?
set -e
# Every run minted and revoked its token through the gateway.
mints=$(jq -r 'select(.event == "token-mint") | .event' "$T/state/audit.jsonl" | wc -l)
revokes=$(jq -r 'select(.event == "token-revoke") | .event' "$T/state/audit.jsonl" | wc -l)
echo "# $mints tokens minted, $revokes revoked"
if [ "$mints" -lt 6 ] || [ "$mints" != "$revokes" ]; then
  echo "not ok - every case ran through refgate run and revoked its token"
  rc=1
else
  echo "ok - every case ran through refgate run and revoked its token"
fi
exit $rc
