#!/usr/bin/env bash
# Finding 5: run as root, the command kept DAC_OVERRIDE, FOWNER, CHOWN and
# FSETID: it read every user's secrets and could `chmod 4755` a root-owned
# program outside the fork. Now it is nobody (65534) in its user namespace
# and outside, with no capability: root-only files are unreadable and
# root's files cannot be changed, while the fork (id-mapped) is its own. As
# what it makes in the fork is root's on disk, it cannot make it setuid.
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
echo work >f && chmod 640 f && stat -c 'fork-owner=%u mode=%a' f
cp /bin/true suid && chmod 4755 suid; cp -p /bin/true kept && echo cp-p-ok
cat /etc/shadow; cat '$OUT/root-only'; ls /root
chmod 4755 '$OUT/suid-me'; chown 1:1 '$OUT/root-only'; echo done"
equals "the command ran" "$STATUS" 0
contains "the command is nobody inside and outside" "$OUTPUT" "65534      65534          1"
contains "the command owns its fork and may chmod there" "$OUTPUT" "fork-owner=65534 mode=640"
contains "cp -p does not fail on owners it cannot keep" "$OUTPUT" "cp-p-ok"
contains "a setuid file cannot be made in the fork (root's on disk)" "$OUTPUT" \
    "changing permissions of 'suid': Operation not permitted"
denied "/etc/shadow is unreadable" "$OUTPUT" "/etc/shadow"
denied "a root-only file outside the fork is unreadable" "$OUTPUT" "$OUT/root-only"
lacks "no root-only content leaks" "$OUTPUT" "SECRET-ROOT-ONLY"
lacks "/etc/shadow's content does not leak" "$OUTPUT" "root:"
contains "chmod 4755 of a root-owned program outside fails" "$OUTPUT" "changing permissions of"
equals "the program outside keeps mode 755" "$(stat -c %a "$OUT/suid-me")" 755
equals "the file outside keeps its owner" "$(stat -c %u:%g "$OUT/root-only")" "0:0"
fork=$(cd "$PROJ" && "$RUN" -q -- sh -c 'echo x >made' 2>&1 | fork_path)
equals "what the command makes in its fork is root's on disk" "$(stat -c %u:%g "$fork/made")" "0:0"

finish
