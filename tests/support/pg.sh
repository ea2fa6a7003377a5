# A real PostgreSQL for the tests (Debian's postgresql package): a fresh
# cluster in a temporary directory, listening only on a unix socket there,
# with trust authentication for local connections. initdb refuses to run as
# root, so as root the cluster belongs to the `postgres` account.
#
#   . "$REFGATE_SRC/tests/support/pg.sh"
#   pg_start         start one in a new /tmp/rgpg.* (its own, so the postgres
#                    account can reach it); sets PG_URL, PG_DIR, PG_BIN
#   pg_stop          stop it at once and remove it (trap it on EXIT)
#   pg_restart       stop and start the same cluster
#   pg_psql SQL...   run psql on it, tuples only, unaligned
#
# pg_start returns 77 after printing why when PostgreSQL cannot run here,
# which script tests pass on as ctest's skip code.

pg_bin_dir()
{
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && echo "$d"
}

# Run a PostgreSQL program as the cluster's owner.
pg_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_start() {
  PG_BIN=$(pg_bin_dir) || { echo "SKIP: PostgreSQL's initdb/pg_ctl are not installed (Debian package postgresql)"; return 77; }
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "SKIP: running as root and there is no postgres account for initdb"
    return 77
  fi
  PG_DIR=$(mktemp -d /tmp/rgpg.XXXXXX)
  chmod 0755 "$PG_DIR"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$PG_DIR"
  pg_as_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U refgate -A trust -E UTF8 --no-locale \
    >"$PG_DIR/initdb.log" 2>&1 || { cat "$PG_DIR/initdb.log"; return 1; }
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-k $PG_DIR -c listen_addresses= -c max_connections=300" start >/dev/null ||
    { cat "$PG_DIR/server.log"; return 1; }
  pg_as_owner "$PG_BIN/createdb" -h "$PG_DIR" -U refgate refgate
  PG_URL="postgresql:///refgate?host=$PG_DIR&user=refgate"
  export PG_URL PG_DIR PG_BIN
}

pg_stop() {
  [ -n "${PG_DIR:-}" ] || return 0
  [ -n "${PG_BIN:-}" ] || PG_BIN=$(pg_bin_dir) || true
  [ -f "$PG_DIR/data/postmaster.pid" ] &&
    pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1
  rm -rf "$PG_DIR"
  PG_DIR=
}

pg_restart() {
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-k $PG_DIR -c listen_addresses= -c max_connections=300" start >/dev/null
}

pg_psql() {
  psql "$PG_URL" -X -q -t -A -v ON_ERROR_STOP=1 -c "$*"
}
