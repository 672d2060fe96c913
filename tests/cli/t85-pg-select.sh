#!/bin/bash
# t85-pg-select: --include, --exclude, --min-size and --max-size in a shared
# job (issue 14: what a single host's run takes, a shared one takes) against
# a throw-away cluster on a Unix socket. SRC is behind bench/slowfs (2 ms
# an operation), so that two hosts started together both join. The oracle
# is rsync run with the same rules (rsync -a, and rsync -a --delete on a
# copy of DST: excluded entries are not deleted), compared by diff -r;
# psql for the rows. Proves:
#  - two hosts at once with the rules: both exit 0, DST is rsync's copy;
#    an excluded directory has no row (so no listing of it);
#  - a host with other rules joins a run that is not over: exit 1, saying
#    both; with the same rules it goes on (exit 0);
#  - a run again with one more exclude (of a directory ferry copied) and
#    --delete, after SRC lost a file: only the lost file is deleted, as
#    rsync --delete with the same rules; the excluded directory's rows are
#    not removed (psql);
#  - a file SRC lost in a run without --delete, then excluded, with
#    --delete: kept (rsync --delete keeps it too);
#  - a failed file (psql), then its directory excluded: not copied; a run
#    that takes it again retries it;
#  - a file grown past --max-size: neither copied nor deleted;
#  - bad sizes (--min-size above --max-size): exit 1, DST not made;
#    --verify with selection options: exit 1 (it verifies the whole job),
#    without: exit 0. (--files-from: t92.)
# Skips, saying why, without root, PostgreSQL, rsync or bench/slowfs.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_slowfs_start rsync
jid() { sql "SELECT id FROM ferry.jobs WHERE name = 'sel'"; }
RULES=(--exclude 'cache/' --exclude '*.log' --include 'keep/**' --max-size 2000)
TWO_HOSTS_JOB=sel
fy() { "$FERRY" --manifest "$URL" --job-name sel -j 4 "$@" "$MNT" "$T/dst"; }
# expect [--delete] RULE...: exp is what rsync makes of DST with the rules
expect() {
	rm -rf exp
	cp -a dst exp
	rsync -a "$@" --exclude /.ferry-job src/ exp/
}
same() {
	diff -r -x .ferry-job exp dst >"$LOG/diff" 2>&1
	check "$1: DST is rsync's copy with the same rules (diff -r)" test ! -s "$LOG/diff" ||
		show "$LOG/diff"
}
deleted() { sed -n 's/.* \([0-9][0-9]*\) deleted,.*/\1/p' "$LOG/err"; }

mkdir -p src/keep/a src/keep/b src/keep/c src/cache/deep src/logs src/big
for i in $(seq 1 10); do
	echo "a $i" >"src/keep/a/f$i"
	echo "b $i" >"src/keep/b/g$i"
	echo "c $i" >"src/keep/c/h$i"
	echo "cache $i" >"src/cache/deep/x$i"
	echo "log $i" >"src/logs/l$i.log"
	echo "text $i" >"src/logs/t$i.txt"
done
echo "a log" >src/keep/a/run.log
head -c 5000 /dev/zero >src/big/large
head -c 100 /dev/zero >src/big/small
mkdir -p "$MNT"
"$SLOWFS" --latency-us 2000 "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"

# ---- bad input first: nothing made ---------------------------------------------
run fy --min-size 10 --max-size 5
check "--min-size above --max-size: exit 1 (got $RC)" test "$RC" = 1 || show "$LOG/err"
check "... DST not made" test ! -e dst

# ---- two hosts at once ------------------------------------------------------------
expect "${RULES[@]}"
two_hosts "${RULES[@]}"
check "two hosts with the rules: both exit 0 (got $R1 $R2)" test "$R1 $R2" = "0 0" ||
	show "$T/h1.out.err"
check "... psql: both joined the job" \
	test "$(sql "SELECT count(*) FROM ferry.hosts WHERE job = $(jid)")" = 2
same "two hosts"
# a directory is listed only by a claim of its row
check "... cache/ never listed: psql has no row of it or below it" \
	test "$(sql "SELECT count(*) FROM ferry.dirs WHERE job = $(jid) AND (path =
		convert_to('cache', 'UTF8') OR position(convert_to('cache/', 'UTF8') in path) = 1)")" = 0

# ---- a host with other rules joins a run that is not over ---------------------------
# psql leaves one file of the run to copy: the run is not over
sql "UPDATE ferry.files SET state = 0, hash = NULL WHERE job = $(jid)
	AND name = convert_to('f3', 'UTF8')" >/dev/null
run fy --exclude 'cache/'
check "a host with other rules joins a run not over: exit 1 (got $RC)" test "$RC" = 1 ||
	show "$LOG/err"
check "... saying both" \
	grep -q "is scanning SRC with --exclude 'cache/' --exclude '\*.log' --include 'keep/\*\*' --max-size 2000; this host has --exclude 'cache/'" "$LOG/err" ||
	show "$LOG/err"
run fy "${RULES[@]}"
check "... with the same rules it goes on: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
same "the run finished"

# ---- a run again: one more exclude, --delete ------------------------------------
RULES2=(--exclude 'keep/b/' "${RULES[@]}")
rm src/keep/a/f1
sleep 1.2 # slowfs's attribute cache
expect --delete "${RULES2[@]}"
run fy --delete "${RULES2[@]}"
check "a run again, keep/b/ excluded too, --delete: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... one deleted, keep/a/f1 (got $(deleted))" \
	eval 'test "$(deleted)" = 1 && test ! -e dst/keep/a/f1' || show "$LOG/err"
check "... keep/b kept" test -f dst/keep/b/g1
same "keep/b excluded"
check "... psql: keep/b's rows not removed" \
	test "$(sql "SELECT count(*) FROM ferry.files f JOIN ferry.dirs d ON d.id = f.dir
		WHERE f.job = $(jid) AND d.path = convert_to('keep/b', 'UTF8') AND f.state = 1")" = 10

# ---- lost from SRC without --delete, then excluded ------------------------------
rm src/keep/c/h1
sleep 1.2
run fy "${RULES2[@]}"
check "keep/c/h1 gone, a run without --delete: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
RULES3=(--exclude 'keep/c/' "${RULES2[@]}")
expect --delete "${RULES3[@]}"
run fy --delete "${RULES3[@]}"
check "... then keep/c/ excluded, --delete: exit 0, nothing deleted (got $RC, $(deleted))" \
	eval 'test "$RC" = 0 && test "$(deleted)" = 0' || show "$LOG/err"
check "... keep/c/h1 kept" test -f dst/keep/c/h1
same "keep/c excluded"

# ---- a failed file, then excluded ----------------------------------------------
# (psql plays the failure; its DST copy is gone): the run that excludes
# its directory neither copies it nor fails for it... it stays failed,
# retried by a later run whose scan finds it again
sql "UPDATE ferry.files SET state = 2, error = 'planted', hash = NULL
	WHERE job = $(jid) AND name = convert_to('t3.txt', 'UTF8')" >/dev/null
rm dst/logs/t3.txt
RULES4=(--exclude 'logs/' "${RULES3[@]}")
sleep 1.2
run fy "${RULES4[@]}"
check "logs/t3.txt failed, then logs/ excluded: not copied again (got exit $RC)" \
	test ! -e dst/logs/t3.txt || show "$LOG/err"
run fy "${RULES3[@]}"
check "... a run that takes logs/ again retries it: exit 0 (got $RC), copied" \
	eval 'test "$RC" = 0 && cmp -s src/logs/t3.txt dst/logs/t3.txt' || show "$LOG/err"

# ---- a file grown past --max-size ----------------------------------------------
head -c 3000 /dev/zero >src/big/small
sleep 1.2
expect --delete "${RULES3[@]}"
run fy --delete "${RULES3[@]}"
check "big/small grown past --max-size, --delete: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... neither copied nor deleted (100 bytes in DST)" \
	test "$(stat -c %s dst/big/small)" = 100
same "a file grown past --max-size"

run "$FERRY" --verify --manifest "$URL" --job-name sel "${RULES[@]}" "$MNT" "$T/dst"
check "--verify with selection options: exit 1 (got $RC), saying it verifies the whole job" \
	eval 'test "$RC" = 1 && grep -q "verifies the whole job" "$LOG/err"' || show "$LOG/err"
run "$FERRY" --verify --manifest "$URL" --job-name sel "$MNT" "$T/dst"
check "--verify: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"

wrong=$(pg_counts_wrong)
check "every job's counts are psql's counts of its rows" test -z "$wrong" ||
	printf '%s\n' "$wrong" | show -
finish
