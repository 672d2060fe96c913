#!/bin/bash
# t87-pg-max-delete: --max-delete N in a shared job (issue 14): at most N
# entries deleted by one run of the job, whichever hosts delete them, as
# rsync's option and a single host's (t32) bound one run. Against a
# throw-away cluster on a Unix socket, SRC behind bench/slowfs (2 ms an
# operation). SRC loses 12 files and a directory (13 entries ferry wrote;
# the copy of one is gone from DST already, 12 stay to delete).
# Proves, DST's entries that SRC lacks counted with find (an oracle apart
# from ferry), and rsync -anci / diff -r at the end:
#  - two hosts at once with --delete --max-delete 4 (both joined while the
#    job is paused), claims of 3 rows each followed by a wait of 400 ms
#    times SLOW (a test build's hooks, so that the other host, slower to
#    get there under a sanitizer, claims meanwhile: both take
#    shares of the limit, and one gives back what a copy already gone did
#    not use): both exit 25, each deletes at least one entry (its
#    summary), exactly 4 entries leave DST, the summaries' deletions add up
#    to 4, -v lists
#    every other one DST holds as "not deleting PATH: --max-delete 4
#    reached", each host says once how many were deleted and kept; psql:
#    the job's count of deletions is 4, its kept rows stay removed;
#  - a host with --delete and another --max-delete (or none) joining that
#    run is refused (exit 1, naming both), deleting nothing; a host
#    without --delete joins it;
#  - --max-delete 0: nothing deleted, -v lists what would go, exit 25;
#  - the next run with --max-delete 4 goes on: 4 more (exit 25); then
#    --delete with no limit deletes the rest (exit 0): DST is SRC (diff -r,
#    rsync -anci), no removed row left (psql);
#  - --max-delete with no number or a negative one: exit 1.
# Skips, saying why, without root, PostgreSQL, rsync or bench/slowfs.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_slowfs_start rsync
jid() { sql "SELECT id FROM ferry.jobs WHERE name = 'md'"; }
# extra: how many entries DST holds that SRC does not (the job's mark aside)
extra() {
	comm -13 <(cd src && find . | sort) <(cd dst && find . ! -name .ferry-job | sort) | wc -l
}
# deleted FILE...: the sum of the summaries' "N deleted"
deleted() {
	sed -n 's/.* \([0-9][0-9]*\) deleted,.*/\1/p' "$@" | awk '{n += $1} END {print n + 0}'
}
# held FILE...: the lines "not deleting PATH: --max-delete N reached"
held() { cat "$@" | grep -c "^not deleting .*: --max-delete $N reached$"; }
same() {
	rsync -anci --exclude .ferry-job src/ dst/ >"$LOG/rsync" 2>&1 && test ! -s "$LOG/rsync"
}

mkdir -p src
for d in 1 2 3 4; do
	mkdir "src/d$d"
	for f in 1 2 3 4 5 6 7 8; do echo "file $d $f" >"src/d$d/f$f"; done
done
mkdir -p src/d4/s
for f in a b c; do echo "s $f" >"src/d4/s/$f"; done
echo top >src/top1
echo top >src/top2
mkdir -p "$MNT"
"$SLOWFS" --latency-us 2000 "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
fy() { "$FERRY" --manifest "$URL" --job-name md -j 4 "$@" "$MNT" "$T/dst"; }

run fy
check "first run: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... DST is SRC (diff -r)" diff -r -x .ferry-job src dst
expect_code 1 fy --delete --max-delete -1
expect_code 1 fy --delete --max-delete x

# ---- SRC loses 13 entries; two hosts with --max-delete 4 -------------------
rm src/d1/f1 src/d1/f2 src/d1/f3 src/d1/f4 src/d1/f5 src/d3/f1 src/d3/f2 src/d3/f3 src/top1
rm -r src/d4/s
# the copy of the lowest row of them (the first claim's) gone from DST
# already: deleting that row deletes nothing, and uses none of the limit
first=$(sql "SELECT CASE WHEN d.path = ''::bytea THEN '' ELSE
	convert_from(d.path, 'UTF8') || '/' END || convert_from(f.name, 'UTF8')
	FROM ferry.files f JOIN ferry.dirs d ON d.id = f.dir WHERE f.job = $(jid)
	ORDER BY f.id" | while read -r p; do [[ -e src/$p ]] || { echo "$p"; break; }; done)
[[ -n $first && -f dst/$first ]] || die "no copy of a removed file to remove: '$first'"
rm "dst/$first"
sleep 1.2
check "12 entries of DST are gone from SRC (find)" test "$(extra)" = 12
N=4
# claims of 3 rows (a test build's hook): both hosts take shares of the 4,
# and the first claim gives back what it did not use. Both join while the
# job is paused (ferry set), so that both are in the run before it starts:
# a host started late (a loaded machine, ThreadSanitizer) would find the
# run over, and run the job again with nothing to delete (exit 0).
"$FERRY" set --manifest "$URL" --job-name md --pause >"$LOG/set" 2>&1 ||
	die "ferry set --pause failed: $(cat "$LOG/set")"
export FERRY_PG_DEL_CLAIM=3 FERRY_PG_DEL_WAIT_MS=$((400 * SLOW))
spawn "$T/h1.out" fy -v --delete --max-delete 4
p1=$SPAWNED
spawn "$T/h2.out" fy -v --delete --max-delete 4
p2=$SPAWNED
unset FERRY_PG_DEL_CLAIM FERRY_PG_DEL_WAIT_MS
running() { sql "SELECT count(*) FROM ferry.hosts WHERE job = $(jid) AND left_at IS NULL"; }
for _ in $(seq 1 $((600 * SLOW))); do
	[[ $(running) == 2 ]] && break
	sleep 0.05
done
[[ $(running) == 2 ]] || die "the two hosts did not both join the paused job"
"$FERRY" set --manifest "$URL" --job-name md --resume >"$LOG/set" 2>&1 ||
	die "ferry set --resume failed: $(cat "$LOG/set")"
reap "$p1"
R1=$RC
reap "$p2"
R2=$RC
check "two hosts, --delete --max-delete 4: both exit 25 (got $R1 $R2)" \
	test "$R1 $R2" = "25 25" || show "$T/h1.out.err"
check "... exactly 4 entries left DST (find: 8 of the 12 stay)" test "$(extra)" = 8
n=$(deleted "$T/h1.out.err" "$T/h2.out.err")
check "... their summaries' deletions add up to 4 (got $n)" test "$n" = 4
n1=$(deleted "$T/h1.out.err")
n2=$(deleted "$T/h2.out.err")
check "... both hosts deleted: each summary counts at least one (got $n1 and $n2)" \
	eval 'test "$n1" -ge 1 && test "$n2" -ge 1' || show "$T/h1.out.err"
k=$(held "$T/h1.out" "$T/h2.out")
kept=$(sql "SELECT del_held FROM ferry.jobs WHERE id = $(jid)")
check "... -v lists the entries kept, as many as the job counts (got $k, psql $kept)" \
	eval 'test "$k" -ge 7 && test "$k" = "$kept"' || show "$T/h1.out"
for h in h1 h2; do
	check "... $h says it once, with the job's counts" \
		eval 'test "$(grep -c "max-delete 4 reached" "$T/$h.out.err")" = 1 &&
		grep -qF -- "--max-delete 4 reached: 4 entries deleted, $kept kept (-v lists them); the next run with --delete goes on" "$T/$h.out.err"' ||
		show "$T/$h.out.err"
done
check "... psql: the job counts 4 deletions in this run" \
	test "$(sql "SELECT del_used FROM ferry.jobs WHERE id = $(jid)")" = 4
check "... psql: the kept files' rows stay removed (5)" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 5")" -ge 7

# ---- another limit in a run under way is refused ---------------------------
# the job paused (ferry set), host A joins and records its limit for the
# new run (psql shows it), then waits; B joins that run with another
"$FERRY" set --manifest "$URL" --job-name md --pause >"$LOG/set" 2>&1 ||
	die "ferry set --pause failed: $(cat "$LOG/set")"
spawn "$T/a.out" fy --delete --max-delete 0
pa=$SPAWNED
for _ in $(seq 1 200); do
	[[ $(sql "SELECT del_gen = gen AND del_limit = 0 FROM ferry.jobs WHERE id = $(jid)") == t ]] && break
	sleep 0.05
done
run timeout 30 "$FERRY" --manifest "$URL" --job-name md -j 4 --delete --max-delete 3 "$MNT" "$T/dst"
check "a host with --max-delete 3 joining a run with 0: exit 1 (got $RC)" test "$RC" = 1
check "... naming both" grep -qF -- "deletes with --max-delete 0 in this run; this host has --max-delete 3" "$LOG/err" ||
	show "$LOG/err"
run timeout 30 "$FERRY" --manifest "$URL" --job-name md -j 4 --delete "$MNT" "$T/dst"
check "a host with --delete and no limit joining it: exit 1, naming both (got $RC)" \
	eval 'test "$RC" = 1 && grep -qF -- "this host has no --max-delete" "$LOG/err"' || show "$LOG/err"
spawn "$T/c.out" fy
pc=$SPAWNED
"$FERRY" set --manifest "$URL" --job-name md --resume >"$LOG/set" 2>&1 ||
	die "ferry set --resume failed: $(cat "$LOG/set")"
reap "$pc"
check "a host without --delete joins that run: exit 0 (got $RC)" test "$RC" = 0 || show "$T/c.out.err"
reap "$pa"
check "--max-delete 0 (host A): exit 25 (got $RC)" test "$RC" = 25 || show "$T/a.out.err"
check "... nothing deleted (find)" test "$(extra)" = 8
check "... one run: A and the host without --delete in one generation" \
	test "$(sql "SELECT gen = del_gen FROM ferry.jobs WHERE id = $(jid)")" = t

# ---- --max-delete 0, alone ------------------------------------------------
N=0
run fy -v --delete --max-delete 0
check "--max-delete 0: exit 25 (got $RC)" test "$RC" = 25 || show "$LOG/err"
check "... nothing deleted (find)" test "$(extra)" = 8
k=$(held "$LOG/out")
check "... -v lists what would go (got $k)" test "$k" -ge 7 || show "$LOG/out"
check "... no deletion listed" test "$(grep -c '^deleting ' "$LOG/out")" = 0

# ---- the next runs go on ---------------------------------------------------
run fy --delete --max-delete 4
check "the next run, --max-delete 4: exit 25 (got $RC)" test "$RC" = 25 || show "$LOG/err"
check "... 4 more entries left DST (find: 4 stay)" test "$(extra)" = 4
run fy -v --delete
check "then --delete with no limit: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... no max-delete message" test "$(grep -c 'max-delete' "$LOG/err")" = 0
check "... DST is SRC (diff -r)" diff -r -x .ferry-job src dst
check "... rsync -anci src/ dst/: nothing to do (directories' times too)" same ||
	show "$LOG/rsync"
check "... psql: no removed file row left" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 5")" = 0
finish
