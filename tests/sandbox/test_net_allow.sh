#!/usr/bin/env bash
# --net allow=HOST:PORT,...: an HTTP CONNECT proxy inside (HTTPS_PROXY and
# friends point at it) lets the command reach exactly the listed host:port
# entries, resolved outside; an unlisted port, a name that leads back to
# this host, a plain GET and a direct connection around the proxy all fail.
# With --gateway, the gateway stays reachable directly. Loopback only: the
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
serve gw
# shellcheck disable=SC2154  # set by serve
API="127.0.0.1:$PORT_api"
# shellcheck disable=SC2154
OTHER="127.0.0.1:$PORT_other"
# shellcheck disable=SC2154
GW="127.0.0.1:$PORT_gw"

# tunnel URL...: curl each URL through the proxy the run was given, as a
# CONNECT tunnel (-p), the loopback not exempted (NO_PROXY lists it).
TUNNEL='for u in "$@"; do
    if out=$(curl -sS -m 5 -p --noproxy "" -x "$HTTPS_PROXY" "$u" 2>&1); then
        echo "GOT $out"
    else
        echo "FAIL $u: $out"
    fi
done'
tunnel() {
    local args=()
    while [ "$1" != -- ]; do
        args+=("$1")
        shift
    done
    shift
    sandbox "${args[@]}" -- /bin/sh -c "$TUNNEL" sh "$@"
}

tunnel --net "allow=$API,localhost:$PORT_api" -- "http://$API/index.txt" \
    "http://$OTHER/index.txt" "http://localhost:$PORT_api/index.txt"
equals "--net allow: the run succeeds" "$STATUS" 0
contains "--net allow: a listed host:port is reached through the proxy" "$OUTPUT" "GOT content-of-api"
contains "--net allow: an unlisted port is refused" "$OUTPUT" \
    "FAIL http://$OTHER/index.txt: curl: (56) CONNECT tunnel failed, response 403"
contains "--net allow: a listed name that leads to this host is refused" "$OUTPUT" \
    "FAIL http://localhost:$PORT_api/index.txt: curl: (56) CONNECT tunnel failed, response 403"
lacks "--net allow: nothing unlisted arrives" "$OUTPUT" "content-of-other"

sandbox --net "allow=$API" -- /bin/sh -c 'env | grep -i _proxy | sort'
contains "--net allow: HTTPS_PROXY points at the proxy" "$OUTPUT" "HTTPS_PROXY=http://127.0.0.1:3128"
contains "--net allow: https_proxy too" "$OUTPUT" "https_proxy=http://127.0.0.1:3128"
contains "--net allow: the loopback is kept off the proxy" "$OUTPUT" "NO_PROXY=127.0.0.1,localhost,::1"

sandbox --net "allow=$API" -e HTTPS_PROXY=http://evil.example:1 -- /bin/sh -c 'echo "P=$HTTPS_PROXY"'
contains "--net allow: an --env HTTPS_PROXY gives way" "$OUTPUT" "P=http://127.0.0.1:3128"

# Around the proxy: a direct connection, and a plain (non-CONNECT) request.
sandbox --net "allow=$API" -- /bin/sh -c \
    "curl -sS -m 5 --noproxy '*' http://$API/index.txt; echo; curl -sS -m 5 -i --noproxy '' -x \"\$HTTP_PROXY\" http://$API/index.txt"
contains "--net allow: a direct connection to a listed host fails" "$OUTPUT" "Failed to connect to 127.0.0.1 port $PORT_api"
contains "--net allow: a plain proxy request is refused" "$OUTPUT" "405"
lacks "--net allow: ... and nothing arrives" "$OUTPUT" "content-of-api"

# With the gateway: reached directly, the proxy beside it.
sandbox --gateway "http://$GW/" --net "allow=$API" -- /bin/sh -c \
    "curl -sS -m 5 http://$GW/index.txt; $TUNNEL" sh "http://$API/index.txt"
contains "--net allow with --gateway: the gateway is reached directly" "$OUTPUT" "content-of-gw"
contains "--net allow with --gateway: the listed host through the proxy" "$OUTPUT" "GOT content-of-api"

# Refusals.
sandbox --net "allow=" -- true
equals "--net allow= with no entry is refused" "$STATUS" 125
sandbox --net "allow=$API,example.com" -- true
equals "an entry without a port is refused" "$STATUS" 125
contains "... and named" "$OUTPUT" "the port is missing"
sandbox --net "allow=https://example.com/" -- true
equals "a URL is not an entry" "$STATUS" 125
sandbox --share-net --net "allow=$API" -- true
equals "--net allow without the net namespace is refused" "$STATUS" 125

finish
