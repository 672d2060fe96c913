#!/bin/bash
# t25-changing-source: a source that changes under ferry's feet never gives
# a torn copy marked done.
#
# The timing is taken out with strace fault injection: ferry's second read()
# of a victim file (or its open(), or the open of a directory) is held for
# 1.5 s with -e inject=...:delay_enter, and the test changes the source
# while it waits. Scenarios, each a fresh job:
#  1. grow:    data appended after the first 128 KiB were read;
#  2. shrink:  truncated to 1000 bytes in the middle of the copy;
#  3. rewrite: the same size, other bytes, the old mtime put back (only the
#              ctime tells);
#  4. vanish:  deleted in the middle of the copy (exit 24, not done);
#  5. a directory replaced by a file between scan and copy (exit 24), and
#     between two runs; the first name of a hardlink group deleted between
#     two runs (--delete);
#  6. symlink loops (a -> b -> a, self, .., .) are copied as links, and a
#     SRC that is itself a symlink loop is refused (exit 2, one line);
#  7. files rewritten without pause by a background writer during a run;
#     each version is one line repeated to a length that depends on it, so a
#     torn copy (two versions, or a wrong length) is visible in DST;
#  8. a source directory that becomes unreadable mid-run, as user nobody:
#     before the scanner opens it, and after, before the files are opened.
# After every run: no sanitizer report, the manifest invariant (each done
# row is in DST with its size and hash), the victim is either not done or an
# exact, untorn copy; then (source quiet again) the plain command completes
# and DST == SRC by the oracles.
# Needs strace (allowed to trace); part 8 needs root for the switch to
# nobody. Parts that cannot run are skipped with the reason.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd
need_strace

# how long strace holds the call the source changes under: twice as long in
# a slow build, for the change to land inside the hold
HOLD_US=$((1500000 * (SLOW > 1 ? 2 : 1)))

# Engine bugs found by this test and t20, fixed since:
#  - when a SRC directory became a file, the rows of the files that were in
#    it stayed done although DST's directory was replaced, and --verify
#    reported them missing for ever, even after --delete (they are now
#    "removed" rows, state 5);
#  - when the first name of a hardlink group was deleted from SRC, the other
#    names were copied as separate files and stayed so (another name of the
#    group now becomes the first).

# version_lines K: the number of lines of version K (5000 to 200000), each
# "vKKKKK"; write_version writes it.
version_lines() { echo $(((($1 * 7919) % 40 + 1) * 5000)); }
write_version() { # FILE K: write version K in place (O_TRUNC, then write)
	yes "v$(printf %05d "$2")" | head -n "$(version_lines "$2")" >"$1"
}

# untorn FILE: FILE is a state that the writer's file really had: empty, or
# a prefix of one version (it is rewritten with O_TRUNC and then written
# front to back). A copy torn by a change in the middle mixes two versions.
untorn() {
	[[ -s $1 ]] || return 0
	local first k size
	first=$(head -c 6 -- "$1")
	[[ $first == v[0-9][0-9][0-9][0-9][0-9] ]] || return 1
	k=$((10#${first#v}))
	size=$(stat -c %s -- "$1")
	write_version "$LOG/version" "$k"
	((size <= $(stat -c %s -- "$LOG/version"))) && cmp -s -n "$size" -- "$1" "$LOG/version"
}

# row_state SRC DST REL: the state of the file row REL (empty if none).
row_state() {
	local dir=${3%/*} name=${3##*/}
	[[ $3 == */* ]] || dir=
	sqlite3 -readonly "$(manifest_path "$1" "$2")" "
		SELECT f.state FROM files f JOIN dirs d ON d.id = f.dir
		WHERE d.path = CAST('$dir' AS BLOB) AND f.name = CAST('$name' AS BLOB);"
}

# after_run LABEL SRC DST WANT-RCS: the background run ended with one of
# WANT-RCS (a space-separated list); invariant.
after_run() {
	local label=$1 src=$2 dst=$3 want=$4
	bg_wait
	if [[ " $want " == *" $BG_RC "* ]]; then
		ok "$label: exit $BG_RC (expected: $want)"
	else
		fail "$label: exit in ($want) (got $BG_RC)"
		show "$LOG/bg.err"
	fi
	no_sanitizer_report "$LOG/bg.err"
	manifest_invariant "$(manifest_path "$src" "$dst")" "$dst" "$label"
}

# victim_ok LABEL SRC DST REL: REL is not done, or its copy equals SRC now.
victim_ok() {
	local st
	st=$(row_state "$2" "$3" "$4")
	if [[ $st != 1 ]]; then
		ok "$1: the victim is not marked done (state ${st:-none})"
	elif cmp -s "$2/$4" "$3/$4"; then
		ok "$1: the victim is done and equals the source"
	else
		fail "$1: the victim is done and equals the source"
	fi
}

small_tree() {
	mkdir -p "$1/sub"
	local i
	for i in 1 2 3 4 5; do
		printf 'file %s\n' "$i" >"$1/f$i"
		printf 'sub %s\n' "$i" >"$1/sub/s$i"
	done
}

# 1-4: the victim file changes during its second read
change_during_read() {
	local what=$1 s=src-$1 d=dst-$1
	small_tree "$s"
	write_version "$s/sub/victim" 7 # 1.3 MB, read in 128 KiB pieces
	held_run "$T/$s/sub/victim" read,pread64 2 "$FERRY" -q "$s" "$d" ||
		say "$what: the second read was not seen being held"
	case $what in
	grow) write_version "$T/$s/sub/extra" 1 && cat "$s/sub/extra" >>"$s/sub/victim" && rm "$s/sub/extra" ;;
	shrink) truncate -s 1000 "$s/sub/victim" ;;
	rewrite)
		local old
		old=$(stat -c %y "$s/sub/victim")
		# in place, the same size: v00007 lines become v00008 lines
		tr '7' '8' <"$s/sub/victim" >"$LOG/v8" && cat "$LOG/v8" >"$s/sub/victim"
		touch -d "$old" "$s/sub/victim"
		;;
	vanish) rm "$s/sub/victim" ;;
	esac
	local want="0"
	[[ $what == vanish ]] && want="24"
	after_run "$what" "$s" "$d" "$want"
	victim_ok "$what" "$s" "$d" sub/victim
	if [[ $what == vanish ]]; then
		check "vanish: the victim is not in DST" test ! -e "$d/sub/victim"
		check "vanish: status counts it vanished" test "$(status_count "$s" "$d" vanished)" = 1
	fi
	no_temp_files "$d"
	final_state "$s" "$d"
}

# 5: a directory replaced by a file between scan and copy
dir_becomes_file() {
	local s=src-dirfile d=dst-dirfile
	small_tree "$s"
	mkdir "$s/D"
	printf 'one\n' >"$s/D/held-file-1"
	printf 'two\n' >"$s/D/file-2"
	held_run held-file-1 open,openat,openat2 1 "$FERRY" -q "$s" "$d" ||
		say "dir->file: the open was not seen being held"
	rm -rf "$s/D"
	printf 'now a file\n' >"$s/D"
	after_run "dir->file" "$s" "$d" "24"
	no_temp_files "$d"
	final_with_zombie_rows "dir->file" "$s" "$d"
}

# 5b: a directory replaced by a file between two runs (no --delete): the
# second run replaces the DST directory by the file; the rows of the files
# that were in it must not stay done.
dir_becomes_file_between_runs() {
	local s=src-dirfile2 d=dst-dirfile2
	small_tree "$s"
	mkdir "$s/D"
	printf 'inside\n' >"$s/D/inside"
	expect_code 0 "$FERRY" -q "$s" "$d"
	rm -rf "$s/D"
	printf 'now a file\n' >"$s/D"
	final_with_zombie_rows "dir->file between runs" "$s" "$d"
	# and with --delete: the removed rows are gone from the manifest
	expect_code 0 "$FERRY" -q --delete "$s" "$d"
	check "dir->file between runs: after --delete, no row below D is left" \
		test "$(sqlite3 -readonly "$(manifest_path "$s" "$d")" \
			"SELECT count(*) FROM files f JOIN dirs d ON d.id = f.dir
			 WHERE d.path = CAST('D' AS BLOB)")" = 0
	expect_code 0 "$FERRY" -q --verify "$s" "$d"
}

# final_with_zombie_rows LABEL SRC DST: final_state for a job in which a
# directory D of SRC became a file: the rows of the files that were in D
# must no longer be done (DST's D is a file now), and none is verified.
final_with_zombie_rows() {
	local label=$1 s=$2 d=$3
	final_state "$s" "$d"
	check "$label: no row below D is done" \
		test "$(sqlite3 -readonly "$(manifest_path "$s" "$d")" \
			"SELECT count(*) FROM files f JOIN dirs d ON d.id = f.dir
			 WHERE d.path = CAST('D' AS BLOB) AND f.state = 1")" = 0
}

# 5c: the first name of a hardlink group is deleted between two runs
# (--delete): the other names, whose inode's ctime changed with its link
# count, are copied again and must stay one inode in DST.
hardlink_leader_deleted() {
	local s=src-hl d=dst-hl first
	small_tree "$s"
	printf 'three names\n' >"$s/hl-a"
	ln "$s/hl-a" "$s/sub/hl-b"
	ln "$s/hl-a" "$s/hl-c"
	expect_code 0 "$FERRY" -q "$s" "$d"
	first=$(sqlite3 -readonly "$(manifest_path "$s" "$d")" "
		SELECT CASE WHEN d.path = X'' THEN CAST(f.name AS TEXT)
		       ELSE CAST(d.path AS TEXT) || '/' || CAST(f.name AS TEXT) END
		FROM files f JOIN dirs d ON d.id = f.dir WHERE f.hl = -1;")
	[[ -n $first && -f $s/$first ]] || die "no first name of the hardlink group in the manifest"
	say "hardlink group: deleting its first name $first"
	rm "$s/$first"
	expect_code 0 "$FERRY" -q --delete "$s" "$d"
	check "leader deleted: the other names are still one inode in DST" \
		test "$(link_groups "$s")" = "$(link_groups "$d")"
	manifest_invariant "$(manifest_path "$s" "$d")" "$d" "leader deleted"
	tree_equal "$s" "$d"
	hardlinks_equal "$s" "$d"
	# and a no-change re-run keeps them so
	final_state "$s" "$d"
	hardlinks_equal "$s" "$d"
}

# 6: symlink loops
symlink_loops() {
	local s=src-loops d=dst-loops
	small_tree "$s"
	ln -s loop-b "$s/loop-a"
	ln -s loop-a "$s/loop-b"
	ln -s self "$s/self"
	ln -s .. "$s/sub/up"
	ln -s . "$s/sub/here"
	ln -s ../sub "$s/sub/again"
	expect_code 0 "$FERRY" -q "$s" "$d"
	final_state "$s" "$d"
	ln -s srcloop srcloop
	expect_code 2 "$FERRY" -q srcloop dst-srcloop
	stderr_is_one_error
	check "a symlink-loop SRC creates no DST" test ! -e dst-srcloop
}

# 7: a background writer rewrites three files without pause during a run
writer_loop() {
	local s=src-writer d=dst-writer k=0 f pid
	gen_tree "$s" --seed 2525 --files 400 --median 8K --max-size 256K
	for f in w1 w2 w3; do write_version "$s/$f" 1; done
	(
		k=1
		while :; do
			k=$((k + 1))
			for f in w1 w2 w3; do write_version "$s/$f" "$k"; done
		done
	) &
	pid=$!
	BG_PIDS+=("$pid")
	run "$FERRY" -q --retries=2 "$s" "$d"
	kill "$pid"
	wait "$pid" 2>/dev/null
	if [[ $RC == 0 || $RC == 23 ]]; then
		ok "writer: exit $RC (0, or 23 for files that kept changing)"
	else
		fail "writer: exit 0 or 23 (got $RC)"
		show "$LOG/err"
	fi
	no_sanitizer_report "$LOG/err"
	if [[ $RC == 23 ]]; then
		check "writer: failures are files that changed while copied" \
			bash -c '! grep "^ferry: failed: " "$1" | grep -iv chang >/dev/null' _ "$LOG/err"
		show "$LOG/err" 4
	fi
	manifest_invariant "$(manifest_path "$s" "$d")" "$d" "writer"
	local torn=0
	for f in w1 w2 w3; do
		if [[ $(row_state "$s" "$d" "$f") == 1 ]] && ! untorn "$d/$f"; then
			torn=$((torn + 1))
			say "writer: $f is done but torn: $(sort -u "$d/$f" | head -n 3 | tr '\n' ' ')"
		fi
	done
	check "writer: no done copy of a rewritten file is torn" test "$torn" = 0
	no_temp_files "$d"
	final_state "$s" "$d"
}

# 8: a directory becomes unreadable mid-run (run as nobody: root reads all)
unreadable_mid_run() {
	local w=$T/nobody when=$1 s d
	s=$w/src-$when d=$w/dst-$when
	# ferry runs as nobody with its own state directory; root's status
	# and sqlite3 queries must look there too
	local -x XDG_STATE_HOME=$w/state HOME=$w/home
	small_tree "$s"
	mkdir "$s/locked-dir"
	printf 'a\n' >"$s/locked-dir/held-inner-a"
	printf 'b\n' >"$s/locked-dir/inner-b"
	chown -R "$NOBODY_UID:$NOBODY_GID" "$s"
	if [[ $when == before-scan ]]; then
		# hold the scanner's open of the directory itself
		held_run locked-dir open,openat,openat2 1 \
			"${AS_NOBODY[@]}" "$FERRY" -q "$s" "$d" || say "$when: the open was not seen being held"
	else
		held_run held-inner-a open,openat,openat2 1 \
			"${AS_NOBODY[@]}" "$FERRY" -q "$s" "$d" || say "$when: the open was not seen being held"
	fi
	chmod 0000 "$s/locked-dir"
	after_run "unreadable $when" "$s" "$d" "23"
	check "unreadable $when: stderr says Permission denied" \
		grep -q "^ferry: failed: '.*locked-dir.*': .*Permission denied" "$LOG/bg.err"
	check "unreadable $when: the files outside are copied" diff -r -x locked-dir "$s" "$d"
	no_temp_files "$d"
	chmod 0755 "$s/locked-dir"
	as_nobody "$FERRY" -q "$s" "$d"
	check "unreadable $when: readable again, the plain command completes" test $? = 0
	tree_equal "$s" "$d"
}

for what in grow shrink rewrite vanish; do
	say "--- $what"
	change_during_read "$what"
done
say "--- a directory replaced by a file"
dir_becomes_file
dir_becomes_file_between_runs
say "--- the first name of a hardlink group is deleted"
hardlink_leader_deleted
say "--- symlink loops"
symlink_loops
say "--- a writer rewrites files during the run"
writer_loop
if can_run_unprivileged; then
	for when in before-scan before-open; do
		say "--- a directory becomes unreadable ($when)"
		unreadable_mid_run "$when"
	done
else
	say "SKIP unreadable directory mid-run: $WHY_NOT"
fi
finish
