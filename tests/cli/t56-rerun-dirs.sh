#!/bin/bash
# t56-rerun-dirs: a re-run notices every change whatever the size of the
# directory it is in.
#
# The scan hands its results over in chunks of 128 entries, and a
# directory that arrives whole in one chunk has its rows read from the
# manifest at once (manifest/scan.c) where a bigger one has each looked up
# by name. Directories of 1, 127, 128, 129, 300 and 5,000 files sit on
# both sides of that line. After a first copy, each gets content changed
# with the same size and a new mtime, content changed behind a restored
# mtime (only the ctime moves), a mode alone, and a file removed; three
# also a rename and a new file, and three have their mtime restored (a
# directory whose mtime lies about the removal).
# Proves, with oracles that share no code with ferry:
#  - a no-op re-run copies nothing and counts every file unchanged (--json);
#  - the re-run copies exactly the changed, renamed and new files (-v) and
#    applies the mode alone in place (-v "metadata: PATH");
#  - with --delete, the removed and renamed names go at once, and a file
#    removed behind a lying mtime by the next run at the latest;
#    then DST equals SRC (diff -r, rsync -ani --numeric-ids, find's
#    metadata listing: tree_equal).
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd rsync

SIZES=(1 127 128 129 300 5000)

make_src() {
	local n i d
	mkdir src
	for n in "${SIZES[@]}"; do
		d=src/d$n
		mkdir "$d"
		for ((i = 0; i < n; i++)); do
			printf 'file %d of %d\n' "$i" "$n" >"$d/f$i"
		done
		# ns mtimes, one per directory (set_times takes minutes here)
		(cd "$d" && find . -type f -exec touch -d "@1600000$n.123456789" {} +)
		touch -d "@1600001$n.5" "$d"
	done
}

# flip_byte FILE: change the first byte, keep the size.
flip_byte() {
	local b
	b=$(head -c1 -- "$1" | od -An -tu1 | tr -d ' ')
	printf "\\x$(printf %02x $(((b + 1) % 256)))" |
		dd of="$1" conv=notrunc status=none
}

# Directories whose mtime moves with their changes, and those that have
# it restored afterwards (it lies: a removal it does not show).
HONEST=(127 129 300)
LYING=(1 128 5000)

# change_dir N: changes in src/dN; what the re-run must copy goes to
# $LOG/expected.copied, a mode alone to $LOG/expected.meta, the names it
# must delete at once to $LOG/expected.deleted.
change_dir() {
	local n=$1 d=src/d$1 last=$(($1 - 1))
	touch -r "$d" "$LOG/dir-time"
	if ((n > 1)); then
		flip_byte "$d/f0" && touch -d @1700000001.5 "$d/f0"
		touch -r "$d/f1" "$LOG/ref" && flip_byte "$d/f1" &&
			touch -r "$LOG/ref" "$d/f1"
		chmod 0600 "$d/f2"
		printf 'd%s/f0\nd%s/f1\n' "$n" "$n" >>"$LOG/expected.copied"
		printf 'd%s/f2\n' "$n" >>"$LOG/expected.meta"
	fi
	rm "$d/f$last"
	if [[ " ${LYING[*]} " == *" $n "* ]]; then
		touch -r "$LOG/dir-time" "$d"
		return
	fi
	mv "$d/f3" "$d/renamed"
	printf 'new\n' >"$d/added"
	printf 'd%s/renamed\nd%s/added\n' "$n" "$n" >>"$LOG/expected.copied"
	printf 'd%s/f3\nd%s/f%s\n' "$n" "$n" "$last" >>"$LOG/expected.deleted"
}

make_src
expect_code 0 "$FERRY" -q src dst
tree_equal src dst

# a no-op re-run
expect_code 0 "$FERRY" --json src dst
expect_json "$LOG/out" files_copied 0
expect_json "$LOG/out" files_unchanged "$(find src -type f | wc -l)"

: >"$LOG/expected.copied"
: >"$LOG/expected.meta"
: >"$LOG/expected.deleted"
for n in "${SIZES[@]}"; do
	change_dir "$n"
done

expect_code 0 "$FERRY" -v --delete src dst
verbose_copied "$LOG/out" | grep -v '^metadata: ' |
	while IFS= read -r p; do [[ -f src/$p ]] && printf '%s\n' "$p"; done >"$LOG/copied"
same_set "the re-run copies exactly the changed, renamed and new files" \
	"$LOG/expected.copied" "$LOG/copied"
sed -n 's/^metadata: //p' "$LOG/out" | grep -v '^d[0-9]*$' | grep -v '^\.$' >"$LOG/meta"
same_set "the re-run applies each mode alone in place" \
	"$LOG/expected.meta" "$LOG/meta"
verbose_deleted "$LOG/out" | grep -vxF -f "$LOG/expected.deleted" |
	grep -v '^d\(1\|128\|5000\)/f[0-9]*$' >"$LOG/deleted.other"
verbose_deleted "$LOG/out" | grep -xF -f "$LOG/expected.deleted" >"$LOG/deleted"
same_set "--delete removes the renamed and removed names of the honest directories at once" \
	"$LOG/expected.deleted" "$LOG/deleted"
check "--delete removes nothing else (a lying directory's removed file at most)" \
	test ! -s "$LOG/deleted.other"
show "$LOG/deleted.other"

# the files removed behind a lying mtime are gone after the next run
expect_code 0 "$FERRY" -q --delete src dst
for n in "${SIZES[@]}"; do
	check "d$n/f$((n - 1)), removed, is gone from DST" \
		test ! -e "dst/d$n/f$((n - 1))"
done
tree_equal src dst

# and the run after that has nothing to do
expect_code 0 "$FERRY" --json --delete src dst
expect_json "$LOG/out" files_copied 0
expect_json "$LOG/out" files_deleted 0
finish
