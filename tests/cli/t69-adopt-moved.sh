#!/bin/bash
# t69-adopt-moved: a job whose DST or SRC moved is pointed at the new paths
# with `ferry --adopt --manifest OLD NEWSRC NEWDST`, without a copy; and an
# adopting run killed in the middle finishes when run again.
#
# Oracles: strace (bytes that write/pwrite64 put into files under DST, and
# the files under DST opened, with openat or openat2), find (DST's inodes
# and mtimes), the manifest's meta table read with sqlite3, diff -r,
# `ferry --verify`.
#
# Proves:
#  A. `mv dst dst2`, then the old manifest with the new DST and no --adopt:
#     refused, exit 3, one message naming the job's recorded paths and
#     --adopt, and the manifest still names the old paths;
#  B. with --adopt: exit 0, a warning says what moved, nothing copied and
#     nothing adopted (the rows are trusted as a re-run trusts them: no
#     file under DST is even opened for reading), nothing written into DST,
#     the manifest and `ferry status` (of the job and the job list) name
#     the new paths; the manifest, the default one of the old pair, is
#     now the default one of the new pair (the old file gone), so a plain
#     `ferry src dst2` finds the job (nothing copied), --verify clean;
#  C. SRC copied elsewhere (cp -a: new inodes, the scan sees every file
#     changed), re-pointed with --adopt: every file adopted after hashing
#     both sides, no data written into DST, --verify clean; without
#     --adopt the same move would have rewritten every file (shown on a
#     scratch copy of the job: files_copied is the file count); a
#     manifest outside the state directory stays where it is;
#  D. --dry-run --adopt with the old manifest changes nothing in it;
#  E. an adopting run that dies (FERRY_CRASH, exit 86) right after its
#     first barrier, before the COMMIT, and one that dies before the
#     second barrier, each run again with the same command: exit 0, rows
#     all done, no data written by either run, --verify clean, diff -r;
#     and a run killed with SIGKILL once the manifest holds done rows,
#     then run again: the same;
#  F. (root, a loop device, XFS) crash safety of the done mark: a tree
#     cp -a'd into XFS and not synced, adopted at once, then a power cut
#     (xfs_io shutdown, no log flush) right after the run: after log
#     recovery every row the manifest marks done is in DST with its
#     content (--verify exit 0, diff -r): the barrier covered the files
#     cp had left in the page cache. The same steps with
#     --durability=none (no barrier) are shown (said, not checked: the
#     kernel may write back first) to lose data, so the check can see a
#     missing barrier;
#  G. arguments swapped (the new DST is the job's SRC, and the new SRC its
#     DST): refused, exit 2, the message says so, the manifest's paths and
#     SRC's files unchanged; (root) the same for a new DST that is SRC
#     under another name (a bind mount: the recorded identity of its root);
#  H. DST re-pointed at a copy that lacks three files the sample of done
#     rows does not look at (the 5th to 7th file rows of 400): the first
#     run after the re-point looks at every done row, the three are copied
#     again (files_copied 3, a warning counts them), diff -r clean;
#  I. a stale '-wal' beside the new pair's default manifest: the move is
#     refused (a warning says why and that --manifest still works), the
#     old file stays, the stale file is untouched, and the manifest notes
#     the move as pending; once the stale file is gone, the next --adopt
#     run (the paths already the new ones) moves it;
#  J. (test build) a crash right after the rename, before the new paths
#     are committed: a plain run on the new paths refuses the manifest
#     (exit 3, names --adopt) instead of starting a second, empty job, and
#     an --adopt run then finishes the re-point without a copy.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3
need_strace

mkdir -p src/d src/e
for i in $(seq 1 30); do head -c $((i * 300)) /dev/urandom >"src/d/f$i"; done
for i in $(seq 1 10); do printf 'e %s\n' "$i" >"src/e/g$i"; done
ln -s d/f1 src/sym
set_times src
NFILES=41

dst_written() {
	awk -v d="$2/" '/^(write|pwrite64)\(/ {
		if (index($0, "<" d) == 0) next
		n = $NF; if (n ~ /^[0-9]+$/) s += n
	} END { print s + 0 }' "$1".*
}
# regular files under DIR opened (for reading) by a traced run
dst_opened() {
	grep -hE '^openat2?\(' "$1".* | grep -F "$2/" | grep -v 'O_DIRECTORY' |
		grep -vc 'ferry-part' || true
}
mtimes() { (cd "$1" && find . -type f -printf '%i %T@ %P\n' | sort -k3); }
meta() { sqlite3 -readonly "$M" "SELECT CAST(value AS TEXT) FROM meta WHERE key = '$1'"; }
traced() {
	local tr=$1
	shift
	expect_code 0 env "$(no_leak_check_env)" strace -ff -y -qq \
		-e trace=write,pwrite64,openat,openat2 -o "$T/$tr" "$FERRY" "$@"
}

expect_code 0 "$FERRY" src dst
M=$(manifest_path src dst)
check "the job's manifest exists" test -f "$M"

# ---- A: DST moved, no --adopt ----------------------------------------------
mv dst dst2
mtimes dst2 >"$LOG/before"
expect_code 3 "$FERRY" --manifest "$M" src dst2
check "A: the refusal names the recorded job" grep -q "belongs to another job: '$T/src' -> '$T/dst'" "$LOG/err"
check "A: and says how to re-point it (--adopt)" grep -q -- '--adopt points it at the new paths' "$LOG/err"
check "A: the manifest still names the old DST" test "$(meta dst)" = "$T/dst"

# ---- B: DST moved, --adopt ---------------------------------------------------
traced trB --adopt --json --manifest "$M" src dst2
check "B: a warning says what moved" grep -q "the job of '$T/src' -> '$T/dst' now copies '$T/src' -> '$T/dst2'" "$LOG/err"
check "B: nothing copied" test "$(json_get "$LOG/out" files_copied)" = 0
check "B: nothing adopted (the rows are trusted)" test "$(json_get "$LOG/out" files_adopted)" = 0
check "B: all $NFILES unchanged" test "$(json_get "$LOG/out" files_unchanged)" = "$NFILES"
w=$(dst_written "$T/trB" "$T/dst2")
check "B: no data written into DST (got $w bytes)" test "$w" = 0
o=$(dst_opened "$T/trB" "$T/dst2")
check "B: no file under DST opened (got $o)" test "$o" = 0
mtimes dst2 >"$LOG/after"
check "B: DST's inodes and mtimes unchanged" cmp -s "$LOG/before" "$LOG/after"
check "B: a warning says where the manifest is now" grep -q "the job's manifest is now '" "$LOG/err"
check "B: the old manifest's name is gone" test ! -e "$M"
OLDM=$M
M=$(manifest_path src dst2)
check "B: the new pair's default manifest is the job's" test -f "$M"
check "B: its lock file went with it" test ! -e "$OLDM.lock"
check "B: the manifest names the new DST" test "$(meta dst)" = "$T/dst2"
expect_code 0 "$FERRY" --json src dst2
check "B: a plain run on the new paths finds the job: nothing copied" \
	test "$(json_get "$LOG/out" files_copied)" = 0
check "B: all $NFILES unchanged" test "$(json_get "$LOG/out" files_unchanged)" = "$NFILES"
expect_code 0 "$FERRY" status --manifest "$M"
check "B: ferry status shows the new destination" grep -qx "destination: $T/dst2" "$LOG/out"
expect_code 0 "$FERRY" status
check "B: the job list shows the new destination" grep -q "destination: $T/dst2\$" "$LOG/out"
expect_code 0 "$FERRY" --verify --manifest "$M" src dst2

# ---- C: SRC moved (copied: new inodes), --adopt ----------------------------
cp -a src src2
cp -a dst2 scratch
sqlite3 -readonly "$M" ".backup '$T/scratch.db'"
expect_code 0 "$FERRY" --adopt --manifest "$T/scratch.db" src scratch
check "C: a manifest outside the state directory stays" test -f "$T/scratch.db"
mtimes dst2 >"$LOG/before"
traced trC --adopt --json --manifest "$M" src2 dst2
check "C: all $NFILES adopted" test "$(json_get "$LOG/out" files_adopted)" = "$NFILES"
check "C: nothing copied" test "$(json_get "$LOG/out" files_copied)" = 0
o=$(dst_opened "$T/trC" "$T/dst2")
check "C: DST's 40 files were read to be hashed (opened: $o)" test "$o" -ge 40
w=$(dst_written "$T/trC" "$T/dst2")
check "C: no data written into DST (got $w bytes)" test "$w" = 0
mtimes dst2 >"$LOG/after"
check "C: DST's inodes and mtimes unchanged" cmp -s "$LOG/before" "$LOG/after"
M=$(manifest_path src2 dst2)
check "C: the manifest names the new SRC" test "$(meta src)" = "$T/src2"
expect_code 0 "$FERRY" --verify src2 dst2
diff -r src2 dst2 >"$LOG/diff" 2>&1
check "C: diff -r src2 dst2" test ! -s "$LOG/diff"
# what the move costs without --adopt: the scratch job, pointed at src2 by
# hand (as an older ferry would have needed), rewrites every file
sqlite3 "$T/scratch.db" "UPDATE meta SET value = CAST('$T/src2' AS BLOB) WHERE key = 'src'"
expect_code 0 "$FERRY" --json --manifest "$T/scratch.db" src2 scratch
check "C: without --adopt the moved SRC costs a copy of all $NFILES" \
	test "$(json_get "$LOG/out" files_copied)" = "$NFILES"

# ---- D: --dry-run --adopt writes nothing into the manifest ---------------
sum=$(sqlite3 -readonly "$M" "SELECT group_concat(key || '=' || CAST(value AS TEXT)) FROM meta WHERE key IN ('src', 'dst')")
expect_code 0 "$FERRY" --dry-run --adopt --manifest "$M" src dst2
check "D: the dry run says what would move" grep -q "would copy '$T/src' -> '$T/dst2'" "$LOG/err"
check "D: the manifest stays where it is" test -f "$M"
check "D: the manifest's paths are unchanged" \
	test "$(sqlite3 -readonly "$M" "SELECT group_concat(key || '=' || CAST(value AS TEXT)) FROM meta WHERE key IN ('src', 'dst')")" = "$sum"

# ---- E: killed in the middle of an adopting run ----------------------------
if "$FERRY" --version 2>/dev/null | grep -q '^test build:'; then
	mkdir -p many
	for i in $(seq 1 3000); do printf 'n %s\n' "$i" >"many/n$i"; done
	for point in after_barrier:1 before_barrier:2; do
		rm -rf "cp.${point%:*}"
		cp -a many "cp.${point%:*}"
		D=$T/cp.${point%:*}
		expect_code 86 env "$(crash_env)" FERRY_CRASH=$point "$FERRY" --adopt many "$D"
		traced "trE.${point%:*}" --adopt --json many "$D"
		w=$(dst_written "$T/trE.${point%:*}" "$D")
		check "E ($point): the second run writes no data (got $w bytes)" test "$w" = 0
		ME=$(manifest_path many "$D")
		check "E ($point): every row done" \
			test "$(sqlite3 -readonly "$ME" 'SELECT count(*) FROM files WHERE state != 1')" = 0
		check "E ($point): 3000 rows" \
			test "$(sqlite3 -readonly "$ME" 'SELECT count(*) FROM files')" = 3000
		expect_code 0 "$FERRY" --verify many "$D"
		diff -r many "$D" >"$LOG/diff" 2>&1
		check "E ($point): diff -r" test ! -s "$LOG/diff"
	done
else
	say "E skipped: not a test build (FERRY_CRASH needs -DFERRY_TESTING=ON)"
fi
if [[ -n $GENTREE && -x $GENTREE ]]; then
	# a sanitizer build is slow enough to be killed mid-run in fewer
	gen_tree big --seed 69 --files "$([[ -n $SANITIZED ]] && echo 5000 || echo 20000)" \
		--median 2K --max-size 64K
	cp -a big cp.kill
	bg "$FERRY" --adopt -q big "$T/cp.kill"
	MK=
	done_rows_now() {
		[[ -n $MK ]] || MK=$(manifest_path big "$T/cp.kill")
		[[ -n $MK && -f $MK ]] || return 1
		(($(sqlite3 -cmd '.timeout 2000' "file:$MK?mode=ro" \
			'SELECT count(*) FROM files WHERE state = 1' 2>/dev/null || echo 0) > 0))
	}
	wait_until 60 eval 'done_rows_now || ! kill -0 "$BG_PID" 2>/dev/null'
	kill -KILL "$BG_PID" 2>/dev/null
	bg_wait
	check "E (SIGKILL): killed in the middle (exit $BG_RC)" test "$BG_RC" = 137
	traced trE.kill --adopt --json big "$T/cp.kill"
	w=$(dst_written "$T/trE.kill" "$T/cp.kill")
	check "E (SIGKILL): the second run writes no data (got $w bytes)" test "$w" = 0
	check "E (SIGKILL): the second run copied nothing" test "$(json_get "$LOG/out" files_copied)" = 0
	MK=$(manifest_path big "$T/cp.kill")
	check "E (SIGKILL): every row done" \
		test "$(sqlite3 -readonly "$MK" 'SELECT count(*) FROM files WHERE state != 1')" = 0
	expect_code 0 "$FERRY" --verify big "$T/cp.kill"
else
	say "E (SIGKILL) skipped: needs bench/gentree"
fi

# ---- F: a power cut right after an adopting run ----------------------------
power_cut() { # DURABILITY: cp -a, adopt, cut, remount; the run's exit in RC
	cp -a many mnt/dst || return 1
	run "$FERRY" --adopt --durability="$1" many mnt/dst
	xfs_io -x -c shutdown "$T/mnt" 2>"$LOG/xfs_io.err" || return 1
	umount mnt 2>"$LOG/umount.err" && mount -t xfs "$LOOP" mnt 2>"$LOG/mount.err"
}
why=
if [[ $(id -u) != 0 ]]; then
	why="needs root (mounts an XFS loop device)"
elif ! command -v losetup >/dev/null || ! command -v mkfs.xfs >/dev/null ||
	! command -v xfs_io >/dev/null; then
	why="needs losetup, mkfs.xfs and xfs_io"
elif ! [[ -d many ]]; then
	why="needs the tree of E (a test build)"
elif ! { grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	why="the kernel has no XFS"
fi
if [[ -z $why ]]; then
	. "$TESTS_CLI/t2-lib.sh" || exit 1
	truncate -s 300M xfs.img && mkfs.xfs -q -f xfs.img 2>"$LOG/mkfs.err" ||
		why="mkfs.xfs failed: $(head -c 200 "$LOG/mkfs.err")"
	[[ -z $why ]] && { LOOP=$(losetup --find --show xfs.img 2>"$LOG/losetup.err") ||
		why="no loop device: $(head -c 200 "$LOG/losetup.err")"; }
	[[ -z $why ]] && T2_LOOPS+=("$LOOP") && mkdir -p mnt &&
		{ mount -t xfs "$LOOP" mnt 2>"$LOG/mount.err" ||
			why="cannot mount XFS: $(head -c 200 "$LOG/mount.err")"; }
	[[ -z $why ]] && track_mount "$T/mnt"
fi
if [[ -z $why ]]; then
	check "F: cp -a, adopt, power cut, remount" power_cut batch
	check "F: the adopting run exited 0 (got $RC)" test "$RC" = 0
	expect_code 0 "$FERRY" --verify many mnt/dst
	diff -r many mnt/dst >"$LOG/diff" 2>&1
	check "F: diff -r: every file is there with its content" test ! -s "$LOG/diff"
	MF=$(manifest_path many "$T/mnt/dst")
	check "F: every row was done before the cut" \
		test "$(sqlite3 -readonly "$MF" 'SELECT count(*) FROM files WHERE state != 1')" = 0
	# the same without a barrier: the oracle sees what a missing barrier loses
	rm -rf mnt/dst "$MF"
	# (said, not checked: the kernel's writeback, or another test's
	# sync, may have written the files before the cut)
	if power_cut none; then
		run "$FERRY" --verify many mnt/dst
		say "with --durability=none (no barrier) the verify after the cut exits $RC (5: files lost)"
	else
		fail "F: the cut with --durability=none"
	fi
	umount mnt
else
	say "F skipped: $why"
fi
# ---- G: swapped arguments are refused --------------------------------------
mkdir -p srcG && for i in 1 2 3; do echo "g $i" >"srcG/g$i"; done
expect_code 0 "$FERRY" srcG dstG
MG=$(manifest_path srcG dstG)
(cd srcG && find . -printf '%i %T@ %P\n' | sort) >"$LOG/srcG.before"
expect_code 2 "$FERRY" --adopt --manifest "$MG" dstG srcG
check "G: the refusal says the arguments look swapped" grep -q 'SRC and DST swapped?' "$LOG/err"
check "G: the manifest still names SRC" test "$(M=$MG meta src)" = "$T/srcG"
check "G: the manifest still names DST" test "$(M=$MG meta dst)" = "$T/dstG"
(cd srcG && find . -printf '%i %T@ %P\n' | sort) >"$LOG/srcG.after"
check "G: SRC's files untouched" cmp -s "$LOG/srcG.before" "$LOG/srcG.after"
# the same directory under another name (a bind mount: another path, the
# recorded identity of SRC's root): refused too
if [[ $(id -u) == 0 ]]; then
	. "$TESTS_CLI/t2-lib.sh" || exit 1
	mkdir -p bindG && cp -a dstG otherG
	if mount --bind srcG bindG 2>"$LOG/mount.err"; then
		track_mount "$T/bindG"
		expect_code 2 "$FERRY" --adopt --manifest "$MG" otherG bindG
		umount bindG
		check "G (bind mount): the refusal names the same directory" \
			grep -q 'the new destination is its source (the same directory under another name)' "$LOG/err"
		check "G (bind mount): the manifest still names DST" test "$(M=$MG meta dst)" = "$T/dstG"
	else
		say "G (bind mount) skipped: mount --bind failed: $(head -c 200 "$LOG/mount.err")"
	fi
else
	say "G (bind mount) skipped: needs root"
fi

# ---- H: a re-point checks every done row, not a sample -----------------------
mkdir -p srcH && for i in $(seq 1 400); do echo "h $i" >"srcH/h$i"; done
expect_code 0 "$FERRY" srcH dstH
MH=$(manifest_path srcH dstH)
cp -a dstH dstH2
sqlite3 -readonly "$MH" "SELECT CAST(name AS TEXT) FROM files WHERE type = 1 ORDER BY id LIMIT 3 OFFSET 4" >"$LOG/gone"
check "H: three files picked" test "$(wc -l <"$LOG/gone")" = 3
while read -r n; do rm -f "dstH2/$n"; done <"$LOG/gone"
expect_code 0 "$FERRY" --adopt --json --manifest "$MH" srcH dstH2
check "H: the three missing files copied again" test "$(json_get "$LOG/out" files_copied)" = 3
check "H: a warning counts them" grep -q '3 of 400 copied files are missing from the re-pointed destination' "$LOG/err"
diff -r srcH dstH2 >"$LOG/diff" 2>&1
check "H: diff -r srcH dstH2" test ! -s "$LOG/diff"
expect_code 0 "$FERRY" --json srcH dstH2
check "H: the next run looks at a sample again: nothing copied" test "$(json_get "$LOG/out" files_copied)" = 0

# ---- I: a stale log beside the new name: the move waits ----------------------
new_default() { "$FERRY" status "$1" "$2" 2>&1 | sed -n "s/^ferry: no manifest at '\(.*\)'\$/\1/p"; }
mkdir -p srcI && for i in 1 2 3; do echo "i $i" >"srcI/i$i"; done
expect_code 0 "$FERRY" srcI dstI
MI=$(manifest_path srcI dstI)
mv dstI dstI2
TO=$(new_default srcI dstI2)
check "I: the new pair's default name is known" test -n "$TO"
printf 'stale log of another database\n' >"$TO-wal"
cp "$TO-wal" "$T/stale"
expect_code 0 "$FERRY" --adopt --manifest "$MI" srcI dstI2
check "I: a warning says the manifest stays, and why" \
	grep -q "the job's manifest stays '$MI', not moved to '$TO' ('$TO' or its -wal, -shm or -journal exists" "$LOG/err"
check "I: and that --manifest still names the job" grep -q -- "--manifest '$MI' still names the job" "$LOG/err"
check "I: the old file stays" test -f "$MI"
check "I: nothing at the new name" test ! -e "$TO"
check "I: the stale file is untouched" cmp -s "$T/stale" "$TO-wal"
check "I: the move is noted as pending" test "$(M=$MI meta move_pending)" = 1
check "I: the manifest names the new DST" test "$(M=$MI meta dst)" = "$T/dstI2"
rm -f "$TO-wal"
expect_code 0 "$FERRY" --adopt --json --manifest "$MI" srcI dstI2
check "I: now the move is made" test -f "$TO" -a ! -e "$MI"
check "I: a warning names the new file" grep -q "the job's manifest is now '$TO'" "$LOG/err"
check "I: nothing pending any more" test "$(M=$TO meta move_pending)" = ""
check "I: nothing copied" test "$(json_get "$LOG/out" files_copied)" = 0

# ---- J: a crash between the rename and the commit of the new paths -----------
if "$FERRY" --version 2>/dev/null | grep -q '^test build:'; then
	mkdir -p srcJ && for i in 1 2 3; do echo "j $i" >"srcJ/j$i"; done
	expect_code 0 "$FERRY" srcJ dstJ
	MJ=$(manifest_path srcJ dstJ)
	mv dstJ dstJ2
	TO=$(new_default srcJ dstJ2)
	expect_code 86 env "$(crash_env)" FERRY_CRASH=repoint-moved:1 "$FERRY" --adopt --manifest "$MJ" srcJ dstJ2
	check "J: the file was renamed before the crash" test -f "$TO" -a ! -e "$MJ"
	check "J: its paths are still the old ones" test "$(M=$TO meta dst)" = "$T/dstJ"
	expect_code 3 "$FERRY" srcJ dstJ2
	check "J: a plain run refuses it and names --adopt" grep -q -- '--adopt points it at the new paths' "$LOG/err"
	check "J: no second job started (3 rows)" \
		test "$(sqlite3 -readonly "$TO" 'SELECT count(*) FROM files WHERE type = 1')" = 3
	expect_code 0 "$FERRY" --adopt --json srcJ dstJ2
	check "J: the re-point finishes without a copy" test "$(json_get "$LOG/out" files_copied)" = 0
	check "J: the manifest names the new DST" test "$(M=$TO meta dst)" = "$T/dstJ2"
else
	say "J skipped: not a test build (FERRY_CRASH needs -DFERRY_TESTING=ON)"
fi
finish
