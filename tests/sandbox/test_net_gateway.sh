#!/usr/bin/env bash
# --net: with `--net gateway=127.0.0.1:PORT` (or --gateway URL) an HTTP
# server on the host's loopback is reachable from inside at the same URL,
# and nothing else is: not another host port, not UDP to the host, not a
# raw or MPTCP socket. `--net none` (the default without a gateway)
# reaches nothing; `--net host` reaches both and says so loudly. A gateway
# off the loopback, or one the net namespace cannot carry, is refused. The
# relay ends with the run: a connection the command left open is closed.
# Real kernel, loopback only; every wait is a bounded poll.
. "$(dirname "$0")/lib.sh"
require_abi 1

PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
    echo "SKIP: needs $PY for the test servers"
    exit 77
fi

serve gw
serve other
# shellcheck disable=SC2154  # set by serve
GW="127.0.0.1:$PORT_gw"
# shellcheck disable=SC2154
OTHER="127.0.0.1:$PORT_other"

# A UDP listener on the host's loopback: records every datagram it gets.
"$PY" -u -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
while True:
    data = s.recv(100)
    with open(sys.argv[1], "ab") as f:
        f.write(data + b"\n")
' "$T/udp.got" >"$T/udp.port" &
CLEANUPS+=("kill $!")
wait_for_file "$T/udp.port" || {
    echo "the UDP listener did not start"
    exit 1
}
UDP=$(cat "$T/udp.port")

# The probe, run inside: fetch each URL, print GOT <body> or FAIL <url>.
PROBE='
import sys, urllib.request
for url in sys.argv[1:]:
    try:
        print("GOT", urllib.request.urlopen(url, timeout=5).read().decode().strip())
    except Exception as e:
        print("FAIL", url, e)
'
fetch() {
    local args=()
    while [ "$1" != -- ]; do
        args+=("$1")
        shift
    done
    shift
    sandbox "${args[@]}" -- "$PY" -c "$PROBE" "$@"
}

# --- gateway ----------------------------------------------------------------
fetch --net "gateway=$GW" -- "http://$GW/index.txt" "http://$OTHER/index.txt"
equals "--net gateway: the run succeeds" "$STATUS" 0
contains "--net gateway: the gateway answers inside at its own URL" "$OUTPUT" "GOT content-of-gw"
contains "--net gateway: another host port is not reachable" "$OUTPUT" "FAIL http://$OTHER/"
lacks "--net gateway: ... and its content never arrives" "$OUTPUT" "content-of-other"

fetch --gateway "http://$GW/" -- "http://$GW/index.txt" "http://$OTHER/index.txt"
contains "--gateway URL: --net gateway is the default" "$OUTPUT" "GOT content-of-gw"
lacks "--gateway URL: another host port is not reachable" "$OUTPUT" "content-of-other"

# Several requests in one run, in parallel: the relay keeps them apart.
sandbox --net "gateway=$GW" -- /bin/sh -c "
    for i in 1 2 3 4 5 6 7 8; do \"$PY\" -c '$PROBE' http://$GW/index.txt & done; wait"
equals "--net gateway: eight parallel fetches all arrive" \
    "$(printf '%s\n' "$OUTPUT" | grep -c 'GOT content-of-gw')" 8

# UDP to the host and raw or MPTCP sockets.
sandbox --net "gateway=$GW" -- "$PY" -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b'leak-from-inside', ('127.0.0.1', $UDP))
print('udp sent (to the inside loopback)')
for name, args in (('raw', (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
                   ('raw6', (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)),
                   ('packet', (socket.AF_INET, 10, 0)),  # SOCK_PACKET
                   ('mptcp', (socket.AF_INET, socket.SOCK_STREAM, 262))):
    try:
        socket.socket(*args)
        print(name, 'OPENED')
    except OSError as e:
        print(name, 'refused:', e.strerror)
"
contains "a raw IPv4 socket is refused" "$OUTPUT" "raw refused: Operation not permitted"
contains "a raw IPv6 socket is refused" "$OUTPUT" "raw6 refused: Operation not permitted"
contains "a packet socket is refused" "$OUTPUT" "packet refused:"
contains "an MPTCP socket is refused" "$OUTPUT" "mptcp refused: Protocol not supported"
lacks "no such socket opens" "$OUTPUT" "OPENED"
# A datagram sent from here afterwards arrives; the one from inside never did.
"$PY" -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'from-host', ('127.0.0.1', $UDP))"
wait_for_file "$T/udp.got"
contains "the host's UDP listener works" "$(cat "$T/udp.got")" "from-host"
lacks "UDP from inside never reaches the host" "$(cat "$T/udp.got")" "leak-from-inside"

# --- none and the default ---------------------------------------------------
fetch --net none -- "http://$GW/index.txt" "http://$OTHER/index.txt"
equals "--net none: the run succeeds" "$STATUS" 0
contains "--net none: the gateway's port is not reachable" "$OUTPUT" "FAIL http://$GW/"
lacks "--net none: nothing arrives" "$OUTPUT" "GOT"
fetch -- "http://$GW/index.txt"
contains "by default, without a gateway, nothing is reachable" "$OUTPUT" "FAIL http://$GW/"

# --- host -------------------------------------------------------------------
fetch --net host -- "http://$GW/index.txt" "http://$OTHER/index.txt"
contains "--net host: the gateway is reachable" "$OUTPUT" "GOT content-of-gw"
contains "--net host: so is every other port" "$OUTPUT" "GOT content-of-other"
contains "--net host: said loudly" "$OUTPUT" "WARNING: --net host"
sandbox --share-net -- true
contains "--share-net is --net host, said loudly too" "$OUTPUT" "WARNING: --net host"

# --- refusals ---------------------------------------------------------------
refused() {
    local name=$1 want=$2
    shift 2
    rm -rf "$PROJ".[0-9]*
    sandbox "$@" -- /bin/sh -c 'echo RAN'
    equals "$name: refused" "$STATUS" 125
    contains "$name: says why" "$OUTPUT" "$want"
    lacks "$name: nothing ran" "$OUTPUT" "RAN"
}
refused "a gateway off the loopback" "not a loopback address" --net gateway=192.0.2.1:80
refused "--net gateway without an address" "needs the gateway's address" --net gateway
refused "--net gateway without the net namespace" "needs the net namespace" \
    --share-net --net "gateway=$GW"
refused "--net none without the net namespace" "needs the net namespace" --share=net --net none
refused "an unknown mode" "unknown mode 'bogus'" --net bogus
refused "a port out of range" "a port from 1 to 65535" --net gateway=127.0.0.1:70000
refused "two different gateways" "name two gateways" --gateway "$GW" --net gateway=127.0.0.1:1

# --- the relay ends with the run --------------------------------------------
# A server that records when a connection opens and when it is closed; the
# command leaves a connection open in a background process and exits.
"$PY" -u -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
open(sys.argv[1], "w").write("open\n")
while c.recv(100):
    pass
open(sys.argv[1], "a").write("closed\n")
' "$T/hold.state" >"$T/hold.port" &
CLEANUPS+=("kill $! 2>/dev/null")
wait_for_file "$T/hold.port"
HOLD=127.0.0.1:$(cat "$T/hold.port")
start=$(date +%s)
sandbox --net "gateway=$HOLD" -- /bin/sh -c "
    \"$PY\" -c 'import socket, time; s = socket.create_connection((\"127.0.0.1\", ${HOLD#*:})); open(\"connected\", \"w\").write(\"y\"); time.sleep(60)' &
    for i in \$(seq 200); do [ -s connected ] && break; sleep 0.05; done; echo left"
elapsed=$(($(date +%s) - start))
contains "the command left a connection open" "$OUTPUT" "left"
check "the run did not wait for its background process" test "$elapsed" -lt 30
for i in $(seq 200); do
    grep -q closed "$T/hold.state" 2>/dev/null && break
    sleep 0.05
done
contains "the connection reached the server" "$(cat "$T/hold.state" 2>/dev/null)" "open"
contains "the connection is closed once the run ends" "$(cat "$T/hold.state" 2>/dev/null)" "closed"

# --- unprivileged -----------------------------------------------------------
# The same bridge as an ordinary user: the user namespace is then the only
# source of the net namespace's capabilities.
if user_setup; then
    OUTPUT=$(cd "$U/proj" && as_user "$RUN" -q --rm --net "gateway=$GW" -- "$PY" -c "$PROBE" \
        "http://$GW/index.txt" "http://$OTHER/index.txt" 2>&1)
    contains "unprivileged: the gateway answers inside" "$OUTPUT" "GOT content-of-gw"
    contains "unprivileged: another host port is not reachable" "$OUTPUT" "FAIL http://$OTHER/"
fi

finish
