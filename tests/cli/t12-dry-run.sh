#!/bin/bash
# t12-dry-run: -n lists what would happen and writes nothing anywhere.
#
# Proves:
#  - a first -n run creates neither DST nor a manifest (nothing at all in
#    $XDG_STATE_HOME) and lists every file of SRC; an existing empty DST
#    stays empty with its mtime;
#  - after a real copy and some changes, -n --delete lists exactly the changed
#    and the removed files, and changes neither DST (inodes, ctimes) nor the
#    manifest (its bytes, and those of its -wal file if any);
#  - the real run that follows still copies exactly the changed files: the
#    dry run marked nothing done.
. "$(dirname "$0")/lib.sh" || exit 1

gen_tree src --seed 1212 --files 300 --no-links
(cd src && find . -type f -printf '%P\n') >"$LOG/all.files"

# listed_paths: the files the last -n run listed, to copy or to delete
# (directories it may list are left out).
listed_paths() {
	local p
	{ verbose_copied "$LOG/out"; verbose_deleted "$LOG/out"; } |
		while IFS= read -r p; do
			[[ -d src/$p ]] || printf '%s\n' "$p"
		done
}

# state_snapshot: checksums of the manifest and its write-ahead log (not of
# the -shm index or the lock file, which readers and runs may touch).
state_snapshot() {
	find "$XDG_STATE_HOME" -type f \( -name '*.db' -o -name '*.db-wal' \) \
		-exec sha1sum {} + | sort
}

check_first_dry_run() {
	expect_code 0 "$FERRY" -n src dst
	check "-n created no DST" test ! -e dst
	check "-n created no manifest (no file in the state dir)" \
		test -z "$(find "$XDG_STATE_HOME" -type f -print -quit)"
	listed_paths >"$LOG/listed"
	same_set "-n lists every file of SRC" "$LOG/all.files" "$LOG/listed"

	mkdir dst && touch -d @1600000000.5 dst
	expect_code 0 "$FERRY" -n -v src dst
	check "-n leaves an existing empty DST empty" test -z "$(ls -A dst)"
	check "-n leaves DST's mtime alone" test "$(find dst -maxdepth 0 -printf %T@)" = 1600000000.5000000000
	rmdir dst
}

check_dry_run_after_changes() {
	local a b gone
	expect_code 0 "$FERRY" -q src dst
	a=$(sed -n 5p "$LOG/all.files") b=$(sed -n 15p "$LOG/all.files")
	gone=$(sed -n 25p "$LOG/all.files")
	printf 'changed\n' >>"src/$a"
	touch -d @1700000000.75 "src/$b"
	rm "src/$gone"
	printf '%s\n' "$a" "$b" "$gone" >"$LOG/want"

	find dst -printf '%P %i %C@\n' | sort >"$LOG/dst.before"
	state_snapshot >"$LOG/state.before"
	expect_code 0 "$FERRY" -n --delete src dst
	listed_paths >"$LOG/listed"
	same_set "-n --delete lists the changed and the removed files" "$LOG/want" "$LOG/listed"
	find dst -printf '%P %i %C@\n' | sort >"$LOG/dst.after"
	check "-n changed nothing in DST" cmp -s "$LOG/dst.before" "$LOG/dst.after"
	state_snapshot >"$LOG/state.after"
	check "-n changed nothing in the manifest" cmp -s "$LOG/state.before" "$LOG/state.after"
	check "-n deleted nothing" test -f "dst/$gone"

	expect_code 0 "$FERRY" -v src dst
	printf '%s\n' "$a" "$b" >"$LOG/want"
	verbose_copied "$LOG/out" >"$LOG/got"
	same_set "the real run after -n copies exactly the changed files" "$LOG/want" "$LOG/got"
}

check_first_dry_run
check_dry_run_after_changes
finish
