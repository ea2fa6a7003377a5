#!/usr/bin/env bash
# Finding 8 with the real runner: `refgate diff --apply` must not apply a
# fork whose run is still alive (a process of it could change the fork
# between review and apply). refgate-run holds an exclusive flock on
# .<dir>.<N>.run beside the fork for the run's life; the command can
# neither remove that file nor release the lock. After the run, the
# reviewed digest applies.
. "$(dirname "$0")/lib.sh"
require_abi 1
if [ -z "${REFGATE:-}" ] || [ ! -x "$REFGATE" ]; then
    echo "SKIP: REFGATE does not point at the refgate binary"
    exit 77
fi
F="$PROJ.1"
L="$T/.proj.1.run"
# The command edits, tries to end its marker, then waits for the test.
(cd "$PROJ" && "$RUN" -- sh -c 'echo edited >README
rm -f "'"$L"'" 2>&1; flock -u "'"$L"'" true 2>&1; echo tried >tried
while [ ! -e go ]; do sleep 0.02; done' >"$T/out" 2>"$T/err") &
pid=$!
# Bounded: until the command has made its attempts (or 20 s).
for _ in $(seq 1 1000); do
    [ -e "$F/tried" ] && break
    sleep 0.02
done
check "the command ran" test -e "$F/tried"
check "the marker exists during the run" test -f "$L"
out=$("$REFGATE" diff --apply --unreviewed "$F" 2>&1)
st=$?
equals "--apply during the run exits 2" "$st" 2
contains "--apply says the run is alive" "$out" "still running"
equals "nothing was applied during the run" "$(head -1 "$PROJ/README")" "readme"
err=$("$REFGATE" diff --stat "$F" 2>&1 >/dev/null)
contains "a diff during the run warns that the run is alive" "$err" "warning: the run that made"
touch "$F/go"
wait "$pid"
rm -f "$F/go" "$F/tried"
check "the marker stays after the run (for later applies)" test -f "$L"
d=$("$REFGATE" diff --stat "$F" 2>&1 >/dev/null | sed -n 's/^refgate-diff-digest: //p')
out=$("$REFGATE" diff --apply --digest "$d" "$F" 2>&1)
equals "--apply after the run exits 0" "$?" 0
equals "the reviewed change is applied" "$(cat "$PROJ/README")" "edited"
# --rm removes the marker with the fork.
(cd "$PROJ" && "$RUN" -q --rm -- true) 2>/dev/null
absent "--rm leaves no marker" "$T/.proj.2.run"
finish
