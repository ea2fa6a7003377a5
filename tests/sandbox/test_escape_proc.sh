#!/usr/bin/env bash
# Escapes through other processes and the process itself: a confined
# command must not signal or read processes outside the sandbox, connect to
# their abstract unix sockets, inherit descriptors, keep the caller's
# terminal as its controlling terminal, gain privileges, or (as root) keep
# the capabilities that go around file rules.
. "$(dirname "$0")/lib.sh"
require_abi 6

PY=$(command -v /usr/bin/python3 || command -v python3 || true)

# A process outside the sandbox to aim at.
sleep 300 &
VICTIM=$!
CLEANUPS+=("kill $VICTIM 2>/dev/null")

# --- signals --------------------------------------------------------------------
sandbox_sh "kill -TERM $VICTIM; echo status=\$?"
# Outside the pid namespace the victim does not exist; Landlock scoping
# refuses it too where it does.
denied "signalling a process outside is denied" "$OUTPUT" "kill"
check "the process outside is still alive" kill -0 "$VICTIM"

sandbox_sh 'kill -TERM $PPID; echo status=$?'
contains "signalling refgate-run itself (outside the sandbox) is denied" "$OUTPUT" \
    "Operation not permitted"

sandbox_sh 'sleep 100 & kill $!; wait $!; echo inner-status=$?'
contains "signalling a process inside the sandbox works" "$OUTPUT" "inner-status=143"

# --- abstract unix sockets ------------------------------------------------------
if [ -n "$PY" ]; then
    NAME="refgate-test-$$"
    "$PY" - "$NAME" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(4)
time.sleep(120)
EOF
    LISTENER=$!
    CLEANUPS+=("kill $LISTENER 2>/dev/null")
    for _ in $(seq 50); do
        grep -q "@$NAME" /proc/net/unix && break
        sleep 0.1
    done
    "$PY" -c "import socket; socket.socket(socket.AF_UNIX).connect('\0$NAME'); print('outside-ok')" \
        >/dev/null || not_ok "control: connecting from outside works"
    sandbox -- "$PY" -c "
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('\0$NAME')
    print('connected')
except OSError as e:
    print('refused:', e)
inner = socket.socket(socket.AF_UNIX)
inner.bind('\0inner-$NAME')
inner.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect('\0inner-$NAME')
print('inner-ok')
"
    # EPERM from Landlock scoping, or ECONNREFUSED: the network namespace
    # has abstract sockets of its own.
    contains "connecting to an abstract socket outside is denied" "$OUTPUT" "refused: [Errno"
    lacks "no connection was made" "$OUTPUT" "connected"
    contains "abstract sockets inside the sandbox work" "$OUTPUT" "inner-ok"
else
    echo "# no python3: abstract socket checks skipped"
fi

# --- /proc of processes outside -----------------------------------------------------
export MY_API_TOKEN=SECRET-TOKEN-IN-PARENT
sandbox_sh "cat /proc/\$PPID/environ; cat /proc/$VICTIM/environ; ls /proc/1/root/;
cat /proc/$VICTIM/root$HOME/.ssh/id_ed25519; cat /proc/self/environ >/dev/null && echo self-ok"
unset MY_API_TOKEN
denied "reading refgate-run's environment via /proc is denied" "$OUTPUT" \
    "environ"
lacks "the parent's token does not leak via /proc/PID/environ" "$OUTPUT" "SECRET-"
denied "/proc/1/root is not reachable" "$OUTPUT" "/proc/1/root/'"
denied "reading a secret via another process's root is denied" "$OUTPUT" \
    "/proc/$VICTIM/root$HOME/.ssh/id_ed25519"
contains "the command can read its own /proc entries" "$OUTPUT" "self-ok"

# --- no_new_privs, session, descriptors -------------------------------------------------
sandbox_sh 'grep NoNewPrivs /proc/self/status'
contains "no_new_privs is set" "$OUTPUT" "NoNewPrivs:	1"

sandbox_sh 'set -- $(cat /proc/$$/stat); echo "sid=$6 pid=$$"'
sid=$(echo "$OUTPUT" | sed -n 's/^sid=\([0-9]*\) pid=\([0-9]*\)$/\1 \2/p')
if [ -n "$sid" ] && [ "${sid% *}" = "${sid#* }" ]; then
    ok "the command leads a new session"
else
    not_ok "the command leads a new session"
    echo "  $OUTPUT"
fi

exec 7</etc/hostname 8>"$T/fd8"
sandbox_sh 'for fd in 3 4 5 6 7 8 9; do test -e /proc/self/fd/$fd && echo "fd $fd open"; done; echo done'
exec 7<&- 8>&-
lacks "descriptors above 2 are closed before exec" "$OUTPUT" "open"
contains "the descriptor check ran" "$OUTPUT" "done"

# TIOCSTI: under a pseudo-terminal, the sandboxed command must not be able
# to push characters into the terminal's input queue.
if [ -n "$PY" ] && command -v script >/dev/null; then
    STI="import fcntl, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('sti-worked')
except OSError as e:
    print('sti-failed:', e)"
    control=$(script -qec "$PY -c \"$STI\"" /dev/null 2>&1)
    mkdir -p "$T/work"
    got=$(script -qec "$RUN -q -d $T/work -- $PY -c \"$STI\"" /dev/null 2>&1)
    case "$control" in
    *sti-worked*)
        contains "TIOCSTI into the caller's terminal fails" "$got" "sti-failed"
        lacks "TIOCSTI did not work" "$got" "sti-worked"
        ;;
    *) echo "# TIOCSTI is disabled on this kernel (dev.tty.legacy_tiocsti=0); check skipped" ;;
    esac
fi

# --- capabilities (root only) -------------------------------------------------------------
if [ "$(id -u)" = 0 ]; then
    sandbox_sh 'grep -E "^Cap(Bnd|Eff):" /proc/self/status'
    bnd=$(echo "$OUTPUT" | sed -n 's/^CapBnd:[[:space:]]*//p')
    eff=$(echo "$OUTPUT" | sed -n 's/^CapEff:[[:space:]]*//p')
    for cap in 16:SYS_MODULE 17:SYS_RAWIO 19:SYS_PTRACE 21:SYS_ADMIN 27:MKNOD 5:KILL; do
        n=${cap%%:*}
        equals "CAP_${cap#*:} is not in the bounding set" "$(((0x$bnd >> n) & 1))" 0
        equals "CAP_${cap#*:} is not effective" "$(((0x$eff >> n) & 1))" 0
    done
    # In the user namespace the command owns its fork (id-mapped) and needs
    # no capability at all; before namespaces it kept CAP_DAC_OVERRIDE.
    equals "no capability is effective in the user namespace" "$eff" "0000000000000000"
    equals "the bounding set is empty in the user namespace" "$bnd" "0000000000000000"

    sandbox_sh 'mknod disk b 8 0; ls disk; mkdir m && mount -t tmpfs none m && echo mounted'
    denied "making a device node in the fork is denied" "$OUTPUT" "mknod: disk"
    contains "no device node exists in the fork" "$OUTPUT" "cannot access 'disk'"
    lacks "nothing was mounted" "$OUTPUT" "mounted"
fi

finish
