#!/usr/bin/env bash
# Finding 1: a confined command could open the user's other terminals under
# /dev/pts and read what is typed there. Inside, /dev/pts is a new devpts
# instance: it holds only ptmx and the run's own terminals, so another
# terminal's device does not exist; the command can still make a pty.
. "$(dirname "$0")/lib.sh"
require_abi 1
PY=$(command -v /usr/bin/python3 || command -v python3 || true)
if [ -z "$PY" ]; then
    echo "SKIP: needs python3 to hold a terminal open"
    exit 77
fi

# start_terminal DIR PREFIX...: a pty outside, with "keystrokes" waiting in
# its input, held open in the background; its device path in $PTY.
start_terminal() {
    local f="$1/pty.$RANDOM"
    shift
    "$@" "$PY" - "$f" <<'PYEOF' &
import os, sys, time
m, s = os.openpty()
os.write(m, b"SECRET-KEYSTROKES\n")
with open(sys.argv[1] + ".pid", "w") as f:
    f.write(str(os.getpid()))
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(os.ttyname(s))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
PYEOF
    wait_for_file "$f" || not_ok "the outside terminal started"
    # Its own pid: $! may be a subshell running as_user.
    CLEANUPS+=("kill $(cat "$f.pid") 2>/dev/null")
    PTY=$(cat "$f")
}

probe() {
    cat <<PYEOF
import os
print("pts=[" + " ".join(sorted(os.listdir("/dev/pts"))) + "]")
try:
    fd = os.open("$PTY", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    print("opened", os.read(fd, 100))
except OSError as e:
    print("refused:", e)
m, s = os.openpty()
os.write(m, b"typed inside\n")
print("own-pty", os.ttyname(s), os.read(s, 100))
PYEOF
}

start_terminal "$T"
sandbox -- "$PY" -c "$(probe)"
equals "the command ran" "$STATUS" 0
contains "the command can make a terminal of its own" "$OUTPUT" "own-pty /dev/pts/0 b'typed inside"
contains "/dev/pts holds only ptmx (a new devpts instance)" "$OUTPUT" "pts=[ptmx]"
contains "another terminal cannot be opened" "$OUTPUT" "refused: [Errno 2]"
lacks "another terminal was not opened" "$OUTPUT" "opened"
lacks "its keystrokes do not leak" "$OUTPUT" "SECRET-KEYSTROKES"

if user_setup; then
    start_terminal "$U" as_user
    OUTPUT=$(cd "$U/proj" && as_user "$RUN" -q --rm -- "$PY" -c "$(probe)" 2>&1)
    contains "unprivileged: the command can make a terminal" "$OUTPUT" "own-pty /dev/pts/0"
    contains "unprivileged: /dev/pts holds only ptmx" "$OUTPUT" "pts=[ptmx]"
    lacks "unprivileged: the user's other terminal was not opened" "$OUTPUT" "opened"
    lacks "unprivileged: its keystrokes do not leak" "$OUTPUT" "SECRET-KEYSTROKES"
fi

finish
