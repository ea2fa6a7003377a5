# The approvals store suite (tests/approvals/test_store.c) against a real
# PostgreSQL: the same tests as the file store, plus two stores on one
# database racing (two gateways).
set -euo pipefail
: "${REFGATE_SRC:?}" "${REFGATE_BUILD:?}"
. "$REFGATE_SRC/tests/support/pg.sh"
trap 'pg_stop' EXIT
rc=0; pg_start || rc=$?
[ $rc -eq 0 ] || exit $rc
APPROVALS_TEST_STORE=pg "$REFGATE_BUILD/tests/approvals_test_store" --jobs 1
