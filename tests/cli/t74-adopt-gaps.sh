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
#     oracle sees a change), an xattr of 3000 bytes that differs is set;
#     an equal ACL is not set again (ctime), a
#     missing one is (getfacl);
#  C. `-n -v --adopt` lists what the real `-v --adopt` run after it does,
#     name by name (adopt: / adopted:, copies, links, failures by name) and
#     in its counts, over a cp -a'd DST with a file of another size (rule
#     9), a DST file with a second name SRC lacks (copied), a hard-linked
#     pair (the second name linked), symlinks of the same and of another
#     target (rule 9), a file DST lacks; and an 80 MiB file whose chunked
#     copy was killed (SIGKILL, with a chunk recorded) and then put in DST
#     by cp -a: the run resumes its copy instead of adopting it, and so
#     says the dry run (not exercised: a file of SRC's size and mtime with
#     another content, which only the run's hash can tell);
#  D. (root, exfat-fuse on a loop device, as t28) the same on a
#     case-insensitive DST whose "A" holds SRC's "a" (as cp -a leaves two
#     names that differ by case): neither run adopts it for "a", both
#     fail "a" (the names collide) and "A" (rule 9), and the dry run,
#     with no manifest yet, learns the case rule from DST's own names
#     without writing there (DST's listing unchanged).
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3 rsync

mkdir -p src/d
for i in 1 2 3 4 5; do printf 'file %s\n' "$i" >"src/f$i"; done
printf 'deep\n' >src/d/deep
ln -s f1 src/sym
xattrs=no
setfattr -n user.note -v kept src/f2 2>/dev/null && xattrs=yes
# one longer than meta.c's stack buffer for the compare
[[ $xattrs == yes ]] && setfattr -n user.long -v "$(printf '%03000d' 7)" src/f3
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
[[ $xattrs == yes ]] && check "B: the xattrs are there" \
	test "$(getfattr --only-values -n user.note dstB/f2 2>/dev/null)" = kept -a \
	"$(getfattr --only-values -n user.long dstB/f3 2>/dev/null)" = "$(printf '%03000d' 7)"
# the long one changed in DST (same length): set again
if [[ $xattrs == yes ]]; then
	cp -a src dstB5
	setfattr -n user.long -v "$(printf '%03000d' 8)" dstB5/f3
	expect_code 0 "$FERRY" --adopt src dstB5
	check "B: a differing long xattr is set to SRC's" \
		test "$(getfattr --only-values -n user.long dstB5/f3 2>/dev/null)" = "$(printf '%03000d' 7)"
fi

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

# ---- C: the dry run decides as the run -------------------------------------
# same_decisions NAME ARGS...: `-n -v` then `-v` with ARGS; the item lists,
# the failed names and the counts of both must agree
same_decisions() {
	local name=$1
	shift
	run "$FERRY" -n -v "$@"
	sed 's/^adopt: /adopted: /' "$LOG/out" | sort >"$LOG/$name.dry"
	sed -n "s/^ferry: warning: '\([^']*\)': .*/\1/p" "$LOG/err" | sort >"$LOG/$name.dryfail"
	sed -n 's/^ferry: dry run: \([0-9]*\) to adopt.*/\1/p' "$LOG/err" >"$LOG/$name.drycount"
	local dry_rc=$RC
	run "$FERRY" -v "$@"
	sort "$LOG/out" >"$LOG/$name.run"
	sed -n "s/^ferry: failed: '\([^']*\)': .*/\1/p" "$LOG/err" | sort >"$LOG/$name.runfail"
	sed -n 's/^ferry: \([0-9]*\) adopted.*/\1/p' "$LOG/err" >"$LOG/$name.runcount"
	check "$name: the dry run lists what the run did" cmp -s "$LOG/$name.dry" "$LOG/$name.run"
	diff "$LOG/$name.dry" "$LOG/$name.run" | show -
	check "$name: the same files fail ($(tr '\n' ' ' <"$LOG/$name.runfail"))" \
		cmp -s "$LOG/$name.dryfail" "$LOG/$name.runfail"
	check "$name: as many adopted ($(cat "$LOG/$name.runcount"))" \
		cmp -s "$LOG/$name.drycount" "$LOG/$name.runcount"
	check "$name: the same exit ($dry_rc, $RC)" test "$dry_rc" = "$RC"
}

mkdir srcD
for i in 1 2 3 4 5; do printf 'file %s\n' "$i" >"srcD/f$i"; done
printf 'size\n' >srcD/g
printf 'links\n' >srcD/h
printf 'missing\n' >srcD/missing
printf 'pair\n' >srcD/l1
ln srcD/l1 srcD/l2
ln -s f1 srcD/sym
ln -s f2 srcD/sym2
set_times srcD
cp -a srcD dstD
rm dstD/missing
printf 'another size\n' >dstD/g
ln dstD/h dstD/h-extra
ln -sfn f3 dstD/sym2 # another target
same_decisions C --adopt srcD dstD
check "C: g and sym2 failed (rule 9)" \
	test "$(tr '\n' ' ' <"$LOG/C.runfail")" = "g sym2 "
check "C: 7 adopted" test "$(cat "$LOG/C.runcount")" = 7
check "C: h and missing copied, l2 linked" \
	test "$(grep -v '^adopted: ' "$LOG/C.run" | tr '\n' ' ')" = "h l2 missing "

# a chunked copy killed (a chunk recorded), then DST filled by cp -a
mkdir srcR
head -c $((80 << 20)) /dev/urandom >srcR/big
printf 'small\n' >srcR/small
bg "$FERRY" --bwlimit 8M srcR dstR
# chunked: a chunk is recorded (the manifest's path looked up once: each
# lookup is a run of ferry, slow in a sanitizer build)
db=
chunked() {
	local n
	[[ -n $db ]] || db=$(manifest_path srcR dstR)
	[[ -n $db && -f $db ]] || return 1
	n=$(sqlite3 -cmd '.timeout 2000' "file:$db?mode=ro" 'SELECT count(*) FROM chunks' 2>/dev/null) || return 1
	((n >= 1))
}
if wait_until 60 eval 'chunked || ! kill -0 "$BG_PID" 2>/dev/null'; then
	kill -KILL "$BG_PID" 2>/dev/null
fi
bg_wait
check "C: the chunked copy was killed mid-file (exit $BG_RC)" test "$BG_RC" = 137
check "C: its temp file is there to resume" \
	test -n "$(find dstR -name '.big.*.ferry-part' -print -quit)"
cp -a srcR/big srcR/small dstR/
same_decisions C-resume --adopt srcR dstR
check "C: big was copied (its copy resumed), not adopted" grep -qx big "$LOG/C-resume.run"
check "C: big is SRC's" cmp -s srcR/big dstR/big
no_temp_files dstR

# ---- D: a case-insensitive DST (root: exfat-fuse) --------------------------
why=
if [[ $(id -u) != 0 ]]; then
	why="needs root (mounts an exFAT loop device)"
elif ! command -v losetup >/dev/null || ! command -v mkfs.exfat >/dev/null ||
	! command -v mount.exfat-fuse >/dev/null || ! [[ -c /dev/fuse ]]; then
	why="needs losetup, mkfs.exfat, mount.exfat-fuse and /dev/fuse"
fi
if [[ -z $why ]]; then
	. "$TESTS_CLI/t2-lib.sh" || exit 1
	truncate -s 64M exfat.img && mkfs.exfat exfat.img >"$LOG/mkfs.out" 2>&1 ||
		why="mkfs.exfat failed: $(head -c 200 "$LOG/mkfs.out")"
	[[ -z $why ]] && { LOOP=$(losetup --find --show exfat.img 2>"$LOG/losetup.err") ||
		why="no loop device: $(head -c 200 "$LOG/losetup.err")"; }
	[[ -z $why ]] && T2_LOOPS+=("$LOOP") && mkdir -p mnt &&
		{ mount.exfat-fuse "$LOOP" mnt >"$LOG/mount.err" 2>&1 ||
			why="cannot mount exFAT: $(head -c 200 "$LOG/mount.err")"; }
	[[ -z $why ]] && track_mount "$T/mnt"
fi
if [[ -z $why ]]; then
	mkdir srcE mnt/dst
	printf 'upper\n' >srcE/A
	printf 'lower, longer\n' >srcE/a
	for i in 1 2 3; do printf 'e %s\n' "$i" >"srcE/e$i"; done
	# what cp -a leaves of A then a: the name "A" with a's bytes and mtime
	cp srcE/a mnt/dst/A
	touch -r srcE/a mnt/dst/A
	for i in 1 2 3; do cp srcE/e$i mnt/dst/e$i && touch -r srcE/e$i mnt/dst/e$i; done
	ls -a mnt/dst >"$LOG/D.before"
	run "$FERRY" -n -v --adopt --no-owner --no-perms srcE mnt/dst
	ls -a mnt/dst >"$LOG/D.after"
	check "D: the dry run writes nothing in DST" cmp -s "$LOG/D.before" "$LOG/D.after"
	same_decisions D --adopt --no-owner --no-perms srcE mnt/dst
	check "D: a is not adopted" test "$(grep -cx 'adopted: a' "$LOG/D.run")" = 0
	check "D: a and A fail" test "$(tr '\n' ' ' <"$LOG/D.runfail")" = "A a "
	check "D: the three others adopted" test "$(cat "$LOG/D.runcount")" = 3
	check "D: DST's A keeps its bytes" cmp -s srcE/a mnt/dst/A
else
	say "skip D: $why"
fi

finish
