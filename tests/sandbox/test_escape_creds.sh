#!/usr/bin/env bash
# Finding 4: credentials outside HOME were readable: the kerberos ticket
# cache /tmp/krb5cc_<uid>, $XDG_RUNTIME_DIR/containers/auth.json (podman,
# skopeo), and a same-user gateway's state_dir/token-ed25519.key. /tmp is a private
# tmpfs, $XDG_RUNTIME_DIR and /run/user are hidden, and `refgate run`
# passes the gateway's state with --hide, which hides any path.
. "$(dirname "$0")/lib.sh"
require_abi 1

# plant DIR: the three credentials, as the current user; sets KRB, AUTH, KEY.
plant() {
    KRB=/tmp/krb5cc_$(id -u)
    if [ -e "$KRB" ]; then
        KRB_KEEP=1 # a real ticket cache: read it nowhere, remove it never
    else
        KRB_KEEP=0
        echo "SECRET-KRB-TICKET" >"$KRB"
        chmod 600 "$KRB"
    fi
    mkdir -p "$1/xdg/containers" "$1/state"
    echo '{"auths":{"registry.example.com":{"auth":"SECRET-AUTH-JSON"}}}' >"$1/xdg/containers/auth.json"
    echo "SECRET-TOKEN-KEY" >"$1/state/token-ed25519.key"
    echo "http://127.0.0.1:8470" >"$1/state/url"
    chmod 700 "$1/xdg"
    AUTH=$1/xdg/containers/auth.json
    KEY=$1/state/token-ed25519.key
}

probe() {
    echo "echo work >f && cat f; cat '$1/state/url' && echo url-readable
cat '$KRB'; cat '$AUTH'; cat '$KEY'; ls '$1/state'"
}

plant "$T"
[ "$KRB_KEEP" = 1 ] || CLEANUPS+=("rm -f '$KRB'")
export XDG_RUNTIME_DIR=$T/xdg
# Without --hide first, so this fails on a runner that has no such option.
sandbox -- sh -c "$(probe "$T")"
equals "the command ran" "$STATUS" 0
contains "the command worked in its fork" "$OUTPUT" "work"
denied "/tmp/krb5cc_<uid> is unreadable" "$OUTPUT" "$KRB"
denied "\$XDG_RUNTIME_DIR/containers/auth.json is unreadable" "$OUTPUT" "$AUTH"
lacks "neither leaks" "$OUTPUT" "SECRET-KRB"
lacks "auth.json does not leak" "$OUTPUT" "SECRET-AUTH"

sandbox --hide "$KEY" -- sh -c "$(probe "$T")"
equals "the command ran with --hide" "$STATUS" 0
contains "a file beside a hidden one stays readable" "$OUTPUT" "url-readable"
denied "a --hide file (a gateway's token-ed25519.key) is unreadable" "$OUTPUT" "$KEY"
lacks "no credential leaks" "$OUTPUT" "SECRET-"

sandbox --hide "$T/state" -- sh -c "cat '$T/state/url'; ls '$T/state'"
denied "a --hide directory is unreadable" "$OUTPUT" "$T/state'"
lacks "nothing in a hidden directory is listed" "$OUTPUT" "token-ed25519.key"

if user_setup; then
    as_user bash -c "$(declare -f plant); plant '$U'; echo \$KRB_KEEP" >"$T/keep"
    UKRB=/tmp/krb5cc_$(id -u "$RG_TEST_USER")
    [ "$(cat "$T/keep")" = 1 ] || CLEANUPS+=("rm -f '$UKRB'")
    KRB=$UKRB AUTH=$U/xdg/containers/auth.json KEY=$U/state/token-ed25519.key
    OUTPUT=$(cd "$U/proj" && as_user env XDG_RUNTIME_DIR="$U/xdg" \
        "$RUN" -q --rm --hide "$KEY" -- sh -c "$(probe "$U")" 2>&1)
    contains "unprivileged: a file beside a hidden one stays readable" "$OUTPUT" "url-readable"
    denied "unprivileged: /tmp/krb5cc_<uid> is unreadable" "$OUTPUT" "$KRB"
    denied "unprivileged: auth.json is unreadable" "$OUTPUT" "$AUTH"
    denied "unprivileged: a --hide file is unreadable" "$OUTPUT" "$KEY"
    lacks "unprivileged: no credential leaks" "$OUTPUT" "SECRET-"
fi

finish
