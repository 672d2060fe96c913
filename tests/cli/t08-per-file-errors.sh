#!/bin/bash
# t08-per-file-errors: a file that cannot be copied does not stop the run.
#
#  A. unreadable source file (run as an unprivileged user, root reads all):
#     the rest is copied, exit 23, "failed: 'PATH': reason" on stderr at the
#     end, `ferry status` counts and lists it, --json says files_failed 1; a
#     re-run tries it again; once readable it is copied and the run exits 0.
#  B. unreadable source directory (a scan error) with --delete: exit 23, the
#     directory listed as failed like a file, and nothing deleted from DST, since a file the scan could not see is not
#     a file removed from SRC; once readable, --delete removes what is gone.
#  D. read-only directories (run unprivileged): a directory of mode 0555 is
#     copied with its mode, and a re-run still updates and adds files in it
#     (as cp -a and rsync do, by making it writable for the moment); its
#     mode and mtime end up as in SRC again.
#  C. a file that vanishes between scan and copy: exit 24, status counts it
#     as vanished, --json says files_vanished 1 and files_copied = the files
#     find sees in SRC after the removal, a re-run exits 0. To hit the window every time, strace
#     holds ferry's open() of exactly that name (-P NAME) for 3 s; the test
#     waits until the open is pending, then deletes the file.
# A, B and D are skipped (with the reason) when no unprivileged user is
# available, C when strace is not; the test is skipped if none could run.
. "$(dirname "$0")/lib.sh" || exit 1

ran=0

# make_small_tree DIR: a few files in two levels.
make_small_tree() {
	mkdir -p "$1/sub/deeper"
	local i
	for i in 1 2 3 4 5; do
		printf 'file %s\n' "$i" >"$1/f$i"
		printf 'sub %s\n' "$i" >"$1/sub/s$i"
		printf 'deeper %s\n' "$i" >"$1/sub/deeper/d$i"
	done
}

unreadable_file() {
	local w=$T/nobody
	make_small_tree "$w/srcA"
	printf 'secret\n' >"$w/srcA/sub/secret"
	chown -R "$NOBODY_UID:$NOBODY_GID" "$w/srcA"
	chmod 0000 "$w/srcA/sub/secret"

	expect_code 23 as_nobody "$FERRY" "$w/srcA" "$w/dstA"
	if tail -n 3 "$LOG/err" | grep -q "^\(ferry: \)\?failed: 'sub/secret': ..*"; then
		ok "A: stderr ends with [ferry: ]failed: 'sub/secret': reason"
	else
		fail "A: stderr ends with [ferry: ]failed: 'sub/secret': reason"
		show "$LOG/err"
	fi
	check "A: the other files were copied" \
		diff -r -x secret "$w/srcA" "$w/dstA"
	check "A: no partial copy of the unreadable file" test ! -e "$w/dstA/sub/secret"
	no_temp_files "$w/dstA"

	expect_code 0 as_nobody "$FERRY" status "$w/srcA" "$w/dstA"
	check "A: status says failed: 1 files" grep -q '^failed: 1 files' "$LOG/out"
	check "A: status lists failed: 'sub/secret': reason" \
		grep -q "^failed: 'sub/secret': ..*" "$LOG/out"

	expect_code 23 as_nobody "$FERRY" --json "$w/srcA" "$w/dstA"
	expect_json "$LOG/out" files_failed 1
	expect_json "$LOG/out" exit_code 23

	chmod 0644 "$w/srcA/sub/secret"
	expect_code 0 as_nobody "$FERRY" -v "$w/srcA" "$w/dstA"
	check "A: once readable, the file is copied" \
		cmp -s "$w/srcA/sub/secret" "$w/dstA/sub/secret"
	check "A: ... and only it" test "$(cat "$LOG/out")" = sub/secret
}

scan_error_blocks_delete() {
	local w=$T/nobody
	make_small_tree "$w/srcB"
	mkdir "$w/srcB/locked" && printf 'inner\n' >"$w/srcB/locked/inner"
	chown -R "$NOBODY_UID:$NOBODY_GID" "$w/srcB"
	expect_code 0 as_nobody "$FERRY" -q "$w/srcB" "$w/dstB"

	rm "$w/srcB/f1"
	chmod 0000 "$w/srcB/locked"
	expect_code 23 as_nobody "$FERRY" --delete "$w/srcB" "$w/dstB"
	check "B: the unreadable dir is named on stderr" grep -q locked "$LOG/err"
	check "B: exit 23 comes with a failed: line naming the unreadable dir" \
		grep -q "^\(ferry: \)\?failed: 'locked'" "$LOG/err"
	check "B: scan error: removed file not deleted" test -f "$w/dstB/f1"
	check "B: scan error: files below the unreadable dir kept" \
		test -f "$w/dstB/locked/inner"

	chmod 0755 "$w/srcB/locked"
	expect_code 0 as_nobody "$FERRY" -q --delete "$w/srcB" "$w/dstB"
	check "B: clean scan: --delete removes the file" test ! -e "$w/dstB/f1"
	tree_equal "$w/srcB" "$w/dstB"
}

read_only_dir() {
	local w=$T/nobody
	make_small_tree "$w/srcD"
	chmod 0555 "$w/srcD/sub/deeper" "$w/srcD/sub"
	chown -R "$NOBODY_UID:$NOBODY_GID" "$w/srcD"
	expect_code 0 as_nobody "$FERRY" -q "$w/srcD" "$w/dstD"
	tree_equal "$w/srcD" "$w/dstD"

	chmod 0755 "$w/srcD/sub/deeper"
	printf 'changed\n' >>"$w/srcD/sub/deeper/d1"
	printf 'new\n' >"$w/srcD/sub/deeper/new"
	chown "$NOBODY_UID:$NOBODY_GID" "$w/srcD/sub/deeper/new"
	chmod 0555 "$w/srcD/sub/deeper"
	expect_code 0 as_nobody "$FERRY" -v "$w/srcD" "$w/dstD"
	printf '%s\n' sub/deeper/d1 sub/deeper/new >"$LOG/want"
	verbose_copied "$LOG/out" >"$LOG/got"
	same_set "D: re-run updates files inside a read-only dir" "$LOG/want" "$LOG/got"
	tree_equal "$w/srcD" "$w/dstD"
}

vanishing_file() {
	local victim=vanishing-victim-file
	make_small_tree srcC
	printf 'here today\n' >"srcC/sub/$victim"

	bg env "$(no_leak_check_env)" strace -f -o "$LOG/strace" -P "$victim" \
		-e trace=open,openat,openat2 \
		-e inject=open,openat,openat2:delay_enter=3000000 \
		"$FERRY" --json srcC dstC
	if ! wait_until 30 grep -qs "\"$victim\"" "$LOG/strace"; then
		fail "C: ferry opened the file within 30 s"
		bg_wait
		return
	fi
	rm "srcC/sub/$victim"
	bg_wait
	if [[ $BG_RC == 24 ]]; then ok "C: vanished file: exit 24"; else
		fail "C: vanished file: exit 24 (got $BG_RC)"
		show "$LOG/bg.err"
		show "$LOG/strace" 5
	fi
	check "C: the vanished file is named on stderr" grep -q "$victim" "$LOG/bg.err"
	check "C: status counts it vanished" test "$(status_count srcC dstC vanished)" = 1
	expect_json "$LOG/bg.out" files_vanished 1
	expect_json "$LOG/bg.out" files_copied "$(find srcC -type f -printf . | wc -c)"
	expect_json "$LOG/bg.out" exit_code 24
	check "C: the other files were copied" diff -r srcC dstC
	no_temp_files dstC
	expect_code 0 "$FERRY" -q srcC dstC
	tree_equal srcC dstC
}

if can_run_unprivileged; then
	unreadable_file
	scan_error_blocks_delete
	read_only_dir
	ran=1
else
	say "SKIP unreadable file, unreadable dir, read-only dir: $WHY_NOT"
fi
if have_strace; then
	vanishing_file
	ran=1
else
	say "SKIP vanishing file: needs strace, allowed to trace"
fi
((ran)) || skip_all "neither an unprivileged user nor strace is available"
finish
