#!/bin/bash
# t07-bad-input: every kind of bad input gets its documented exit code and
# exactly one error line on stderr starting with "ferry: ", which names what
# is wrong: the option or value, the path (quoted, as the man page says), the
# manifest file, the pid of the run that holds the job.
#
#  1 usage: unknown option, bad -j / --durability / --verify / --retries
#    values, wrong number of arguments;
#  2 paths: SRC missing or not a directory, DST equal to or inside SRC (also
#    through a symlink), DST a file, DST not creatable or not writable (run
#    as an unprivileged user; skipped with a reason when that is impossible);
#  3 manifest: random bytes, a damaged SQLite header, a foreign SQLite
#    database, a newer schema, another SRC/DST pair, no manifest for status;
#    the offending file is left byte-for-byte unchanged;
#  4 locked: a second run while the first holds the job names the first's pid
#    (the first is frozen with SIGSTOP while holding the lock, so this does
#    not depend on timing); the refused runs cost the first nothing: once
#    thawed it completes, and DST equals SRC.
. "$(dirname "$0")/lib.sh" || exit 1

mkdir -p src/sub
printf 'a\n' >src/a
printf 'b\n' >src/sub/b
printf 'not a dir\n' >a-file

# fails_with N WHAT ARGS...: ferry ARGS exits N with one "ferry: " line,
# and that line contains the string WHAT (what is wrong, e.g. "'nope'").
fails_with() {
	local code=$1 what=$2
	shift 2
	expect_code "$code" "$FERRY" "$@" && stderr_is_one_error && names "$what"
}

# names WHAT: a check that the last error line contains the string WHAT.
names() {
	if grep -qF -- "$1" "$LOG/err"; then
		ok "the error names $1"
		return 0
	fi
	fail "the error names $1"
	show "$LOG/err"
	return 1
}

check_usage_errors() {
	fails_with 1 "'--no-such-option'" --no-such-option src dst
	fails_with 1 "'-Z'" -Z src dst
	fails_with 1 "'0'" -j 0 src dst
	fails_with 1 "'1025'" -j 1025 src dst
	fails_with 1 "'abc'" -j abc src dst
	fails_with 1 "'4x'" --jobs=4x src dst
	fails_with 1 "'-3'" -j -3 src dst
	fails_with 1 "'sometimes'" --durability=sometimes src dst
	fails_with 1 "'everything'" --verify=everything src dst
	fails_with 1 "'many'" --retries=many src dst
	fails_with 1 "missing SRC and DST"
	# one operand after status: never a copy of ./status into it
	mkdir status && printf 's\n' >status/f
	fails_with 1 "status needs SRC and DST, or --manifest FILE (to copy a directory named status, write ./status)" status dst
	check "status DST: nothing copied into DST" test ! -e dst
	rm -r status
	fails_with 1 "missing DST " src
	fails_with 1 "too many arguments: 'extra' after SRC and DST" src dst extra
	fails_with 1 "too many arguments: 'extra' after SRC and DST" status src dst extra
	fails_with 1 "'--no-such-option'" status --no-such-option
	check "usage errors created no DST" test ! -e dst
}

check_path_errors() {
	local real
	real=$(readlink -f src)
	fails_with 2 "'does-not-exist'" does-not-exist dst
	fails_with 2 "'a-file'" a-file dst
	# DST inside SRC: named as resolved, the symlink's target included
	fails_with 2 "'$real'" src src
	fails_with 2 "'$real/sub/dst'" src src/sub/dst
	fails_with 2 "'$real'" src src/
	ln -s src src-link
	fails_with 2 "'$real/sub/dst'" src-link src/sub/dst
	fails_with 2 "'a-file'" src a-file
	check "DST inside SRC was not created" test ! -e src/sub/dst
}

check_unwritable_dst() {
	if ! can_run_unprivileged; then
		say "SKIP unwritable DST: $WHY_NOT"
		return
	fi
	mkdir root-only && chmod 0755 root-only
	expect_code 2 as_nobody "$FERRY" src root-only/dst && stderr_is_one_error &&
		names "'root-only/dst'"
	expect_code 2 as_nobody "$FERRY" src root-only && stderr_is_one_error &&
		names "'root-only'"
}

# refused_manifest DESC FILE: ferry --manifest FILE exits 3 and leaves FILE
# (and its absence of -wal/-journal companions) as it was.
refused_manifest() {
	local desc=$1 m=$2
	cp -p "$m" "$LOG/manifest.orig"
	fails_with 3 "'$m'" --manifest "$m" src dst-m
	check "$desc: file unchanged" cmp -s "$m" "$LOG/manifest.orig"
	check "$desc: no -wal or -journal left next to it" \
		test ! -e "$m-wal" -a ! -e "$m-journal"
}

check_manifest_errors() {
	head -c 65536 /dev/urandom >random.db
	refused_manifest "random bytes" random.db

	{ printf 'SQLite format 3\0'; head -c 8176 /dev/urandom; } >bad-header.db
	refused_manifest "damaged SQLite file" bad-header.db

	sqlite3 foreign.db 'CREATE TABLE t(x); INSERT INTO t VALUES (42);'
	refused_manifest "foreign SQLite database" foreign.db

	expect_code 0 "$FERRY" -q --manifest good.db src dst-good
	cp good.db newer.db
	sqlite3 newer.db 'PRAGMA user_version = 9999;'
	refused_manifest "newer schema" newer.db

	mkdir src2
	cp good.db good-copy.db
	# names the manifest file and the pair it belongs to
	fails_with 3 "manifest 'good-copy.db' belongs to another job: '$(readlink -f src)' -> '$(readlink -f dst-good)'" \
		--manifest good-copy.db src2 dst-other
	check "other pair's manifest unchanged" cmp -s good.db good-copy.db

	# the default manifest it looked for (man page, FILES)
	fails_with 3 "'$XDG_STATE_HOME/ferry/" status src dst-never-copied
	fails_with 3 "'does-not-exist.db'" status --manifest does-not-exist.db
}

# check_locked: a frozen first run holds the job; the second gets exit 4.
check_locked() {
	gen_tree big --seed 707 --files 3000 --median 32K --no-links
	bg "$FERRY" -q big dst-big
	if ! wait_until 60 started_copying dst-big; then
		fail "first run started copying"
		return
	fi
	kill -STOP "$BG_PID"
	if ! wait_until 5 is_stopped "$BG_PID"; then
		fail "first run still running when frozen (finished too soon?)"
		kill -CONT "$BG_PID"
		bg_wait
		return
	fi
	fails_with 4 "process $BG_PID " big dst-big
	fails_with 4 "process $BG_PID " --verify big dst-big
	kill -CONT "$BG_PID"
	bg_wait
	check "the first run then completes (exit $BG_RC)" test "$BG_RC" = 0
	tree_equal big dst-big
}

check_usage_errors
check_path_errors
check_manifest_errors
check_locked
check_unwritable_dst
finish
