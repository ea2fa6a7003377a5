#!/usr/bin/env bash
# Finding 7: SysV shared memory of processes outside (a database's buffers,
# an IDE's caches) could be read and overwritten. In its own ipc namespace
# the command sees only segments it made.
. "$(dirname "$0")/lib.sh"
require_abi 1
PY=$(command -v /usr/bin/python3 || command -v python3 || true)
if ! command -v ipcmk >/dev/null || [ -z "$PY" ]; then
    echo "SKIP: needs ipcmk and ipcs (util-linux) and python3"
    exit 77
fi

# attach ID [write]: attach segment ID and print what it holds, or why not;
# with `write`, overwrite it.
ATTACH='import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
p = libc.shmat(int(sys.argv[1]), None, 0)
if p in (None, ctypes.c_void_p(-1).value):
    print("attach-failed:", os.strerror(ctypes.get_errno()))
else:
    print("attached:", ctypes.string_at(p, 16))
    if len(sys.argv) > 2:
        ctypes.memmove(p, b"overwritten!", 12)'

# A segment outside holding a secret.
CREATE='import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
i = libc.shmget(0, 4096, 0o1600)
p = libc.shmat(i, None, 0)
ctypes.memmove(p, b"SECRET-SHM-DATA!", 16)
print(i)'
ID=$("$PY" -c "$CREATE")
CLEANUPS+=("ipcrm -m $ID 2>/dev/null")
control=$("$PY" -c "$ATTACH" "$ID")
contains "control: the segment is readable outside" "$control" "attached: b'SECRET-SHM-DATA!'"

sandbox_sh "ipcs -m | grep -c '^0x' ; $PY -c '$ATTACH' $ID write
mine=\$(ipcmk -M 4096 | awk '{print \$NF}') && $PY -c '$ATTACH' \$mine; ipcrm -m \$mine"
equals "the command ran" "$STATUS" 0
contains "the command can use shared memory of its own" "$OUTPUT" "attached: b'\\x00"
contains "the segment outside cannot be attached" "$OUTPUT" "attach-failed:"
lacks "its content does not leak" "$OUTPUT" "SECRET-SHM"
equals "ipcs lists no segment of the host" "$(echo "$OUTPUT" | grep -x '[0-9]*' | head -1)" 0
contains "the segment outside is not overwritten" "$("$PY" -c "$ATTACH" "$ID")" \
    "attached: b'SECRET-SHM-DATA!'"

if user_setup; then
    UID_SHM=$(as_user "$PY" -c "$CREATE")
    CLEANUPS+=("ipcrm -m $UID_SHM 2>/dev/null")
    OUTPUT=$(cd "$U/proj" && as_user "$RUN" -q --rm -- "$PY" -c "$ATTACH" "$UID_SHM" write 2>&1)
    contains "unprivileged: the user's own segment outside cannot be attached" "$OUTPUT" \
        "attach-failed:"
    lacks "unprivileged: its content does not leak" "$OUTPUT" "SECRET-SHM"
fi

finish
