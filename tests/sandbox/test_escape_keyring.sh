#!/usr/bin/env bash
# Finding 3: keyctl read the session (and persistent) keyrings, where
# kerberos, ecryptfs and some agents keep secrets; neither Landlock nor the
# filesystem stands in the way. seccomp answers keyctl, add_key and
# request_key with EPERM.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v keyctl >/dev/null; then
    echo "SKIP: needs keyctl (keyutils)"
    exit 77
fi
PY=$(command -v /usr/bin/python3 || command -v python3 || true)

INNER='echo work >f && cat f
keyctl show @s; keyctl print %user:rg-test-secret; keyctl get_persistent @s'
if [ -n "$PY" ]; then
    INNER="$INNER
$PY -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(250, 0, -3, 0)  # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING)
print(\"keyctl-syscall\", r, os.strerror(ctypes.get_errno()))'"
fi

# In a session keyring of its own holding a secret, as a login session has;
# the control proves the secret is there to read.
run_in_session() {
    keyctl session rg-test sh -c 'keyctl add user rg-test-secret SECRET-KEYRING @s >/dev/null
echo "control: $(keyctl print %user:rg-test-secret)"
cd "$1" && shift && "$@"' rg "$@" 2>&1
}
OUTPUT=$(run_in_session "$PROJ" "$RUN" -q --rm -- sh -c "$INNER")
contains "control: the secret is in the session keyring outside" "$OUTPUT" "control: SECRET-KEYRING"
contains "the command worked in its fork" "$OUTPUT" "work"
OUTPUT=${OUTPUT//control: SECRET-KEYRING/}
lacks "the session keyring's secret does not leak" "$OUTPUT" "SECRET-KEYRING"
contains "keyctl is refused" "$OUTPUT" "Operation not permitted"
if [ -n "$PY" ]; then
    contains "the keyctl system call fails with EPERM" "$OUTPUT" "keyctl-syscall -1 Operation not permitted"
fi

if user_setup; then
    OUTPUT=$(cd "$U" && as_user bash -c "$(declare -f run_in_session); run_in_session '$U/proj' '$RUN' -q --rm -- sh -c \"\$1\"" rg "$INNER")
    contains "unprivileged: control: the secret is there" "$OUTPUT" "control: SECRET-KEYRING"
    OUTPUT=${OUTPUT//control: SECRET-KEYRING/}
    lacks "unprivileged: the session keyring's secret does not leak" "$OUTPUT" "SECRET-KEYRING"
    contains "unprivileged: keyctl is refused" "$OUTPUT" "Operation not permitted"
fi

finish
