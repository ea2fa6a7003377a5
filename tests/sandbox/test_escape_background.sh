#!/usr/bin/env bash
# Finding 2: a process the command left in the background survived
# refgate-run and could keep reading the caller's terminal. The runner's
# child is init of a pid namespace: when the command exits, the kernel
# kills everything left in it, before refgate-run returns.
. "$(dirname "$0")/lib.sh"
require_abi 1

# bg_sandbox_sh SCRIPT: sandbox_sh with the output in a file, so a
# surviving job holding it open cannot hold up the test.
bg_sandbox_sh() {
    (cd "$PROJ" && "$RUN" -q --rm -- /bin/sh -c "$1") >"$T/bg.out" 2>&1
    STATUS=$?
    OUTPUT=$(cat "$T/bg.out")
}

# survivors PATTERN: pids of processes whose command line matches.
survivors() { pgrep -f "$1" | tr '\n' ' '; }
# Survivors (the old, broken behaviour) are the test's own: killed by pid.
CLEANUPS+=('for p in $(pgrep -f "sleep 31[0-9][.]5"); do kill "$p"; done 2>/dev/null')

bg_sandbox_sh 'echo work >f && cat f
sleep 311.5 &
setsid sh -c "sleep 312.5" &
(sleep 313.5 </dev/null >/dev/null 2>&1 &)
echo started; exit 3'
equals "the command's exit code passes through" "$STATUS" 3
contains "the command worked in its fork" "$OUTPUT" "work"
contains "the background jobs started" "$OUTPUT" "started"
equals "no background job outlives the run" "$(survivors 'sleep 31[0-9]\.5')" ""

# The same with a command killed by a signal: its status still passes through.
bg_sandbox_sh 'sleep 314.5 & kill -TERM $$'
equals "a command killed by SIGTERM still ends the run with it" "$STATUS" 143
equals "its background job is gone too" "$(survivors 'sleep 314\.5')" ""

if user_setup; then
    (cd "$U/proj" && as_user "$RUN" -q --rm -- /bin/sh -c \
        'sleep 315.5 & setsid sh -c "sleep 316.5" & echo started') >"$T/bg.out" 2>&1
    OUTPUT=$(cat "$T/bg.out")
    contains "unprivileged: the jobs started" "$OUTPUT" "started"
    equals "unprivileged: no background job outlives the run" "$(survivors 'sleep 31[56]\.5')" ""
fi

finish
