#!/usr/bin/env bash
# Finding 5: run as root, the command kept DAC_OVERRIDE, FOWNER, CHOWN and
# FSETID: it read every user's secrets and could `chmod 4755` a root-owned
# program outside the fork. Now it is root only inside its user namespace
# and nobody (65534) outside, with no capability: root-only files are
# unreadable and root's files cannot be changed, while the fork (id-mapped)
# is its own.
. "$(dirname "$0")/lib.sh"
require_abi 1
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: this finding is about running as root"
    exit 77
fi

cp /bin/true "$OUT/suid-me"
chmod 755 "$OUT/suid-me"
echo "SECRET-ROOT-ONLY" >"$OUT/root-only"
chmod 600 "$OUT/root-only"

sandbox_sh "id -u; cat /proc/self/uid_map
echo work >f && chmod 640 f && chown 0:0 f && stat -c 'fork-owner=%u mode=%a' f
cat /etc/shadow; cat '$OUT/root-only'; ls /root
chmod 4755 '$OUT/suid-me'; chown 1:1 '$OUT/root-only'; echo done"
equals "the command ran" "$STATUS" 0
contains "the command is root inside" "$OUTPUT" "0"
contains "inside root is nobody (65534) outside" "$OUTPUT" "0      65534          1"
contains "the command owns its fork and may chmod and chown there" "$OUTPUT" \
    "fork-owner=0 mode=640"
denied "/etc/shadow is unreadable" "$OUTPUT" "/etc/shadow"
denied "a root-only file outside the fork is unreadable" "$OUTPUT" "$OUT/root-only"
lacks "no root-only content leaks" "$OUTPUT" "SECRET-ROOT-ONLY"
lacks "/etc/shadow's content does not leak" "$OUTPUT" "root:"
contains "chmod 4755 of a root-owned program outside fails" "$OUTPUT" "changing permissions of"
equals "the program outside keeps mode 755" "$(stat -c %a "$OUT/suid-me")" 755
equals "the file outside keeps its owner" "$(stat -c %u:%g "$OUT/root-only")" "0:0"
check "the fork's files are root's on disk (refgate diff reads them as before)" \
    test -z "$(find "$PROJ" -maxdepth 0 ! -user 0)"

finish
