#!/bin/bash
# t30-dst-not-ours: ferry never destroys in DST what it did not write
# (DESIGN.md rule 9; ferry(1), "What ferry replaces and deletes").
#
# Proves, each case against find listings and cmp taken outside ferry:
#  - a DST directory where SRC has a file or a symlink is left alone and the
#    row fails with the reason when ferry did not create it, or when it holds
#    a file ferry did not write; the summary deletes nothing, --dry-run says
#    so first; a directory ferry made that holds only its copies is removed
#    and replaced (and -v and --dry-run list it as deleted);
#  - a DST file where SRC has a directory: kept when ferry did not write it,
#    replaced when it is ferry's copy;
#  - a DST file ferry did not write, at a name SRC has: kept, the row fails;
#    a copy cp -a made (same size and mtime as SRC) is taken as the copy;
#  - --delete keeps a file changed in DST since ferry copied it (and warns,
#    once), deletes the unchanged ones, also after a --no-times copy;
#  - two jobs writing into one DST: the second does not overwrite the
#    first's file, says why, and the first's re-run copies nothing and
#    reports nothing missing (no ping-pong).
. "$(dirname "$0")/lib.sh" || exit 1

# listing DIR: every entry below DIR (its root takes SRC's times) with
# type, size and ns mtime, sorted.
listing() { (cd "$1" && find . -mindepth 1 -printf '%p %y %s %T@\n' | sort); }

# unchanged WHAT DIR BEFORE: DIR lists as BEFORE did.
unchanged() {
	if cmp -s "$3" <(listing "$2"); then
		ok "$1: DST unchanged"
	else
		fail "$1: DST unchanged"
		diff "$3" <(listing "$2") | show -
	fi
}

# --- 1. a directory ferry never created, where SRC has a file or symlink
mkdir -p s1 d1/photos d1/link
printf 'a file now\n' >s1/photos
ln -s photos s1/link
printf 'mine\n' >d1/photos/holiday.jpg
printf 'mine too\n' >d1/link/x
listing d1 >"$T/d1.before"
expect_code 23 "$FERRY" -n s1 d1
check "dry run: names the directory it would not replace" \
	grep -qF "warning: 'photos': not replaced: the destination has a directory here that ferry did not create" "$LOG/err"
check "dry run: lists no deletion" eval '! grep -q "^deleting" "$LOG/out"'
unchanged "dry run" d1 "$T/d1.before"
expect_code 23 "$FERRY" s1 d1
check "foreign directory: the failure says why" \
	grep -qF "failed: 'photos': not replaced: the destination has a directory here that ferry did not create" "$LOG/err"
check "foreign directory, symlink in SRC: the failure says why" \
	grep -qF "failed: 'link': not replaced: the destination has a directory here that ferry did not create" "$LOG/err"
check "foreign directory: the summary deletes nothing" grep -q ', 0 deleted,' "$LOG/err"
unchanged "foreign directory" d1 "$T/d1.before"

# --- 2. a directory ferry made, where the user has put a file since
mkdir -p s2/album/sub
printf 'a\n' >s2/album/a
printf 'c\n' >s2/album/sub/c
expect_code 0 "$FERRY" s2 d2
rm -r s2/album && printf 'album is a file now\n' >s2/album
printf 'added by hand\n' >d2/album/sub/mine
listing d2 >"$T/d2.before"
expect_code 23 "$FERRY" -v s2 d2
check "user's file inside: the failure names it" \
	grep -qF "failed: 'album': not replaced: the destination has a directory here that holds 'album/sub/mine', which ferry did not write" "$LOG/err"
unchanged "user's file inside" d2 "$T/d2.before"

# --- 3. a directory ferry made holding only its copies: replaced
mkdir -p s3/album/sub s3/docs
printf 'a\n' >s3/album/a
printf 'c\n' >s3/album/sub/c
printf 'old notes\n' >s3/notes
expect_code 0 "$FERRY" s3 d3
rm -r s3/album && printf 'album is a file now\n' >s3/album
rm s3/notes && mkdir s3/notes && printf 'n1\n' >s3/notes/n1
expect_code 0 "$FERRY" -n s3 d3
check "dry run: lists the directory it would remove" grep -qx 'deleting album' "$LOG/out"
check "dry run: lists the file it would remove" grep -qx 'deleting notes' "$LOG/out"
check "dry run: removes nothing" test -d d3/album -a -f d3/notes
expect_code 0 "$FERRY" -v s3 d3
check "ferry's directory: -v lists its removal" grep -qx 'deleting album' "$LOG/out"
check "ferry's file in the way of a directory: -v lists its removal" grep -qx 'deleting notes' "$LOG/out"
tree_equal s3 d3

# --- 4. a file where SRC has a directory, that ferry did not write
mkdir -p s4/docs d4
printf 'd\n' >s4/docs/d
printf 'not a directory\n' >d4/docs
listing d4 >"$T/d4.before"
expect_code 23 "$FERRY" s4 d4
check "foreign file where SRC has a directory: the failure says why" \
	grep -qF "failed: 'docs/d': not replaced: the destination has a file 'docs' where the source has a directory, which ferry did not write" "$LOG/err"
unchanged "foreign file where SRC has a directory" d4 "$T/d4.before"

# --- 5. a file at a name SRC has, that ferry did not write; cp -a's copy
mkdir -p s5 d5
printf 'source version\n' >s5/report.txt
printf 'same\n' >s5/same.txt
printf 'edited by a user\n' >d5/report.txt
cp -a s5/same.txt d5/same.txt
listing d5 | grep report >"$T/d5.before"
expect_code 23 "$FERRY" s5 d5
check "foreign file: the failure says why" \
	grep -qF "failed: 'report.txt': not replaced: the destination has a file here that ferry did not write" "$LOG/err"
check "foreign file: kept" cmp -s "$T/d5.before" <(listing d5 | grep report)
check "cp -a's copy (same size and mtime): taken as the copy" cmp -s s5/same.txt d5/same.txt
check "cp -a's copy: not failed" eval '! grep -q "same.txt" "$LOG/err"'

# --- 6. --delete keeps what was changed in DST since ferry copied it
mkdir -p s6
for f in gone edited kept; do printf '%s\n' "$f" >"s6/$f"; done
expect_code 0 "$FERRY" s6 d6
printf 'edited in the backup\n' >>d6/edited
cp d6/edited "$T/edited"
rm s6/gone s6/edited
expect_code 0 "$FERRY" -n --delete s6 d6
check "dry run --delete: lists the unchanged file" grep -qx 'deleting gone' "$LOG/out"
check "dry run --delete: not the edited one" eval '! grep -q "deleting edited" "$LOG/out"'
expect_code 0 "$FERRY" -v --delete s6 d6
check "--delete: the unchanged file is deleted" test ! -e d6/gone
check "--delete: the edited file is kept" cmp -s "$T/edited" d6/edited
check "--delete: a warning names the edited file" \
	grep -qF "warning: 'edited': not deleted: it was changed since ferry copied it" "$LOG/err"
expect_code 0 "$FERRY" -v --delete s6 d6
check "--delete again: no second warning" eval '! grep -q edited "$LOG/err"'
check "--delete again: the edited file is still kept" cmp -s "$T/edited" d6/edited

# the same after a --no-times copy: DST's own mtimes are what was recorded
mkdir -p s7
printf 'x\n' >s7/x && printf 'y\n' >s7/y
touch -d '2001-01-01' s7/x s7/y
expect_code 0 "$FERRY" --no-times s7 d7
rm s7/x
expect_code 0 "$FERRY" --no-times --delete s7 d7
check "--no-times --delete: ferry's copy is deleted" test ! -e d7/x
check "--no-times --delete: no warning" eval '! grep -q warning "$LOG/err"'

# --- 7. two jobs writing into one DST
mkdir -p ja jb
printf 'job A writes this\n' >ja/common.txt
printf 'job B writes something longer here\n' >jb/common.txt
printf 'only B\n' >jb/b-only.txt
expect_code 0 "$FERRY" ja shared
expect_code 23 "$FERRY" jb shared
check "second job: the failure says another job or user wrote it" \
	grep -qF "failed: 'common.txt': not replaced: the destination has a file here that ferry did not write (another job's or a user's)" "$LOG/err"
check "second job: the first job's file is not overwritten" cmp -s ja/common.txt shared/common.txt
check "second job: its own file is copied" cmp -s jb/b-only.txt shared/b-only.txt
expect_code 0 "$FERRY" -v ja shared
check "first job again: nothing copied (no ping-pong)" test ! -s "$LOG/out"
check "first job again: nothing reported missing" eval '! grep -q missing "$LOG/err"'

finish
