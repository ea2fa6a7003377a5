#!/bin/bash
# deploy/Containerfile's package lists hold what the image needs, checked on
# this Debian machine without a container engine: both stages are Debian
# 12; the build stage installs the package of every pkg-config module the
# build requires (tests and fuzzers aside: the image builds with
# REFGATE_TESTS=OFF); the runtime stage installs the package of every
# library refgate and refgate-run link (DT_NEEDED) unless Debian 12's base
# image has it anyway (a required or essential package, or one they depend
# on), plus git, which the gateway runs for local upstreams.
set -euo pipefail

CF=$REFGATE_SRC/deploy/Containerfile
T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-cdeps.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for tool in dpkg dpkg-query apt-cache pkg-config readelf ldd; do
  command -v "$tool" >/dev/null || { echo "SKIP: no $tool (not a Debian machine?)"; exit 77; }
done

[ "$(grep -c '^FROM debian:12' "$CF")" = 2 ] || fail "both stages must be FROM debian:12"
# The words of each stage's text: package names stand alone among them.
build_words=$(awk '/^FROM /{n++} n == 1 && !/^ *#/' "$CF" | tr -cs 'A-Za-z0-9.+-' '\n')
run_words=$(awk '/^FROM /{n++} n == 2 && !/^ *#/' "$CF" | tr -cs 'A-Za-z0-9.+-' '\n')
in_words() { grep -qx -- "$2" <<<"$1"; }

# owner FILE: the Debian package that ships FILE (merged /usr aware).
owner() {
  local f=$1 p
  for cand in "$f" "${f#/usr}" "/usr$f" "$(readlink -f "$f")"; do
    p=$(dpkg -S "$cand" 2>/dev/null | head -n1 | cut -d: -f1) && [ -n "$p" ] && { echo "$p"; return; }
  done
  return 1
}

n=0
for f in "$REFGATE_SRC/CMakeLists.txt" "$REFGATE_SRC"/*/CMakeLists.txt; do
  case $f in */tests/*|*/fuzz/*) continue ;; esac
  sed -nE 's/^[^#]*pkg_check_modules\([A-Z0-9_]+ REQUIRED IMPORTED_TARGET ([a-z0-9_.-]+)\).*/\1/p' "$f"
done >"$T/modules"
while read -r m; do
  pc=$(pkg-config --variable=pcfiledir "$m")/$m.pc
  pkg=$(owner "$pc") || fail "no package owns $pc"
  in_words "$build_words" "$pkg" || fail "the build stage lacks $pkg (pkg-config $m)"
  n=$((n + 1))
done <"$T/modules"
[ "$n" -ge 5 ] || fail "found only $n pkg-config modules in the CMakeLists"
echo "ok: the build stage installs the packages of $n pkg-config modules"

# What debian:12-slim holds: the packages of priority required and the
# essential ones, with everything they depend on.
dpkg-query -W -f='${Package} ${Priority} ${Essential}\n' |
  awk '$2 == "required" || $3 == "yes" {print $1}' >"$T/required"
# shellcheck disable=SC2046
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances $(cat "$T/required") 2>/dev/null | grep -v '^ ' | sort -u >"$T/base"
[ "$(wc -l <"$T/base")" -gt 50 ] || fail "could not work out the base image's packages"

: >"$T/installed"
for bin in "$REFGATE" "$REFGATE_RUN"; do
  for so in $(readelf -d "$bin" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p'); do
    case $so in lib[altu]san.so*|libubsan.so*) continue ;; esac # sanitizer builds
    path=$(ldd "$bin" | awk -v so="$so" '$1 == so {print $3}')
    [ -n "$path" ] || fail "ldd does not resolve $so"
    pkg=$(owner "$path") || fail "no package owns $path"
    if in_words "$run_words" "$pkg"; then
      echo "$pkg" >>"$T/installed"
    elif ! grep -qx -- "$pkg" "$T/base"; then
      fail "the runtime stage lacks $pkg ($so, linked by $(basename "$bin"))"
    fi
  done
done
in_words "$run_words" git || fail "the runtime stage lacks git"
echo "ok: the runtime stage installs git and the linked libraries: $(sort -u "$T/installed" | tr '\n' ' ')"
