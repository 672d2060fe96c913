#!/bin/bash
# t73-pg-claims: the shared manifest's core (src/manifest_pg/, issue 14)
# against a real PostgreSQL cluster, driven by tests/pg/pgdrive (one
# process per host, each in its own network namespace, joined to the
# database's by a veth pair). psql is the oracle throughout. Proves:
#  - an address libpq cannot parse fails at once, saying so; a server
#    that does not answer is waited for, then named in the failure;
#  - two hosts connecting at once migrate once: the second waits for the
#    first's migration (its advisory lock) and finds it done;
#    schema_version has one row per sql/pg/ migration;
#  - joining a job with another DST fingerprint is refused, saying so;
#  - three hosts claim and complete 2,000 rows (and 20 directories) at
#    once, with leases (3 s) shorter than their work (3.5 s a claim,
#    renewed every 0.75 s): every row done
#    exactly once, by the token the host that did it was given, and no row
#    held by two live claims (O_EXCL marker files while held);
#  - kill -9 of a host holding a claim: its rows come back when the lease
#    runs out, and the others complete them;
#  - a host cut off (ip link set down) past its lease, then back: its late
#    outcome is refused, the rows stay done by the other hosts' tokens;
#  - the server restarted mid-run: the hosts wait, reconnect, carry on.
# Skips, saying why, without root, network namespaces, PostgreSQL or a
# test build's pgdrive.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_need
PGDRIVE=${FERRY_PGDRIVE:-$(dirname "$FERRY")/../tests/pg/pgdrive}
[[ -x $PGDRIVE ]] ||
	skip_all "needs tests/pg/pgdrive (a build with -DFERRY_TESTING=ON; FERRY_PGDRIVE)"

netns_three # $db and ferry-$$-w1..3, linked
pg_init
pg_start "$db" '*'
sock=$(pg_url)

# sql QUERY: its result, unaligned, from the socket
sql() { psql -X -A -t -q -v ON_ERROR_STOP=1 -c "$1" "$sock"; }
# w I ARGS...: becomes pgdrive in worker I's network namespace (nsenter
# execs it: the pid stays the driver's; not ip netns exec, see in_netns
# in pg-lib.sh), reaching the server over its link (wurl I). Only as
# spawn's command.
w() {
	local i=$1
	shift
	exec nsenter --net="/run/netns/ferry-$$-w$i" -- "$PGDRIVE" "$@"
}
wurl() { pg_url "10.231.$1.1"; }
jobid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }
# spawn OUT CMD...: CMD in the background, output in OUT; SPAWNED its pid
# (the trap kills it if the test dies). reap PID: waits; RC its status.
spawn() {
	local out=$1
	shift
	"$@" >"$out" 2>&1 &
	SPAWNED=$!
	BG_PIDS+=("$SPAWNED")
}
reap() {
	wait "$1" 2>/dev/null
	RC=$?
	local keep=() p
	for p in "${BG_PIDS[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	BG_PIDS=("${keep[@]}")
}

# ---- connecting ---------------------------------------------------------
expect_code 1 "$PGDRIVE" migrate "nonsense here" 30
check "a bad address is refused at once, saying why" \
	grep -q "not a libpq connection string" "$LOG/err"
mkdir "$T/nosock"
t0=$SECONDS
expect_code 3 "$PGDRIVE" migrate "$(pg_url "$T/nosock")" 2
check "a server not there: waited 2 s ($((SECONDS - t0)) s), then a clear failure" \
	eval 'test $((SECONDS - t0)) -ge 2 && grep -q "cannot connect to the shared manifest: .*(waited 2 s)" "$LOG/err"'

# ---- migrations: two hosts at once ------------------------------------
n_mig=$(find "$FERRY_SRCDIR/sql/pg" -name '[0-9][0-9][0-9]_*.sql' | wc -l)
ms() { echo $(($(date +%s%N) / 1000000)); }
# the first host's migration holds its advisory lock for 3 s
advisory_held() {
	test "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")" = 1
}
spawn "$LOG/m1.out" env FERRY_PG_MIGRATE_PAUSE_MS=3000 "$PGDRIVE" migrate "$sock"
m1=$SPAWNED
wait_until 20 advisory_held || fail "the first host never took the migration lock"
t0=$(ms)
spawn "$LOG/m2.out" w 1 migrate "$(wurl 1)"
m2=$SPAWNED
reap "$m2"
rc2=$RC
t2=$(($(ms) - t0))
reap "$m1"
rc1=$RC
check "the first host migrates (exit $rc1)" test "$rc1" = 0
check "the second host, starting during the migration, connects (exit $rc2)" \
	test "$rc2" = 0
check "the second host waited for the first's migration (${t2} ms)" \
	test "$t2" -ge 1000
check "schema_version: one row per migration ($n_mig)" \
	test "$(sql 'SELECT count(*), count(DISTINCT version) FROM ferry.schema_version')" = "$n_mig|$n_mig"
check "a later connect migrates nothing" \
	eval '"$PGDRIVE" migrate "$sock" >/dev/null && test "$(sql "SELECT count(*) FROM ferry.schema_version")" = "$n_mig"'

# ---- job join ---------------------------------------------------------
expect_code 0 "$PGDRIVE" join "$sock" jj src-a dst-a h1
expect_code 0 "$PGDRIVE" join "$sock" jj src-a dst-a h2
expect_code 2 "$PGDRIVE" join "$sock" jj src-a dst-b h3
check "the refusal names the job and DST" \
	grep -q "job 'jj' of the shared manifest has another DST: its fingerprint is 'dst-a', this host's DST is 'dst-b'" "$LOG/err"
expect_code 2 "$PGDRIVE" join "$sock" jj src-x dst-a h3
check "the refusal names SRC" grep -q "has another SRC" "$LOG/err"
check "the job has the two hosts that joined" \
	test "$(sql "SELECT string_agg(host, ',' ORDER BY host) FROM ferry.hosts WHERE job = $(jobid jj)")" = h1,h2
# a fingerprint is compared byte for byte: a backslash is no escape
expect_code 0 "$PGDRIVE" join "$sock" jb 'src\x41' dst-a h1
expect_code 0 "$PGDRIVE" join "$sock" jb 'src\x41' dst-a h2
expect_code 2 "$PGDRIVE" join "$sock" jb srcA dst-a h3

# ---- three hosts, 2,000 rows ------------------------------------------
expect_code 0 "$PGDRIVE" seed "$sock" c3 2000 20
mkdir "$T/marks"
for i in 1 2 3; do
	spawn "$LOG/c3.$i.out" w "$i" work -b 250 -l 3 -w 3500 -m "$T/marks" -o "$T/c3.$i" \
		"$(wurl "$i")" c3 "host$i"
	pids[i]=$SPAWNED
done
for i in 1 2 3; do
	reap "${pids[i]}"
	rc=$RC
	check "c3: host $i ends well (exit $rc)" test "$rc" = 0 ||
		show "$LOG/c3.$i.out"
done
c3=$(jobid c3)
check "c3: every file row done" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $c3 AND state = 1 AND hash IS NOT NULL")" = 2000
check "c3: every directory listed (20 and the root)" \
	test "$(sql "SELECT count(*) FROM ferry.dirs WHERE job = $c3 AND list_state = 1")" = 21
cat "$T"/c3.[123] | sort -n >"$T/c3.hosts"
sql "SELECT id || ' ' || claim_token FROM ferry.files WHERE job = $c3 ORDER BY id" >"$T/c3.db"
check "c3: each row's outcome accepted once, all 2000" \
	test "$(awk '{print $1}' "$T/c3.hosts" | sort -u | wc -l)|$(wc -l <"$T/c3.hosts")" = "2000|2000"
check "c3: each row done by the token its host was given" cmp -s "$T/c3.hosts" "$T/c3.db"
check "c3: no row held by two live claims" \
	eval '! grep -h overlap "$LOG"/c3.?.out'
check "c3: leases were renewed, none lost, nothing refused" \
	eval '! grep -hE "^(lost lease|refused)" "$LOG"/c3.?.out && grep -qE "renewed [1-9]" "$LOG/c3.1.out"'
check "c3: all three hosts did some of it" \
	test "$(sql "SELECT count(DISTINCT claimed_by) FROM ferry.files WHERE job = $c3")" = 3

# ---- kill -9 of a host holding a claim --------------------------------
expect_code 0 "$PGDRIVE" seed "$sock" k9 600 0
k9=$(jobid k9)
spawn "$LOG/k9.3.out" w 3 work -b 40 -l 2 -S 1 -r "$T/never" "$(wurl 3)" k9 host3
p3=$SPAWNED
wait_until 20 grep -q '^holding' "$LOG/k9.3.out"
read -r _ _ tok _ n <"$LOG/k9.3.out"
kill -KILL "$p3"
reap "$p3"
say "host 3 killed holding token $tok ($n rows)"
check "k9: the killed host held $n rows under token $tok" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $k9 AND claim_token = $tok AND state = 0")" = 40
for i in 1 2; do
	spawn "$LOG/k9.$i.out" w "$i" work -b 40 -l 2 -w 100 -o "$T/k9.$i" "$(wurl "$i")" k9 "host$i" \

	pids[i]=$SPAWNED
done
for i in 1 2; do
	reap "${pids[i]}"
	rc=$RC
	check "k9: host $i ends well (exit $rc)" test "$rc" = 0 || show "$LOG/k9.$i.out"
done
check "k9: every row done" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $k9 AND state = 1")" = 600
check "k9: none by the killed host's token" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $k9 AND claim_token = $tok")" = 0
check "k9: each row's outcome accepted once" \
	test "$(cat "$T"/k9.[12] | awk '{print $1}' | sort -u | wc -l)" = 600

# ---- a host cut off past its lease ------------------------------------
expect_code 0 "$PGDRIVE" seed "$sock" cut 600 0
cut=$(jobid cut)
spawn "$LOG/cut.2.out" w 2 work -b 40 -l 2 -S 1 -r "$T/resume" -o "$T/cut.2" \
	"$(wurl 2)" cut host2
p2=$SPAWNED
wait_until 20 grep -q '^holding' "$LOG/cut.2.out"
read -r _ _ tok _ n <"$LOG/cut.2.out"
ip -n "ferry-$$-w2" link set "fw$$x2" down
say "host 2 cut off holding token $tok ($n rows)"
for i in 1 3; do
	spawn "$LOG/cut.$i.out" w "$i" work -b 40 -l 2 -w 100 -o "$T/cut.$i" "$(wurl "$i")" cut "host$i" \

	pids[i]=$SPAWNED
done
for i in 1 3; do
	reap "${pids[i]}"
	rc=$RC
	check "cut: host $i ends well (exit $rc)" test "$rc" = 0 || show "$LOG/cut.$i.out"
done
check "cut: every row done while host 2 was cut off" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $cut AND state = 1")" = 600
ip -n "ferry-$$-w2" link set "fw$$x2" up
touch "$T/resume"
reap "$p2"
rc=$RC
check "cut: host 2 ends well once back (exit $rc)" test "$rc" = 0 || show "$LOG/cut.2.out"
check "cut: host 2's late outcome was refused" \
	grep -q "^refused token $tok rows $n\$" "$LOG/cut.2.out"
check "cut: host 2 had no outcome accepted" test ! -s "$T/cut.2"
check "cut: its rows are done by other tokens" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $cut AND claim_token = $tok")" = 0
check "cut: each row's outcome accepted once" \
	test "$(cat "$T"/cut.[13] | awk '{print $1}' | sort -u | wc -l)|$(cat "$T"/cut.[13] | wc -l)" = "600|600"

# ---- the server restarted mid-run -------------------------------------
expect_code 0 "$PGDRIVE" seed "$sock" rs 1000 0
rs=$(jobid rs)
for i in 1 2 3; do
	spawn "$LOG/rs.$i.out" w "$i" work -b 20 -l 3 -w 300 -o "$T/rs.$i" "$(wurl "$i")" rs "host$i" \

	pids[i]=$SPAWNED
done
done_at_least() {
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $1 AND state = 1")" -ge "$2"
}
wait_until 20 done_at_least "$rs" 100
check "rs: the server stops mid-run (rows still pending)" \
	eval '! done_at_least "$rs" 700'
pg_stop
sleep 1
pg_start "$db" '*'
for i in 1 2 3; do
	reap "${pids[i]}"
	rc=$RC
	check "rs: host $i ends well (exit $rc)" test "$rc" = 0 || show "$LOG/rs.$i.out"
	check "rs: host $i reconnected" grep -qE 'reconnects [1-9]' "$LOG/rs.$i.out"
done
check "rs: every row done" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $rs AND state = 1")" = 1000
cat "$T"/rs.[123] | sort -n >"$T/rs.hosts"
sql "SELECT id || ' ' || claim_token FROM ferry.files WHERE job = $rs ORDER BY id" >"$T/rs.db"
check "rs: each row done once, by the token its host was given" cmp -s "$T/rs.hosts" "$T/rs.db"
finish
