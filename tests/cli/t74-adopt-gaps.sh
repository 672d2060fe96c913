#!/bin/bash
# t74-adopt-gaps: what --adopt does at its edges (issue 12 item 6).
#
# Oracles: find (file lists, inodes, ctimes by -printf %C@, mtimes), stat,
# cmp, the manifest read with sqlite3, the -v lists of the runs compared
# with each other and with find.
#
# Proves:
#  A. `--adopt --manifest FILE` with no FILE there (a moved job's manifest
#     named wrong) is refused: exit 3, one message naming FILE, and nothing
#     made or written: no FILE (nor its lock), no manifest in the state
#     directory, DST's files as they were (find), a DST that did not exist
#     not made; the same with --dry-run;
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3

mkdir -p src/d
for i in 1 2 3 4 5; do printf 'file %s\n' "$i" >"src/f$i"; done
printf 'deep\n' >src/d/deep
ln -s f1 src/sym
xattrs=no
setfattr -n user.note -v kept src/f2 2>/dev/null && xattrs=yes
set_times src

listing() { (cd "$1" && find . -printf '%y %i %s %T@ %P\n' | sort -k5); }
# the files' and symlinks' ctimes (a directory's metadata is applied at
# the end of every first run, adopting or not)
ctimes() { (cd "$1" && find . \( -type f -o -type l \) -printf '%C@ %P\n' | sort -k2); }
state_files() { find "$XDG_STATE_HOME" -name '*.db*' 2>/dev/null | wc -l; }

# ---- A: --adopt --manifest naming no file ------------------------------
cp -a src dstA
listing dstA >"$LOG/A.before"
for dry in "" --dry-run; do
	expect_code 3 "$FERRY" --adopt $dry --manifest "$T/moved.db" src dstA
	check "A$dry: the message names the missing manifest" \
		grep -q "no manifest at '$T/moved.db'" "$LOG/err"
	check "A$dry: one line on stderr" test "$(wc -l <"$LOG/err")" = 1
	check "A$dry: no manifest made" test ! -e "$T/moved.db"
	check "A$dry: no lock file made" test ! -e "$T/moved.db.lock"
	check "A$dry: nothing in the state directory" test "$(state_files)" = 0
	listing dstA >"$LOG/A.after"
	check "A$dry: DST unchanged" cmp -s "$LOG/A.before" "$LOG/A.after"
	expect_code 3 "$FERRY" --adopt $dry --manifest "$T/moved.db" src "$T/newdst"
	check "A$dry: a DST that did not exist is not made" test ! -e "$T/newdst"
done
# the same run without --adopt starts a job there, as before
expect_code 0 "$FERRY" --manifest "$T/new.db" src dstA2
check "A: without --adopt, --manifest FILE makes a new job" test -f "$T/new.db"

finish
