#!/bin/bash
# The version has one definition, CMake's project(VERSION): `refgate
# --version` prints it (and the gateway's upstream agent is built from the
# same macro, util/version.h).
set -euo pipefail
want=$(sed -n 's/^project(refgate VERSION \([0-9.]*\).*/\1/p' "$REFGATE_SRC/CMakeLists.txt")
got=$("$REFGATE" --version)
if [ -z "$want" ] || [ "$got" != "refgate $want" ]; then
    echo "FAIL: refgate --version says '$got', CMakeLists.txt says '$want'"
    exit 1
fi
if grep -rn --include='*.c' --include='*.h' -E 'refgate[/ ][0-9]+\.[0-9]+\.[0-9]+' \
    "$REFGATE_SRC/cli" "$REFGATE_SRC/gateway" "$REFGATE_SRC/util"; then
    echo "FAIL: a version string is written out above instead of RG_VERSION"
    exit 1
fi
echo "ok: refgate $want"
