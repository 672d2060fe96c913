#!/bin/bash
# t93-pg-dry-run: ferry -n of a shared job, against a throw-away PostgreSQL
# cluster on a Unix socket. A dry run lists what a run of this host would
# copy, adopt or refuse, and writes nothing. The oracle for what it lists is
# the real run that follows it (its -v lines, the same paths), and for
# "nothing written" find (DST's entries with inodes and ns mtimes) and psql
# (the job's rows, hosts and generation as they were). Proves:
#  - a new job, DST not there: exit 0, every file and symlink of SRC
#    listed (find), DST not made, no job in the database; the run after it
#    copies exactly those;
#  - after SRC changed (a file rewritten, one's mode changed, one added)
#    and a user's file put in DST where SRC has a new one: exit 23, the
#    changed and new files listed, the user's file said as refused (rule
#    9); DST and psql as they were; the run after it copies exactly those
#    listed and refuses the user's file (exit 23);
#  - --adopt over a cp -a'd DST of a new job: every file and the symlink
#    listed as "adopt: PATH"; the run with --adopt adopts exactly those;
#  - a run under way (psql leaves a row pending; SRC rewrote a done file
#    meanwhile; a directory left to list, with a file rewritten): the
#    pending row, the failed one (a join retries it) and the changed file
#    of the directory to list are listed, not the rewritten file of a
#    listed directory, as the run that follows does;
#  - a symlink in DST where SRC has a directory: the file below it said
#    refused (exit 23);
#  - three names of one inode with --adopt: one listed to adopt, two to
#    copy; the run adopts one and links two;
#  - SRC's top level changed: a job that is over takes it as a run would
#    (-n lists the new top-level file); a SRC none of whose top level is the
#    job's: exit 2, saying why (only 0 of its names); a dry run of the job
#    with another DST (no job's mark): exit 2, nothing made there.
# -n --delete: t94-pg-dry-delete.
# Skips, saying why, without root or PostgreSQL.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_local_start

fy() { "$FERRY" --manifest "$URL" -j 4 "$@"; }
jid() { sql "SELECT id FROM ferry.jobs WHERE name = '$1'"; }
# rows JOB: the job's rows and hosts as psql sees them, one line
rows() {
	sql "SELECT (SELECT count(*) || ' ' || coalesce(sum(state), 0) || ' ' ||
		coalesce(sum(size), 0) || ' ' || coalesce(max(gen), 0) FROM ferry.files
		WHERE job = $(jid "$1")) || ' ' || (SELECT count(*) FROM ferry.hosts
		WHERE job = $(jid "$1")) || ' ' || (SELECT gen FROM ferry.jobs
		WHERE id = $(jid "$1"))"
}
ids() { (cd "$1" && find . -mindepth 1 -printf '%p %i %T@ %m\n' | sort); }
listed() { grep -v '^ferry:' "$1" | sed 's/^adopt: //; s/^adopted: //' | sort; }

mkdir -p src/a/b src/c
for i in 1 2 3 4 5 6; do echo "file $i" >"src/a/f$i"; done
head -c 100000 /dev/urandom >src/c/big
echo deep >src/a/b/deep
ln -s ../c/big src/a/sym
set_times src

# ---- a new job ---------------------------------------------------------------------
run fy --job-name A -n src dst
check "-n of a new job, DST not there: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
listed "$LOG/out" >"$T/dry1"
(cd src && find . \( -type f -o -type l \) -printf '%P\n' | sort) >"$T/all"
check "... lists every file and symlink of SRC (find)" cmp -s "$T/all" "$T/dry1" ||
	diff "$T/all" "$T/dry1" | head
check "... DST not made" test ! -e dst
check "... psql: no job made" test -z "$(jid A)"
run fy --job-name A -v src dst
check "the run after it: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
listed "$LOG/out" >"$T/run1"
check "... copies exactly what the dry run listed" cmp -s "$T/dry1" "$T/run1" ||
	diff "$T/dry1" "$T/run1" | head

# ---- SRC changed, a user's file in DST -----------------------------------------------
sleep 1.1
echo "file 2, rewritten" >src/a/f2
chmod 0600 src/a/f3
echo new >src/c/new
echo "a user's file" >dst/c/new
ids dst >"$T/dst.before"
before=$(rows A)
run fy --job-name A -n src dst
check "-n after SRC changed, a user's file where SRC has a new one: exit 23 (got $RC)" \
	test "$RC" = 23 || show "$LOG/err"
listed "$LOG/out" >"$T/dry2"
check "... lists the rewritten file and the one whose mode changed" \
	test "$(tr '\n' ' ' <"$T/dry2")" = "a/f2 a/f3 "
check "... says the user's file would be refused (rule 9)" \
	grep -q "c/new.*ferry did not write" "$LOG/err" || show "$LOG/err"
ids dst >"$T/dst.after"
check "... DST as it was (find)" cmp -s "$T/dst.before" "$T/dst.after"
check "... psql: the job's rows, hosts and gen as they were ($before)" test "$(rows A)" = "$before"
run fy --job-name A -v src dst
check "the run after it: exit 23 (got $RC)" test "$RC" = 23 || show "$LOG/err"
listed "$LOG/out" >"$T/run2"
check "... copies exactly what the dry run listed" cmp -s "$T/dry2" "$T/run2" ||
	diff "$T/dry2" "$T/run2" | head
check "... and refuses the user's file, kept" grep -qx "a user's file" dst/c/new

# ---- --adopt ---------------------------------------------------------------------------
cp -a src dstB
run fy --job-name B --adopt -n src dstB
check "-n --adopt over a cp -a'd DST: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
listed "$LOG/out" >"$T/dry3"
(cd src && find . \( -type f -o -type l \) -printf '%P\n' | sort) >"$T/all"
check "... every file and symlink of SRC listed as adopt: PATH (find)" \
	eval 'cmp -s "$T/all" "$T/dry3" && ! grep -qv "^adopt: " "$LOG/out"' || show "$LOG/out"
run fy --job-name B --adopt -v src dstB
check "the run with --adopt: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
listed "$LOG/out" >"$T/run3"
check "... adopts exactly those" eval 'cmp -s "$T/dry3" "$T/run3" && test "$(grep -c "^adopted: " "$LOG/out")" = "$(wc -l <"$T/dry3")"' ||
	diff "$T/dry3" "$T/run3" | head

# ---- a run under way --------------------------------------------------------------------
# psql leaves a/f4 to copy (the run is not over), and SRC rewrites a/f5,
# done: a host joining this run copies the pending row only (a/f5 waits
# for the next run's scan)
sleep 1.1
echo "file 4, rewritten" >src/a/f4
echo "file 5, rewritten" >src/a/f5
rm dst/c/new
sql "UPDATE ferry.files SET state = 0, hash = NULL WHERE job = $(jid A)
	AND name = convert_to('f4', 'UTF8')" >/dev/null
# and c still to list in this run, its big file rewritten
head -c 1000 /dev/urandom >src/c/big
sql "UPDATE ferry.dirs SET list_state = 0 WHERE job = $(jid A)
	AND path = convert_to('c', 'UTF8')" >/dev/null
run fy --job-name A -n src dst
check "-n of a run under way: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
listed "$LOG/out" >"$T/dry4"
check "... lists the pending row, the failed one (a join retries it), what c holds" \
	test "$(tr '\n' ' ' <"$T/dry4")" = "a/f4 c/big c/new "
run fy --job-name A -v src dst
listed "$LOG/out" >"$T/run4"
check "the run after it: exit 0 (got $RC), copies exactly those" \
	eval 'test "$RC" = 0 && cmp -s "$T/dry4" "$T/run4"' || diff "$T/dry4" "$T/run4" | head

# ---- a symlink in DST where SRC has a directory -----------------------------------------
# (below SRC's top level, whose names are the job's fingerprint of SRC; the
# run is over now: the dry run lists SRC)
mkdir -p src/c/x/y
echo f >src/c/x/y/f
ln -s /nonexistent dst/c/x
run fy --job-name A -n src dst
check "-n with a symlink in DST where SRC has a directory: exit 23 (got $RC)" \
	test "$RC" = 23 || show "$LOG/err"
check "... c/x/y/f said refused, not listed" \
	eval 'grep -q "c/x/y/f" "$LOG/err" && ! grep -q "c/x/y/f" "$LOG/out"' || show "$LOG/out"
rm dst/c/x

# ---- a hard-link group with --adopt -------------------------------------------------------
mkdir -p srcL/d
echo linked >srcL/d/l1
ln srcL/d/l1 srcL/d/l2
ln srcL/d/l1 srcL/d/l3
cp -a srcL dstL
run fy --job-name L --adopt -n srcL dstL
check "-n --adopt, three names of one inode over a cp -a'd DST: exit 0 (got $RC)" \
	test "$RC" = 0 || show "$LOG/err"
check "... one listed to adopt, the others to copy (the run links them)" \
	test "$(grep -c '^adopt: ' "$LOG/out") $(grep -vc '^adopt: ' "$LOG/out")" = "1 2"
listed "$LOG/out" >"$T/dry5"
counts() { grep -E '^ferry: (dry run: )?[0-9]+ files' "$LOG/err" | sed 's/^ferry: //; s/^dry run: //; s/ to copy / copied /; s/, [0-9.]* s$//'; }
counts >"$T/dry5.sum"
run fy --job-name L --adopt -v srcL dstL
listed "$LOG/out" >"$T/run5"
check "the run: one adopted, the same names" \
	eval 'test "$RC" = 0 && test "$(grep -c "^adopted: " "$LOG/out")" = 1 && cmp -s "$T/dry5" "$T/run5"' ||
	show "$LOG/out"
check "... and the same counts: the links are not files to copy ($(cat "$T/dry5.sum"))" \
	test "$(cat "$T/dry5.sum")" = "$(counts)" || show "$LOG/err"

# ---- SRC's top level changed -------------------------------------------------------------
echo "a new top-level file" >src/newtop
run fy --job-name A -n src dst
check "-n after a file was added at SRC's top level: exit 0 (got $RC), lists it" \
	eval 'test "$RC" = 0 && listed "$LOG/out" | grep -qx newtop' ||
	show "$LOG/out" "$LOG/err"
mkdir -p srcX/zz
echo z >srcX/zz/z
run fy --job-name A -n srcX dst
check "-n of a SRC none of whose top level is the job's: exit 2 (got $RC), saying why" \
	eval 'test "$RC" = 2 && grep -q "only 0 of the" "$LOG/err"' || show "$LOG/err"

# ---- refused ----------------------------------------------------------------------------
mkdir other
run fy --job-name A -n src other
check "-n of job A into a DST with no job's mark: exit 2 (got $RC)" test "$RC" = 2 || show "$LOG/err"
check "... nothing made there" test -z "$(ls -A other)"

finish
