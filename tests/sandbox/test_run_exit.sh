#!/usr/bin/env bash
# refgate-run exits with the command's status: exit codes pass through, a
# command killed by a signal kills refgate-run with the same signal, and
# the runner's own failures are 125 (refused), 126 (cannot run) and 127
# (not found). SIGINT and SIGTERM sent to refgate-run reach the command.
# shellcheck disable=SC2088  # "~/..." in check names is text, not a path
. "$(dirname "$0")/lib.sh"
require_abi 1

W="$T/work"
mkdir -p "$W"

for code in 0 1 3 42 124 255; do
    "$RUN" -q -d "$W" -- sh -c "exit $code" 2>/dev/null
    equals "exit code $code passes through" "$?" "$code"
done

"$RUN" -q -d "$W" -- sh -c 'kill -TERM $$' 2>/dev/null
equals "a command killed by SIGTERM ends refgate-run with SIGTERM" "$?" 143
"$RUN" -q -d "$W" -- sh -c 'kill -KILL $$' 2>/dev/null
equals "a command killed by SIGKILL ends refgate-run with SIGKILL" "$?" 137

out=$("$RUN" -q -d "$W" -- refgate-no-such-command 2>&1)
equals "a command that is not found exits 127" "$?" 127
contains "not found is said" "$out" "refgate-no-such-command: command not found"

printf 'data' >"$W/not-executable"
out=$("$RUN" -q -d "$W" -- ./not-executable 2>&1)
equals "a command that cannot run exits 126" "$?" 126
contains "the reason is said" "$out" "Permission denied"

out=$("$RUN" -q 2>&1)
equals "no command is a usage error (125)" "$?" 125
out=$("$RUN" --no-such-option -- true 2>&1)
equals "an unknown option is a usage error (125)" "$?" 125
out=$("$RUN" --help)
equals "--help exits 0" "$?" 0
contains "--help explains the fork" "$out" "copy-on-write fork"
contains "--help lists the readable toolchain paths" "$out" "~/.cargo/{bin,registry,git}"
contains "--help states the hard-link behaviour" "$out" "hard-linked name becomes an independent file"

# Run with SIGINT and SIGQUIT at their default action: a non-interactive
# shell starts background jobs with them ignored, and an ignored signal
# stays ignored (refgate-run passes that on, as nohup needs). perl execs, so
# $! is refgate-run's pid.
DEFAULT=(perl -e '$SIG{INT} = $SIG{QUIT} = "DEFAULT"; exec @ARGV or die "exec: $!"' --)

# watchdog PID: kill PID if it is still running after 20 s, so a lost
# signal fails the check instead of hanging the suite.
watchdog() {
    (
        sleep 20
        kill -KILL "$1" 2>/dev/null
    ) >/dev/null 2>&1 &
    CLEANUPS+=("pkill -P $! 2>/dev/null; kill $! 2>/dev/null")
}

# Signals sent to refgate-run reach the command (in its own session, it does
# not get them from the terminal). The command traps and reports them.
for sig in TERM INT HUP; do
    rm -f "$W/got" "$W/ready"
    "${DEFAULT[@]}" "$RUN" -q -d "$W" -- \
        sh -c "trap 'echo $sig >got; exit 7' $sig; : >ready; while :; do sleep 0.1; done" \
        2>/dev/null &
    pid=$!
    watchdog "$pid"
    for _ in $(seq 100); do
        [ -e "$W/ready" ] && break
        sleep 0.05
    done
    kill -"$sig" "$pid"
    wait "$pid"
    st=$?
    equals "SIG$sig sent to refgate-run reaches the command" "$(cat "$W/got" 2>/dev/null)" "$sig"
    equals "after SIG$sig the command's exit code passes through" "$st" 7
done

# A command killed by a forwarded signal: refgate-run dies the same way, and
# so does everything in the command's process group.
rm -f "$W/ready2" "$W/pid2"
"${DEFAULT[@]}" "$RUN" -q -d "$W" -- sh -c 'echo $$ >pid2; : >ready2; sleep 300; echo survived' \
    2>/dev/null &
pid=$!
watchdog "$pid"
for _ in $(seq 100); do
    [ -e "$W/ready2" ] && break
    sleep 0.05
done
kill -TERM "$pid"
wait "$pid"
equals "SIGTERM to refgate-run ends the command and refgate-run with SIGTERM" "$?" 143
# The kernel kills what is left of the run as the runner goes: wait for
# that (bounded, 10 s) rather than for a fixed time.
sid=$(cat "$W/pid2")
for _ in $(seq 200); do
    left=$(ps -e -o pid=,sid=,stat= | awk -v sid="$sid" '$2 == sid && $3 !~ /^Z/')
    [ -z "$left" ] && break
    sleep 0.05
done
equals "nothing of the command's session is left" "$left" ""

# Job control: SIGTSTP (Ctrl-Z) stops the command as well as refgate-run
# (the kernel would discard SIGTSTP for the command's orphaned group), and
# SIGCONT resumes both. The checks wait on the processes' state, not on
# time: a loaded machine only makes them take longer.

# proc_state PID: the state letter in /proc/PID/stat (after "(comm) ").
proc_state() {
    sed -n 's/^.*) \(.\).*$/\1/p' "/proc/$1/stat" 2>/dev/null
}

# wait_state PID LETTER: poll (bounded, 10 s) until PID is in state LETTER.
wait_state() {
    local i
    for i in $(seq 200); do
        [ "$(proc_state "$1")" = "$2" ] && return 0
        sleep 0.05
    done
    return 1
}

# child_of PID: PID's first child (bounded, 10 s), for the command below
# refgate-run and the pid namespace's init.
child_of() {
    local i c
    for i in $(seq 200); do
        c=$(pgrep -P "$1" | head -1)
        [ -n "$c" ] && echo "$c" && return 0
        sleep 0.05
    done
    return 1
}

rm -f "$W/cnt"
"${DEFAULT[@]}" "$RUN" -q -d "$W" -- sh -c 'i=0; while :; do i=$((i+1)); echo $i >cnt; sleep 0.05; done' \
    2>/dev/null &
pid=$!
watchdog "$pid"
for _ in $(seq 100); do
    [ -s "$W/cnt" ] && break
    sleep 0.05
done
# The command: refgate-run's child, or that child's child when the child
# is the pid namespace's init.
cmd=$(child_of "$pid")
if [ -n "$cmd" ] && [ "$(cat "/proc/$cmd/comm" 2>/dev/null)" != sh ]; then
    cmd=$(child_of "$cmd")
fi
kill -TSTP "$pid"
if wait_state "$pid" T; then ok "SIGTSTP stops refgate-run"; else
    not_ok "SIGTSTP stops refgate-run"
    echo "  state: $(proc_state "$pid")"
fi
if [ -n "$cmd" ] && wait_state "$cmd" T; then ok "SIGTSTP stops the command's process"; else
    not_ok "SIGTSTP stops the command's process"
    echo "  command pid ${cmd:-none}, state: $(proc_state "${cmd:-0}")"
fi
# Both stopped: whatever the command had in flight (one echo) lands within
# a moment; after that the counter stands still.
sleep 0.2
a=$(cat "$W/cnt")
sleep 0.4
b=$(cat "$W/cnt")
equals "SIGTSTP stops the command" "$b" "$a"
kill -CONT "$pid"
c=$b
for _ in $(seq 200); do
    c=$(cat "$W/cnt")
    [ "$c" -gt "$b" ] && break
    sleep 0.05
done
if [ "$c" -gt "$b" ]; then ok "SIGCONT resumes the command"; else not_ok "SIGCONT resumes the command"; fi
kill -TERM "$pid"
wait "$pid"
equals "a resumed command still ends with the forwarded SIGTERM" "$?" 143

finish
