#!/bin/bash
# t05-incremental: a re-run copies exactly what changed.
#
# After a first copy, the source is changed in every way that must be noticed
# (content with and without size change, mtime only, mode only, content behind
# a restored mtime, replaced inode) and files and dirs are added and removed.
# Proves:
#  - the first copy's --json summary agrees with find over SRC: files seen and
#    copied, bytes copied = the sum of the files' stat sizes;
#  - the re-run copies exactly the changed and new files (-v list), applies
#    a change of mode alone in place (-v "metadata: PATH", same DST inode),
#    and leaves
#    every other file in DST alone (same inode and ctime: not replaced, and
#    not written, chmodded or touched in place either);
#  - without --delete, removed files stay in DST and status counts them as
#    "not in source"; with --delete they go, the tree matches the source, and
#    files in DST that ferry did not copy are kept; --json files_deleted
#    counts the entries it removed: the files removed from SRC and those of
#    their directories that are gone from DST afterwards;
#  - a re-run with nothing changed copies nothing (-v prints nothing, --json
#    files_copied 0, files_unchanged = every file find sees in SRC), changes
#    nothing in DST (ctimes) and opens no file in DST
#    (strace: only directories may be opened there).
. "$(dirname "$0")/lib.sh" || exit 1

gen_tree src --seed 505 --files 1500 --no-links

# The directory that will be removed from the source, and the regular
# files outside it that will be changed, in a stable order.
GONE_DIR=$(cd src && find . -mindepth 2 -type f -size +0 -printf '%h\n' | sort | tail -n1)
GONE_DIR=${GONE_DIR#./}
mapfile -t FILES < <(cd src && find . -type f -size +0 ! -path "./$GONE_DIR/*" \
	-printf '%P\n' | sort)
pick() { printf '%s' "${FILES[$1]}"; }

# count FIND-ARGS...: how many entries find prints (names may hold newlines).
count() { find "$@" -printf . | wc -c; }

# flip_byte FILE: change the first byte, keep the size.
flip_byte() {
	local b
	b=$(head -c1 -- "$1" | od -An -tu1 | tr -d ' ')
	printf "\\x$(printf %02x $(((b + 1) % 256)))" |
		dd of="$1" conv=notrunc status=none
}

# change_source: writes to $LOG/expected.copied and $LOG/expected.deleted
# what the next run has to do ($LOG/gone.dirs: directories removed).
change_source() {
	local a b c d e f gone
	a=$(pick 10) b=$(pick 20) c=$(pick 30) d=$(pick 40) e=$(pick 50) f=$(pick 60)
	flip_byte "src/$a" && touch -d @1700000001.5 "src/$a"  # content, same size
	printf 'more' >>"src/$b"                               # size
	touch -d @1700000002.25 "src/$c"                       # mtime only
	chmod 0640 "src/$d"                                    # mode only
	touch -r "src/$e" "$LOG/ref" && flip_byte "src/$e" &&
		touch -r "$LOG/ref" "src/$e"                       # content, same mtime
	cp -p "src/$f" "$LOG/copy" && mv "$LOG/copy" "src/$f"  # new inode, same all
	printf 'new\n' >"src/new-file"
	mkdir -p src/new-dir/sub && printf 'x\n' >src/new-dir/sub/x &&
		printf 'y\n' >src/new-dir/y
	printf '%s\n' "$a" "$b" "$c" "$e" "$f" new-file new-dir/sub/x \
		new-dir/y >"$LOG/expected.copied"
	# a mode alone: applied in place (t43-metadata-layer tells more)
	printf '%s\n' "$d" >"$LOG/expected.meta"

	gone=$(pick 70)
	(cd src && find "$GONE_DIR" ! -type d && printf '%s\n' "$gone") >"$LOG/expected.deleted"
	(cd src && find "$GONE_DIR" -type d) >"$LOG/gone.dirs"
	rm -f "src/$gone" && rm -rf "src/$GONE_DIR"
}

# regular_lines FILE: the listed paths that are regular files in SRC (a
# listing may name directories whose times were updated; they do not count).
regular_lines() {
	local p
	while IFS= read -r p; do
		[[ -f src/$p && ! -L src/$p ]] && printf '%s\n' "$p"
	done <"$1"
}

# inode_ctime_map DIR: "inode ctime<TAB>path" for every regular file below
# DIR, by path.
inode_ctime_map() {
	(cd "$1" && find . -type f -printf '%i %C@\t%P\n') | sort -t$'\t' -k2
}

check_rerun_copies_changes() {
	inode_ctime_map dst >"$LOG/inodes.before"
	expect_code 0 "$FERRY" -v src dst || return
	verbose_copied "$LOG/out" | grep -v '^metadata: ' >"$LOG/listed"
	regular_lines "$LOG/listed" >"$LOG/copied"
	same_set "re-run copies exactly the changed and new files" \
		"$LOG/expected.copied" "$LOG/copied"
	sed -n 's/^metadata: //p' "$LOG/out" >"$LOG/meta"
	same_set "re-run applies a mode alone in place (-v: metadata: PATH)" \
		"$LOG/expected.meta" "$LOG/meta"
	check "nothing deleted without --delete" test -z "$(verbose_deleted "$LOG/out")"

	inode_ctime_map dst >"$LOG/inodes.after"
	join -t$'\t' -1 2 -2 2 "$LOG/inodes.before" "$LOG/inodes.after" |
		awk -F'\t' '$2 != $3 {print $1 "\t" $2 " -> " $3}' >"$LOG/replaced"
	cut -f1 "$LOG/replaced" | grep -vxF -f "$LOG/expected.copied" |
		grep -vxF -f "$LOG/expected.meta" >"$LOG/wrongly"
	local d
	d=$(head -n1 "$LOG/expected.meta")
	check "the file whose mode alone changed keeps its DST inode" test \
		"$(grep -P "\t\Q$d\E$" "$LOG/inodes.before" | cut -d' ' -f1)" = \
		"$(grep -P "\t\Q$d\E$" "$LOG/inodes.after" | cut -d' ' -f1)"
	if [[ ! -s $LOG/wrongly ]]; then
		ok "unchanged files keep their DST inode and ctime ($(wc -l <"$LOG/inodes.before") files before)"
	else
		fail "unchanged files keep their DST inode and ctime (path, inode ctime before -> after)"
		grep -F -f "$LOG/wrongly" "$LOG/replaced" | show -
	fi
	local gone
	gone=$(head -n1 "$LOG/expected.deleted")
	check "removed file still in DST without --delete" test -f "dst/$gone"
	local n
	n=$(status_count src dst 'not in source')
	check "status: not in source: $(wc -l <"$LOG/expected.deleted") files (got '$n')" \
		test "$n" = "$(wc -l <"$LOG/expected.deleted")"
}

check_delete() {
	local parent d gone_dirs=0
	printf 'mine\n' >dst/not-from-ferry
	printf 'mine\n' >"dst/$GONE_DIR/user-file"
	expect_code 0 "$FERRY" -v --json --delete src dst || return
	# -v lines, then the summary on the last line
	tail -n1 "$LOG/out" >"$LOG/summary"
	while IFS= read -r d; do
		[[ -e dst/$d ]] || gone_dirs=$((gone_dirs + 1))
	done <"$LOG/gone.dirs"
	expect_json "$LOG/summary" files_deleted \
		$(($(wc -l <"$LOG/expected.deleted") + gone_dirs))
	verbose_deleted "$LOG/out" | grep -vxF -f "$LOG/gone.dirs" >"$LOG/deleted"
	same_set "--delete removes exactly the files removed from SRC" \
		"$LOG/expected.deleted" "$LOG/deleted"
	check "--delete keeps a file ferry did not copy" test -f dst/not-from-ferry
	check "--delete keeps a user file in a removed dir" test -f "dst/$GONE_DIR/user-file"
	# take away what the user added, then DST must equal SRC
	rm -rf dst/not-from-ferry "dst/$GONE_DIR"
	parent=$(dirname "$GONE_DIR")
	touch -r "src/$parent" "dst/$parent" && touch -r src dst
	tree_equal src dst
}

ctimes() { find dst -printf '%P %i %C@\n' | sort; }

check_noop_rerun() {
	expect_code 0 "$FERRY" -v src dst
	check "no-change re-run prints nothing with -v" test ! -s "$LOG/out"
	expect_code 0 "$FERRY" --json src dst
	expect_json "$LOG/out" files_copied 0
	expect_json "$LOG/out" files_failed 0
	expect_json "$LOG/out" files_unchanged "$(count src \( -type f -o -type l \))"

	if ! have_strace; then
		say "SKIP the strace part: strace missing or not permitted"
		return
	fi
	local dstabs
	dstabs=$(readlink -f dst)
	ctimes >"$LOG/ctimes.before"
	env "$(no_leak_check_env)" strace -f -y -o "$LOG/strace" \
		-e trace=open,openat,openat2,creat "$FERRY" -q src dst
	check "traced no-change re-run exits 0" test $? = 0
	ctimes >"$LOG/ctimes.after"
	if cmp -s "$LOG/ctimes.before" "$LOG/ctimes.after"; then
		ok "no-change re-run modifies nothing in DST (ctimes, inodes)"
	else
		fail "no-change re-run modifies nothing in DST (ctimes, inodes)"
		diff "$LOG/ctimes.before" "$LOG/ctimes.after" | show -
	fi
	# Each open that returned an fd for a path below DST: must be a directory.
	grep -oE "= [0-9]+<$dstabs(/[^>]*)?>\$" "$LOG/strace" |
		sed -E 's/^= [0-9]+<(.*)>$/\1/' | sort -u >"$LOG/opened"
	local p bad=0
	while IFS= read -r p; do
		[[ -d $p ]] || { bad=1 && say "opened: $p"; }
	done <"$LOG/opened"
	check "no-change re-run opens only directories in DST ($(wc -l <"$LOG/opened") opened)" \
		test $bad = 0
	grep -E "<$dstabs(/[^>]*)?>.*O_(WRONLY|RDWR|CREAT|TRUNC)" "$LOG/strace" >"$LOG/writes"
	check "no-change re-run opens nothing in DST for writing" test ! -s "$LOG/writes"
	show "$LOG/writes" 5
}

# check_first_copy: a first copy, its summary against find's view of SRC.
check_first_copy() {
	local entries bytes
	entries=$(count src ! -type d)
	bytes=$(find src -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	expect_code 0 "$FERRY" --json src dst
	expect_json "$LOG/out" files_seen "$entries"
	expect_json "$LOG/out" files_copied "$entries"
	expect_json "$LOG/out" bytes_copied "$bytes"
}

check_first_copy
change_source
check_rerun_copies_changes
check_delete
check_noop_rerun
finish
