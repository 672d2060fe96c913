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
#    dry run marked nothing done;
#  - with a subtree gone from SRC, -n --delete lists exactly what the run's
#    --delete then removes from DST (find before and after), directories
#    included: nested ones, one left a stale temp by a killed run (removed
#    first), not one that keeps a file ferry did not write (warned about
#    on both runs); and with --max-delete below that, the dry run and the
#    run list the same deleted and kept entries, count them alike, and both
#    exit 25;
#  - on a tree with hard links, changed, added, removed and chmod'ed files
#    and removed directories, -n -v --delete lists what the run's -v lists
#    (a mode changed alone as "metadata: PATH") and its summary counts the
#    same (later names of a link group are linked, not copied);
#  - a removed directory that SRC now has a file in place of, and a file
#    that SRC now has a directory of files in place of: -n lists what the
#    run deletes once, as the run (nothing under it again), and
#    neither warns of its rows; a removed subtree whose DST directory a
#    user replaced by a symbolic link to a directory outside DST: the run
#    removes nothing through the link (the outside directory stays, find)
#    and says of the file row below it what -n says; also without openat2
#    (as on a kernel before Linux 5.6);
#  - a SRC whose old files are gone, in place of them a file with 160
#    names: -n --delete and --delete both go ahead (the names count as
#    files that stay done).
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

# dst_entries: every path under dst, sorted.
dst_entries() {
	(cd dst && find . -mindepth 1 -printf '%P\n' | sort)
}

# deleted_count: the "N deleted" of the last run's summary line.
deleted_count() {
	sed -n 's/.* \([0-9]*\) deleted,.*/\1/p' -- "$LOG/err"
}

# not_empty_warnings: the last run's warnings of a directory kept.
not_empty_warnings() {
	grep -c 'directory not deleted: Directory not empty' -- "$LOG/err"
}

# A subtree gone from SRC: -n --delete lists and counts its directories as
# the run that follows deletes them (find before and after: the oracle).
check_dry_run_removed_dirs() {
	local n
	mkdir -p src/gone/deep/er src/kept/in src/tmpd
	echo 1 >src/gone/f
	echo 2 >src/gone/deep/g
	echo 3 >src/gone/deep/er/h
	ln -s f src/gone/l
	echo 4 >src/kept/in/i
	expect_code 0 "$FERRY" -q src dst
	head -c 300000 /dev/urandom >src/tmpd/big
	expect_code 86 env "$(crash_env)" FERRY_CRASH=after_write:1 "$FERRY" -q src dst
	check "the killed run left a temp in dst/tmpd" \
		test -n "$(find dst/tmpd -name '*.ferry-part')"
	echo foreign >dst/kept/in/not-ours
	rm -r src/gone src/kept src/tmpd

	dst_entries >"$LOG/before"
	expect_code 0 "$FERRY" -v -n --delete src dst
	verbose_deleted "$LOG/out" >"$LOG/dry"
	local dry_count dry_warned
	dry_count=$(deleted_count) dry_warned=$(not_empty_warnings)
	check "-n deleted nothing" cmp -s "$LOG/before" <(dst_entries)
	expect_code 0 "$FERRY" -v --delete src dst
	dst_entries | comm -23 "$LOG/before" - | grep -v '\.ferry-part$' >"$LOG/gone"
	same_set "-n --delete listed what the run deleted, directories too" \
		"$LOG/gone" "$LOG/dry"
	check "the run deleted the removed subtree's directories" \
		test ! -e dst/gone -a ! -e dst/tmpd
	check "the run kept the directories that hold a file ferry did not write" \
		test -f dst/kept/in/not-ours
	check "-n and the run warned of those two directories ($dry_warned, $(not_empty_warnings))" \
		test "$dry_warned" = 2 -a "$(not_empty_warnings)" = 2
	n=$(wc -l <"$LOG/gone")
	check "-n and the run counted $n deleted ($dry_count, $(deleted_count))" \
		test "$dry_count" = "$n" -a "$(deleted_count)" = "$n"
}

# --max-delete below what would go: the dry run lists the same deleted and
# kept entries as the run, directories too, and both exit 25.
check_dry_run_max_delete() {
	mkdir -p src/m/a/b src/m/c
	echo 1 >src/m/a/b/f
	echo 2 >src/m/a/g
	echo 3 >src/m/c/h
	expect_code 0 "$FERRY" -q src dst
	rm -r src/m
	dst_entries >"$LOG/before"
	expect_code 25 "$FERRY" -v -n --delete --max-delete 4 src dst
	verbose_deleted "$LOG/out" >"$LOG/dry"
	grep '^not deleting ' "$LOG/out" | sort >"$LOG/dry.kept"
	expect_code 25 "$FERRY" -v --delete --max-delete 4 src dst
	verbose_deleted "$LOG/out" >"$LOG/real"
	grep '^not deleting ' "$LOG/out" | sort >"$LOG/real.kept"
	dst_entries | comm -23 "$LOG/before" - >"$LOG/gone"
	same_set "--max-delete 4: -n listed what the run deleted" "$LOG/gone" "$LOG/dry"
	check "--max-delete 4: the run deleted 4 entries, one a directory" \
		test "$(wc -l <"$LOG/gone")" = 4 -a -n "$(grep -x 'm/a/b\|m/c' "$LOG/gone")"
	same_set "--max-delete 4: -n and the run kept the same entries" \
		"$LOG/real.kept" "$LOG/dry.kept"
	check "--max-delete 4: some entries were kept" test -s "$LOG/real.kept"
}

# summary_counts: the last run's summary line without "dry run: ", its
# verb and its time.
summary_counts() {
	grep -E '^ferry: (dry run: )?[0-9]+ files' -- "$LOG/err" |
		sed 's/^ferry: //; s/^dry run: //; s/ to copy / copied /; s/, [0-9.]* s$//'
}

# Dry run and run side by side on a second job with every kind of change.
check_dry_run_matches_run() {
	gen_tree src2 --seed 1213 --files 600 --median 2K
	echo a >src2/meta-a
	echo b >src2/meta-b
	chmod 644 src2/meta-a src2/meta-b
	expect_code 0 "$FERRY" -q src2 dst2
	(cd src2 && find . -mindepth 2 -type d | sort | sed -n '2p;11p') |
		while IFS= read -r d; do rm -r "src2/$d"; done
	gen_tree src2 --mutate 10 --add 40 --delete-pct 10 --seed 1214 --median 2K
	chmod 600 src2/meta-a src2/meta-b
	expect_code 0 "$FERRY" -v -n --delete src2 dst2
	sort "$LOG/out" >"$LOG/dry2"
	summary_counts >"$LOG/dry2.sum"
	expect_code 0 "$FERRY" -v --delete src2 dst2
	sort "$LOG/out" >"$LOG/real2"
	same_set "-n -v --delete lists what the run's -v lists" "$LOG/real2" "$LOG/dry2"
	check "-n listed a mode changed alone as metadata" \
		grep -qx 'metadata: meta-a' "$LOG/dry2"
	check "-n's summary counts what the run's does ($(cat "$LOG/dry2.sum"))" \
		test "$(cat "$LOG/dry2.sum")" = "$(summary_counts)"
	tree_equal src2 dst2
}

# A directory replaced by a file in SRC, and a removed one replaced by a
# symbolic link in DST.
check_dry_run_replaced() {
	mkdir -p src3/a/sub src3/keep src3/ln/b
	echo 0 >src3/x
	echo 1 >src3/a/x
	echo 2 >src3/a/sub/y
	echo 3 >src3/keep/k
	echo 4 >src3/ln/b/f
	expect_code 0 "$FERRY" -q src3 dst3
	rm -r src3/a src3/ln
	echo "now a file" >src3/a
	rm src3/x
	mkdir -p src3/x/y
	echo 5 >src3/x/f1
	echo 6 >src3/x/y/f2
	mkdir -p outside/b
	rm -r dst3/ln
	ln -s "$PWD/outside" dst3/ln
	expect_code 0 "$FERRY" -v -n --delete src3 dst3
	sort "$LOG/out" >"$LOG/dry3"
	summary_counts >"$LOG/dry3.sum"
	grep -c 'Not a directory' "$LOG/err" >"$LOG/dry3.notdir"
	grep 'symbolic links' "$LOG/err" | sed 's/^ferry: warning: //' >"$LOG/dry3.link"
	expect_code 0 "$FERRY" -v --delete src3 dst3
	sort "$LOG/out" >"$LOG/real3"
	grep 'symbolic links' "$LOG/err" | sed 's/^ferry: warning: //' >"$LOG/real3.link"
	same_set "a directory replaced by a file, a file by a directory: -n lists what the run does" \
		"$LOG/real3" "$LOG/dry3"
	check "... 'deleting a' and 'deleting x' once each" \
		test "$(grep -cx 'deleting [ax]' "$LOG/dry3")" = 2
	check "... and the same counts ($(cat "$LOG/dry3.sum"))" \
		test "$(cat "$LOG/dry3.sum")" = "$(summary_counts)"
	check "... neither warns 'Not a directory'" \
		test "$(cat "$LOG/dry3.notdir")" = 0 -a "$(grep -c 'Not a directory' "$LOG/err")" = 0
	check "a symbolic link in DST: the run removed nothing through it (find)" \
		test -d outside/b
	# (the warning of ln/b/f, a symbolic link on its way: ELOOP with
	# openat2; without it, the link is where a directory was: gone)
	check "... and the run said of the file below it what -n did ($(cat "$LOG/dry3.link"))" \
		cmp -s "$LOG/dry3.link" "$LOG/real3.link"
}

# The same symbolic link, on a kernel without openat2 (before Linux 5.6;
# FERRY_NO_OPENAT2 in a test build): the run still removes nothing through
# it.
check_symlink_without_openat2() {
	mkdir -p src5/ln/b/c
	echo 4 >src5/ln/b/c/f
	echo 5 >src5/keep
	expect_code 0 "$FERRY" -q src5 dst5
	rm -r src5/ln
	mkdir -p outside5/b/c
	rm -r dst5/ln
	ln -s "$PWD/outside5" dst5/ln
	run env FERRY_NO_OPENAT2=1 "$FERRY" -v --delete src5 dst5
	check "without openat2: the run removed nothing through the link (find)" \
		test -d outside5/b/c || show "$LOG/err"
}

# Old files gone, in their place one file with many names: the names are
# files the run makes done, so --delete's guard lets it delete.
check_dry_run_guard_links() {
	mkdir -p src4/old src4/new
	for i in $(seq 1 150); do echo "$i" >"src4/old/f$i"; done
	expect_code 0 "$FERRY" -q src4 dst4
	rm -r src4/old
	echo one >src4/new/l0
	for i in $(seq 1 160); do ln src4/new/l0 "src4/new/l$i"; done
	expect_code 0 "$FERRY" -n --delete src4 dst4
	expect_code 0 "$FERRY" --delete src4 dst4
	tree_equal src4 dst4
}

check_first_dry_run
check_dry_run_after_changes
check_dry_run_removed_dirs
check_dry_run_max_delete
check_dry_run_matches_run
check_dry_run_replaced
check_symlink_without_openat2
check_dry_run_guard_links
finish
