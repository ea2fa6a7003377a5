#!/usr/bin/env bash
# Finding 13: Landlock does not cover xattrs (nor chmod, chown, utimes), so
# the command could set extended attributes and ACLs on files outside the
# fork. The host tree is bound read-only: EROFS; in the fork it works.
. "$(dirname "$0")/lib.sh"
require_abi 1
if ! command -v setfattr >/dev/null; then
    echo "SKIP: needs setfattr (attr)"
    exit 77
fi

echo data >"$OUT/target"
chmod 644 "$OUT/target"
touch -d '2001-02-03 04:05:06' "$OUT/target"
before=$(stat -c '%a %Y' "$OUT/target")

sandbox_sh "echo f >f && setfattr -n user.rg -v in-fork f && getfattr --only-values -n user.rg f && echo
setfattr -n user.rg -v pwned '$OUT/target'
setfattr -n system.posix_acl_access -v 0sAgAAAAEABgD/////BAAEAP////8QAAYA/////yAABAD/////CAAHAAAAAAA= '$OUT/target'
touch '$OUT/target'; chmod 777 '$OUT/target'"
contains "xattrs work in the fork" "$OUTPUT" "in-fork"
denied "setfattr on a file outside fails" "$OUTPUT" "setfattr: $OUT/target"
if getfattr -n user.rg "$OUT/target" >/dev/null 2>&1; then
    not_ok "no xattr was set outside"
else
    ok "no xattr was set outside"
fi
equals "mode and mtime outside are unchanged" "$(stat -c '%a %Y' "$OUT/target")" "$before"

if user_setup; then
    as_user sh -c "echo data >'$U/target'"
    user_sandbox_sh "echo f >f && setfattr -n user.rg -v in-fork f && getfattr --only-values -n user.rg f && echo
setfattr -n user.rg -v pwned '$U/target'; touch -d 2001-01-01 '$U/target'"
    contains "unprivileged: xattrs work in the fork" "$OUTPUT" "in-fork"
    denied "unprivileged: setfattr on the user's own file outside fails" "$OUTPUT" \
        "setfattr: $U/target"
    if getfattr -n user.rg "$U/target" >/dev/null 2>&1; then
        not_ok "unprivileged: no xattr was set outside"
    else
        ok "unprivileged: no xattr was set outside"
    fi
fi

finish
