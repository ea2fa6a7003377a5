#!/bin/bash
# `cmake --install BUILD --prefix DIR` installs what a machine needs:
# refgate and refgate-run (which run), refgate(1), refgate-run(1) and
# refgate.json(5) where man finds them, the three example configs, the
# systemd unit with ExecStart pointing at DIR/bin/refgate and the sysusers
# entry. The installed unit passes `systemd-analyze verify` with its
# Documentation= pages found in DIR (when systemd-analyze works here).
set -euo pipefail

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
P=$T/prefix

cmake --install "$REFGATE_BUILD" --prefix "$P" >"$T/install.log" 2>&1 ||
  { cat "$T/install.log"; fail "cmake --install"; }

for f in bin/refgate bin/refgate-run \
  share/man/man1/refgate.1 share/man/man1/refgate-run.1 share/man/man5/refgate.json.5 \
  share/doc/refgate/examples/refgate.example.json \
  share/doc/refgate/examples/github-app.example.json \
  share/doc/refgate/examples/gitlab.example.json \
  lib/systemd/system/refgate.service lib/sysusers.d/refgate.conf; do
  [ -f "$P/$f" ] || { cat "$T/install.log"; fail "not installed: $f"; }
done
for f in refgate refgate-run; do [ -x "$P/bin/$f" ] || fail "$f is not executable"; done
echo "ok: installed $(find "$P" -type f | wc -l) files"

want=$("$REFGATE" --version)
got=$("$P/bin/refgate" --version) || fail "installed refgate --version failed"
[ "$got" = "$want" ] || fail "installed refgate --version says '$got', not '$want'"
"$P/bin/refgate-run" --version >/dev/null || fail "installed refgate-run --version failed"
echo "ok: $got"

grep -qx "ExecStart=$P/bin/refgate serve --config /etc/refgate/refgate.json" \
  "$P/lib/systemd/system/refgate.service" ||
  { grep ExecStart "$P/lib/systemd/system/refgate.service"; fail "the unit does not run $P/bin/refgate"; }
grep -qx "ExecReload=$P/bin/refgate serve --config /etc/refgate/refgate.json --check-config" \
  "$P/lib/systemd/system/refgate.service" ||
  { grep ExecReload "$P/lib/systemd/system/refgate.service"; fail "the reload does not check with $P/bin/refgate"; }
# Apart from ExecStart and ExecReload, the unit is deploy/refgate.service as it is.
diff <(grep -vE '^Exec(Start|Reload)=' "$REFGATE_SRC/deploy/refgate.service") \
  <(grep -vE '^Exec(Start|Reload)=' "$P/lib/systemd/system/refgate.service") ||
  fail "the installed unit differs from deploy/refgate.service beyond ExecStart and ExecReload"

if command -v man >/dev/null; then
  for page in 1:refgate 1:refgate-run 5:refgate.json; do
    MANPATH=$P/share/man man -w "${page%%:*}" "${page#*:}" >/dev/null 2>&1 ||
      fail "man does not find ${page#*:}(${page%%:*}) under $P/share/man"
  done
  echo "ok: man finds the three pages under $P/share/man"
fi

if ! command -v systemd-analyze >/dev/null; then
  echo "skipped verify: no systemd-analyze"
else
  mkdir -p "$T/probe"
  printf '[Service]\nExecStart=/bin/true\n' >"$T/probe/probe.service"
  if ! systemd-analyze verify --man=no "$T/probe/probe.service" >"$T/probe.out" 2>&1; then
    echo "skipped verify: systemd-analyze verify does not work here: $(cat "$T/probe.out")"
  else
    MANPATH=$P/share/man systemd-analyze verify "$P/lib/systemd/system/refgate.service" \
      >"$T/verify.out" 2>&1 || { cat "$T/verify.out"; fail "systemd-analyze verify on the installed unit"; }
    ! grep -q 'refgate.service' "$T/verify.out" || { cat "$T/verify.out"; fail "verify warned"; }
    echo "ok: systemd-analyze verify on the installed unit, Documentation= pages found"
  fi
fi
