# The database restarted, and then down for a while, under load: 12 git
# clients keep pushing through three gateways on one PostgreSQL (each push
# an allowed new branch and a denied one) while PostgreSQL restarts
# (pg_restart) and later stays stopped until pushes have been refused.
# Then: no push hung; no push claimed a ref that did not land; every push
# that did not land was refused with a reason the pusher sees (naming the
# database or the audit log); nothing landed without an allow decision
# record in the database; within seconds of the database's return no
# decision of a live gateway stays pending for a ref that landed (outcomes
# the database could not take waited in the gateway's outbox) and every
# landed ref has exactly one outcome record; the denied branches never
# landed; the gateways served again by themselves (same processes, no
# restart); the chain is contiguous and verifies.
#
#   MULTI_CLIENTS=N (per gateway, default 4)
source "$(dirname "$0")/lib_multi.sh"

PER_GW=${MULTI_CLIENTS:-4}
N=$((3 * PER_GW))
make_upstream app
multi_setup 3 "$STANDARD_RULES"
STOP=$T/stop
for i in 1 2 3; do gw_pid "$i" >"$T/pid$i.before"; done

now() { echo "${EPOCHREALTIME/./}"; }

# loader K: push until $STOP exists; one line per push to $T/l$K/log:
# "n commit rc landed_claimed start_us end_us".
loader() {
  local k=$1 d=$T/l$1 n=0 c rc t0 claimed
  clone app "$d/w"
  gw_use $((k % 3 + 1)) "$(cat "$T/tok$k")"
  git -C "$d/w" switch -q -c "c$k"
  while [ ! -e "$STOP" ]; do
    n=$((n + 1))
    commit "$d/w" f.txt "$k $n"
    c=$(git -C "$d/w" rev-parse HEAD)
    t0=$(now)
    rc=0
    timeout 120 git -C "$d/w" push origin "HEAD:refs/heads/feature/c$k-$n" "HEAD:refs/heads/deny/c$k-$n" \
      >"$d/out.$n" 2>&1 || rc=$?
    claimed=0
    grep -qF "* [new branch]      HEAD -> feature/c$k-$n" "$d/out.$n" && claimed=1
    echo "$n $c $rc $claimed $t0 $(now)" >>"$d/log"
  done
}

# claimed_since US [GATEWAY]: pushes that started at or after US and
# claimed their branch landed (through GATEWAY's clients only, if given).
claimed_since() {
  local k total=0
  for ((k = 0; k < N; k++)); do
    [ -z "${2:-}" ] || [ $((k % 3 + 1)) = "$2" ] || continue
    [ -s "$T/l$k/log" ] || continue
    total=$((total + $(awk -v t="$1" '$4 == 1 && $5 >= t' "$T/l$k/log" | wc -l)))
  done
  echo "$total"
}
# refused_since US: pushes that started at or after US and ended unclaimed.
refused_since() { cat "$T"/l*/log 2>/dev/null | awk -v t="$1" '$4 == 0 && $5 >= t' | wc -l; }

test_pushes_go_on_through_a_database_restart_and_an_outage() {
  local k t
  # Whatever happens here, the loaders stop and PostgreSQL is up for the
  # checks that follow.
  trap 'touch "$STOP"; wait; pg_up' EXIT
  for ((k = 0; k < N; k++)); do
    mkdir -p "$T/l$k"
    gw_mint $(((k + 1) % 3 + 1)) local/acme/app -- --run "l$k" >"$T/tok$k"
  done
  for ((k = 0; k < N; k++)); do loader "$k" >"$T/l$k/err" 2>&1 & done
  wait_until 120 '[ "$(claimed_since 0)" -ge "$N" ]'
  note "load running: $(claimed_since 0) pushes landed"

  # A restart (fast shutdown: sessions are cut) while pushes run.
  pg_restart
  t=$(now)
  note "pg_restart done"
  wait_until 120 '[ "$(claimed_since "$t")" -ge "$N" ]'
  note "after the restart: $(claimed_since "$t") pushes landed"

  # An outage: stopped until pushes that began after it have been refused.
  pg_down
  t=$(now)
  echo "$t" >"$T/down.at"
  wait_until 120 '[ "$(refused_since "$t")" -ge "$N" ]'
  pg_up
  t=$(now)
  echo "$t" >"$T/up.at"
  note "outage: $(refused_since "$(cat "$T/down.at")") pushes refused while the database was down"

  # Each gateway serves again by itself.
  local i
  for i in 1 2 3; do
    wait_until 120 '[ "$(claimed_since "$t" "$i")" -ge 1 ]'
  done
  note "back: every gateway landed a push $(( ($(now) - t) / 1000 )) ms after PostgreSQL was up"
}

test_no_push_hung_and_none_claimed_a_ref_that_did_not_land() {
  local k n c rc claimed t0 got bad=0
  for ((k = 0; k < N; k++)); do
    while read -r n c rc claimed t0 _; do
      [ "$rc" != 124 ] || { echo "c$k push $n hung"; bad=$((bad + 1)); }
      got=$(upstream_ref app "refs/heads/feature/c$k-$n")
      if [ "$claimed" = 1 ] && [ "$got" != "$c" ]; then
        echo "c$k push $n: git said it landed, upstream has '${got}'"; bad=$((bad + 1))
      fi
      [ -z "$(upstream_ref app "refs/heads/deny/c$k-$n")" ] || { echo "deny/c$k-$n landed"; bad=$((bad + 1)); }
    done <"$T/l$k/log"
  done
  [ "$bad" = 0 ] || fail "$bad bad pushes"
}

test_every_push_that_did_not_land_was_refused_with_a_reason() {
  local k n c rc claimed t0 bad=0 refused=0
  : >"$T/reasons"
  for ((k = 0; k < N; k++)); do
    while read -r n c rc claimed t0 _; do
      [ -z "$(upstream_ref app "refs/heads/feature/c$k-$n")" ] || continue
      refused=$((refused + 1))
      [ "$rc" != 0 ] || { echo "c$k push $n: not landed, yet git exited 0"; bad=$((bad + 1)); }
      if grep -qiE 'database|audit log' "$T/l$k/out.$n"; then
        grep -iE 'database|audit log' "$T/l$k/out.$n" | head -1 >>"$T/reasons"
      else
        echo "c$k push $n: refused without a reason:"; sed 's/^/    /' "$T/l$k/out.$n"; bad=$((bad + 1))
      fi
    done <"$T/l$k/log"
  done
  note "$refused pushes refused; what the pushers saw (counts):"
  sed -E 's/[0-9a-f]{12,}/<id>/g; s/[0-9]+ ms/N ms/g' "$T/reasons" | sort | uniq -c | sort -rn | head -5 |
    while read -r line; do note "  $line"; done
  [ "$refused" -ge 1 ] || fail "no push was refused: the outage tested nothing"
  [ "$bad" = 0 ] || fail "$bad pushes refused badly"
}

# landed_complete: every ref upstream has its allow decision completed by
# exactly one outcome record, and none is pending for a live gateway
# (exit 1 and a line saying what is not so, else a summary line).
landed_complete() {
  git --git-dir="$T/upstream/acme/app.git" for-each-ref --format='%(refname) %(objectname)' \
    refs/heads/feature >"$T/landed.refs"
  pg_psql "SELECT json_build_object('seq', seq, 'pending', pending, 'gateway', gateway,
             'live', EXISTS (SELECT 1 FROM gateways g WHERE g.id = gateway AND g.stopped IS NULL
                             AND g.seen > now() - interval '10 seconds'),
             'rec', convert_from(line, 'UTF8')::json)
           FROM audit_records WHERE kind IN ('decision', 'outcome') ORDER BY seq" >"$T/landed.rows"
  python3 - "$T/landed.refs" "$T/landed.rows" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[2])]
decision = {(r["rec"]["ref"], r["rec"]["new"]): r for r in rows
            if r["rec"]["type"] == "decision" and r["rec"]["decision"] == "allow"}
outcomes = collections.defaultdict(list)
for r in rows:
    if r["rec"]["type"] == "outcome":
        outcomes[r["rec"]["decision_seq"]].append(r["rec"]["outcome"])
stuck, counts, unknown, n = [], collections.Counter(), 0, 0
for line in open(sys.argv[1]):
    n += 1
    ref, new = line.split()
    d = decision.get((ref, new))
    if d is None:
        sys.exit(f"{ref} {new} landed without an allow decision")
    if d["pending"] and d["live"]:
        stuck.append(d["seq"])
    got = outcomes[d["seq"]]
    counts[len(got)] += 1
    unknown += sum(1 for o in got if o.startswith("unknown"))
if stuck:
    sys.exit(f"{len(stuck)} landed refs still pending for a live gateway: seqs {stuck[:10]}")
if set(counts) != {1}:
    sys.exit(f"landed refs by their number of outcome records: {dict(counts)}")
print(f"{n} landed refs, each with one outcome ({unknown} of them unknown)")
PY
}

test_soon_after_the_database_returns_every_landed_ref_has_one_outcome() {
  local retried
  wait_until 30 'landed_complete >"$T/landed_complete.out" 2>&1' ||
    { cat "$T/landed_complete.out"; return 1; }
  note "$(cat "$T/landed_complete.out"); so $(( ($(now) - $(cat "$T/up.at")) / 1000 )) ms after PostgreSQL was up"
  retried=$(awk '/audit_outbox_retried/ { for (i = 1; i <= NF; i++) if ($i ~ /^appended=/) n += substr($i, 10) }
    END { print n + 0 }' "$T"/gw*/gateway.log)
  note "outcome records the gateways kept and wrote once the database answered: $retried"
}

test_nothing_landed_without_an_allow_decision_record() {
  db_rows >"$T/rows"
  git --git-dir="$T/upstream/acme/app.git" for-each-ref --format='%(refname) %(objectname)' \
    refs/heads/feature refs/heads/deny >"$T/upstream.refs"
  python3 - "$T/upstream.refs" "$T/rows" >"$T/landed.out" <<'PY' || { cat "$T/landed.out"; fail "refs without records"; }
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[2])]
allow = collections.Counter((r["ref"], r["new"]) for r in rows if r["decision"] == "allow")
bad = 0
for line in open(sys.argv[1]):
    ref, new = line.split()
    if allow[(ref, new)] != 1:
        bad += 1
        print(f"{ref} {new} is upstream with {allow[(ref, new)]} allow decision records")
pending = [r["seq"] for r in rows if r["outcome"] is None]
print(f"{sum(1 for _ in open(sys.argv[1]))} refs upstream, {len(rows)} decision records, "
      f"{len(pending)} left without an outcome {pending[:10]}")
sys.exit(1 if bad else 0)
PY
  note "$(tail -1 "$T/landed.out")"
}

test_the_gateways_recovered_by_themselves_and_the_chain_verifies() {
  local i
  for i in 1 2 3; do
    if [ "$(gw_pid "$i")" != "$(cat "$T/pid$i.before")" ] || ! kill -0 "$(gw_pid "$i")"; then
      fail "gateway $i is not the process that started"
    fi
  done
  multi_verify
  note "$(cat "$T/chain.out")"
}

run_tests
