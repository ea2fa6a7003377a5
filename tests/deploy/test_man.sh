#!/bin/bash
# The man pages in doc/ (mdoc) lint clean (mandoc -T lint -W warning, and
# groff through man --warnings where man is installed) and cannot fall
# behind the programs: every command refgate(1)'s SYNOPSIS names answers
# `refgate COMMAND --help` with its entry of the page, every option
# `refgate-run --help` lists is in refgate-run(1), and every key config.h
# names is in refgate.json(5), as the rendered pages show them.
set -euo pipefail

DOC=$REFGATE_SRC/doc
T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-man.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

command -v mandoc >/dev/null || { echo "SKIP: no mandoc (scripts/lib.sh installs it)"; exit 77; }
pages=("$DOC/refgate.1" "$DOC/refgate-run.1" "$DOC/refgate.json.5")

for p in "${pages[@]}"; do
  [ -f "$p" ] || { fail "no $p"; continue; }
  if ! mandoc -T lint -W warning "$p" >"$T/lint" 2>&1 || [ -s "$T/lint" ]; then
    cat "$T/lint"; fail "mandoc -T lint: $(basename "$p")"
  fi
  if command -v man >/dev/null && command -v groff >/dev/null; then
    MANWIDTH=80 man --warnings -l "$p" 2>"$T/groff" >/dev/null || true
    [ ! -s "$T/groff" ] || { cat "$T/groff"; fail "man --warnings: $(basename "$p")"; }
  fi
done
[ "$failed" = 0 ] && echo "ok: ${#pages[@]} pages lint clean"

# render PAGE: as a reader sees it, one paragraph per line where it fits.
render() { mandoc -T ascii -O width=1000 "$1" | col -bx; }
render "$DOC/refgate.1" >"$T/refgate.txt"
render "$DOC/refgate-run.1" >"$T/refgate-run.txt"
render "$DOC/refgate.json.5" >"$T/refgate.json.txt"

# has FILE WORD: WORD appears on its own (not inside a longer option/name).
has() { grep -qE -- "(^|[^A-Za-z0-9_-])$2([^A-Za-z0-9_-]|\$)" "$1"; }
# options: the long options and the "-x," short options of a --help text.
options() {
  grep -oE -- '--[a-z][a-z-]*[a-z]' "$1" || true
  grep -oE '^ +-[A-Za-z],' "$1" | tr -d ' ,' || true
}

# refgate's --help texts are refgate(1) itself (rendered at build time,
# cmake/ManHelp.cmake), so they are held against the page the other way
# round: `refgate --help` is its SYNOPSIS, and every command the SYNOPSIS
# names answers `refgate CMD [SUB...] --help` with exit 0 and its own entry
# (the dispatch and the page's COMMANDS agree). That every option of every
# subcommand's parse table is in its entry is tests/cli/test_opts.c's.
"$REFGATE" --help >"$T/help"
has "$T/help" "refgate serve" || fail "refgate --help does not show the SYNOPSIS"
# Command words: each synopsis line's words after `refgate` up to its first
# option (`[--config file]`, `--config file`).
sed -nE 's/^refgate ([a-z]+( [a-z]+)*)( .*)?$/\1/p' "$T/help" >"$T/cmds"
[ -s "$T/cmds" ] || fail "refgate --help lists no commands"
n=0
while read -r line; do
  set -- $line
  n=$((n + 1))
  if ! "$REFGATE" "$@" --help >"$T/h" 2>"$T/e"; then
    fail "refgate $* --help exits non-zero: $(head -1 "$T/e")"; continue
  fi
  grep -q "^usage: refgate $*\b" "$T/h" || fail "refgate $* --help does not show its refgate(1) entry"
  has "$T/refgate.txt" "refgate $*" || fail "refgate(1) lacks 'refgate $*'"
done <"$T/cmds"
[ "$n" -gt 15 ] || fail "only $n commands in refgate --help's SYNOPSIS"
echo "checked: $n commands of refgate's SYNOPSIS answer --help with their refgate(1) entry"

"$REFGATE_RUN" --help >"$T/run-help"
n=0
for o in $(options "$T/run-help" | sort -u); do
  n=$((n + 1))
  has "$T/refgate-run.txt" "$o" || fail "refgate-run(1) lacks '$o' (refgate-run --help lists it)"
done
[ "$n" -gt 20 ] || fail "refgate-run --help lists only $n options"
echo "checked: $n options of refgate-run against refgate-run(1)"

# Keys: every "word" the config header spells in quotes (its documentation
# comments: keys, and the values they take).
n=0
for k in $(grep -oE '"[a-z][a-z_-]*"' "$REFGATE_SRC/config/config.h" | tr -d '"' | sort -u); do
  n=$((n + 1))
  has "$T/refgate.json.txt" "$k" || fail "refgate.json(5) lacks '$k' (config/config.h names it)"
done
echo "checked: $n keys and values of config/config.h against refgate.json(5)"

exit "$failed"
