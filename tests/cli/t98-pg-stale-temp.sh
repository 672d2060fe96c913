#!/bin/bash
# t98-pg-stale-temp: a shared job removes the temp a killed host left
# for a file that is then gone from SRC, as a single host's run does
# (coord/finish.c's stale temps), against a throw-away PostgreSQL cluster
# on a Unix socket. A host removes its own temp when its copy fails or
# stops, and the next claim of a row replaces a dead host's; but a row
# whose file is gone from SRC is never copied again, so before, its temp
# stayed in DST for good. Oracle: find of DST's *.ferry-part names, diff
# -r against SRC. Proves, for a host killed (FERRY_CRASH=after_write: its
# temp written, not renamed) while it copied:
#  - a new file: the file removed from SRC, the next run (once the dead
#    host's lease has run out) finds it vanished (exit 24), and the run
#    after it, a new scan (with --delete), leaves no temp in DST and DST
#    equal to SRC;
#  - a file done before and changed since: the same;
#  - psql: each file's row is gone (the --delete run forgot it).
# Skips, saying why, without root or PostgreSQL.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_local_start

# fy JOB ARGS...: one host on JOB, with leases of 5 s (the shortest)
fy() { local j=$1; shift; "$FERRY" --manifest "$URL" --lease 5 -j 2 --job-name "$j" "$@"; }
temps() { find "$1" -name '*.ferry-part' | wc -l; }
state() {
	sql "SELECT f.state FROM ferry.files f JOIN ferry.jobs j ON j.id = f.job
		WHERE j.name = '$1' AND f.name = convert_to('$2', 'UTF8')"
}

# killed_copy JOB SRC DST: a run killed after it wrote its first temp
killed_copy() {
	run env "$(crash_env)" FERRY_CRASH=after_write:1 "$FERRY" --manifest "$URL" \
		--lease 5 -j 1 --job-name "$1" "$2" "$3"
	check "$1: the killed run: exit 86 (got $RC), a temp left in DST ($(temps "$3"))" \
		test "$RC" = 86 -a "$(temps "$3")" = 1 || show "$LOG/err"
}

# gone_then_clean JOB SRC DST FILE: FILE (its temp left) is removed from SRC;
# the runs after leave DST as SRC, with no temp
gone_then_clean() {
	local j=$1 src=$2 dst=$3 f=$4
	rm "$src/d/$f"
	echo more >"$src/d/more-$j"
	run fy "$j" "$src" "$dst"
	check "$j: the next run finds $f vanished: exit 24 (got $RC)" test "$RC" = 24 ||
		show "$LOG/err"
	run fy "$j" --delete "$src" "$dst"
	check "$j: the run after it, a new scan with --delete: exit 0 (got $RC)" test "$RC" = 0 ||
		show "$LOG/err"
	no_temp_files "$dst"
	check "$j: DST is SRC (diff -r, but the job's mark)" \
		diff -r --no-dereference -x .ferry-job "$src" "$dst"
	check "$j: psql: $f's row is gone (--delete forgot it; got '$(state "$j" "$f")')" \
		test -z "$(state "$j" "$f")"
}

# ---- a new file ------------------------------------------------------------------
mkdir -p srcA/d
head -c 300000 /dev/urandom >srcA/d/big
killed_copy A srcA dstA
gone_then_clean A srcA dstA big

# ---- a file done before, changed since ---------------------------------------------
mkdir -p srcB/d
head -c 300000 /dev/urandom >srcB/d/big
run fy B srcB dstB
check "B: the first run: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
head -c 300000 /dev/urandom >srcB/d/big
killed_copy B srcB dstB
gone_then_clean B srcB dstB big
finish
