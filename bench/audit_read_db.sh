#!/usr/bin/env bash
# Reading the audit log from PostgreSQL against reading the same log from
# its file: a valid chain of RECORDS decision records (about 400 bytes
# each) is made in a fresh PostgreSQL (tests/support/pg.sh) and copied byte
# for byte to a file; then, as medians over RUNS, the wall time of
#   verify  - `refgate audit verify` (the whole chain, and the head row);
#   json    - `refgate audit --json` (every row, to /dev/null);
#   head    - `refgate audit head`;
# on the file and on the database, and the database's time as a ratio of
# the file's. Prints the plan of one page query too (it must be an index
# scan on audit_records' key that stops at its LIMIT).
#
#   bench/audit_read_db.sh [RECORDS] [RUNS]     (defaults 200000 and 3)
#
# The program is $REFGATE, else $REFGATE_BUILD/cli/refgate, else
# build/cli/refgate.
set -euo pipefail
RECORDS=${1:-200000}
RUNS=${2:-3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)
# shellcheck source=tests/support/pg.sh
source "$REPO/tests/support/pg.sh"

T=$(mktemp -d "${TMPDIR:-/tmp}/refgate-bench.XXXXXX")
trap 'pg_stop; rm -rf "$T"' EXIT
pg_start >/dev/null || { echo "bench/audit_read_db.sh: no PostgreSQL to run on" >&2; exit 2; }
mkdir -p "$T/state"
echo '{"state_dir": "state"}' >"$T/file.json"
printf '{"state_dir": "state", "state": {"postgres": "%s"}}\n' "$PG_URL" >"$T/db.json"
"$REFGATE" db migrate --config "$T/db.json" >/dev/null

psql "$PG_URL" -X -q -v ON_ERROR_STOP=1 -v n="$RECORDS" >/dev/null <<'SQL'
SELECT set_config('bench.n', :'n', false);
DO $$
DECLARE prev text := repeat('0', 64); l bytea; n int := current_setting('bench.n')::int;
BEGIN
  FOR i IN 1..n LOOP
    l := convert_to(format('{"v":2,"seq":%s,"prev":"%s","time":"2026-12-01T00:00:00.000Z",'
      '"type":"decision","push_id":"p%s","run":"run-%s","token":"0123456789ab",'
      '"remote":"127.0.0.1","repo":"local/acme/app","ref":"refs/heads/feature/%s",'
      '"old":"0000000000000000000000000000000000000000",'
      '"new":"1111111111111111111111111111111111111111","action":"create",'
      '"decision":"allow","rule":"features","reason":"ok","outcome":"rejected"}',
      i, prev, i, i % 997, i), 'UTF8');
    INSERT INTO audit_records (seq, line, kind) VALUES (i, l, 'decision');
    prev := encode(sha256(l), 'hex');
  END LOOP;
  UPDATE audit_head SET seq = n, hash = prev;
END $$;
VACUUM ANALYZE audit_records;
SQL
psql "$PG_URL" -X -q -v ON_ERROR_STOP=1 \
  -c "\\copy (SELECT convert_from(line, 'UTF8') FROM audit_records ORDER BY seq) TO '$T/state/audit.jsonl' WITH (FORMAT csv, DELIMITER E'\\x01', QUOTE E'\\x02')"
echo "$RECORDS records: $(du -h "$T/state/audit.jsonl" | cut -f1) in the file," \
  "$(pg_psql "SELECT pg_size_pretty(pg_total_relation_size('audit_records'))") in the table"
echo "plan of a page (forward, from seq 1000):"
pg_psql "EXPLAIN SELECT seq, line FROM (SELECT seq, line, sum(octet_length(line)) OVER (ORDER BY seq ASC) - octet_length(line) AS before FROM audit_records WHERE (1000::bigint IS NULL OR seq > 1000::bigint) AND (NULL::bytea IS NULL OR position(NULL::bytea IN line) > 0) ORDER BY seq ASC LIMIT 256) AS page WHERE before < 4194304" |
  sed 's/^/  /'

# median_time CONFIG ARGS...: the median wall seconds of `refgate audit ARGS`
# over RUNS; exits when one fails (a fast failure is no figure).
median_time() {
  local cfg=$1 i t0 t1 times=""; shift
  for i in $(seq 1 "$RUNS"); do
    t0=$(date +%s.%N)
    "$REFGATE" audit "$@" --config "$cfg" >/dev/null ||
      { echo "bench/audit_read_db.sh: refgate audit $* failed on $cfg" >&2; exit 1; }
    t1=$(date +%s.%N)
    times+="$(echo "$t1 - $t0" | bc)"$'\n'
  done
  printf '%s' "$times" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

printf '%-8s %10s %10s %8s\n' measure "file s" "db s" "db/file"
for m in verify json head; do
  case $m in
    verify) args=(verify) ;;
    json) args=(--json) ;;
    head) args=(head) ;;
  esac
  f=$(median_time "$T/file.json" "${args[@]}")
  d=$(median_time "$T/db.json" "${args[@]}")
  printf '%-8s %10.3f %10.3f %8.2f\n' "$m" "$f" "$d" "$(echo "$d / $f" | bc -l)"
done
