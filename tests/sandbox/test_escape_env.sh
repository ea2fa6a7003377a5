#!/usr/bin/env bash
# The command's environment is built from an allow-list: loader and
# startup hooks and credential-looking variables set outside are absent
# inside unless named with --env, TMPDIR is a private directory that is
# removed afterwards, and HOME falls back to the passwd entry.
. "$(dirname "$0")/lib.sh"
require_abi 1

W="$T/work"
mkdir -p "$W"

# envdump CMD...: stdout in $OUTPUT, stdout and stderr in $ALL.
envdump() {
    OUTPUT=$("$@" 2>"$T/stderr")
    STATUS=$?
    ALL="$OUTPUT
$(cat "$T/stderr")"
}

hook() { echo hook; }
export -f hook

envdump env \
    LD_PRELOAD=/nonexistent/refgate-test-preload.so \
    LD_LIBRARY_PATH=/nonexistent \
    NODE_OPTIONS=--require=/nonexistent/evil.js \
    BASH_ENV=/nonexistent/evil.sh \
    ENV=/nonexistent/evil.sh \
    PYTHONSTARTUP=/nonexistent/evil.py \
    PERL5OPT=-Mevil \
    RUBYOPT=-revil \
    JAVA_TOOL_OPTIONS=-javaagent:evil.jar \
    GIT_SSH_COMMAND="ssh -i /nonexistent/key" \
    GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=evil-pager \
    GIT_CONFIG_PARAMETERS="'core.pager'='evil-pager'" \
    MY_API_TOKEN=SECRET-token GITHUB_TOKEN=SECRET-gh AWS_SECRET_ACCESS_KEY=SECRET-aws \
    DB_PASSWORD=SECRET-db OPENAI_API_KEY=SECRET-openai LC_SECRET_TOKEN=SECRET-lc \
    FOO=unlisted LANG=C.UTF-8 LC_ALL=C TERM=dumb TZ=UTC USER=tester LOGNAME=tester \
    SHELL=/bin/sh SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt TMPDIR=/var/tmp \
    "$RUN" -q -d "$W" -- env
equals "the command ran" "$STATUS" 0
for name in LD_PRELOAD LD_LIBRARY_PATH NODE_OPTIONS BASH_ENV ENV PYTHONSTARTUP PERL5OPT \
    RUBYOPT JAVA_TOOL_OPTIONS GIT_SSH_COMMAND GIT_CONFIG_COUNT GIT_CONFIG_KEY_0 \
    GIT_CONFIG_VALUE_0 GIT_CONFIG_PARAMETERS MY_API_TOKEN GITHUB_TOKEN AWS_SECRET_ACCESS_KEY \
    DB_PASSWORD OPENAI_API_KEY LC_SECRET_TOKEN FOO BASH_FUNC_hook; do
    lacks "$name set outside is absent inside" "$OUTPUT" "$name"
done
lacks "no credential value leaks" "$OUTPUT" "SECRET-"
for kv in "LANG=C.UTF-8" "LC_ALL=C" "TERM=dumb" "TZ=UTC" "USER=tester" "LOGNAME=tester" \
    "SHELL=/bin/sh" "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" "HOME=$HOME" "PATH="; do
    contains "${kv%%=*} passes" "$OUTPUT" "$kv"
done
lacks "the caller's TMPDIR is replaced" "$(echo "$OUTPUT" | grep -x 'TMPDIR=/var/tmp')" "TMPDIR"
contains "TMPDIR is a private directory" "$OUTPUT" "TMPDIR=/var/tmp/refgate-run."

# git sees no injected configuration.
if command -v git >/dev/null; then
    envdump env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=evil-pager \
        "$RUN" -q -d "$W" -- git config --get core.pager
    lacks "GIT_CONFIG_* cannot inject git configuration" "$OUTPUT" "evil-pager"
fi

# --env passes what is named, even what is denied by default.
envdump env FOO=from-outside MY_API_TOKEN=SECRET-named \
    "$RUN" -d "$W" --env FOO --env BAR=set-here --env MY_API_TOKEN --env UNSET_HERE -- env
contains "--env NAME passes NAME" "$OUTPUT" "FOO=from-outside"
contains "--env NAME=VALUE sets NAME" "$OUTPUT" "BAR=set-here"
contains "--env can pass a credential on purpose" "$OUTPUT" "MY_API_TOKEN=SECRET-named"
contains "passing a credential on purpose is noted" "$ALL" \
    "passing MY_API_TOKEN as asked, although it looks like a credential"
contains "--env of an unset name warns" "$ALL" "--env UNSET_HERE: not set here"
envdump "$RUN" -d "$W" --env =x -- true
equals "a malformed --env is refused" "$STATUS" 125

# TMPDIR: private, writable, removed afterwards unless --keep-tmp.
envdump "$RUN" -q -d "$W" -- sh -c 'echo $TMPDIR; stat -c %a "$TMPDIR"; touch "$TMPDIR/x"'
tmp=$(echo "$OUTPUT" | grep refgate-run. | head -1)
contains "TMPDIR is mode 0700" "$OUTPUT" "700"
absent "TMPDIR is removed after the run" "$tmp"
envdump "$RUN" -d "$W" --keep-tmp -- sh -c 'echo $TMPDIR; touch "$TMPDIR/kept"'
tmp=$(echo "$OUTPUT" | head -1)
check "--keep-tmp keeps TMPDIR and its files" test -f "$tmp/kept"
contains "--keep-tmp says where" "$ALL" "kept TMPDIR $tmp"
rm -rf "$tmp"

# HOME: from the environment, else the passwd entry.
pwhome=$(getent passwd "$(id -u)" | cut -d: -f6)
envdump env -u HOME "$RUN" -q -d "$W" -- sh -c 'echo "home=$HOME"'
if [ "$pwhome" = / ]; then
    # Nothing could be hidden: refgate-run refuses rather than run exposed.
    equals "a passwd home of / is refused" "$STATUS" 125
    contains "the refusal says why" "$ALL" "the home directory is \"/\"; refusing"
else
    equals "HOME falls back to the passwd entry" "$(echo "$OUTPUT" | grep '^home=')" "home=$pwhome"
    envdump env -u HOME "$RUN" --check
    contains "the passwd home is the one hidden" "$OUTPUT" "home: $pwhome"
fi

finish
