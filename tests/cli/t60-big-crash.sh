#!/bin/bash
# t60-big-crash: a power cut of DST in the middle of a large file copied in
# chunks, then the resume: identical, --verify clean, the chunks done
# before the cut kept.
#
# DST is XFS on a loop device; `xfs_io -x -c shutdown` (no log flush: what
# XFS had not written is lost, as in a power cut) cuts it once the manifest
# (on another file system) holds a first chunk of the 200 MiB file, which SRC
# serves through bench/slowfs (20 ms per operation) so that the cut lands
# mid-file. A chunk is recorded only after its data is durable in the temp
# file (fdatasync) and the temp's name durable (the directory fsynced when
# it was made): so after the remount, log recovery, the temp file is
# there and holds the recorded chunks. The resumed run (traced: the bytes
# it reads from SRC's file are summed from pread64's return values) reads
# less than the whole file, and at most what was not recorded plus the
# chunks in flight; cmp SRC DST, xxh128sum, --verify exit 0, no temp left.
# B: the same with the manifest on the XFS too (one machine's power cut):
# the chunk rows committed half a second before the cut survive it.
# Needs root, a loop device, XFS and xfsprogs, bench/slowfs, strace.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 losetup mkfs.xfs xfs_io xxh128sum cmp
need_root "mounts an XFS loop device"
need_test_hooks
need_strace
grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null ||
	skip_all "the kernel has no XFS"
need_slowfs

truncate -s 640M xfs.img || die "cannot create the image"
mkfs.xfs -q -f xfs.img 2>"$LOG/mkfs.err" || skip_all "mkfs.xfs failed: $(head -c 200 "$LOG/mkfs.err")"
LOOP=$(losetup --find --show xfs.img 2>"$LOG/losetup.err") ||
	skip_all "no loop device: $(head -c 200 "$LOG/losetup.err")"
T2_LOOPS+=("$LOOP")
mkdir mnt slow
mount -t xfs "$LOOP" mnt 2>"$LOG/mount.err" ||
	skip_all "cannot mount XFS from $LOOP: $(head -c 200 "$LOG/mount.err")"
track_mount "$T/mnt"

SIZE=$((200 << 20))
mkdir src
head -c "$SIZE" /dev/urandom >src/big || die "cannot write the source"
echo small >src/small
"$SLOWFS" --latency-us 20000 "$T/src" "$T/slow" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
umount_slow() { umount_fuse "$T/slow"; }
trap 'umount_slow; t2_cleanup_mounts; cleanup' EXIT

export FERRY_CHUNK_STREAMS=2
bg "$FERRY" "$T/slow" mnt/dst
db=
recorded() {
	[[ -n $db ]] || db=$(manifest_path "$T/slow" mnt/dst)
	[[ -n $db && -f $db ]] || return 1
	local n
	n=$(sqlite3 -cmd '.timeout 2000' "file:$db?mode=ro" 'SELECT count(*) FROM chunks' 2>/dev/null) || return 1
	((n >= ${1:-3}))
}
# cut_mid_file ROWS PAUSE LABEL: once the manifest holds ROWS chunks and
# PAUSE seconds later, the XFS shut down under the ferry in the background;
# then that ferry's end.
cut_mid_file() {
	local cut=0
	if wait_until 120 eval "recorded $1"' || ! kill -0 "$BG_PID" 2>/dev/null' &&
		kill -0 "$BG_PID" 2>/dev/null; then
		sleep "$2"
		xfs_io -x -c shutdown "$T/mnt" 2>"$LOG/xfs_io.err" ||
			die "xfs_io shutdown failed: $(cat "$LOG/xfs_io.err")"
		cut=1
	fi
	wait_until 120 eval '! kill -0 "$BG_PID" 2>/dev/null' || kill -KILL "$BG_PID"
	bg_wait
	check "$3 cut mid-file" test "$cut" = 1
	check "ferry ended without crashing (exit $BG_RC)" not_a_crash "$BG_RC"
	no_sanitizer_report "$LOG/bg.err"
}
cut_mid_file 1 0 "DST was"
kept=$(sqlite3 "file:$db?mode=ro" 'SELECT count(*) FROM chunks' 2>/dev/null)
say "chunks recorded before the cut: ${kept:-?}"

umount mnt 2>"$LOG/umount.err" || die "unmount after the cut: $(cat "$LOG/umount.err")"
mount -t xfs "$LOOP" mnt 2>"$LOG/mount.err" || die "mount after the cut: $(cat "$LOG/mount.err")"
check "the temp file is there after log recovery" \
	test -n "$(find mnt/dst -name '.big.*.ferry-part' -print -quit 2>/dev/null)"

# a fresh SRC mount: no page cache, every read reaches slowfs
umount_slow
"$SLOWFS" --latency-us 0 "$T/src" "$T/slow" 2>"$LOG/slowfs.err" || die "slowfs again"
expect_code 0 env "$(no_leak_check_env)" strace -ff -y -qq -e trace=pread64 \
	-o "$T/trace" "$FERRY" "$T/slow" mnt/dst
src_read=$(awk -v f="$T/slow/big>" '/^pread64\(/ && index($0, f) { n = $NF; if (n ~ /^[0-9]+$/) s += n } END { print s + 0 }' "$T"/trace.*)
chunk=$((16 << 20)) # FERRY_CHUNK_SIZE (src/chunks.h)
bound=$((SIZE - ${kept:-0} * chunk + 2 * chunk))
((bound > SIZE)) && bound=$SIZE
say "resumed run read $src_read bytes of SRC's big (file: $SIZE, bound: $bound)"
check "the resumed run kept chunks: read less than the file from SRC (got $src_read)" \
	test "$src_read" -lt "$SIZE"
check "and at most the unrecorded part plus 2 chunks in flight (got $src_read, bound $bound)" \
	test "$src_read" -le "$bound"
check "cmp SRC DST: identical" cmp -s src/big mnt/dst/big
check "xxh128sum equal" test "$(xxh128sum <src/big)" = "$(xxh128sum <mnt/dst/big)"
no_temp_files mnt/dst
expect_code 0 "$FERRY" --verify "$T/slow" mnt/dst
umount_slow

# B: the manifest on the file system that is cut too, as on one machine
# that loses its power. A chunk's row owes no sync at its commit, but one
# commit in half a second syncs the -wal: the cut keeps rows recorded
# before it, and the resumed run reads less than the whole file.
rm -rf mnt/dst || die "cannot empty DST"
"$SLOWFS" --latency-us 20000 "$T/src" "$T/slow" 2>"$LOG/slowfs.err" || die "slowfs again"
db=$T/mnt/m.db
bg "$FERRY" --manifest "$db" "$T/slow" mnt/dst
# 0.6 s after the third row: a commit syncs the -wal at most 0.5 s apart
cut_mid_file 3 0.6 "B: DST and the manifest were"
umount mnt 2>"$LOG/umount.err" || die "unmount after the cut: $(cat "$LOG/umount.err")"
mount -t xfs "$LOOP" mnt 2>"$LOG/mount.err" || die "mount after the cut: $(cat "$LOG/mount.err")"
umount_slow
"$SLOWFS" --latency-us 0 "$T/src" "$T/slow" 2>"$LOG/slowfs.err" || die "slowfs again"
rm -f "$T"/trace.*
expect_code 0 env "$(no_leak_check_env)" strace -ff -y -qq -e trace=pread64 \
	-o "$T/trace" "$FERRY" --manifest "$db" "$T/slow" mnt/dst
src_read=$(awk -v f="$T/slow/big>" '/^pread64\(/ && index($0, f) { n = $NF; if (n ~ /^[0-9]+$/) s += n } END { print s + 0 }' "$T"/trace.*)
say "B: resumed run read $src_read bytes of SRC's big (file: $SIZE)"
check "B: chunk rows survived the cut: read less than the file from SRC (got $src_read)" \
	test "$src_read" -lt "$SIZE"
check "B: cmp SRC DST: identical" cmp -s src/big mnt/dst/big
no_temp_files mnt/dst
expect_code 0 "$FERRY" --verify --manifest "$db" "$T/slow" mnt/dst
umount_slow
finish
