#!/bin/bash
# t32-delete-guards: --delete refuses to act on a SRC that looks replaced or
# emptied, --delete-anyway overrides that, and --max-delete N bounds what one
# run deletes (rsync's name and meaning).
#
# A mount point whose mount failed is an empty directory: a --delete run that
# trusted it would remove the whole copy. ferry records SRC's identity (its
# root's dev:ino, as DST's) and weighs it with what the scan finds gone.
# Proves, each DST compared before and after with find's listing (names,
# types, modes, sizes, ns mtimes, inodes) and diff -r against a cp -a copy:
#  - SRC emptied in place (same identity): --delete exits 25 with one
#    message naming SRC, saying why and naming --delete-anyway; DST is
#    untouched; with SRC back, the same command copies and deletes nothing;
#  - SRC an empty directory made anew (a mount point whose mount failed):
#    the same; the manifest records SRC's dev:ino;
#  - SRC replaced by another, small tree (another root): refused, nothing
#    that was in DST goes, the new tree's files are copied;
#    --delete-anyway then deletes as asked (DST equals SRC);
#  - SRC whose identity changed (recorded one rewritten) with a few files
#    gone: refused; with nothing gone: accepted and the new identity is
#    recorded;
#  - most of SRC gone at once, same root (150 of 170 files): refused;
#    --dry-run reports the refusal (exit 25) and lists what would go as
#    "not deleting PATH: --delete refused", changing nothing;
#  - --max-delete below the count: exactly N entries removed (find), one
#    message, exit 25; --max-delete 0 removes nothing and -v lists what
#    would go; --dry-run with --max-delete; above the count: the rest goes,
#    exit 0, DST equals SRC;
#  - a legitimate --delete of a few files removes exactly those, exit 0, no
#    message;
#  - a directory of 150 files renamed: not refused, by the dry run either
#    (both weigh the new copies done), the old names listed and deleted.
. "$(dirname "$0")/lib.sh" || exit 1

REFUSED='ferry: --delete refused: '

# mk_tree DIR N [notop]: N files in DIR/a, 20 in DIR/b, 5 in DIR/c/d, and
# unless notop 3 files and a symlink at the top (N + 29 entries). A tree
# without files at the top can be moved out of DIR and back without
# changing the ctime of a file (a renamed file's changes: copied again).
mk_tree() {
	local d=$1 n=$2 i
	mkdir -p "$d/a" "$d/b" "$d/c/d" || die "mkdir $d"
	for ((i = 1; i <= n; i++)); do printf 'a%d\n' "$i" >"$d/a/f$i"; done
	for ((i = 1; i <= 20; i++)); do printf 'b%d\n' "$i" >"$d/b/f$i"; done
	for ((i = 1; i <= 5; i++)); do printf 'd%d\n' "$i" >"$d/c/d/f$i"; done
	[[ ${3-} == notop ]] && return
	for ((i = 1; i <= 3; i++)); do printf 't%d\n' "$i" >"$d/t$i"; done
	ln -s b/f1 "$d/link"
}

# listing DIR: an oracle of DIR and everything below it.
listing() { find "$1" -printf '%P|%y|%m|%s|%T@|%i|%l\n' | sort; }

# setup CASE N [notop]: CASE/src with mk_tree N, copied to CASE/dst; a cp -a copy
# of DST in CASE/dst.copy and its listing in CASE/before.
setup() {
	local c=$1
	mk_tree "$c/src" "$2" "${3-}"
	expect_code 0 "$FERRY" -q "$c/src" "$c/dst" || die "first copy of $c failed"
	cp -a "$c/dst" "$c/dst.copy" || die "cp -a $c/dst"
	listing "$c/dst" >"$c/before"
}

# untouched CASE WHAT: DST is what it was after setup.
untouched() {
	local c=$1
	listing "$c/dst" >"$c/after"
	if diff "$c/before" "$c/after" >"$LOG/listing.diff"; then
		ok "$2: DST untouched (find listing)"
	else
		fail "$2: DST untouched (find listing)"
		show "$LOG/listing.diff"
	fi
	check "$2: DST untouched (diff -r against a copy)" \
		diff -r --no-dereference "$c/dst.copy" "$c/dst"
}

# refused WHAT WORDS...: the last run exited 25 with one refusal on stderr
# that contains each of WORDS and names --delete-anyway.
refused() {
	local what=$1 w
	shift
	check "$what: one refusal on stderr" test "$(grep -c "^$REFUSED" "$LOG/err")" = 1
	for w in "$@" "nothing deleted" "use --delete-anyway"; do
		check "$what: the message says '$w'" grep -qF -- "$w" "$LOG/err"
	done
}

# nothing_again CASE WHAT: with SRC back, --delete copies and deletes
# nothing, and DST keeps every file and inode it had.
nothing_again() {
	local c=$1
	expect_code 0 "$FERRY" -v --json --delete "$c/src" "$c/dst"
	tail -n1 "$LOG/out" >"$LOG/summary"
	expect_json "$LOG/summary" files_copied 0
	expect_json "$LOG/summary" files_deleted 0
	check "$2: nothing listed by -v" test "$(wc -l <"$LOG/out")" = 1
	check "$2: DST keeps every entry (below its root)" \
		diff <(grep -v '^|' "$c/before") <(listing "$c/dst" | grep -v '^|')
	check "$2: DST equals SRC" diff -r --no-dereference "$c/src" "$c/dst"
}

# 1. SRC emptied in place: the same directory, nothing in it.
case_emptied() {
	local c=$T/emptied
	setup "$c" 30 notop
	mkdir "$c/hold" && mv "$c/src"/* "$c/hold/" || die "cannot empty $c/src"
	expect_code 25 "$FERRY" --delete "$c/src" "$c/dst"
	refused "emptied SRC" "the source '$c/src' is empty" "records 55 files"
	untouched "$c" "emptied SRC"
	mv "$c/hold"/* "$c/src/" || die "cannot refill $c/src"
	nothing_again "$c" "emptied SRC back"
}

# 2. A mount that failed: an empty directory in SRC's place (another root).
case_failed_mount() {
	local c=$T/mount
	setup "$c" 30
	if command -v sqlite3 >/dev/null 2>&1; then
		M=$(manifest_path "$c/src" "$c/dst")
		check "the manifest records SRC's dev:ino" test \
			"$(sqlite3 "$M" "SELECT value FROM meta WHERE key = 'src_identity'")" = \
			"$(stat -c %d:%i "$c/src")"
	fi
	mv "$c/src" "$c/src.real" && mkdir "$c/src" || die "cannot swap $c/src"
	expect_code 25 "$FERRY" -q --delete "$c/src" "$c/dst"
	refused "failed mount" "the source '$c/src' is empty" "a mount that failed?"
	check "failed mount: the refusal is all on stderr under -q" test "$(wc -l <"$LOG/err")" = 1
	untouched "$c" "failed mount"
	rmdir "$c/src" && mv "$c/src.real" "$c/src" || die "cannot swap back $c/src"
	nothing_again "$c" "mount back"
}

# 3. SRC replaced by another, small tree: only the identity tells.
case_replaced() {
	local c=$T/replaced i
	setup "$c" 10
	mv "$c/src" "$c/src.old" && mkdir "$c/src" || die "cannot swap $c/src"
	for ((i = 1; i <= 4; i++)); do printf 'new%d\n' "$i" >"$c/src/new-$i"; done
	expect_code 25 "$FERRY" --delete "$c/src" "$c/dst"
	refused "replaced SRC" "the source '$c/src' is another directory" \
		"39 files copied before are not in it"
	check "replaced SRC: nothing that was in DST changed or went" \
		diff -r --no-dereference -x 'new-*' "$c/dst.copy" "$c/dst"
	check "replaced SRC: every entry of DST is still there (find)" \
		test -z "$(comm -23 <(cut -d'|' -f1 "$c/before" | sort) \
			<(listing "$c/dst" | cut -d'|' -f1 | sort))"
	check "replaced SRC: the new tree's files are copied" \
		cmp -s "$c/src/new-4" "$c/dst/new-4"
	expect_code 0 "$FERRY" -v --delete-anyway "$c/src" "$c/dst"
	check "--delete-anyway: DST equals the new SRC" \
		diff -r --no-dereference "$c/src" "$c/dst"
	check "--delete-anyway: every file and directory of the old tree listed as deleted" \
		test "$(grep -c '^deleting ' "$LOG/out")" = 43
	check "--delete-anyway: no refusal" test "$(grep -c "$REFUSED" "$LOG/err")" = 0
	# the new root is recorded: a later --delete of one file is no refusal
	rm "$c/src/new-1"
	expect_code 0 "$FERRY" -q --delete "$c/src" "$c/dst"
	check "after --delete-anyway: the new root is the recorded one" test ! -e "$c/dst/new-1"
}

# 4. The recorded identity changed (a remount may do that), rewritten.
case_identity() {
	local c=$T/identity
	command -v sqlite3 >/dev/null 2>&1 || {
		say "no sqlite3: the rewritten identity is not tried"
		return
	}
	setup "$c" 10
	M=$(manifest_path "$c/src" "$c/dst")
	sqlite3 "$M" "UPDATE meta SET value = '1:1' WHERE key = 'src_identity'" ||
		die "cannot rewrite the recorded identity"
	rm "$c/src/t1" "$c/src/t2"
	expect_code 25 "$FERRY" --delete "$c/src" "$c/dst"
	refused "other identity" "was 1:1" "2 files copied before"
	untouched "$c" "other identity"
	printf 't1\n' >"$c/src/t1" && printf 't2\n' >"$c/src/t2" &&
		touch -r "$c/dst.copy/t1" "$c/src/t1" && touch -r "$c/dst.copy/t2" "$c/src/t2" || die "cannot restore t1 t2"
	expect_code 0 "$FERRY" -q --delete "$c/src" "$c/dst"
	check "nothing gone: the new identity is recorded" test \
		"$(sqlite3 "$M" "SELECT value FROM meta WHERE key = 'src_identity'")" = \
		"$(stat -c %d:%i "$c/src")"
}

# 5. Most of SRC gone at once under the same root; and --dry-run.
case_most_gone() {
	local c=$T/most
	setup "$c" 150
	rm -r "$c/src/a"
	find "$c/dst/a" -printf 'a/%P\n' | sed 's|/$||' | sort >"$LOG/gone"
	expect_code 25 "$FERRY" -n --delete "$c/src" "$c/dst"
	check "dry run: one refusal" test "$(grep -c "^$REFUSED" "$LOG/err")" = 1
	check "dry run: the refusal says why" \
		grep -qF "150 of the 179 files copied from the source '$c/src' are gone" "$LOG/err"
	check "dry run: the refusal says nothing would be deleted" \
		grep -qF "nothing would be deleted" "$LOG/err"
	sed -n 's/^not deleting \(.*\): --delete refused$/\1/p' "$LOG/out" >"$LOG/listed"
	same_set "dry run: lists what would go otherwise" "$LOG/gone" "$LOG/listed"
	check "dry run: lists no deletion" test "$(grep -c '^deleting ' "$LOG/out")" = 0
	untouched "$c" "dry run"
	expect_code 25 "$FERRY" --delete "$c/src" "$c/dst"
	refused "most gone" "150 of the 179 files"
	untouched "$c" "most gone"
	expect_code 0 "$FERRY" -q --delete-anyway "$c/src" "$c/dst"
	check "--delete-anyway: DST equals SRC" diff -r --no-dereference "$c/src" "$c/dst"
}

# removed_count CASE: entries of the last listing of CASE that are gone.
removed_count() {
	comm -23 <(cut -d'|' -f1 "$1/prev" | sort) \
		<(listing "$1/dst" | cut -d'|' -f1 | sort) | wc -l
}
remember() { listing "$1/dst" >"$1/prev"; }

# 6. --max-delete below and above the count, 0, and with --dry-run.
case_max_delete() {
	local c=$T/max
	setup "$c" 10
	# 10 files and links and 2 directories go: 12 entries
	rm -r "$c/src/c" "$c/src/t1" "$c/src/t2" "$c/src/b/f1" "$c/src/link"
	rm "$c/src/b/f2"
	expect_code 25 "$FERRY" -n --delete --max-delete 4 "$c/src" "$c/dst"
	check "dry run --max-delete 4: 4 deletions listed" test "$(grep -c '^deleting ' "$LOG/out")" = 4
	check "dry run --max-delete 4: the other entries listed as kept" \
		test "$(grep -c '^not deleting .*: --max-delete 4 reached$' "$LOG/out")" = 8
	untouched "$c" "dry run --max-delete"
	remember "$c"
	expect_code 25 "$FERRY" --delete --max-delete 4 "$c/src" "$c/dst"
	check "--max-delete 4: exactly 4 entries removed (find)" test "$(removed_count "$c")" = 4
	check "--max-delete 4: said once" test "$(grep -c 'max-delete 4 reached' "$LOG/err")" = 1
	check "--max-delete 4: the message counts what was kept" \
		grep -qF -- '--max-delete 4 reached: 4 entries deleted, 8 kept' "$LOG/err"
	remember "$c"
	expect_code 25 "$FERRY" -v --delete --max-delete 0 "$c/src" "$c/dst"
	check "--max-delete 0: nothing removed (find)" test "$(removed_count "$c")" = 0
	check "--max-delete 0: -v lists the 8 that would go" \
		test "$(grep -c '^not deleting .*: --max-delete 0 reached$' "$LOG/out")" = 8
	check "--max-delete 0: no deletion listed" test "$(grep -c '^deleting ' "$LOG/out")" = 0
	expect_code 0 "$FERRY" -v --delete --max-delete 9 "$c/src" "$c/dst"
	check "--max-delete above the count: the 8 left removed (find)" test "$(removed_count "$c")" = 8
	check "--max-delete above the count: no message" test "$(grep -c 'max-delete' "$LOG/err")" = 0
	check "--max-delete above the count: DST equals SRC" \
		diff -r --no-dereference "$c/src" "$c/dst"
	expect_code 1 "$FERRY" --delete --max-delete -1 "$c/src" "$c/dst"
	expect_code 1 "$FERRY" --delete --max-delete x "$c/src" "$c/dst"
}

# 7. A legitimate --delete of a few files.
case_few() {
	local c=$T/few
	setup "$c" 10
	rm "$c/src/a/f1" "$c/src/b/f3" "$c/src/t3"
	remember "$c"
	expect_code 0 "$FERRY" --delete "$c/src" "$c/dst"
	check "a few files gone: exactly 3 removed (find)" test "$(removed_count "$c")" = 3
	check "a few files gone: DST equals SRC" diff -r --no-dereference "$c/src" "$c/dst"
	check "a few files gone: no refusal" test "$(grep -c "$REFUSED" "$LOG/err")" = 0
}

# 8. A directory of 150 files renamed: 150 gone, 150 new. A run's guard
# weighs the new copies done (it comes after them), and so does a dry run.
case_renamed() {
	local c=$T/ren
	mkdir -p "$c/src/old" "$c/src/k"
	for i in $(seq 1 150); do echo "r $i" >"$c/src/old/f$i"; done
	echo k >"$c/src/k/k"
	expect_code 0 "$FERRY" -q "$c/src" "$c/dst" || die "first copy of $c failed"
	mv "$c/src/old" "$c/src/new"
	expect_code 0 "$FERRY" -n --delete "$c/src" "$c/dst"
	check "a directory of 150 renamed: -n --delete lists the 150 old names, not refused" \
		eval 'test "$(grep -c "^deleting old/" "$LOG/out")" = 150 &&
		! grep -q "$REFUSED" "$LOG/err"' || show "$LOG/err"
	expect_code 0 "$FERRY" --delete "$c/src" "$c/dst"
	check "... the run deletes them: DST equals SRC" diff -r --no-dereference "$c/src" "$c/dst"
}

case_emptied
case_renamed
case_failed_mount
case_replaced
case_identity
case_most_gone
case_max_delete
case_few
finish
