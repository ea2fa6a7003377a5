#!/usr/bin/env bash
# Shared state in PostgreSQL against the file stores, on one machine:
#   1. audit append rate: audit_bench (bench/audit_bench.c) appending to a
#      file log and to the database's chain, alternated ROUNDS times; each
#      call durable before it returns (fsync; a committed transaction);
#      medians of records/s and ms per call, and the ratio database/file;
#   2. a small push's latency (a one-commit new branch, the client's
#      whole `git push`), direct to the bare upstream, through a gateway
#      on files and through a gateway on the database, interleaved
#      (bench/interleave.py); medians and ratios;
#   3. throughput: CLIENTS git clients pushing small new branches for
#      SECONDS through 1 gateway on files, then 1, 2 and 3 gateways on one
#      database (the clients spread over them); pushes/s, and where the
#      CPU went (the gateways with their git children, PostgreSQL, the
#      clients' git), which is what limits it on a small machine;
#   4. what an idle gateway costs the database, timed by pgbench with the
#      statements the gateway runs (copied from audit/store_pg.c, db/lease.c and
#      db/policies.c): its sweep for dead gateways' records with nothing to
#      complete (a look without the head row's lock), before and after the
#      table is analysed, against the sweep that locked the head first (as
#      an append does; what it did before), its lease renewal, its poll of
#      the policy version.
#
#   bench/pg.sh [ROUNDS] [SECONDS] [CLIENTS]     (defaults 5, 15, 12)
#
# PostgreSQL is started for the run by tests/support/pg.sh (Debian's
# postgresql package; exit 2 saying why when it cannot run), its data on
# /tmp, the file stores under /var/tmp. The programs are $REFGATE and
# $AUDIT_BENCH, else $REFGATE_BUILD/..., else build/... in this checkout.
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-15}
CLIENTS=${3:-12}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
REFGATE=$(bench_binary REFGATE cli/refgate)
AUDIT_BENCH=$(bench_binary AUDIT_BENCH bench/audit_bench)
# shellcheck source=tests/support/pg.sh
source "$REPO/tests/support/pg.sh"

T=$(mktemp -d /var/tmp/refgate-bench-pg.XXXXXX)
chmod 0755 "$T"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop
  rm -rf "$T"
}
trap cleanup EXIT
bench_git_env "$T/home"
rc=0
pg_start >"$T/pg.out" || rc=$?
[ "$rc" = 0 ] || { cat "$T/pg.out" >&2; echo "bench/pg.sh: no PostgreSQL here" >&2; exit 2; }

cat >"$T/migrate.json" <<JSON
{"state_dir": "$T/migrate", "state": {"postgres": "$PG_URL"}}
JSON
"$REFGATE" db migrate --config "$T/migrate.json" >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

# ---- 1. audit append rate ----------------------------------------------------

mkdir -p "$T/auditlog"
# audit_bench prints one line per shape, "<label> N records in S s: R
# records/s, M ms per call", for the file log and then, with AUDIT_BENCH_PG,
# for the database ("postgres: <label> ..."); the rounds alternate the two.
for _ in $(seq "$ROUNDS"); do
  AUDIT_BENCH_PG=$PG_URL "$AUDIT_BENCH" "$T/auditlog" 400 4 16 >>"$T/audit.out"
done
# figure SHAPE STORE FIELD: the median of FIELD (rate or ms) of SHAPE's lines of STORE (file or pg).
figure() {
  local lines
  if [ "$2" = pg ]; then lines=$(grep -F "postgres: $1 " "$T/audit.out"); else lines=$(grep -F "$1 " "$T/audit.out" | grep -v '^postgres: '); fi
  if [ "$3" = rate ]; then sed 's/.*: *\([0-9.]*\) records\/s.*/\1/' <<<"$lines" | median
  else sed 's/.*, *\([0-9.]*\) ms per call.*/\1/' <<<"$lines" | median; fi
}
echo "== audit append, $ROUNDS rounds alternated, medians (file log on $(df --output=fstype "$T" | tail -1 | tr -d ' '), fsync per call; PostgreSQL 15 on the same disk, a commit per call)"
for shape in "1 record per call, 1 thread" "1 record per call, 4 threads" "16 records per call, 1 thread"; do
  rf=$(figure "$shape" file rate); rp=$(figure "$shape" pg rate)
  printf '%-32s file %6.0f records/s (%.2f ms/call), database %6.0f records/s (%.2f ms/call), ratio %s\n' \
    "$shape:" "$rf" "$(figure "$shape" file ms)" "$rp" "$(figure "$shape" pg ms)" "$(div "$rp" "$rf")"
done

# ---- gateways ------------------------------------------------------------------

git init -q --bare "$T/up/acme/app.git"
git init -q "$T/seed"
echo seed >"$T/seed/README" && git -C "$T/seed" add README && git -C "$T/seed" commit -q -m seed
git -C "$T/seed" push -q "$T/up/acme/app.git" main
RULES='[{"name": "features", "refs": ["refs/heads/feature/**"], "actions": ["create", "update"], "effect": "allow"}]'

# gateway_config NAME STATE_JSON: write NAME's config (STATE_JSON: "" for files).
gateway_config() {
  local state=
  [ -z "$2" ] || state="\"state\": $2,"
  mkdir -p "$T/$1"
  cat >"$T/$1/refgate.json" <<JSON
{"listen": "127.0.0.1:0", "state_dir": "state", $state
 "limits": {"per_token": 64},
 "upstreams": [{"host": "local", "url": "file://$T/up"}], "rules": $RULES}
JSON
}
# start NAME: serve NAME; its URL in $T/NAME/url, its pid in $T/NAME/pid.
start() {
  "$REFGATE" serve --config "$T/$1/refgate.json" 2>>"$T/$1/gw.log" &
  PIDS+=($!)
  echo $! >"$T/$1/pid"
  for _ in $(seq 200); do [ -s "$T/$1/state/url" ] && break; sleep 0.05; done
  [ -s "$T/$1/state/url" ] || { cat "$T/$1/gw.log" >&2; exit 1; }
  cp "$T/$1/state/url" "$T/$1/url"
  "$REFGATE" token mint --config "$T/$1/refgate.json" --repo local/acme/app --ttl 2h >"$T/$1/token"
}
gateway_config file ""
for g in 1 2 3; do gateway_config "db$g" "{\"postgres\": \"$PG_URL\"}"; done
"$REFGATE" policy publish --config "$T/db1/refgate.json" >/dev/null
start file
start db1

# push.sh URL TOKEN_FILE: one small new branch (a new commit on main) pushed to URL.
git clone -q "$T/up/acme/app.git" "$T/w"
cat >"$T/push.sh" <<'SH'
set -e
export REFGATE_TOKEN_FILE=$2 GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=credential.helper
export GIT_CONFIG_VALUE_0='!f() { test "$1" = get && echo username=b && echo "password=$(cat "$REFGATE_TOKEN_FILE")"; }; f'
n=$(date +%s%N)-$RANDOM
c=$(echo "$n" | git -C "$W" commit-tree -p main -m "$n" "main^{tree}")
git -C "$W" push -q "$1" "$c:refs/heads/feature/b-$n"
SH
export W=$T/w

# ---- 2. a small push's latency ------------------------------------------------

python3 "$REPO/bench/interleave.py" --warmup 3 --runs $((ROUNDS * 6)) --json "$T/latency.json" \
  "bash $T/push.sh file://$T/up/acme/app.git -" \
  "bash $T/push.sh $(cat "$T/file/url")/local/acme/app.git $T/file/token" \
  "bash $T/push.sh $(cat "$T/db1/url")/local/acme/app.git $T/db1/token"
read -r direct viafile viadb < <(jq -r '[.results[].median] | map(tostring) | join(" ")' "$T/latency.json")
echo "== a small push (one new commit, new branch), $((ROUNDS * 6)) runs interleaved, medians"
printf 'direct (file://)                 %6.1f ms\n' "$(awk -v a="$direct" 'BEGIN {print a * 1000}')"
printf 'gateway on files                 %6.1f ms   ratio to direct %s\n' \
  "$(awk -v a="$viafile" 'BEGIN {print a * 1000}')" "$(div "$viafile" "$direct")"
printf 'gateway on PostgreSQL            %6.1f ms   ratio to direct %s, to files %s\n' \
  "$(awk -v a="$viadb" 'BEGIN {print a * 1000}')" "$(div "$viadb" "$direct")" "$(div "$viadb" "$viafile")"

# ---- 3. throughput --------------------------------------------------------------

# cpu_ticks PID...: user+system ticks of each PID and its waited-for children.
cpu_ticks() {
  local p t=0
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13 + $14 + $15}')))
  done
  echo "$t"
}
pg_pids() { local pm; pm=$(head -1 "$PG_DIR/data/postmaster.pid"); echo "$pm" $(pgrep -P "$pm" || true); }
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
total_ticks() { awk '/^cpu / {s = 0; for (i = 2; i <= 9; i++) s += $i; print s}' /proc/stat; }

# clients NAME...: CLIENTS loops pushing through the gateways named, in
# turn, for SECS; prints "pushes failures". Not in a $(...): the loops must
# be this shell's children for waited_ticks to count them.
clients() {
  local names=("$@") k end=$((SECONDS + SECS)) loops=()
  rm -f "$T"/ok.* "$T"/ko.*
  for ((k = 0; k < CLIENTS; k++)); do
    local g=${names[$((k % ${#names[@]}))]}
    (
      git clone -q "$T/up/acme/app.git" "$T/c$k.$g" 2>/dev/null || true
      while [ "$SECONDS" -lt "$end" ]; do
        if W=$T/c$k.$g bash "$T/push.sh" "$(cat "$T/$g/url")/local/acme/app.git" "$T/$g/token" 2>>"$T/ko.err"; then
          echo >>"$T/ok.$k"
        else
          echo >>"$T/ko.$k"
        fi
      done
    ) &
    loops+=($!)
  done
  wait "${loops[@]}"
  echo "$(cat "$T"/ok.* 2>/dev/null | wc -l) $(cat "$T"/ko.* 2>/dev/null | wc -l)"
}

# waited_ticks: what this shell's waited-for children (the clients) used.
waited_ticks() { sed 's/.*) //' "/proc/$$/stat" | awk '{print $14 + $15}'; }

# measure LABEL NAME...: one throughput row. The CPU shares are of the
# busy time of the whole machine; "other" is what ran besides this
# benchmark (on a shared machine, other work).
measure() {
  local label=$1 n f b0 b1 t0 t1 g0 g1 p0 p1 c0 c1 gw=(); shift
  for g in "$@"; do gw+=("$(cat "$T/$g/pid")"); done
  b0=$(busy_ticks); t0=$(total_ticks); g0=$(cpu_ticks "${gw[@]}"); p0=$(cpu_ticks $(pg_pids)); c0=$(waited_ticks)
  clients "$@" >"$T/counts"
  read -r n f <"$T/counts"
  b1=$(busy_ticks); t1=$(total_ticks); g1=$(cpu_ticks "${gw[@]}"); p1=$(cpu_ticks $(pg_pids)); c1=$(waited_ticks)
  awk -v l="$label" -v n="$n" -v f="$f" -v s="$SECS" -v b=$((b1 - b0)) -v t=$((t1 - t0)) \
    -v g=$((g1 - g0)) -v p=$((p1 - p0)) -v c=$((c1 - c0)) 'BEGIN {
      o = b - g - p - c; if (o < 0) o = 0
      printf "%-30s %5.1f pushes/s (%d in %d s, %d failed); CPU busy %.0f%%: gateways with their git %.0f%%, PostgreSQL %.0f%%, clients (git) %.0f%%, other %.0f%%\n",
        l ":", n / s, n, s, f, 100 * b / t, 100 * g / b, 100 * p / b, 100 * c / b, 100 * o / b }'
}

echo "== throughput: $CLIENTS git clients pushing small new branches for $SECS s, $(nproc) cores (load average before: $(cut -d' ' -f1-3 /proc/loadavg))"
measure "1 gateway on files" file
measure "1 gateway on PostgreSQL" db1
start db2
measure "2 gateways on one database" db1 db2
start db3
measure "3 gateways on one database" db1 db2 db3
rows=$(pg_psql "SELECT seq FROM audit_head")
echo "audit chain in the database at the end: $rows records"

# ---- 4. what an idle gateway costs ----------------------------------------------

# The gateway's statements, each a transaction of its own as it runs them.
# An idle sweep looks without the lock, and ends its transaction without
# a commit (audit/store_pg.c: the connection is released with a ROLLBACK).
cat >"$T/look.sql" <<'SQL'
BEGIN;
SELECT 1 FROM audit_records WHERE pending AND gateway IS DISTINCT FROM 'bench'
  AND (gateway IS NULL OR NOT EXISTS (SELECT 1 FROM gateways g WHERE g.id = gateway
       AND g.stopped IS NULL AND g.seen > now() - interval '10 seconds'))
  LIMIT 1;
ROLLBACK;
SQL
# The sweep as it was: the head row locked before it looked.
cat >"$T/sweep.sql" <<'SQL'
BEGIN;
SELECT seq, hash FROM audit_head FOR UPDATE;
SELECT seq, gateway, line FROM audit_records WHERE pending AND gateway IS DISTINCT FROM 'bench'
  AND (gateway IS NULL OR NOT EXISTS (SELECT 1 FROM gateways g WHERE g.id = gateway
       AND g.stopped IS NULL AND g.seen > now() - interval '10 seconds'))
  ORDER BY gateway NULLS FIRST, seq LIMIT 100;
COMMIT;
SQL
echo "UPDATE gateways SET seen = now() WHERE id = 'bench' AND stopped IS NULL;" >"$T/lease.sql"
cat >"$T/poll.sql" <<'SQL'
SELECT version, digest, to_char(published AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
  published_by FROM policies ORDER BY version DESC LIMIT 1;
SQL
pg_psql "INSERT INTO gateways (id, host, pid) VALUES ('bench', 'bench', 1)" >/dev/null
chmod 0644 "$T"/*.sql
# pgbench_ms SQL_FILE: its mean latency in ms, on one connection for 5 s.
pgbench_ms() {
  pg_as_owner "$PG_BIN/pgbench" -n -h "$PG_DIR" -U refgate -f "$1" -c 1 -T 5 refgate \
    >"$T/pgbench.out" 2>&1 || { cat "$T/pgbench.out" >&2; exit 1; }
  awk '/latency average/ {print $4}' "$T/pgbench.out"
}
echo "== what an idle gateway costs the database (pgbench, 1 connection, 5 s each, mean latency)"
# Until audit_records is first analysed the planner guesses its pending
# rows and may find the plan dear enough to JIT-compile; the locked sweep
# held the head row lock while it compiled, the look holds none.
printf '%-62s %7.3f ms\n' "a sweep with nothing to complete (no lock held):" "$(pgbench_ms "$T/look.sql")"
printf '%-62s %7.3f ms\n' "the sweep that locked the head first (before):" "$(pgbench_ms "$T/sweep.sql")"
pg_psql "ANALYZE audit_records" >/dev/null
printf '%-62s %7.3f ms\n' "after ANALYZE audit_records, no lock held:" "$(pgbench_ms "$T/look.sql")"
printf '%-62s %7.3f ms\n' "after ANALYZE audit_records, the head locked (before):" "$(pgbench_ms "$T/sweep.sql")"
printf '%-62s %7.3f ms\n' "a lease renewal:" "$(pgbench_ms "$T/lease.sql")"
printf '%-62s %7.3f ms\n' "a poll of the policy version:" "$(pgbench_ms "$T/poll.sql")"
