#!/bin/bash
# t33-dst-fails: when the destination itself fails mid-run (crash-safety
# rule 10, issue 8 item 6), the run stops within seconds with one message
# naming DST and exit code 12; no file is recorded failed, the rows not
# finished stay pending, the rows committed before stay done; the same
# command finishes the job once DST is back.
#
# Each case below checks, after the failed run:
#  - exit 12, measured within a few seconds of the failure (not minutes of
#    retries: before the fix ferry retried and failed every remaining file,
#    exit 23, thousands of "create destination: Input/output error" rows);
#  - stderr is exactly one line, "ferry: the destination 'DST' failed: ...";
#  - the manifest, read with sqlite3 -readonly: 0 failed rows, every row
#    done or pending, some pending (the run was cut), at least as many done
#    rows as were committed before the failure, and each done row is in DST
#    with its size and hash (manifest_invariant);
# and then, DST back: the same command exits 0, DST equals SRC (diff -r,
# rsync -c, find), no temp file is left, --verify exits 0.
#
#  A. [test build] FERRY_FAULT makes a step on DST fail and the probe of
#     DST's root (the "probe" op) say it is gone: EIO from a rename, EROFS
#     from a rename, EIO from the barrier's syncfs, a --verify whose reads
#     of DST fail, a --delete whose unlink fails, the directory metadata
#     set at the end of a run; and the control: the same EIO with DST
#     answering is retried (exit 0).
#  B. [root, loop device, XFS, strace] a real XFS file system on a loop
#     device is shut down with `xfs_io -x -c shutdown` mid-run (strace
#     slows every rename by 10 ms); after umount and mount (log recovery)
#     the same command completes.
#  C. [root, loop device, XFS, strace] the same file system remounted
#     read-only mid-run (EROFS); `mount -o remount,rw` brings it back.
#  E. [root, loop device, ext4, strace] an ext4 file system shut down the
#     same way: its root's stat still answers, only a write tells.
#  D. [strace] DST's root directory removed mid-run (rm -rf, then made
#     again empty): the probe sees the removed root (link count 0). The
#     next run finds DST replaced and copies everything again. A DST root
#     renamed away still answers and is written on where ferry opened it
#     (README), so there is no case for it here.
# Cases skip (with the reason) what the machine lacks; the test skips when
# it can run none.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd rsync

HOOKS=0
"$FERRY" --version 2>/dev/null | grep -q '^test build:' && HOOKS=1
STRACE=0
have_strace && STRACE=1
XFS_WHY=
if [[ $(id -u) != 0 ]]; then
	XFS_WHY="needs root (mounts an XFS loop device)"
elif ! command -v losetup >/dev/null || ! command -v mkfs.xfs >/dev/null ||
	! command -v xfs_io >/dev/null; then
	XFS_WHY="needs losetup, mkfs.xfs and xfs_io"
elif ! grep -qw xfs /proc/filesystems && ! modprobe xfs 2>/dev/null; then
	XFS_WHY="the kernel has no XFS"
elif ((!STRACE)); then
	XFS_WHY="needs strace, allowed to trace (to slow the copy down)"
fi
if ((!HOOKS && !STRACE)); then
	skip_all "needs a test build (-DFERRY_TESTING=ON) or strace allowed to trace"
fi

NFILES=$(pick 3000 1500 6000)
gen_tree src --seed 3333 --files "$NFILES" --median 2K --max-size 16K
say "source: $(du -sh --apparent-size src | cut -f1) in $(find src -type f | wc -l) files"
ROWS=$(find src ! -type d | wc -l) # files and symlinks: one row each

# rows MANIFEST STATE: the number of file rows in that state (0 pending,
# 1 done, 2 failed), read with sqlite3 -readonly.
rows() {
	sqlite3 -readonly "$1" "SELECT count(*) FROM files WHERE state = $2;" 2>/dev/null
}

# expect_dst_failed LABEL DST MANIFEST REASON [DONE_BEFORE]: the last run
# ($RC, $LOG/err) stopped because DST failed with REASON (strerror).
expect_dst_failed() {
	local label=$1 dst=$2 m=$3 why=$4 before=${5:-0}
	if [[ $RC == 12 ]]; then
		ok "$label: exit 12"
	else
		fail "$label: exit 12 (got $RC)"
		show "$LOG/err"
	fi
	no_sanitizer_report "$LOG/err"
	stderr_is_one_error
	local want="ferry: the destination '$dst' failed: $why; stopped, nothing lost: run the same command when it is back"
	if grep -qxF -- "$want" "$LOG/err"; then
		ok "$label: the message names DST and why"
	else
		fail "$label: the message names DST and why"
		say "wanted: $want"
		show "$LOG/err" 3
	fi
	local ndone pending failed total
	ndone=$(rows "$m" 1)
	pending=$(rows "$m" 0)
	failed=$(rows "$m" 2)
	total=$(sqlite3 -readonly "$m" 'SELECT count(*) FROM files;' 2>/dev/null)
	say "$label: manifest: $ndone done, $pending pending, $failed failed of $total"
	check "$label: no row is failed" test "$failed" = 0
	check "$label: every row is done or pending" test "$((ndone + pending))" = "$total"
	check "$label: the run was cut: rows are pending" test "$pending" -gt 0
	check "$label: the rows committed before the failure stay done ($before)" \
		test "$ndone" -ge "$before"
}

# a JSON-free status: the last result recorded for the run
last_result() {
	sqlite3 -readonly "$1" 'SELECT result FROM runs ORDER BY id DESC LIMIT 1;' 2>/dev/null
}

# ---- A: fault hooks -------------------------------------------------------

fault_run() { # LABEL SPEC REASON MANIFEST [FERRY-OPTIONS...]
	local label=$1 spec=$2 why=$3 m=$4
	shift 4
	rm -rf dsta "$m"*
	local t0=$EPOCHREALTIME
	run env FERRY_FAULT="$spec" "$FERRY" -q -j 4 --manifest "$m" "$@" src dsta
	local secs
	secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	say "$label: ferry ran ${secs}s"
	expect_dst_failed "$label" dsta "$m" "$why"
	check "$label: the run's result 12 is recorded" test "$(last_result "$m")" = 12
	manifest_invariant "$m" dsta "$label"
	final_state src dsta --manifest "$m"
	manifest_invariant "$m" dsta "$label: final run"
}

if ((HOOKS)); then
	say "--- A: FERRY_FAULT: a step on DST fails and DST's root does not answer"
	fault_run "A1 rename EIO" rename:300:5,probe:0:5 "Input/output error" "$T/a1.db"
	fault_run "A2 rename EROFS" rename:300:30,probe:0:30 "Read-only file system" "$T/a2.db"
	fault_run "A3 barrier syncfs EIO" syncfs:1:5,probe:0:5 "Input/output error" "$T/a3.db"

	say "--- A4: the same EIO while DST answers: retried as before"
	rm -rf dsta "$T/a4.db"*
	run env FERRY_FAULT=rename:300:5 FERRY_FAULT_LOG="$T/a4.log" "$FERRY" -q -j 4 --manifest "$T/a4.db" src dsta
	check "A4: the fault fired" test -s "$T/a4.log"
	check "A4: exit 0 (got $RC)" test "$RC" = 0
	show "$LOG/err" 3
	tree_equal src dsta

	say "--- A5: --verify, every read of DST fails and its root does not answer"
	# reads are of DST only in a verify: the hash of each copied file
	run env FERRY_FAULT=read:0:5,probe:0:5 "$FERRY" -q --verify --manifest "$T/a4.db" src dsta
	check "A5: exit 12 (got $RC)" test "$RC" = 12
	stderr_is_one_error
	check "A5: the message names DST" grep -q "^ferry: the destination 'dsta' failed: Input/output error;" "$LOG/err"
	check "A5: every row stays done" test "$(rows "$T/a4.db" 1)" = "$ROWS"
	expect_code 0 "$FERRY" -q --verify --manifest "$T/a4.db" src dsta
	rm -rf dsta

	say "--- A6: --delete, the first unlink in DST fails and its root does not answer"
	gen_tree small --seed 3334 --files 60 --max-size 8K
	expect_code 0 "$FERRY" -q --manifest "$T/a6.db" small dsts
	find small -type f | sort | head -n 5 | xargs rm --
	run env FERRY_FAULT=unlink:1:5,probe:0:5 "$FERRY" -q --delete --manifest "$T/a6.db" small dsts
	check "A6: exit 12 (got $RC)" test "$RC" = 12
	stderr_is_one_error
	check "A6: the message names DST" grep -q "^ferry: the destination 'dsts' failed: Input/output error;" "$LOG/err"
	expect_code 0 "$FERRY" -q --delete --manifest "$T/a6.db" small dsts
	tree_equal small dsts

	say "--- A7: directory metadata at the end of a run, DST's root does not answer"
	# only directories: every chmod is of one, after the copy (apply_dir)
	mkdir -p dirs/a/b dirs/c
	chmod 750 dirs/a/b
	touch -d '2001-02-03 04:05:06.123456789' dirs/a/b dirs/a dirs/c dirs
	run env FERRY_FAULT=chmod:1:5,probe:0:5 "$FERRY" -q --manifest "$T/a7.db" dirs dstd7
	check "A7: exit 12 (got $RC)" test "$RC" = 12
	stderr_is_one_error
	check "A7: no directory is recorded failed" \
		test "$(sqlite3 -readonly "$T/a7.db" 'SELECT count(*) FROM dirs WHERE error IS NOT NULL;')" = 0
	check "A7: every directory's metadata is still to be applied" \
		test "$(sqlite3 -readonly "$T/a7.db" 'SELECT count(*) FROM dirs WHERE state != 0;')" = 0
	expect_code 0 "$FERRY" -q --manifest "$T/a7.db" dirs dstd7
	tree_equal dirs dstd7
else
	say "SKIP A: needs a build with -DFERRY_TESTING=ON (FERRY_FAULT)"
	ok "# SKIP A: not a test build"
fi

# ---- helpers for the real failures (B, C, D) ------------------------------

# slow_run DST MANIFEST: ferry copies src to DST in the background, each
# rename into place held 10 ms by strace (about 8 s for the whole tree).
slow_run() {
	bg env "$(no_leak_check_env)" strace -f -o "$LOG/strace" -e trace=rename,renameat,renameat2 \
		-e inject=rename,renameat,renameat2:delay_enter=10000 \
		"$FERRY" -q -j 4 --manifest "$2" src "$1"
}

# copied_some DST N: at least N regular files are in DST.
copied_some() {
	(($(find "$1" -type f ! -name '*.ferry-part' 2>/dev/null | wc -l) >= $2)) ||
		! kill -0 "$BG_PID" 2>/dev/null
}

# kill_traced: kill the ferry that strace ($BG_PID) runs, then strace (a
# killed strace would leave ferry running, holding DST's mount).
kill_traced() {
	local kids=()
	mapfile -t kids < <(ps -o pid= --ppid "$BG_PID" 2>/dev/null | tr -d ' ')
	((${#kids[@]})) && kill -KILL "${kids[@]}" 2>/dev/null
	kill -KILL "$BG_PID" 2>/dev/null
}

# fail_mid_run LABEL DST MANIFEST CMD...: start a slow run, wait for 300 files in
# DST, note the done rows, run CMD (the failure), wait for ferry to end
# (at most 30 s) and time it; RC and $LOG/err are the run's.
fail_mid_run() {
	local label=$1 dst=$2 m=$3
	shift 3
	slow_run "$dst" "$m"
	wait_until 60 copied_some "$dst" 300
	if ! kill -0 "$BG_PID" 2>/dev/null; then
		bg_wait
		fail "$label: ferry still ran when DST was to fail (exit $BG_RC)"
		return 1
	fi
	DONE_BEFORE=$(rows "$m" 1)
	DONE_BEFORE=${DONE_BEFORE:-0}
	"$@" || die "$label: could not make DST fail: $*"
	local t0=$EPOCHREALTIME
	if ! wait_until 30 eval '! kill -0 "$BG_PID" 2>/dev/null'; then
		fail "$label: ferry ends within $(slow_s 30) s of the failure"
		kill_traced
	fi
	local secs
	secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
	bg_wait
	RC=$BG_RC
	grep -v '^strace: ' "$LOG/bg.err" >"$LOG/err"
	local most
	most=$(slow_s 5)
	if awk -v s="$secs" -v m="$most" 'BEGIN { exit !(s <= m) }'; then
		ok "$label: ferry stopped ${secs}s after DST failed (at most $most s)"
	else
		fail "$label: ferry stopped ${secs}s after DST failed (at most $most s)"
	fi
}

# ---- B, C: a real XFS file system ------------------------------------------

if [[ -z $XFS_WHY ]]; then
	truncate -s 320M xfs.img || die "cannot create the image"
	mkfs.xfs -q -f xfs.img 2>"$LOG/mkfs.err" || die "mkfs.xfs failed: $(head -c 200 "$LOG/mkfs.err")"
	LOOP=$(losetup --find --show xfs.img 2>"$LOG/losetup.err") || XFS_WHY="no loop device: $(head -c 200 "$LOG/losetup.err")"
fi
if [[ -z $XFS_WHY ]]; then
	T2_LOOPS+=("$LOOP")
	mkdir mnt
	if mount -t xfs "$LOOP" mnt 2>"$LOG/mount.err"; then
		track_mount "$T/mnt"
	else
		XFS_WHY="cannot mount XFS from $LOOP: $(head -c 200 "$LOG/mount.err")"
	fi
fi
if [[ -z $XFS_WHY ]]; then
	say "--- B: xfs_io shutdown of DST mid-run"
	if fail_mid_run B mnt/dst "$T/b.db" xfs_io -x -c shutdown "$T/mnt"; then
		expect_dst_failed B mnt/dst "$T/b.db" "Input/output error" "$DONE_BEFORE"
		check "B: the run's result 12 is recorded" test "$(last_result "$T/b.db")" = 12
		umount mnt || die "cannot unmount the shut down XFS"
		mount -t xfs "$LOOP" mnt || die "cannot mount the XFS again (log recovery)"
		manifest_invariant "$T/b.db" mnt/dst "B: after log recovery"
		final_state src mnt/dst --manifest "$T/b.db"
		manifest_invariant "$T/b.db" mnt/dst "B: final run"
	fi
	rm -rf mnt/dst

	say "--- C: DST remounted read-only mid-run"
	# a remount to read-only waits for a moment with no file open for writing
	ro() {
		local i
		for ((i = 0; i < 500; i++)); do
			mount -o remount,ro "$T/mnt" 2>/dev/null && return 0
			sleep 0.01
		done
		return 1
	}
	if fail_mid_run C mnt/dst "$T/c.db" ro; then
		expect_dst_failed C mnt/dst "$T/c.db" "Read-only file system" "$DONE_BEFORE"
		mount -o remount,rw "$T/mnt" || die "cannot remount DST read-write"
		manifest_invariant "$T/c.db" mnt/dst "C: after remount,rw"
		final_state src mnt/dst --manifest "$T/c.db"
		manifest_invariant "$T/c.db" mnt/dst "C: final run"
	fi
	rm -rf mnt/dst
else
	say "SKIP B and C: $XFS_WHY"
	ok "# SKIP B, C: $XFS_WHY"
fi

# ---- E: ext4 shut down: its root's stat still answers -----------------------

EXT4_WHY=
if [[ $(id -u) != 0 ]]; then
	EXT4_WHY="needs root (mounts an ext4 loop device)"
elif ! command -v losetup >/dev/null || ! command -v mkfs.ext4 >/dev/null ||
	! command -v xfs_io >/dev/null; then
	EXT4_WHY="needs losetup, mkfs.ext4 and xfs_io"
elif ! grep -qw ext4 /proc/filesystems; then
	EXT4_WHY="the kernel has no ext4"
elif ((!STRACE)); then
	EXT4_WHY="needs strace, allowed to trace (to slow the copy down)"
fi
if [[ -z $EXT4_WHY ]]; then
	truncate -s 128M ext4.img || die "cannot create the ext4 image"
	mkfs.ext4 -q -F ext4.img 2>"$LOG/mkfs.err" || die "mkfs.ext4 failed: $(head -c 200 "$LOG/mkfs.err")"
	LOOP4=$(losetup --find --show ext4.img 2>"$LOG/losetup.err") || EXT4_WHY="no loop device: $(head -c 200 "$LOG/losetup.err")"
fi
if [[ -z $EXT4_WHY ]]; then
	T2_LOOPS+=("$LOOP4")
	mkdir mnt4
	if mount -t ext4 "$LOOP4" mnt4 2>"$LOG/mount.err"; then
		track_mount "$T/mnt4"
	else
		EXT4_WHY="cannot mount ext4 from $LOOP4: $(head -c 200 "$LOG/mount.err")"
	fi
fi
if [[ -z $EXT4_WHY ]]; then
	# the same ioctl as XFS's shutdown (EXT4_IOC_SHUTDOWN); afterwards a
	# stat of DST's root still succeeds, only a write tells (the probe's
	# O_TMPFILE)
	say "--- E: ext4 shut down mid-run"
	if fail_mid_run E mnt4/dst "$T/e.db" xfs_io -x -c shutdown "$T/mnt4"; then
		expect_dst_failed E mnt4/dst "$T/e.db" "Input/output error" "$DONE_BEFORE"
		umount mnt4 || die "cannot unmount the shut down ext4"
		mount -t ext4 "$LOOP4" mnt4 || die "cannot mount the ext4 again"
		manifest_invariant "$T/e.db" mnt4/dst "E: after mounting again"
		final_state src mnt4/dst --manifest "$T/e.db"
		manifest_invariant "$T/e.db" mnt4/dst "E: final run"
	fi
	rm -rf mnt4/dst
else
	say "SKIP E: $EXT4_WHY"
	ok "# SKIP E: $EXT4_WHY"
fi

# ---- D: DST's root directory removed mid-run ------------------------------

if ((STRACE)); then
	say "--- D: DST's root directory removed mid-run"
	remove_root() {
		local i
		for ((i = 0; i < 100; i++)); do # workers make entries meanwhile
			rm -rf dstd 2>/dev/null && break
		done
		[[ ! -e dstd ]] && mkdir dstd
	}
	if fail_mid_run D dstd "$T/d.db" remove_root; then
		expect_dst_failed D dstd "$T/d.db" "No such file or directory" "$DONE_BEFORE"
		final_state src dstd --manifest "$T/d.db"
		manifest_invariant "$T/d.db" dstd "D: final run"
	fi
else
	say "SKIP D: needs strace, allowed to trace (to slow the copy down)"
	ok "# SKIP D: no strace"
fi
finish
