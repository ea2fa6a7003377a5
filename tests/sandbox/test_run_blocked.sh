#!/usr/bin/env bash
# Issue 8: when the command was denied something, the run ends with one
# line on stderr saying what (after the command's own output, before the
# fork's path): the --net allow proxy's refusals counted and named (an
# unlisted name, an unlisted port, a listed name leading to this host, a
# request that is not a CONNECT), and what was neutralised in the fork's
# .git. A run denied nothing prints no such line. Loopback only: the
# "remote host" is a test server listed by its IP literal.
. "$(dirname "$0")/lib.sh"
require_abi 1

PY=/usr/bin/python3
CURL=$(command -v curl || true)
if [ ! -x "$PY" ] || [ -z "$CURL" ]; then
    echo "SKIP: needs $PY and curl"
    exit 77
fi

serve api
serve other
# shellcheck disable=SC2154  # set by serve
API="127.0.0.1:$PORT_api"
# shellcheck disable=SC2154
OTHER="127.0.0.1:$PORT_other"

TUNNEL='for u in "$@"; do
    if out=$(curl -sS -m 5 -p --noproxy "" -x "$HTTPS_PROXY" "$u" 2>&1); then
        echo "GOT $out"
    else
        echo "FAIL $u"
    fi
done
curl -sS -m 5 --noproxy "" -x "$HTTP_PROXY" "http://$1/" >/dev/null 2>&1
echo "command done"'

sandbox --net "allow=$API,localhost:$PORT_api" -- /bin/sh -c "$TUNNEL" sh \
    "http://$API/index.txt" "https://evil.example/" "http://$OTHER/index.txt" \
    "http://$OTHER/index.txt" "http://localhost:$PORT_api/index.txt"
equals "the run succeeds" "$STATUS" 0
contains "the listed host is reached" "$OUTPUT" "GOT content-of-api"
contains "the summary counts and names the hosts off the allow-list" "$OUTPUT" \
    "refgate-run: blocked during the run: 3 connections refused by the network allow-list (evil.example:443, 127.0.0.1:$PORT_other x2)"
contains "the summary names the listed name that leads to this host" "$OUTPUT" \
    "1 connection refused: the name leads to a local address (localhost:$PORT_api)"
contains "the summary counts the request that is not a CONNECT" "$OUTPUT" \
    "1 connection refused: not a CONNECT request"
contains "the summary says Landlock's denials are not in it" "$OUTPUT" \
    "Landlock denials not counted"
last=$(printf '%s\n' "$OUTPUT" | tail -1)
contains "the summary comes after the command's output" "$last" "blocked during the run"

sandbox --net "allow=$API" -- /bin/sh -c "curl -sS -m 5 -p --noproxy '' -x \"\$HTTPS_PROXY\" http://$API/index.txt"
contains "a run denied nothing reaches its host" "$OUTPUT" "content-of-api"
lacks "a run denied nothing prints no summary" "$OUTPUT" "blocked during the run"
sandbox -- /bin/true
lacks "a plain run prints no summary" "$OUTPUT" "blocked during the run"

# The fork's .git: what was neutralised is in the summary, before the
# fork's path.
if command -v git >/dev/null; then
    err=$(cd "$PROJ" && "$RUN" -- sh -c 'git config core.fsmonitor /bin/false' 2>&1 >/dev/null)
    contains "the summary names the neutralised .git config" "$err" \
        "blocked during the run: 1 thing in the fork's .git neutralised (.git: config core.fsmonitor)"
    before=$(printf '%s\n' "$err" | sed -n '/blocked during the run/,$p')
    contains "... before the fork's path" "$before" "the fork stays at"
    rm -rf "$PROJ.1" "$(dirname "$PROJ")/.$(basename "$PROJ").1.base"
fi

finish
