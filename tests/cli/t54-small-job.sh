#!/bin/bash
# t54-small-job: a small job pays for what it does, not for ferry's size.
#
# Proves, against oracles that share no code with ferry (strace's count of
# sync calls, diff, stat, sqlite3 on a manifest after a power cut):
#  A. a 1-file job (no manifest yet, DST absent) makes at most SYNC_FIRST
#     sync calls in all threads (fsync, fdatasync, syncfs, sync_file_range,
#     msync: strace -f -c), and the copy is right (diff, stat);
#  B. its re-run, with nothing changed, makes at most SYNC_NOOP sync calls
#     and none on DST (strace -y: no sync names DST), and DST is unchanged;
#  C. a crash right after the COMMIT of the done mark (FERRY_CRASH=
#     after_commit) leaves a manifest whose done rows have their data;
#  D. (root, XFS) a crash right after that COMMIT (FERRY_CRASH=
#     after_done_commit:1: C's nth can differ in a slower run, where a
#     timed commit comes first) with the manifest on an XFS file system
#     that is then cut (xfs_io shutdown without a log flush: what was not
#     synced is lost, as in a power cut): after the remount the done mark
#     is still there, and its file with its size and hash. That is rule 7
#     (DESIGN.md): the manifest runs with synchronous=NORMAL and the COMMIT
#     of a done mark syncs the -wal itself; a COMMIT that did not would
#     lose the mark here.
# What the sync calls of A are (src/manifest/results.c, the commit policy):
# the new manifest's main file once; the -wal when rows are first handed
# out (with its directory, SQLite's once per new -wal); DST's barrier
# (syncfs and the directory's fsync); the -wal at the done mark's COMMIT;
# DST's syncfs after its directory's times are set; on XFS, Btrfs and
# ext2/3/4 each sync of DST ends with an fsync of DST (it reports a file
# system that failed, as syncfs may not), and on ext2/3/4 without a
# journal it begins with a second syncfs (the first one's last writes
# come after its flush); and SQLite's checkpoint at close (the -wal, then
# the main file). The re-run (B): the new -wal's header and directory, and the
# checkpoint at close.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_strace
need_cmd sqlite3 xxhsum xxd

# where one fsync after the syncfs covers DST (lib.sh one_fsync_covers),
# each sync of DST is syncfs + fsync, and without a journal a second
# syncfs (ext2/3/4 without one: see the list above): up to 12 in all
SYNC_FIRST=9
if one_fsync_covers .; then
	SYNC_FIRST=12
	[[ $(findmnt -n -o FSTYPE -T . | tail -n 1) == xfs ]] && SYNC_FIRST=10
fi
SYNC_NOOP=4
SYNCS=fsync,fdatasync,syncfs,sync_file_range,msync

mkdir src
printf 'one small file\n' >src/f
touch -d '2001-02-03 04:05:06.789' src/f
chmod 640 src/f

# sync_calls TRACE: the sync calls strace -f -y logged, one per line.
sync_calls() {
	grep -E "^[0-9]+ +($(tr , '|' <<<"$SYNCS"))\(" "$1" | grep -v 'resumed>'
}

# traced NAME: the plain job under strace (all threads), its log in
# $LOG/NAME.trace.
traced() {
	expect_code 0 env "$(no_leak_check_env)" strace -f -qq -y -o "$LOG/$1.trace" \
		-e trace="$SYNCS" "$FERRY" -q src dst
}

# A. the first run
traced first || finish
n=$(sync_calls "$LOG/first.trace" | wc -l)
if ((n <= SYNC_FIRST)); then
	ok "A: a 1-file job makes $n sync calls (at most $SYNC_FIRST)"
else
	fail "A: a 1-file job makes at most $SYNC_FIRST sync calls (got $n)"
	sync_calls "$LOG/first.trace" | show -
fi
check "A: DST equals SRC (diff)" diff -r src dst
check "A: mode, size and mtime are SRC's (stat)" \
	test "$(stat -c '%a %s %Y.%y' src/f)" = "$(stat -c '%a %s %Y.%y' dst/f)"
m=$(manifest_path src dst)
manifest_invariant "$m" dst "A"
check "A: the manifest calls the file done" test "$INV_DONE" = 1

# B. nothing changed: nothing to make durable in DST
before=$(stat -c '%i %Y %Z' dst dst/f)
traced noop || finish
n=$(sync_calls "$LOG/noop.trace" | wc -l)
if ((n <= SYNC_NOOP)); then
	ok "B: a re-run with nothing to do makes $n sync calls (at most $SYNC_NOOP)"
else
	fail "B: a re-run with nothing to do makes at most $SYNC_NOOP sync calls (got $n)"
	sync_calls "$LOG/noop.trace" | show -
fi
if sync_calls "$LOG/noop.trace" | grep -qF "<$T/dst"; then
	fail "B: no sync call on DST in a re-run that changes nothing"
	sync_calls "$LOG/noop.trace" | grep -F "<$T/dst" | show -
else
	ok "B: no sync call on DST in a re-run that changes nothing"
fi
check "B: DST untouched (inodes, mtimes, ctimes)" \
	test "$before" = "$(stat -c '%i %Y %Z' dst dst/f)"

# after_commit_nth: the first pass of after_commit at which the done mark
# is committed (a plain crash, no power cut: the manifest says).
after_commit_nth() {
	local nth
	for nth in 1 2 3 4 5 6 7 8 9 10 11 12; do
		rm -rf dst "$XDG_STATE_HOME/ferry"
		run env "$(crash_env)" FERRY_CRASH="after_commit:$nth" "$FERRY" -q src dst
		[[ $RC == 86 ]] || return 1
		invariant_holds "$(manifest_path src dst)" dst || return 1
		if ((INV_DONE > 0)); then
			echo "$nth"
			return 0
		fi
	done
	return 1
}

# C. a crash right after the done mark's COMMIT
if nth=$(after_commit_nth); then
	ok "C: crash at after_commit:$nth, the first with the done mark committed"
	manifest_invariant "$(manifest_path src dst)" dst "C: after the crash"
	expect_code 0 "$FERRY" -q src dst && check "C: the next run completes (diff)" diff -r src dst
else
	fail "C: a crash at after_commit:1..12 leaves a done mark whose data is there"
	finish
fi

# D. the same crash, then a power cut of the manifest's file system
if [[ $(id -u) != 0 ]] || ! command -v mkfs.xfs >/dev/null ||
	! command -v xfs_io >/dev/null || ! command -v losetup >/dev/null ||
	! { grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	say "D: skipped (needs root, a loop device, XFS and xfsprogs)"
	finish
fi
truncate -s 320M xfs.img && mkfs.xfs -q -f xfs.img 2>"$LOG/mkfs.err" ||
	{ say "D: skipped (mkfs.xfs failed)" && finish; }
LOOP=$(losetup --find --show xfs.img 2>"$LOG/losetup.err") ||
	{ say "D: skipped (no loop device)" && finish; }
T2_LOOPS+=("$LOOP")
mkdir mnt
mount -t xfs "$LOOP" mnt 2>"$LOG/mount.err" || { say "D: skipped (cannot mount XFS)" && finish; }
track_mount "$T/mnt"
rm -rf dst
M=$T/mnt/m.db
run env "$(crash_env)" FERRY_CRASH=after_done_commit:1 "$FERRY" -q --manifest "$M" src dst
check "D: the run crashed right after the done mark's COMMIT (exit 86)" test "$RC" = 86
xfs_io -x -c shutdown "$T/mnt" 2>"$LOG/xfs_io.err" || die "xfs_io shutdown: $(cat "$LOG/xfs_io.err")"
umount mnt 2>"$LOG/umount.err" || die "umount after the cut: $(cat "$LOG/umount.err")"
mount -t xfs "$LOOP" mnt 2>"$LOG/mount.err" || die "mount after the cut: $(cat "$LOG/mount.err")"
manifest_invariant "$M" dst "D: after the power cut"
check "D: the done mark survived the power cut (1 done row)" test "$INV_DONE" = 1
expect_code 0 "$FERRY" -q --manifest "$M" src dst &&
	check "D: the next run completes (diff)" diff -r src dst
finish
