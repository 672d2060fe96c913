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
#  B. an adopted file whose metadata is SRC's already is not written at
#     all: over a cp -a'd DST (a file with a user xattr, one in a
#     subdirectory, a symlink) every ctime (find %C@) stays; over an
#     rsync -a'd DST (no access times kept: only those differ) too, and with
#     --atimes where DST's atimes equal SRC's and are older than the mtimes
#     (a read under relatime would move them: DST is read with O_NOATIME;
#     not the symlink's: readlink has no O_NOATIME, the atime it moves is
#     set back, which moves the ctime);
#     a file whose mode differs gets SRC's mode (its ctime moves: the
#     oracle sees a change); an equal ACL is not set again (ctime), a
#     missing one is (getfacl).
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3 rsync

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

# ---- B: an equal entry adopted without a write ---------------------------
# cp -a: times (access times too), mode, owner and xattrs as SRC's
cp -a src dstB
ctimes dstB >"$LOG/B.before"
sleep 1.1 # a write now would show in the ctimes' seconds too
expect_code 0 "$FERRY" --adopt --json src dstB
check "B: cp -a: all 7 adopted" test "$(json_get "$LOG/out" files_adopted)" = 7
ctimes dstB >"$LOG/B.after"
check "B: cp -a: no ctime moved (xattrs: $xattrs)" cmp -s "$LOG/B.before" "$LOG/B.after"
diff "$LOG/B.before" "$LOG/B.after" | show -
[[ $xattrs == yes ]] && check "B: the xattr is there" \
	test "$(getfattr --only-values -n user.note dstB/f2 2>/dev/null)" = kept

# rsync -a keeps no access times: they alone differ, and without --atimes
# a run does not keep them either
rsync -aX src/ dstB2/
ctimes dstB2 >"$LOG/B2.before"
sleep 1.1
expect_code 0 "$FERRY" --adopt --json src dstB2
check "B: rsync -a: all 7 adopted" test "$(json_get "$LOG/out" files_adopted)" = 7
ctimes dstB2 >"$LOG/B2.after"
check "B: rsync -a: no ctime moved" cmp -s "$LOG/B2.before" "$LOG/B2.after"

# --atimes: DST's access times are SRC's and older than the mtimes, which
# a plain read under relatime would move
cp -a src dstB3
for f in f1 f2 f3 f4 f5 d/deep; do
	touch -a -d @1200000000 "src/$f" "dstB3/$f"
done
ctimes dstB3 | grep -v ' sym$' >"$LOG/B3.before"
sleep 1.1
expect_code 0 "$FERRY" --adopt --atimes --json src dstB3
check "B: --atimes: all 7 adopted" test "$(json_get "$LOG/out" files_adopted)" = 7
ctimes dstB3 | grep -v ' sym$' >"$LOG/B3.after"
check "B: --atimes: no ctime moved" cmp -s "$LOG/B3.before" "$LOG/B3.after"
diff "$LOG/B3.before" "$LOG/B3.after" | show -
check "B: --atimes: DST's atime is SRC's" \
	test "$(stat -c %X dstB3/f3)" = "$(stat -c %X src/f3)"

# the control: a mode that differs is set, which moves that ctime alone
cp -a src dstB4
chmod 0600 dstB4/f4
ctimes dstB4 >"$LOG/B4.before"
sleep 1.1
expect_code 0 "$FERRY" --adopt src dstB4
check "B: a differing mode is set to SRC's" \
	test "$(stat -c %a dstB4/f4)" = "$(stat -c %a src/f4)"
ctimes dstB4 >"$LOG/B4.after"
check "B: only f4's ctime moved" \
	test "$(diff "$LOG/B4.before" "$LOG/B4.after" | grep -c '^>')" = 1 -a \
	"$(diff "$LOG/B4.before" "$LOG/B4.after" | grep '^>' | cut -d' ' -f3)" = f4

# ACLs (an xattr each): an equal one is not set again, a missing one is
if command -v setfacl >/dev/null && mkdir srcC && printf 'x\n' >srcC/f &&
	printf 'y\n' >srcC/g && setfacl -m u:$NOBODY_UID:r srcC/f srcC/g 2>/dev/null; then
	cp -a srcC dstC
	setfacl -b dstC/g
	ctimes dstC | grep ' f$' >"$LOG/C.before"
	sleep 1.1
	expect_code 0 "$FERRY" --adopt srcC dstC
	ctimes dstC | grep ' f$' >"$LOG/C.after"
	check "B: an equal ACL: f's ctime stays" cmp -s "$LOG/C.before" "$LOG/C.after"
	check "B: a missing ACL is set (g)" \
		test "$(getfacl -cn dstC/g 2>/dev/null)" = "$(getfacl -cn srcC/g 2>/dev/null)"
else
	say "skip the ACL part: no setfacl, or no ACLs here"
fi

finish
