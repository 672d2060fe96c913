#!/bin/bash
# t59-big-resume: kill -9 in the middle of a large file copied in chunks,
# then the same command resumes it: the done chunks are kept (neither read
# from SRC nor written again), the file ends identical, --verify is clean.
#
# SRC is a 200 MiB file of random bytes behind bench/slowfs (3 ms per
# operation, so that the copy takes seconds). The first run (2 streams per
# file, FERRY_CHUNK_STREAMS, a test build's knob) is killed with SIGKILL once
# the manifest holds 8 of its 13 chunks (16 MiB each): the chunks are
# durable in the temp file before they are recorded. The resumed run is
# traced (strace -y -e pread64,pwrite64): the bytes it reads from the SRC
# file and writes to the temp are summed from the calls' return values,
# an oracle outside ferry. Bound: at most 55% of the file each (5 of 13
# chunks are 72 MiB, 36%; the bound leaves room for the chunks in flight
# at the kill). Then cmp SRC DST, xxh128sum equal, ferry --verify exit 0, no
# temp file left.
# Needs bench/slowfs (libfuse3, /dev/fuse, fusermount3), sqlite3, strace;
# skipped with the reason.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3 xxh128sum cmp
need_test_hooks
need_strace

need_slowfs
MNT=$T/mnt
umount_mnt() { umount_fuse "$MNT"; }
trap 'umount_mnt; cleanup' EXIT
mount_slow() {
	"$SLOWFS" --latency-us "$1" "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
		skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
}

SIZE=$((200 << 20))
mkdir src "$MNT"
head -c "$SIZE" /dev/urandom >src/big || die "cannot write the source"
echo small >src/small
mount_slow 20000

export FERRY_CHUNK_STREAMS=2
bg "$FERRY" "$MNT" dst
db=
chunks() {
	[[ -n $db ]] || db=$(manifest_path "$MNT" dst)
	[[ -n $db && -f $db ]] || return 1
	local n
	n=$(sqlite3 -cmd '.timeout 2000' "file:$db?mode=ro" 'SELECT count(*) FROM chunks' 2>/dev/null) || return 1
	((n >= 8))
}
if wait_until 120 eval 'chunks || ! kill -0 "$BG_PID" 2>/dev/null'; then
	kill -KILL "$BG_PID" 2>/dev/null
fi
bg_wait
check "the first run was killed mid-file (exit $BG_RC)" test "$BG_RC" = 137
check "the temp file of the big file survived the kill" \
	test -n "$(find dst -name '.big.*.ferry-part' -print -quit)"
check "dst/big is not there yet" test ! -e dst/big
say "chunks recorded at the kill: $(sqlite3 "file:$db?mode=ro" 'SELECT count(*) FROM chunks' 2>/dev/null)"

# a fresh mount: its page cache of SRC is gone, every read reaches slowfs
umount_mnt
mount_slow 0
expect_code 0 env "$(no_leak_check_env)" strace -ff -y -qq -e trace=pread64,pwrite64 \
	-o "$T/trace" "$FERRY" "$MNT" dst
# one file per thread (-ff: no call split across lines by another's):
# pread64(5</…/mnt/big>, …, 1048576, 0) = 1048576
src_read=$(awk -v f="$MNT/big>" '/^pread64\(/ && index($0, f) { n = $NF; if (n ~ /^[0-9]+$/) s += n } END { print s + 0 }' "$T"/trace.*)
tmp_written=$(awk '/^pwrite64\(/ && /\.big\.[0-9]+\.ferry-part>/ { n = $NF; if (n ~ /^[0-9]+$/) s += n } END { print s + 0 }' "$T"/trace.*)
say "resumed run: $src_read bytes read from SRC's big, $tmp_written written to its temp (file: $SIZE)"
check "the resumed run read at most 55% of the file from SRC (got $src_read)" \
	test "$src_read" -gt 0 -a "$src_read" -le $((SIZE * 55 / 100))
check "the resumed run wrote at most 55% of the file (got $tmp_written)" \
	test "$tmp_written" -gt 0 -a "$tmp_written" -le $((SIZE * 55 / 100))
check "cmp SRC DST: identical" cmp -s src/big dst/big
check "xxh128sum equal" test "$(xxh128sum <src/big)" = "$(xxh128sum <dst/big)"
check "the small file too" cmp -s src/small dst/small
no_temp_files dst
expect_code 0 "$FERRY" --verify "$MNT" dst
umount_mnt
finish
