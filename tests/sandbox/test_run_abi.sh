#!/usr/bin/env bash
# Fail closed: without Landlock (simulated with --debug-landlock-abi=0) or
# with an ABI that cannot express the confinement, refgate-run refuses,
# says why, runs nothing and creates nothing; only the named downgrade
# (--no-scope, --no-truncate-control) or --allow-unconfined runs anyway,
# the latter with a loud warning.
. "$(dirname "$0")/lib.sh"

W="$T/work"
mkdir -p "$W"

# attempt ARGS...: run `touch ran` in a fork of $PROJ; output in $OUT.
attempt() {
    rm -f "$PROJ".*/ran
    OUT=$(cd "$PROJ" && "$RUN" --rm "$@" -- sh -c 'touch ran; echo RAN' 2>&1)
    ST=$?
}

attempt --debug-landlock-abi=0
equals "no Landlock: refused" "$ST" 125
contains "no Landlock: the reason is said" "$OUT" "Landlock is not available"
contains "no Landlock: the way out is said" "$OUT" "--allow-unconfined runs it anyway"
lacks "no Landlock: the command did not run" "$OUT" "RAN"
absent "no Landlock: no fork was created" "$PROJ.1"
absent "no Landlock: no base was created" "$T/.proj.1.base"

attempt --debug-landlock-abi=0 --allow-unconfined
equals "no Landlock + --allow-unconfined: runs" "$ST" 0
contains "no Landlock + --allow-unconfined: runs the command" "$OUT" "RAN"
contains "no Landlock + --allow-unconfined: warns loudly" "$OUT" \
    "WARNING: RUNNING UNCONFINED (--allow-unconfined)"
out=$("$RUN" -q -d "$W" --debug-landlock-abi=0 --allow-unconfined -- \
    sh -c 'grep NoNewPrivs /proc/self/status; env' 2>/dev/null)
contains "unconfined still sets no_new_privs" "$out" "NoNewPrivs:	1"
lacks "unconfined still filters the environment" "$out" "REFGATE_RUN="

abi=$(landlock_abi)
if [ -z "$abi" ] || [ "$abi" -lt 1 ]; then
    echo "# this kernel has no Landlock: the simulated-ABI checks below need one"
    finish
fi

if [ "$abi" -ge 6 ]; then
    attempt --debug-landlock-abi=5
    equals "ABI 5: refused (no scoping)" "$ST" 125
    contains "ABI 5: the reason is said" "$OUT" "signals and abstract unix sockets cannot be scoped"
    contains "ABI 5: the named downgrade is said" "$OUT" "--no-scope accepts that"
    lacks "ABI 5: the command did not run" "$OUT" "RAN"
    absent "ABI 5: no fork was created" "$PROJ.1"

    attempt --debug-landlock-abi=5 --no-scope
    equals "ABI 5 + --no-scope: runs" "$ST" 0
    contains "ABI 5 + --no-scope: says what is degraded" "$OUT" \
        "degraded: signals and abstract unix sockets are not scoped"
    lacks "ABI 5 + --no-scope: no loud warning (the loss was named)" "$OUT" "WARNING"

    attempt --debug-landlock-abi=5 --allow-unconfined
    equals "ABI 5 + --allow-unconfined: runs" "$ST" 0
    contains "ABI 5 + --allow-unconfined: warns loudly" "$OUT" \
        "WARNING: RUNNING WITH WEAKENED CONFINEMENT"

    attempt --debug-landlock-abi=6
    equals "ABI 6: runs fully confined" "$ST" 0
    lacks "ABI 6: nothing degraded" "$OUT" "degraded"
fi

if [ "$abi" -ge 3 ]; then
    attempt --debug-landlock-abi=2
    equals "ABI 2: refused (truncate and scoping)" "$ST" 125
    contains "ABI 2: truncate is a reason" "$OUT" "truncate(2) cannot be confined"
    contains "ABI 2: scoping is a reason" "$OUT" "cannot be scoped"

    attempt --debug-landlock-abi=2 --no-scope
    equals "ABI 2 + --no-scope only: still refused" "$ST" 125

    attempt --debug-landlock-abi=2 --no-scope --no-truncate-control
    equals "ABI 2 + both downgrades: runs" "$ST" 0
    contains "ABI 2: truncate is degraded" "$OUT" "degraded: truncate(2) is not confined"
    contains "ABI 2: device ioctls are degraded" "$OUT" "degraded: ioctl on devices"
    out=$(cd "$PROJ" && "$RUN" -q --rm --debug-landlock-abi=2 --no-scope --no-truncate-control -- \
        sh -c 'cat "$HOME/.ssh/id_ed25519"; echo x >"$HOME/x"' 2>&1)
    denied "ABI 2: secrets stay unreadable" "$out" "id_ed25519"
    denied "ABI 2: writes outside stay denied" "$out" "$HOME/x"
fi

if [ "$abi" -ge 2 ]; then
    attempt --debug-landlock-abi=1 --no-scope --no-truncate-control
    equals "ABI 1 + downgrades: runs" "$ST" 0
    contains "ABI 1: the lack of REFER is said" "$OUT" "ABI 1 has no REFER right"
    out=$(cd "$PROJ" && "$RUN" -q --rm --debug-landlock-abi=1 --no-scope --no-truncate-control -- \
        sh -c 'mkdir d && echo x >f && ln f d/g' 2>&1)
    contains "ABI 1: a cross-directory link in the fork fails with EXDEV" "$out" \
        "Invalid cross-device link"
fi

out=$("$RUN" --debug-landlock-abi=99 --check 2>&1)
contains "--debug-landlock-abi cannot raise the ABI" "$out" "Landlock: ABI $abi "

out=$("$RUN" --check --debug-landlock-abi=0 2>&1)
equals "--check reports a refusal with exit 125" "$?" 125
contains "--check says a run would be refused" "$out" "a run would be refused"

finish
