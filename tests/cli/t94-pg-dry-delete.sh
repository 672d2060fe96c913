#!/bin/bash
# t94-pg-dry-delete: ferry -n --delete of a shared job (issue 14), against a
# throw-away PostgreSQL cluster on a Unix socket. A dry run lists what a
# run's --delete would delete, as a single host's dry run does, and writes
# nothing. Oracles: the DST files that SRC lacks (find, comm) for what
# should be listed; the real run with --delete -v that follows each dry
# run (its "deleting" lines, the same paths); find (DST's entries with
# inodes and ns mtimes) and psql (the job's rows, hosts and gen) for
# "nothing written". Proves:
#  - a job that is over, files and a directory gone from SRC, one copy a
#    user rewrote in DST: exit 0, exactly the gone files ferry wrote are
#    listed as "deleting PATH" (not the rewritten one, said "changed since
#    ferry copied it"; not the directory, as on a single host), the new
#    file as a copy; DST and psql as they were; the run with --delete
#    deletes those files (and the directory);
#  - --max-delete 2 with five gone: exit 25, two listed as deleting and
#    three as "not deleting PATH: --max-delete 2 reached", saying so; the
#    run with --max-delete 2 deletes the same two; the next dry run lists
#    the other three;
#  - SRC looks emptied (140 of 150 files gone): exit 25, "--delete refused"
#    and --delete-anyway said, each listed as not deleting; with
#    --delete-anyway: exit 0, all 140 listed, and the run deletes them;
#  - a run under way (psql begins a new scan, as a host's rerun does): the
#    file gone from SRC is listed with the three --max-delete kept, psql's
#    rows as they were; the run that joins deletes those;
#  - a directory SRC cannot list (ferry as nobody): exit 23, nothing listed
#    as deleting, saying the scan had errors.
# Skips, saying why, without root or PostgreSQL.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_local_start

fy() { "$FERRY" --manifest "$URL" -j 4 "$@"; }
jid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }
# rows JOB: the job's rows, hosts and gen as psql sees them, one line
rows() {
	sql "SELECT (SELECT count(*) || ' ' || coalesce(sum(state), 0) || ' ' ||
		coalesce(sum(gen), 0) || ' ' || count(del_tried) FROM ferry.files
		WHERE job = $(jid "$1")) || ' ' || (SELECT count(*) FROM ferry.hosts
		WHERE job = $(jid "$1")) || ' ' || (SELECT gen FROM ferry.jobs
		WHERE id = $(jid "$1")) || ' ' || (SELECT count(*) FROM ferry.dirs
		WHERE job = $(jid "$1"))"
}
ids() { (cd "$1" && find . -mindepth 1 -printf '%p %i %T@ %m\n' | sort); }
# dels FILE: the paths listed as deleted (or that a dry run would delete)
dels() { sed -n 's/^deleting //p' "$1" | sort; }
# gone SRC DST: DST's files that SRC lacks (the job's mark aside)
gone() {
	comm -13 <(cd "$1" && find . -type f -printf '%P\n' | sort) \
		<(cd "$2" && find . -type f ! -name .ferry-job -printf '%P\n' | sort)
}

mkdir -p src/a src/b src/c
for i in 1 2 3 4 5 6; do echo "file $i" >"src/a/f$i"; done
for i in 1 2 3; do echo "g $i" >"src/b/g$i"; done
echo h >src/c/h
echo top >src/top
set_times src
run fy --job-name D src dst
check "the first run: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"

# ---- a job that is over ------------------------------------------------------------
rm src/a/f1 src/a/f2
rm -r src/b
echo new >src/a/new
echo "a user's rewrite" >dst/a/f2
gone src dst | grep -vx a/f2 >"$T/want1"
ids dst >"$T/dst.before"
before=$(rows D)
run fy --job-name D -n --delete src dst
check "-n --delete of a job that is over: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
dels "$LOG/out" >"$T/dry1"
check "... lists exactly the gone files ferry wrote (find, comm)" cmp -s "$T/want1" "$T/dry1" ||
	diff "$T/want1" "$T/dry1" | head
check "... the user's rewrite said kept, not listed" \
	eval 'grep -q "a/f2.*changed since ferry copied it" "$LOG/err" && ! grep -q "a/f2" "$LOG/out"' ||
	show "$LOG/err"
check "... the new file listed as a copy" grep -qx "a/new" "$LOG/out" || show "$LOG/out"
check "... the summary counts 4 to delete" grep -q " 4 deleted" "$LOG/err" || show "$LOG/err"
ids dst >"$T/dst.after"
check "... DST as it was (find)" cmp -s "$T/dst.before" "$T/dst.after"
check "... psql: the job's rows, hosts and gen as they were ($before)" test "$(rows D)" = "$before"
run fy --job-name D --delete -v src dst
check "the run with --delete: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
dels "$LOG/out" | grep -vx b >"$T/run1"
check "... deletes exactly the files the dry run listed (and the directory b)" \
	eval 'cmp -s "$T/dry1" "$T/run1" && test ! -e dst/b' || diff "$T/dry1" "$T/run1" | head
check "... keeps the user's rewrite" grep -qx "a user's rewrite" dst/a/f2

# ---- --max-delete ------------------------------------------------------------------------
rm src/a/f3 src/a/f4 src/a/f5 src/a/f6 src/top
ids dst >"$T/dst.before"
run fy --job-name D -n --delete --max-delete 2 src dst
check "-n --delete --max-delete 2, five gone: exit 25 (got $RC)" test "$RC" = 25 || show "$LOG/err"
dels "$LOG/out" >"$T/dry2"
check "... two listed as deleting, three as kept for --max-delete" \
	eval 'test "$(wc -l <"$T/dry2") $(grep -c ": --max-delete 2 reached$" "$LOG/out")" = "2 3"' ||
	show "$LOG/out"
check "... says so: 2 would be deleted, 3 kept" \
	grep -q -- "--max-delete 2 reached: 2 entries would be deleted, 3 kept" "$LOG/err" || show "$LOG/err"
ids dst >"$T/dst.after"
check "... DST as it was (find)" cmp -s "$T/dst.before" "$T/dst.after"
run fy --job-name D --delete --max-delete 2 -v src dst
check "the run with --max-delete 2: exit 25 (got $RC)" test "$RC" = 25 || show "$LOG/err"
dels "$LOG/out" >"$T/run2"
check "... deletes the same two" cmp -s "$T/dry2" "$T/run2" || diff "$T/dry2" "$T/run2"
gone src dst | grep -vx a/f2 >"$T/want3"
run fy --job-name D -n --delete src dst
dels "$LOG/out" >"$T/dry3"
check "the next -n --delete: exit 0 (got $RC), lists the three kept (find, comm)" \
	eval 'test "$RC" = 0 && test "$(wc -l <"$T/dry3")" = 3 && cmp -s "$T/want3" "$T/dry3"' ||
	diff "$T/want3" "$T/dry3"

# ---- SRC looks emptied -------------------------------------------------------------------
mkdir -p srcE/d
for i in $(seq 1 150); do echo "e $i" >"srcE/d/e$i"; done
run fy --job-name E srcE dstE
check "job E, 150 files: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
for i in $(seq 11 150); do rm "srcE/d/e$i"; done
gone srcE dstE >"$T/wantE"
ids dstE >"$T/dstE.before"
run fy --job-name E -n --delete srcE dstE
check "-n --delete, 140 of 150 gone: exit 25 (got $RC)" test "$RC" = 25 || show "$LOG/err"
check "... says --delete refused and --delete-anyway" \
	eval 'grep -q -- "--delete refused: 140 of the 150 files" "$LOG/err" && grep -q -- "--delete-anyway" "$LOG/err"' ||
	show "$LOG/err"
check "... none listed as deleting, 140 as not deleting: --delete refused" \
	eval 'test "$(dels "$LOG/out" | wc -l) $(grep -c ": --delete refused$" "$LOG/out")" = "0 140"' ||
	show "$LOG/out"
run fy --job-name E -n --delete --delete-anyway srcE dstE
dels "$LOG/out" >"$T/dryE"
check "-n --delete --delete-anyway: exit 0 (got $RC), the 140 listed (find, comm)" \
	eval 'test "$RC" = 0 && cmp -s "$T/wantE" "$T/dryE"' || show "$LOG/err"
ids dstE >"$T/dstE.after"
check "... DST as it was (find)" cmp -s "$T/dstE.before" "$T/dstE.after"
run fy --job-name E --delete --delete-anyway -v srcE dstE
dels "$LOG/out" >"$T/runE"
check "the run with --delete-anyway: exit 0 (got $RC), deletes those 140" \
	eval 'test "$RC" = 0 && cmp -s "$T/dryE" "$T/runE"' || diff "$T/dryE" "$T/runE" | head

# ---- a run under way ---------------------------------------------------------------------
# psql begins job D's next scan as a host's rerun does (manifest_pg/rerun.c:
# the gen moves on, SRC's root is to list again), and SRC loses c/h
rm src/c/h
sql "UPDATE ferry.jobs SET gen = gen + 1, gen_started = now() WHERE id = $(jid D);
	UPDATE ferry.dirs SET list_state = 0, state = 0, gen = (SELECT gen FROM
	ferry.jobs WHERE id = $(jid D)) WHERE job = $(jid D) AND parent IS NULL" >/dev/null
before=$(rows D)
gone src dst | grep -vx a/f2 >"$T/want4"
run fy --job-name D -n --delete src dst
dels "$LOG/out" >"$T/dry4"
check "-n --delete of a run under way: exit 0 (got $RC), lists c/h and the three kept before" \
	eval 'test "$RC" = 0 && grep -qx c/h "$T/dry4" && test "$(wc -l <"$T/dry4")" = 4 &&
		cmp -s "$T/want4" "$T/dry4"' || show "$LOG/out" "$LOG/err"
check "... psql: the job's rows, hosts and gen as they were ($before)" test "$(rows D)" = "$before"
run fy --job-name D --delete -v src dst
dels "$LOG/out" >"$T/run4"
check "the run that joins: exit 0 (got $RC), deletes those" \
	eval 'test "$RC" = 0 && cmp -s "$T/dry4" "$T/run4"' || show "$LOG/out" "$LOG/err"

# ---- a directory SRC cannot list -----------------------------------------------------------
# root reads any directory: ferry runs as nobody, a directory at mode 0
mkdir -p srcU/r srcU/u
echo r >srcU/r/f
echo u >srcU/u/f
echo x >srcU/r/x
run fy --job-name U srcU dstU
check "job U: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
rm srcU/r/x
chmod -R a+rX srcU dstU && chmod 0 srcU/u
setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
	"$FERRY" --manifest "$URL" -j 4 --job-name U -n --delete srcU dstU >"$LOG/out" 2>"$LOG/err"
RC=$?
chmod 755 srcU/u
check "-n --delete, a directory SRC cannot list: exit 23 (got $RC)" test "$RC" = 23 || show "$LOG/err"
check "... nothing listed as deleting, saying the scan had errors" \
	eval 'test -z "$(dels "$LOG/out")" && grep -q "the scan had errors: nothing would be deleted" "$LOG/err"' ||
	show "$LOG/out" "$LOG/err"

finish
