#!/bin/bash
# t11-exclude: --exclude patterns match as documented.
#
#   '*.tmp'         no slash: the basename, at any depth
#   skipdir         no slash: a dir of that name is skipped with everything in
#                   it, and so is a file of that name
#   /top.log        leading slash: anchored at SRC, a deeper top.log is kept
#   build/          trailing slash: directories only; a file named build is kept
#   a/deep/*.bin    a slash inside: matched against the path relative to SRC
# Proves that DST holds exactly the entries not excluded, that -v lists
# exactly the files copied, that a re-run with the same patterns copies
# nothing, and that excluded files were not recorded as done: a later run
# without patterns copies exactly them.
. "$(dirname "$0")/lib.sh" || exit 1

build_tree() {
	local f
	for f in keep.txt junk.tmp a/keep.txt a/junk.tmp top.log a/top.log \
		build/x.o a/build/y.o b/build a/deep/q.bin a/deep/keep.txt \
		a/deep2/q.bin q.bin skipdir/inner/z c/skipdir; do
		mkdir -p "src/$(dirname "$f")"
		printf '%s\n' "$f" >"src/$f"
	done
}

EXCLUDES=(--exclude '*.tmp' --exclude skipdir --exclude /top.log
	--exclude build/ --exclude 'a/deep/*.bin')

build_tree
printf '%s\n' keep.txt a/keep.txt a/top.log b/build a/deep/keep.txt \
	a/deep2/q.bin q.bin >"$LOG/expected.files"
printf '%s\n' a a/deep a/deep2 b c >"$LOG/expected.dirs"
printf '%s\n' junk.tmp a/junk.tmp top.log build/x.o a/build/y.o a/deep/q.bin \
	skipdir/inner/z c/skipdir >"$LOG/excluded.files"

expect_code 0 "$FERRY" -v "${EXCLUDES[@]}" src dst
verbose_copied "$LOG/out" | while IFS= read -r p; do
	[[ -d src/$p ]] || printf '%s\n' "$p"
done >"$LOG/copied"
same_set "-v lists exactly the files not excluded" "$LOG/expected.files" "$LOG/copied"
(cd dst && find . -mindepth 1 ! -type d -printf '%P\n') >"$LOG/dst.files"
same_set "DST holds exactly the files not excluded" "$LOG/expected.files" "$LOG/dst.files"
(cd dst && find . -mindepth 1 -type d -printf '%P\n') >"$LOG/dst.dirs"
same_set "DST holds exactly the dirs not excluded" "$LOG/expected.dirs" "$LOG/dst.dirs"
while IFS= read -r f; do
	cmp -s "src/$f" "dst/$f" || fail "content of $f"
done <"$LOG/expected.files"

expect_code 0 "$FERRY" -v "${EXCLUDES[@]}" src dst
check "re-run with the same patterns copies nothing" test ! -s "$LOG/out"

expect_code 0 "$FERRY" -v src dst
verbose_copied "$LOG/out" | while IFS= read -r p; do
	[[ -d src/$p ]] || printf '%s\n' "$p"
done >"$LOG/copied"
same_set "without patterns, exactly the excluded files are copied" \
	"$LOG/excluded.files" "$LOG/copied"
tree_equal src dst
finish
